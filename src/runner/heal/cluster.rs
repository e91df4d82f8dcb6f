//! Taking back what a run left of its servers: the local cluster its
//! state file lists (processes, cgroups, data directories). What it left
//! in a system's servers (tables in a user's PostgreSQL, a Redis `CLIENT
//! PAUSE`) is taken back by that system's own files, which the executor
//! calls.

use crate::cluster::{state, tmpdata};
use crate::process;
use crate::undo::{explain, RunDir, Scope, Trust};
use rustix::fs::{Mode, OFlags};
use std::path::Path;

/// Why the cluster directory `dir` of a record read back is not this
/// run's. A run's cluster lives in the run directory itself, or (the
/// server of `--storage postgres` or `--storage mariadb`) in its
/// `postgres` or `mariadb` directory: a record naming another one would stop someone else's.
/// Compared by identity, as the path may be spelt another way.
pub(super) fn check_dir(dir: &Path, run_dir: &Path) -> Result<(), String> {
    let id = |d: &Path| process::Owner::of_dir(d).ok();
    let storage = crate::service::postgres::Server::dir(run_dir);
    let storage_my = crate::service::mariadb_storage::server_dir(run_dir);
    let ours = id(dir).is_some_and(|d| {
        Some(&d) == id(run_dir).as_ref()
            || Some(&d) == id(&storage).as_ref()
            || Some(&d) == id(&storage_my).as_ref()
    });
    if ours || !dir.exists() {
        return Ok(());
    }
    Err(format!(
        "{} is neither this run's directory {} nor its storage server's {}; left alone",
        dir.display(),
        run_dir.display(),
        storage.display()
    ))
}

/// Stop the cluster of `dir`, refusing (for a record read back) a
/// directory that is not this run's.
pub(super) async fn cluster(dir: &Path, scope: &Scope, trust: Trust) -> Result<(), String> {
    if trust == Trust::Prove {
        check_dir(dir, scope.dir.path())?;
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
            // In the temporary directory: only the one named after this
            // run and node.
            let removed = match run_id {
                Some(id) => tmpdata::remove_for_run(&n.data_dir, id, &n.name),
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
