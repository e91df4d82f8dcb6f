//! How each kind of [`Undo`] entry is taken back: signals to recorded
//! processes, the local cluster's state file, Toxiproxy toxics and proxies,
//! iptables rules, libfaketime offsets, Redis `CLIENT UNPAUSE`. Every
//! undo is idempotent: an effect already gone counts as undone.

use super::{Undo, UndoError};
use crate::process::{self, Signal};
use crate::toxiproxy::{HttpClient, ToxiproxyApi};
use std::path::Path;
use std::time::Duration;

/// Where an entry comes from, and so what it may signal.
#[derive(Clone, Copy, Debug)]
pub enum Trust<'a> {
    /// Pushed by this process (its own children): as recorded. The path is
    /// the run directory.
    Mine(&'a Path),
    /// Read from the undo file of this run directory (`lockjaw heal`): a
    /// process is signalled only if it is provably the run's (start time
    /// and the run's cgroup, [`process::Owner`]).
    Prove(&'a Path),
}

impl Trust<'_> {
    fn owner(&self) -> Result<Option<process::Owner>, String> {
        match self {
            Trust::Mine(_) => Ok(None),
            Trust::Prove(dir) => process::Owner::of_dir(dir)
                .map(Some)
                .map_err(|e| format!("{}: {e}", dir.display())),
        }
    }

    fn dir(&self) -> &Path {
        match self {
            Trust::Mine(d) | Trust::Prove(d) => d,
        }
    }
}

/// Take one effect back. Idempotent.
pub async fn execute(u: &Undo, trust: Trust<'_>, grace: Duration) -> Result<(), UndoError> {
    let err = |msg: String| UndoError {
        what: u.describe(),
        msg,
    };
    match u {
        Undo::Process { proc, .. } => {
            let p = *proc;
            let owner = trust.owner().map_err(err)?;
            tokio::task::spawn_blocking(move || match owner {
                None => process::stop_recorded(&p, grace),
                Some(o) => process::stop_owned(&p, &o, grace),
            })
            .await
            .map_err(|e| err(e.to_string()))?
            .map_err(|e| err(e.to_string()))
        }
        Undo::Paused { proc, .. } => match trust.owner().map_err(err)? {
            None => proc.signal_group(Signal::Cont),
            Some(o) => process::signal_owned(proc, &o, Signal::Cont),
        }
        .map(drop)
        .map_err(|e| err(e.to_string())),
        Undo::Cgroup { group } => {
            let (g, d) = (group.clone(), trust.dir().to_path_buf());
            tokio::task::spawn_blocking(move || remove_group(&g, &d))
                .await
                .map_err(|e| err(e.to_string()))?
                .map_err(err)
        }
        Undo::Cluster { dir } => {
            if let Trust::Prove(run_dir) = trust {
                // A run's cluster lives in the run directory itself: a
                // record naming another one would stop someone else's.
                let same = process::Owner::of_dir(dir).ok() == process::Owner::of_dir(run_dir).ok();
                if !same && dir.exists() {
                    return Err(err(format!(
                        "{} is not this run's directory {}; left alone",
                        dir.display(),
                        run_dir.display()
                    )));
                }
            }
            let d = dir.clone();
            tokio::task::spawn_blocking(move || stop_cluster(&d))
                .await
                .map_err(|e| err(e.to_string()))?
                .map_err(err)
        }
        Undo::Toxic {
            url,
            proxy,
            toxic,
            embedded,
        } => {
            let c = client(url).map_err(&err)?;
            gone_ok(c.remove_toxic(proxy, toxic).await, *embedded).map_err(err)
        }
        Undo::ProxyDisabled {
            url,
            proxy,
            embedded,
        } => {
            let c = client(url).map_err(&err)?;
            gone_ok(c.set_enabled(proxy, true).await.map(drop), *embedded).map_err(err)
        }
        Undo::Proxy {
            url,
            proxy,
            embedded,
        } => {
            let c = client(url).map_err(&err)?;
            gone_ok(c.delete_proxy(proxy).await, *embedded).map_err(err)
        }
        Undo::Iptables { args } => iptables_delete(args).await.map_err(err),
        Undo::Clock { file, previous } => {
            if !file.exists() {
                return Ok(());
            }
            std::fs::write(file, format!("{previous}\n")).map_err(|e| err(e.to_string()))
        }
        Undo::RedisClientPause { addr } => redis_unpause(addr).await.map_err(err),
    }
}

fn client(url: &str) -> Result<HttpClient, String> {
    HttpClient::new(url).map_err(|e| e.to_string())
}

/// A toxic or proxy that no longer exists is undone; so is anything on an
/// embedded server that is not reachable any more (it died with lockjaw).
fn gone_ok(r: Result<(), crate::toxiproxy::ClientError>, embedded: bool) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(crate::toxiproxy::ClientError::Unreachable { .. }) if embedded => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Kill what is left in the run's cgroup group and remove it, leaves
/// first, if it carries the run directory's owner tag.
fn remove_group(group: &str, run_dir: &Path) -> Result<(), String> {
    let Some(root) = process::Cgroup::root() else {
        // Nothing could have been created without a writable cgroup v2.
        return Ok(());
    };
    let owner =
        process::Owner::of_dir(run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    match process::Cgroup::proven_group(&root, group, owner.tag())? {
        Some(dir) => process::Cgroup::remove_tree(&dir),
        None => Ok(()),
    }
}

fn stop_cluster(dir: &Path) -> Result<(), String> {
    if !crate::cluster::state::path(dir).exists() {
        return Ok(());
    }
    let st = crate::cluster::state::read(dir).map_err(|e| e.to_string())?;
    crate::cluster::state::stop_all(dir).map_err(|e| e.to_string())?;
    for n in &st.nodes {
        // Data directories are large (etcd preallocates its WAL) and worth
        // nothing after the run; logs stay.
        if n.data_dir.starts_with(dir) && n.data_dir != dir {
            let _ = std::fs::remove_dir_all(&n.data_dir);
        }
    }
    Ok(())
}

async fn iptables_delete(args: &[String]) -> Result<(), String> {
    let out = tokio::process::Command::new("iptables")
        .arg("-D")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("cannot run iptables: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    // iptables says "does a matching rule exist" when there is none left.
    if text.contains("does a matching rule exist") || text.contains("No chain/target/match") {
        return Ok(());
    }
    Err(text.trim().to_string())
}

async fn redis_unpause(addr: &str) -> Result<(), String> {
    let client = redis::Client::open(format!("redis://{addr}/")).map_err(|e| e.to_string())?;
    let conn = tokio::time::timeout(
        Duration::from_secs(2),
        client.get_multiplexed_async_connection(),
    )
    .await;
    let mut conn = match conn {
        Ok(Ok(c)) => c,
        // A server that is gone keeps no pause.
        Ok(Err(e)) if e.is_connection_refusal() => return Ok(()),
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("no answer within 2 s".into()),
    };
    redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async::<()>(&mut conn)
        .await
        .map_err(|e| e.to_string())
}
