//! What a run's clients create on servers lockjaw did not start
//! (`--endpoints`, `--attach`), and how it goes again: Redis' lock keys
//! and their fence counters `KEY:fence` (which have no expiry), etcd's
//! keys under the run's lock and storage keys (a register's have no
//! lease), ZooKeeper's persistent znodes of those keys (`/locks/KEY`,
//! `/election/KEY`, `/registers/KEY`; the roots may be the user's and
//! stay), the MariaDB and PostgreSQL tables `lockjaw_<run-id>_*` (the
//! fence table). [`entry`] is the undo entry a run writes before any
//! worker could create one; [`remove`] deletes them, at the end of the
//! run (the undo log's drain) and in `lockjaw heal`, with the run's
//! credentials read again from its `--auth` file (MariaDB's login from
//! `LOCKJAW_MARIADB_URL` or `LOCKJAW_MARIADB_URL_FILE`, as the run had).
//! Nothing here deletes a name that does not carry the run's id.

use super::System;
use crate::auth::Auth;
use crate::client::{db_names, mariadb_conn as my, postgres_conn as pg, redis_query};
use crate::undo::Undo;
use std::path::PathBuf;
use std::time::Duration;

/// How long each server may take to answer.
const T: Duration = Duration::from_secs(5);

/// The undo entry of what `system`'s clients will create on `servers`
/// for run `run_id` (lock key `lock_key`, storage key `storage_key`,
/// both ending in the run id); `None` for a system whose clients leave
/// nothing there, or whose objects are handled elsewhere (PostgreSQL
/// with `--postgres-url`).
pub fn entry(
    system: System,
    servers: Vec<String>,
    keys: [&str; 2],
    run_id: &str,
    auth_file: Option<PathBuf>,
) -> Option<Undo> {
    let (keys, prefix) = match system {
        System::Redis | System::Redlock | System::Sentinel => (
            keys.iter()
                .flat_map(|k| [k.to_string(), crate::client::redis::fence_key(k)])
                .collect(),
            None,
        ),
        // The slot-tagged names of lockjaw's Redis Cluster client, and
        // the plain ones of the others (a register's key): DEL of a key
        // that is not there costs nothing.
        System::RedisCluster => (
            keys.iter()
                .flat_map(|k| {
                    [
                        crate::client::redis_slots::cluster_lock_key(k),
                        crate::client::redis_slots::cluster_fence_key(k),
                        k.to_string(),
                        crate::client::redis::fence_key(k),
                    ]
                })
                .collect(),
            None,
        ),
        System::Etcd | System::Zookeeper => (keys.iter().map(|k| k.to_string()).collect(), None),
        System::Mariadb | System::Postgres => (vec![], Some(db_names::prefix(run_id))),
        _ => return None,
    };
    Some(Undo::ServerObjects {
        system: system.name().to_string(),
        servers,
        keys,
        prefix,
        auth_file,
    })
}

/// Why an entry's names are not run `run_id`'s (then nothing is deleted):
/// every key ends in `-<run-id>` (or that and `:fence`; Redis Cluster's
/// `{KEY}` and `{KEY}:fence` when KEY does), the prefix is
/// `lockjaw_<run-id>_`.
pub fn check(keys: &[String], prefix: Option<&str>, run_id: Option<&str>) -> Result<(), String> {
    let Some(id) = run_id.filter(|i| !i.is_empty()) else {
        return Err("the run's id is not known".into());
    };
    let end = format!("-{id}");
    for k in keys {
        let base = k.strip_suffix(":fence").unwrap_or(k);
        let base = base
            .strip_prefix('{')
            .and_then(|b| b.strip_suffix('}'))
            .unwrap_or(base);
        if !base.ends_with(&end) {
            return Err(format!("key {k:?} does not end in this run's id"));
        }
    }
    match prefix {
        Some(p) if p != db_names::prefix(id) => {
            Err(format!("{p:?} is not this run's table prefix"))
        }
        _ => Ok(()),
    }
}

/// Delete what the entry names (see the module comment); a name already
/// gone counts as deleted.
pub async fn remove(
    system: &str,
    servers: &[String],
    keys: &[String],
    prefix: Option<&str>,
    auth_file: Option<&std::path::Path>,
    run_id: Option<&str>,
) -> Result<(), String> {
    check(keys, prefix, run_id)?;
    let auth = match auth_file {
        Some(f) => crate::auth::load(f).map_err(|e| {
            format!("{e} (hint: the run's --auth file is read again to delete its objects; restore it and heal again)")
        })?,
        None => Auth::default(),
    };
    let first = servers.first().ok_or("no server named")?;
    match (system, prefix) {
        ("mariadb", Some(p)) => drop_mariadb(first, p).await,
        ("postgres", Some(p)) => {
            let url = pg::url_for(first);
            let tls = pg::tls_for_url(&auth, &url)?;
            pg::drop_prefixed(&url, tls.as_ref(), p, T).await.map(drop)
        }
        ("etcd", None) => delete_etcd(servers, keys, &auth).await,
        ("zookeeper", None) => delete_zookeeper(servers, keys, &auth).await,
        ("redis" | "redlock" | "sentinel" | "redis-cluster", None) => {
            delete_redis(servers, keys, &auth).await
        }
        _ => Err(format!("{system}: nothing lockjaw knows how to delete")),
    }
}

/// `DEL` each key on every server. A server that does not serve a key
/// (a replica's `READONLY`, a cluster node's `MOVED`, whose named node is
/// asked in turn) is not asked to; a
/// sentinel (`--endpoints` of `--system sentinel`) names the primaries it
/// monitors, which are asked in its place. Every key must be taken by at
/// least one server, and any other failure of any server is an error
/// (Redlock's keys are on each of its nodes).
async fn delete_redis(servers: &[String], keys: &[String], auth: &Auth) -> Result<(), String> {
    let mut queue: Vec<String> = servers.to_vec();
    let mut asked = std::collections::BTreeSet::new();
    let mut taken = vec![false; keys.len()];
    let mut errors = Vec::new();
    while let Some(s) = queue.pop() {
        if !asked.insert(s.clone()) {
            continue;
        }
        let mut c = match redis_query::connect_as(&s, auth, T).await {
            Ok(c) => c,
            Err(e) => {
                errors.push(format!("{s}: {e}"));
                continue;
            }
        };
        for (i, k) in keys.iter().enumerate() {
            let r = redis::cmd("DEL")
                .arg(k)
                .query_async::<i64>(&mut c)
                .await
                .map_err(|e| redis_query::said(&e));
            match r {
                Ok(_) => taken[i] = true,
                Err(e) if not_served_here(&e) => queue.extend(moved_to(&e)),
                Err(e) if e.to_ascii_lowercase().contains("unknown command") => {
                    match monitored_primaries(&mut c).await {
                        Ok(p) => queue.extend(p),
                        Err(e) => errors.push(format!("{s}: SENTINEL MASTERS: {e}")),
                    }
                    break;
                }
                Err(e) => errors.push(format!("{s}: DEL {k}: {e}")),
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    match keys.iter().zip(&taken).find(|(_, t)| !**t) {
        Some((k, _)) => Err(format!("no server took DEL {k} (every one refused it)")),
        None => Ok(()),
    }
}

/// The `IP:PORT` of each primary a sentinel monitors.
async fn monitored_primaries(
    c: &mut redis::aio::MultiplexedConnection,
) -> Result<Vec<String>, String> {
    let masters: Vec<Vec<String>> = redis::cmd("SENTINEL")
        .arg("MASTERS")
        .query_async(c)
        .await
        .map_err(|e| redis_query::said(&e))?;
    Ok(masters
        .iter()
        .filter_map(|m| {
            let field = |name: &str| {
                m.chunks(2)
                    .find(|kv| kv.len() == 2 && kv[0] == name)
                    .map(|kv| kv[1].clone())
            };
            Some(format!("{}:{}", field("ip")?, field("port")?))
        })
        .collect())
}

/// The node a cluster's `MOVED SLOT HOST:PORT` answer names.
fn moved_to(e: &str) -> Option<String> {
    if !e.to_ascii_uppercase().contains("MOVED") {
        return None;
    }
    e.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || ".:-[]".contains(c))))
        .find(|w| {
            w.rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        })
        .map(str::to_string)
}

/// A server's answer that the key lives elsewhere.
fn not_served_here(e: &str) -> bool {
    let e = e.to_ascii_uppercase();
    e.contains("READONLY") || e.contains("MOVED") || e.contains("ASK ")
}

/// Delete every key under each of `keys` (prefixes), on the first member
/// that answers.
async fn delete_etcd(servers: &[String], keys: &[String], auth: &Auth) -> Result<(), String> {
    let mut last = String::from("no member");
    for s in servers {
        let r = async {
            let opts = crate::client::etcd::options(auth)?
                .with_connect_timeout(T)
                .with_timeout(T);
            let url = crate::client::etcd::url(s, auth);
            let mut c = etcd_client::Client::connect([url], Some(opts))
                .await
                .map_err(|e| e.to_string())?;
            for k in keys {
                let o = etcd_client::DeleteOptions::new().with_prefix();
                c.delete(k.as_str(), Some(o))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        };
        match tokio::time::timeout(T * 2, r).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => last = format!("{s}: {e}"),
            Err(_) => last = format!("{s}: no answer within {:?}", T * 2),
        }
    }
    Err(last)
}

/// Delete the znodes of each key (the lock's and the election's queue
/// directories with any child left in them, the register), as the run's
/// digest user; a node already gone counts as deleted.
async fn delete_zookeeper(servers: &[String], keys: &[String], auth: &Auth) -> Result<(), String> {
    use crate::client::{election, register, zookeeper as zkc};
    use zookeeper_client as zk;
    // The bridge (with [tls]) lives as long as the session.
    let (c, _bridge) = zkc::open_session(&servers.join(","), T, T, auth)
        .await
        .map_err(|e| e.to_string())?;
    let gone = |r: Result<(), zk::Error>, path: &str| match r {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(e) => Err(format!("delete {path}: {e}")),
    };
    for k in keys {
        let dirs = [zkc::lock_dir(k), election::zookeeper::election_dir(k)];
        for dir in &dirs {
            let kids = match c.list_children(dir).await {
                Ok(kids) => kids,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(format!("list {dir}: {e}")),
            };
            for kid in kids {
                let path = format!("{dir}/{kid}");
                gone(c.delete(&path, None).await, &path)?;
            }
            gone(c.delete(dir, None).await, dir)?;
        }
        let reg = register::zookeeper::register_path(k);
        gone(c.delete(&reg, None).await, &reg)?;
    }
    Ok(())
}

/// Drop every table of the login's database whose name starts with
/// `prefix` (the login for `addr` as the run's clients had it).
async fn drop_mariadb(addr: &str, prefix: &str) -> Result<(), String> {
    use mysql_async::prelude::Queryable;
    let login = my::login_for(addr)?;
    let hint = |e: String| match my::user_server() {
        Ok(Some(u)) if u.endpoint == addr => e,
        _ => format!(
            "{e} (hint: set {} or {} as for the run, then heal again)",
            my::URL_ENV,
            my::URL_FILE_ENV
        ),
    };
    let mut c = my::connect(my::opts(addr, &login)?, T)
        .await
        .map_err(hint)?;
    let names: Vec<String> = c
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
        .await
        .map_err(|e| my::describe(&e))?;
    let plain = |n: &str| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    for n in names.iter().filter(|n| n.starts_with(prefix) && plain(n)) {
        c.query_drop(format!("DROP TABLE IF EXISTS {n}"))
            .await
            .map_err(|e| format!("DROP TABLE {n}: {}", my::describe(&e)))?;
    }
    let _ = c.disconnect().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_answer_names_the_node_to_ask() {
        let m = moved_to("MOVED: 3999 127.0.0.1:34512");
        assert_eq!(m.as_deref(), Some("127.0.0.1:34512"));
        assert_eq!(
            moved_to("READONLY You can't write against a replica."),
            None
        );
    }

    #[test]
    fn only_the_runs_own_names_pass() {
        let id = Some("20240101-120000-ab12");
        let k = |s: &str| vec![s.to_string()];
        assert!(check(&k("lockjaw-20240101-120000-ab12"), None, id).is_ok());
        assert!(check(&k("lockjaw-20240101-120000-ab12:fence"), None, id).is_ok());
        assert!(check(&k("lockjaw"), None, id).is_err());
        assert!(check(&k("x:fence"), None, id).is_err());
        assert!(check(&[], Some("lockjaw_20240101_120000_ab12_"), id).is_ok());
        assert!(check(&[], Some("lockjaw_"), id).is_err());
        assert!(check(&k("lockjaw-20240101-120000-ab12"), None, None).is_err());
    }

    #[test]
    fn each_system_names_what_its_clients_create() {
        let id = "r1";
        let e = entry(
            System::Redis,
            vec!["a:1".into()],
            ["l-r1", "s-r1"],
            id,
            None,
        );
        let Some(Undo::ServerObjects { keys, prefix, .. }) = e else {
            panic!("{e:?}")
        };
        assert_eq!(keys, ["l-r1", "l-r1:fence", "s-r1", "s-r1:fence"]);
        assert_eq!(prefix, None);
        let e = entry(
            System::Mariadb,
            vec!["a:1".into()],
            ["l-r1", "s-r1"],
            id,
            None,
        );
        assert!(
            matches!(e, Some(Undo::ServerObjects { prefix: Some(p), .. }) if p == "lockjaw_r1_")
        );
        assert!(entry(System::Cas, vec![], ["l-r1", "s-r1"], id, None).is_none());
    }
}
