//! The Redis protocol outside the lock: the one connect function every
//! part of lockjaw that speaks Redis uses (clients, readiness probes,
//! faults, heal), PING, ROLE, the server's version, and what a sentinel
//! says about the primary and replicas it monitors.

use crate::auth::Auth;
use redis::IntoConnectionInfo;
use std::time::Duration;

/// A multiplexed connection with connect and response timeouts: the one
/// place lockjaw opens a Redis connection. With `auth`'s `[user]` it
/// authenticates (`AUTH user password`, Redis 6 ACL); with its `[tls]` it
/// speaks TLS and verifies the configured server name, whatever address
/// it dials. The error keeps its kind (a refused connection proves the
/// server is gone).
pub async fn open(
    addr: &str,
    auth: &Auth,
    t: Duration,
) -> Result<redis::aio::MultiplexedConnection, redis::RedisError> {
    let mut who = redis::RedisConnectionInfo::default();
    if let Some(u) = &auth.user {
        who = who.set_username(&u.name).set_password(u.password.expose());
    }
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(t))
        .set_response_timeout(Some(t));
    let Some(tls) = &auth.tls else {
        let info = format!("redis://{addr}/")
            .into_connection_info()?
            .set_redis_settings(who);
        return redis::Client::open(info)?
            .get_multiplexed_async_connection_with_config(&cfg)
            .await;
    };
    let timed_out = || std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
    let stream = tokio::time::timeout(t, super::tls::connect(addr, tls))
        .await
        .map_err(|_| timed_out())??;
    let (conn, driver) = tokio::time::timeout(
        t,
        redis::aio::MultiplexedConnection::new_with_config(&who, stream, cfg),
    )
    .await
    .map_err(|_| timed_out())??;
    tokio::spawn(driver);
    Ok(conn)
}

/// [`open`], its error as text ([`said`]).
pub async fn connect_as(
    addr: &str,
    auth: &Auth,
    t: Duration,
) -> Result<redis::aio::MultiplexedConnection, String> {
    open(addr, auth, t).await.map_err(|e| said(&e))
}

/// How a probe says that a server wants credentials it was not given (or
/// refused those it was): its error starts with this.
pub const NEEDS_PASSWORD: &str = "needs a password";

/// The hint for [`NEEDS_PASSWORD`].
pub const AUTH_HINT: &str = "give the credentials with --auth FILE (docs/auth.md)";

/// A Redis error as text: one that asks for credentials (`NOAUTH`,
/// `WRONGPASS`, "Authentication required") as "needs a password (NOAUTH
/// Authentication required.)".
pub fn said(e: &redis::RedisError) -> String {
    let text = e.to_string();
    let code = e.code().unwrap_or("");
    let wants = matches!(code, "NOAUTH" | "WRONGPASS")
        || text.contains("Authentication required")
        || text.contains("invalid username-password");
    if !wants {
        return text;
    }
    let detail = e.detail().unwrap_or("").trim();
    let what = match (code, detail) {
        ("", "") => text.replace('"', ""),
        ("", d) => d.to_string(),
        (c, d) => format!("{c} {d}").trim().to_string(),
    };
    format!("{NEEDS_PASSWORD} ({what})")
}

/// [`connect_as`] without credentials.
pub async fn connect(addr: &str, t: Duration) -> Result<redis::aio::MultiplexedConnection, String> {
    connect_as(addr, &Auth::default(), t).await
}

/// [`ping_as`] without credentials.
pub async fn ping(addr: &str, t: Duration) -> Result<(), String> {
    ping_as(addr, &Auth::default(), t).await
}

/// [`version_as`] without credentials.
pub async fn version(addr: &str, t: Duration) -> Result<String, String> {
    version_as(addr, &Auth::default(), t).await
}

/// [`ask_primary_as`] without credentials.
pub async fn ask_primary(sentinel: &str, master: &str, t: Duration) -> Result<String, String> {
    ask_primary_as(sentinel, master, &Auth::default(), t).await
}

/// [`role_as`] without credentials.
pub async fn role(addr: &str, t: Duration) -> Result<(String, usize), String> {
    role_as(addr, &Auth::default(), t).await
}

/// PING: Ok when the server (or sentinel) answers PONG.
pub async fn ping_as(addr: &str, auth: &Auth, t: Duration) -> Result<(), String> {
    let mut c = connect_as(addr, auth, t).await?;
    let pong: String = redis::cmd("PING")
        .query_async(&mut c)
        .await
        .map_err(|e| said(&e))?;
    if pong == "PONG" {
        Ok(())
    } else {
        Err(format!("PING answered {pong:?}"))
    }
}

/// `ROLE`: "master", "slave" or "sentinel", and for a master the number of
/// replicas it streams to.
pub async fn role_as(addr: &str, auth: &Auth, t: Duration) -> Result<(String, usize), String> {
    let mut c = connect_as(addr, auth, t).await?;
    let v: redis::Value = redis::cmd("ROLE")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let redis::Value::Array(items) = v else {
        return Err(format!("ROLE answered {v:?}"));
    };
    let name: String = items
        .first()
        .and_then(|x| redis::from_redis_value_ref(x).ok())
        .ok_or("ROLE answered no role")?;
    let replicas = match items.get(2) {
        Some(redis::Value::Array(r)) if name == "master" => r.len(),
        _ => 0,
    };
    Ok((name, replicas))
}

/// `redis_version` from `INFO server`, e.g. `redis 7.0.15`.
pub async fn version_as(addr: &str, auth: &Auth, t: Duration) -> Result<String, String> {
    let mut c = connect_as(addr, auth, t).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| format!("redis {}", v.trim()))
        .ok_or_else(|| "INFO server has no redis_version".to_string())
}

/// The settings of a Redis server that decide what survives a crash
/// (`appendonly`, `appendfsync`), from `CONFIG GET` (a server where
/// CONFIG is renamed away answers an error: nothing is recorded).
pub async fn settings(
    addr: &str,
    auth: &Auth,
    t: Duration,
) -> Result<Vec<(String, String)>, String> {
    let mut c = connect_as(addr, auth, t).await?;
    let m: std::collections::BTreeMap<String, String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .arg("appendfsync")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    Ok(m.into_iter().collect())
}

/// `SENTINEL get-master-addr-by-name MASTER` at one sentinel.
pub async fn ask_primary_as(
    sentinel: &str,
    master: &str,
    auth: &Auth,
    t: Duration,
) -> Result<String, String> {
    let mut c = connect_as(sentinel, auth, t).await?;
    let v: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(master)
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    v.map(|(h, p)| format!("{h}:{p}")).ok_or_else(|| {
        format!("sentinel {sentinel} does not monitor a master named {master:?} (hint: --sentinel-master NAME)")
    })
}

/// With `--endpoints` a Sentinel setup is known by its sentinels only:
/// ask them for the primary and the replicas, so each worker reaches those
/// through its own proxies too (a server that appears later, e.g. added
/// after the start, is dialled directly).
pub async fn servers_behind(
    sentinels: &[String],
    master: &str,
    auth: &Auth,
    t: Duration,
) -> Result<Vec<(String, String)>, String> {
    let mut last = String::new();
    for s in sentinels {
        let primary = match ask_primary_as(s, master, auth, t).await {
            Ok(p) => p,
            Err(e) => {
                last = format!("{s}: {e}");
                continue;
            }
        };
        let mut servers = vec![primary];
        if let Ok(mut c) = connect_as(s, auth, t).await {
            let replicas: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
                .arg("replicas")
                .arg(master)
                .query_async(&mut c)
                .await
                .unwrap_or_default();
            for r in replicas {
                if let (Some(ip), Some(port)) = (r.get("ip"), r.get("port")) {
                    servers.push(format!("{ip}:{port}"));
                }
            }
        }
        return Ok(servers
            .into_iter()
            .enumerate()
            .map(|(i, a)| (format!("server{}", i + 1), a))
            .collect());
    }
    Err(format!(
        "no sentinel named the primary ({last}) (hint: --endpoints lists the sentinels of a setup monitoring master {master:?}; --sentinel-master names another)"
    ))
}

/// `CLIENT UNPAUSE` at `addr` (heal of a `CLIENT PAUSE`) as `auth`'s
/// user (the run's `--auth`); a server that refuses the connection is
/// gone and keeps no pause.
pub async fn unpause(addr: &str, auth: &Auth) -> Result<(), String> {
    let t = Duration::from_secs(2);
    let conn = tokio::time::timeout(t, open(addr, auth, t)).await;
    let mut conn = match conn {
        Ok(Ok(c)) => c,
        // A server that is gone keeps no pause.
        Ok(Err(e)) if e.is_connection_refusal() => return Ok(()),
        Ok(Err(e)) => return Err(said(&e)),
        Err(_) => return Err("no answer within 2 s".into()),
    };
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async::<()>(&mut conn)
        .await
        .map_err(|e| said(&e))
}
