//! How each kind of [`Undo`] entry is taken back: signals to recorded
//! processes, the local cluster's state file, Toxiproxy toxics and proxies,
//! iptables rules, libfaketime offsets, Redis `CLIENT UNPAUSE`. Every
//! undo is idempotent: an effect already gone counts as undone.
//!
//! An entry is data from a file, not an order: a path is acted on only
//! beneath the run directory ([`Scope::dir`]), an iptables rule only if it
//! is this run's ([`super::iptables::Rule::check`]). An entry that fails
//! these checks is refused ("skipped") and stays pending.

use super::beneath::explain;
mod remote;
use super::{Scope, Undo, UndoError};
use crate::process::{self, Signal};
use crate::toxiproxy::{HttpClient, ToxiproxyApi};
use rustix::fs::{Mode, OFlags};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Where an entry comes from, and so what it may signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Pushed by this process (its own children): as recorded.
    Mine,
    /// Read from the undo file of the run directory (`lockjaw heal`): a
    /// process is signalled only if it is provably the run's (start time
    /// and the run's cgroup, [`process::Owner`]).
    Prove,
}

impl Trust {
    fn owner(self, dir: &Path) -> Result<Option<process::Owner>, String> {
        match self {
            Trust::Mine => Ok(None),
            Trust::Prove => process::Owner::of_dir(dir)
                .map(Some)
                .map_err(|e| format!("{}: {e}", dir.display())),
        }
    }
}

/// Take one effect back, within `scope`, trusting it as `trust` says.
/// Idempotent.
pub async fn execute(
    u: &Undo,
    scope: &Scope,
    trust: Trust,
    grace: Duration,
) -> Result<(), UndoError> {
    let err = |msg: String| UndoError {
        what: u.describe(),
        msg,
    };
    match u {
        Undo::Process { proc, .. } => {
            let p = *proc;
            let owner = trust.owner(scope.dir.path()).map_err(err)?;
            tokio::task::spawn_blocking(move || match owner {
                None => process::stop_recorded(&p, grace),
                Some(o) => process::stop_owned(&p, &o, grace),
            })
            .await
            .map_err(|e| err(e.to_string()))?
            .map_err(|e| err(e.to_string()))
        }
        Undo::Paused { proc, .. } => match trust.owner(scope.dir.path()).map_err(err)? {
            None => proc.signal_group(Signal::Cont),
            Some(o) => process::signal_owned(proc, &o, Signal::Cont),
        }
        .map(drop)
        .map_err(|e| err(e.to_string())),
        Undo::Cgroup { group } => {
            let (g, d) = (group.clone(), scope.dir.path().to_path_buf());
            tokio::task::spawn_blocking(move || remove_group(&g, &d))
                .await
                .map_err(|e| err(e.to_string()))?
                .map_err(err)
        }
        Undo::Cluster { dir } => {
            let run_dir = scope.dir.path();
            if trust == Trust::Prove {
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
            let (run, d, id) = (scope.dir.clone(), dir.clone(), scope.run_id.clone());
            tokio::task::spawn_blocking(move || stop_cluster(&run, &d, id.as_deref()))
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
        Undo::Iptables(rule) => {
            rule.check(scope.run_id.as_deref())
                .map_err(|e| err(format!("{e}: skipped")))?;
            iptables_delete(&rule.args()).await.map_err(err)
        }
        Undo::Clock { file, previous } => set_clock(&scope.dir, file, previous).map_err(err),
        Undo::RedisClientPause { addr } => redis_unpause(addr).await.map_err(err),
        Undo::PostgresTables { file, prefix } => {
            drop_tables(scope, file, prefix).await.map_err(err)
        }
        Undo::Frozen { cgroup, .. } => {
            thaw(cgroup, scope.run_id.as_deref(), scope.dir.path(), trust).map_err(err)
        }
        Undo::Remote {
            host,
            target,
            effect,
        } => remote::undo(host, target, effect, scope.run_id.as_deref(), grace)
            .await
            .map_err(err),
        Undo::SshMaster { socket } => remote::end_master(socket).await.map_err(err),
        Undo::Netns { name } => {
            let n = name.clone();
            tokio::task::spawn_blocking(move || super::netns::delete_netns(&n))
                .await
                .map_err(|e| err(e.to_string()))?
                .map_err(err)
        }
        Undo::Link { name } => super::netns::delete_link(name).await.map_err(err),
    }
}

/// Drop a run's objects in the `--postgres-url` database: the URL from
/// the private file beneath the run directory, the prefix this run's.
async fn drop_tables(scope: &Scope, file: &Path, prefix: &str) -> Result<(), String> {
    let pg = crate::client::postgres_conn::prefix;
    if scope.run_id.as_deref().map(pg).as_deref() != Some(prefix) {
        return Err(format!(
            "{prefix:?} is not this run's table prefix: skipped"
        ));
    }
    let rel = scope
        .dir
        .relative(file)
        .map_err(|e| format!("{e}: skipped"))?;
    let url = match scope.dir.read(&rel) {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {}", file.display(), explain(&e))),
    };
    crate::client::postgres_conn::drop_prefixed(&url, prefix, Duration::from_secs(5))
        .await
        .map(drop)
}

/// Thaw a node's cgroup, if it is a leaf of this run's group (its id in
/// the path; read from a file, the group must also carry the run
/// directory's owner tag). A cgroup that is gone needs nothing.
fn thaw(rel: &str, run_id: Option<&str>, run_dir: &Path, trust: Trust) -> Result<(), String> {
    let Some((group, _)) = process::cgroup::split_leaf(rel) else {
        return Err(format!(
            "{rel:?} is not a node's cgroup lockjaw/<run-id>/<node>: skipped"
        ));
    };
    if !run_id.is_some_and(|id| process::cgroup::group_name(&group) == Ok(id)) {
        return Err(format!(
            "{rel:?} is not in this run's cgroup group: skipped"
        ));
    }
    let Some(root) = process::Cgroup::root() else {
        return Ok(());
    };
    if let Some(o) = trust.owner(run_dir)? {
        if process::Cgroup::proven_group(&root, &group, o.tag())?.is_none() {
            return Ok(());
        }
    }
    let dir = root.join(rel);
    if !dir.is_dir() {
        return Ok(());
    }
    process::cgroup::freeze(&dir, false).map_err(|e| format!("{}: {e}", dir.display()))
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

/// Stop the cluster whose state file is in `dir` (the run directory or
/// beneath it) and remove its nodes' data directories, each strictly
/// beneath `dir`; the others are reported and left alone.
fn stop_cluster(run: &super::RunDir, dir: &Path, run_id: Option<&str>) -> Result<(), String> {
    let rel = run.relative(dir).map_err(|e| format!("{e}: skipped"))?;
    let (_fd, via) = match run.dir_path(&rel) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {}: skipped", dir.display(), explain(&e))),
    };
    // Through the descriptor from here on: `via` is /proc/self/fd/N.
    let shown = |e: String| e.replace(&via.display().to_string(), &dir.display().to_string());
    let state = rel.join(crate::cluster::state::STATE_FILE);
    match run.open_file(&state, OFlags::RDONLY, Mode::empty()) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(format!(
                "{}: {}: skipped",
                dir.join(crate::cluster::state::STATE_FILE).display(),
                explain(&e)
            ))
        }
        Ok(_) => {}
    }
    let st = crate::cluster::state::read(&via).map_err(|e| shown(e.to_string()))?;
    crate::cluster::state::stop_all(&via).map_err(|e| shown(e.to_string()))?;
    let mut refused = Vec::new();
    for n in &st.nodes {
        if crate::cluster::tmpdata::is_tmp_data(&n.data_dir) {
            // In the temporary directory (PostgreSQL's): only the one named
            // after this run and node.
            let removed = match run_id {
                Some(id) => {
                    crate::cluster::tmpdata::remove(&n.data_dir, id, &n.name).or_else(|_| {
                        // The server of `--storage postgres` beside another system.
                        let group = crate::cluster::postgres::storage_group(id);
                        crate::cluster::tmpdata::remove(&n.data_dir, &group, &n.name)
                    })
                }
                None => Err("no run id to prove it is this run's".into()),
            };
            if let Err(e) = removed {
                refused.push(format!("node {}'s data directory: {e}", n.name));
            }
            continue;
        }
        // Data directories are large (etcd preallocates its WAL) and worth
        // nothing after the run; logs stay.
        let removed = run
            .relative(&n.data_dir)
            .and_then(|d| match d.strip_prefix(&rel) {
                Ok(below) if !below.as_os_str().is_empty() => Ok(d),
                _ => Err(format!(
                    "{} is not beneath the cluster directory {}",
                    n.data_dir.display(),
                    dir.display()
                )),
            })
            .and_then(|d| {
                run.remove_tree(&d)
                    .map_err(|e| format!("{}: {}", n.data_dir.display(), explain(&e)))
            });
        if let Err(e) = removed {
            refused.push(format!("node {}'s data directory: {e}", n.name));
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!("{}: skipped", refused.join("; ")))
    }
}

/// Write `previous` back into the libfaketime control file `file`, opened
/// beneath the run directory. A file that is gone needs nothing.
fn set_clock(run: &super::RunDir, file: &Path, previous: &str) -> Result<(), String> {
    if !is_offset(previous) {
        return Err(format!(
            "{previous:?} is not a libfaketime offset such as +4.000s: skipped"
        ));
    }
    let rel = run.relative(file).map_err(|e| format!("{e}: skipped"))?;
    let mut f = match run.open_file(&rel, OFlags::WRONLY, Mode::empty()) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {}: skipped", file.display(), explain(&e))),
    };
    f.set_len(0)
        .and_then(|_| f.write_all(format!("{previous}\n").as_bytes()))
        .map_err(|e| format!("{}: {e}", file.display()))
}

/// `+4.000s`, `-0.250s`, `+0`: a sign, digits, an optional fraction and unit.
fn is_offset(t: &str) -> bool {
    let Some(rest) = t.strip_prefix(['+', '-']) else {
        return false;
    };
    let num = rest.strip_suffix(['s', 'm', 'h', 'd', 'y']).unwrap_or(rest);
    let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
    t.len() <= 32
        && !int.is_empty()
        && !frac.is_empty()
        && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
}

async fn iptables_delete(args: &[String]) -> Result<(), String> {
    let out = tokio::process::Command::new("iptables")
        .arg("-w")
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
