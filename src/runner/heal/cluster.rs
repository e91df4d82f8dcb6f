//! Taking back what a run left of its servers and databases: the local
//! cluster its state file lists (processes, cgroups, data directories),
//! the tables it made in a user's PostgreSQL, a Redis `CLIENT PAUSE`.

use crate::cluster::{postgres, state, tmpdata};
use crate::process;
use crate::undo::{explain, RunDir, Scope, Trust};
use rustix::fs::{Mode, OFlags};
use std::path::Path;
use std::time::Duration;

/// Stop the cluster of `dir`, refusing (for a record read back) a
/// directory that is not this run's.
pub(super) async fn cluster(dir: &Path, scope: &Scope, trust: Trust) -> Result<(), String> {
    let run_dir = scope.dir.path();
    if trust == Trust::Prove {
        // A run's cluster lives in the run directory itself: a
        // record naming another one would stop someone else's.
        let same = process::Owner::of_dir(dir).ok() == process::Owner::of_dir(run_dir).ok();
        if !same && dir.exists() {
            return Err(format!(
                "{} is not this run's directory {}; left alone",
                dir.display(),
                run_dir.display()
            ));
        }
    }
    let (run, d, id) = (scope.dir.clone(), dir.to_path_buf(), scope.run_id.clone());
    tokio::task::spawn_blocking(move || stop_cluster(&run, &d, id.as_deref()))
        .await
        .map_err(|e| e.to_string())?
}

/// Stop the cluster whose state file is in `dir` (the run directory or
/// beneath it) and remove its nodes' data directories, each strictly
/// beneath `dir`; the others are reported and left alone.
fn stop_cluster(run: &RunDir, dir: &Path, run_id: Option<&str>) -> Result<(), String> {
    let rel = run.relative(dir).map_err(|e| format!("{e}: skipped"))?;
    let (_fd, via) = match run.dir_path(&rel) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {}: skipped", dir.display(), explain(&e))),
    };
    // Through the descriptor from here on: `via` is /proc/self/fd/N.
    let shown = |e: String| e.replace(&via.display().to_string(), &dir.display().to_string());
    let state = rel.join(state::STATE_FILE);
    match run.open_file(&state, OFlags::RDONLY, Mode::empty()) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(format!(
                "{}: {}: skipped",
                dir.join(state::STATE_FILE).display(),
                explain(&e)
            ))
        }
        Ok(_) => {}
    }
    let st = state::read(&via).map_err(|e| shown(e.to_string()))?;
    state::stop_all(&via).map_err(|e| shown(e.to_string()))?;
    let mut refused = Vec::new();
    for n in &st.nodes {
        if tmpdata::is_tmp_data(&n.data_dir) {
            // In the temporary directory (PostgreSQL's): only the one named
            // after this run and node.
            let removed = match run_id {
                Some(id) => {
                    tmpdata::remove(&n.data_dir, id, &n.name).or_else(|_| {
                        // The server of `--storage postgres` beside another system.
                        let group = postgres::storage_group(id);
                        tmpdata::remove(&n.data_dir, &group, &n.name)
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

/// Drop a run's objects in the `--postgres-url` database: the URL from
/// the private file beneath the run directory, the prefix this run's.
pub(super) async fn drop_tables(scope: &Scope, file: &Path, prefix: &str) -> Result<(), String> {
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

pub(super) async fn redis_unpause(addr: &str) -> Result<(), String> {
    let t = Duration::from_secs(2);
    let conn = tokio::time::timeout(t, crate::client::redis_query::open(addr, t)).await;
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
