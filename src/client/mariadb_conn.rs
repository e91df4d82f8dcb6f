//! The MariaDB protocol outside the lock: who lockjaw logs in as (its own
//! servers' `lockjaw` user, or the credentials of a user's server from
//! the environment, never the command line), the one connect function
//! (the lock client, readiness probes and the version use it), error
//! detail, and the server's version with the setting the fence's
//! durability depends on.

use mysql_async::prelude::Queryable;
use std::time::Duration;

/// The database user lockjaw's own servers create (no password, loopback).
pub const USER: &str = "lockjaw";
/// The database lockjaw's own servers create.
pub const DATABASE: &str = "lockjaw";
/// A user's server (`--endpoints`): `mysql://USER[:PASSWORD]@HOST:PORT/DB`.
pub const URL_ENV: &str = "LOCKJAW_MARIADB_URL";
/// The same URL, read from this file instead (its first line).
pub const URL_FILE_ENV: &str = "LOCKJAW_MARIADB_URL_FILE";

/// Who to log in as, and into which database.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub user: String,
    pub password: Option<String>,
    pub database: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "(hidden)"))
            .field("database", &self.database)
            .finish()
    }
}

/// A parsed user URL: the `host:port` it names and its login.
#[derive(Clone, Debug)]
pub struct UserServer {
    pub endpoint: String,
    pub login: Login,
}

/// Parse `mysql://USER[:PASSWORD]@HOST[:PORT]/DB` (also `mariadb://`);
/// the error never repeats the password.
pub fn parse_url(url: &str) -> Result<UserServer, String> {
    let bad = |why: &str| {
        format!("{URL_ENV}: {why} (hint: mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE)")
    };
    let rest = url
        .trim()
        .strip_prefix("mysql://")
        .or_else(|| url.trim().strip_prefix("mariadb://"))
        .ok_or_else(|| bad("not a mysql:// URL"))?;
    let (auth, hostpart) = rest.rsplit_once('@').ok_or_else(|| bad("no USER@"))?;
    let (user, password) = match auth.split_once(':') {
        Some((u, p)) => (u, Some(p.to_string())),
        None => (auth, None),
    };
    let (hostport, db) = hostpart
        .split_once('/')
        .ok_or_else(|| bad("no /DATABASE"))?;
    if user.is_empty() || db.is_empty() || hostport.is_empty() {
        return Err(bad("USER, HOST and DATABASE must not be empty"));
    }
    let endpoint = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => hostport.to_string(),
        Some(_) => return Err(bad("the port is not a number")),
        None => format!("{hostport}:3306"),
    };
    Ok(UserServer {
        endpoint,
        login: Login {
            user: user.to_string(),
            password,
            database: db.to_string(),
        },
    })
}

/// The user's server named by `LOCKJAW_MARIADB_URL` or the file
/// `LOCKJAW_MARIADB_URL_FILE` names; `Ok(None)` when neither is set.
pub fn user_server() -> Result<Option<UserServer>, String> {
    if let Ok(url) = std::env::var(URL_ENV) {
        return parse_url(&url).map(Some);
    }
    let Ok(file) = std::env::var(URL_FILE_ENV) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&file).map_err(|e| {
        format!("{URL_FILE_ENV}={file}: {e} (hint: a file whose first line is mysql://USER[:PASSWORD]@HOST:PORT/DB)")
    })?;
    let line = text.lines().next().unwrap_or_default();
    parse_url(line)
        .map(Some)
        .map_err(|e| format!("{file}, line 1: {e}"))
}

/// The login for the server announced as `addr`: the user URL's when it
/// names that `host:port`, else lockjaw's own servers' `lockjaw` user.
pub fn login_for(addr: &str) -> Result<Login, String> {
    Ok(match user_server()? {
        Some(u) if u.endpoint == addr => u.login,
        _ => Login {
            user: USER.into(),
            password: None,
            database: DATABASE.into(),
        },
    })
}

/// Connection options: `dial` (`host:port`, maybe a proxy) over TCP only
/// (never the server's unix socket, which would bypass the proxy).
pub fn opts(dial: &str, login: &Login) -> Result<mysql_async::Opts, String> {
    let (host, port) = dial
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.trim_matches(['[', ']']), p.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("{dial} is not host:port"))?;
    Ok(mysql_async::OptsBuilder::default()
        .ip_or_hostname(host)
        .tcp_port(port)
        .user(Some(login.user.clone()))
        .pass(login.password.clone())
        .db_name(Some(login.database.clone()))
        .prefer_socket(false)
        .tcp_nodelay(true)
        .into())
}

/// Connect with a deadline.
pub async fn connect(opts: mysql_async::Opts, t: Duration) -> Result<mysql_async::Conn, String> {
    tokio::time::timeout(t, mysql_async::Conn::new(opts))
        .await
        .map_err(|_| format!("no connection within {t:?}"))?
        .map_err(|e| describe(&e))
}

/// An error with its cause (the server's code and message, or the I/O
/// error behind a lost connection).
pub fn describe(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => format!("{} ({}): {}", s.code, s.state, s.message),
        _ => super::with_causes(e),
    }
}

/// A session on the server announced (and dialled) at `addr`.
async fn session_at(addr: &str, t: Duration) -> Result<mysql_async::Conn, String> {
    connect(opts(addr, &login_for(addr)?)?, t).await
}

/// `SELECT 1` on the server at `addr`.
pub async fn probe(addr: &str, t: Duration) -> Result<(), String> {
    let mut c = session_at(addr, t).await?;
    let r = tokio::time::timeout(t, c.query_drop("SELECT 1"))
        .await
        .map_err(|_| format!("no answer within {t:?}"))?
        .map_err(|e| describe(&e));
    let _ = c.disconnect().await;
    r
}

/// The server's version and the durability of its commits, e.g.
/// `MariaDB 10.11.6 (innodb_flush_log_at_trx_commit=2)`: the fence
/// counter survives a server crash only as far as this setting flushes.
pub async fn version(addr: &str, t: Duration) -> Result<String, String> {
    let mut c = session_at(addr, t).await?;
    let row: Option<(String, String)> = tokio::time::timeout(
        t,
        c.query_first("SELECT VERSION(), CAST(@@innodb_flush_log_at_trx_commit AS CHAR)"),
    )
    .await
    .map_err(|_| format!("no answer within {t:?}"))?
    .map_err(|e| describe(&e))?;
    let _ = c.disconnect().await;
    let (v, flush) = row.ok_or("no row for SELECT VERSION()")?;
    Ok(format!(
        "MariaDB {} (innodb_flush_log_at_trx_commit={flush})",
        v.split('-').next().unwrap_or(&v)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_endpoint_and_login_and_errors_hide_the_password() {
        let u = parse_url("mysql://app:s3cret@db.example:3307/locks").unwrap();
        assert_eq!(u.endpoint, "db.example:3307");
        assert_eq!(u.login.user, "app");
        assert_eq!(u.login.password.as_deref(), Some("s3cret"));
        assert_eq!(u.login.database, "locks");
        assert!(!format!("{:?}", u.login).contains("s3cret"));
        assert_eq!(
            parse_url("mariadb://app@db/locks").unwrap().endpoint,
            "db:3306"
        );
        for bad in [
            "postgres://a@b/c",
            "mysql://app:s3cret@db:x/locks",
            "mysql://app:s3cret@db:3306",
        ] {
            let e = parse_url(bad).unwrap_err();
            assert!(e.contains("hint:"), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }
}
