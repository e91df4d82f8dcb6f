//! A node on this machine: its process (group) or whole cgroup, signalled
//! and stopped here, its files read here.

use super::{Handle, Node};
use crate::cluster::{io_err, tmpdata, write_file, ClusterError};
use crate::process::{self, Cgroup, ProcId};
use crate::undo::Undo;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The handle of a node that runs here.
pub(super) struct Here<'a>(pub &'a Node);

impl Handle for Here<'_> {
    fn spawn(&self, detached: bool) -> Result<(), ClusterError> {
        let n = self.0;
        let mut spec = n.launch.clone().ok_or_else(|| ClusterError::NoProcess {
            node: n.name.clone(),
            what: "start".into(),
        })?;
        spec.die_with_parent = !detached;
        spec.cgroup = n.cgroup.as_ref().map(|c| c.dir.clone());
        // Drop the handle of an earlier (dead) process first: its close
        // removes the cgroup, which must not happen after the new start.
        let old = n.lock().child.take();
        drop(old);
        if let Some(f) = &n.faketime_file {
            if !f.exists() {
                write_file(f, "+0\n")?;
            }
        }
        let mut child = process::spawn(&spec).map_err(|source| ClusterError::Process {
            node: n.name.clone(),
            source,
        })?;
        if detached {
            child.detach();
        }
        let mut p = n.lock();
        p.id = Some(child.id());
        p.child = Some(child);
        Ok(())
    }

    fn pause(&self) -> Result<(), ClusterError> {
        let n = self.0;
        let id = n.need_proc("pause")?;
        if let Some(cg) = n.whole_cgroup() {
            return process::cgroup::freeze(&cg.dir, true).map_err(|e| io_err(&cg.dir, e));
        }
        id.signal_group(process::Signal::Stop)
            .map_err(|e| n.perr(e))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while id.is_alive() && !id.is_stopped() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    fn resume(&self) -> Result<(), ClusterError> {
        let n = self.0;
        let id = n.need_proc("resume")?;
        if let Some(cg) = n.whole_cgroup() {
            return process::cgroup::freeze(&cg.dir, false).map_err(|e| io_err(&cg.dir, e));
        }
        id.signal_group(process::Signal::Cont)
            .map_err(|e| n.perr(e))?;
        Ok(())
    }

    fn stop(&self) -> Result<(), ClusterError> {
        let n = self.0;
        if n.proc_id().is_some() {
            self.stop_with(process::DEFAULT_GRACE, "stop")?;
        }
        // Also for a node whose spawn failed after its leaf was made.
        if let Some(cg) = &n.cgroup {
            Cgroup::remove_dir(&cg.dir);
        }
        // A data directory outside the cluster directory goes with it.
        if tmpdata::is_tmp_data(&n.data_dir) {
            tmpdata::remove_own(&n.data_dir, &n.name).map_err(ClusterError::Io)?;
        }
        Ok(())
    }

    fn stop_with(&self, grace: Duration, what: &str) -> Result<(), ClusterError> {
        let n = self.0;
        let id = n.need_proc(what)?;
        if let Some(cg) = n.whole_cgroup() {
            return self.stop_cgroup(id, &cg.dir, grace);
        }
        let p = n.lock();
        let r = match &p.child {
            Some(c) if c.id() == id => c.stop(grace),
            _ => process::stop_recorded(&id, grace),
        };
        r.map_err(|e| n.perr(e))
    }

    fn is_alive(&self) -> bool {
        let p = self.0.lock();
        if let Some(c) = &p.child {
            c.try_wait();
        }
        p.id.is_some_and(|id| id.is_alive())
    }

    fn is_paused(&self) -> bool {
        let n = self.0;
        if let Some(cg) = n.whole_cgroup() {
            return process::cgroup::is_frozen(&cg.dir);
        }
        n.proc_id().is_some_and(|id| id.is_stopped())
    }

    fn exited(&self) -> Option<String> {
        let p = self.0.lock();
        match (&p.child, p.id) {
            (Some(c), _) => c.try_wait().map(|s| s.to_string()),
            (None, Some(id)) if !id.is_alive() => Some("gone".into()),
            _ => None,
        }
    }

    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn log_text(&self) -> Option<String> {
        std::fs::read_to_string(&self.0.log).ok()
    }

    fn clock_undo(&self, file: PathBuf, previous: String) -> Undo {
        Undo::Clock { file, previous }
    }
}

impl Here<'_> {
    /// Thaw the cgroup, ask the main process to stop with SIGINT (a fast
    /// shutdown for PostgreSQL; SIGTERM would wait for every client to
    /// leave), give it `grace`, then kill whatever is left in the cgroup.
    fn stop_cgroup(&self, id: ProcId, dir: &Path, grace: Duration) -> Result<(), ClusterError> {
        let n = self.0;
        let p = n.lock();
        let reap = || {
            if let Some(c) = &p.child {
                c.try_wait();
            }
        };
        if process::cgroup::is_frozen(dir) {
            let _ = process::cgroup::freeze(dir, false);
        }
        if !grace.is_zero() && id.signal(process::Signal::Int).map_err(|e| n.perr(e))? {
            let deadline = std::time::Instant::now() + grace;
            while std::time::Instant::now() < deadline && process::cgroup::populated(dir) {
                reap();
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let gone = process::cgroup::kill_all(dir, Duration::from_secs(10));
        reap();
        if gone {
            Ok(())
        } else {
            Err(n.perr(process::ProcessError::Unkillable {
                pid: id.pid,
                waited: Duration::from_secs(10),
            }))
        }
    }
}
