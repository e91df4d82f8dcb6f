//! A node whose server lockjaw did not start (`--attach`): its host's SSH
//! connection, its `attach` description, and the processes discovery
//! found (pid, start time, cgroup), renewed after every restart. This is
//! the one place the cluster and nemesis layers call into
//! [`crate::remote::attach`]; the [`Handle`] here never stops the server
//! at the end of a run.

use super::{Handle, Node};
use crate::cluster::ClusterError;
use crate::process::Signal;
use crate::remote::attach::{self, AttachRole, AttachSpec, Found, LogMark, ProcStamp, Signalled};
use crate::remote::{Host, HostSpec, RemoteError};
use crate::undo::{RemoteEffect, Undo};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A server lockjaw attached to, on its host.
pub struct AttachedNode {
    pub host: Arc<Host>,
    pub spec: HostSpec,
    pub attach: AttachSpec,
    /// `HOST:PORT` clients dial.
    pub client: String,
    found: Mutex<Found>,
    /// Where its log stood when it was found (the run's window starts there).
    mark: Option<LogMark>,
}

impl std::fmt::Debug for AttachedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AttachedNode({} pids {:?})", self.spec.name, self.pids())
    }
}

impl AttachedNode {
    /// Find the node's processes on its host and mark where its log
    /// stands (changes nothing there). `usual_port`: the system's port
    /// for a node whose file gives none.
    pub async fn discover(
        host: Arc<Host>,
        spec: HostSpec,
        usual_port: u16,
    ) -> Result<AttachedNode, RemoteError> {
        let a = spec.attach.clone().ok_or_else(|| RemoteError {
            host: spec.name.clone(),
            msg: "has no attach table (hint: add [node.attach] to it in the hosts file)".into(),
        })?;
        let found = attach::discover(&host, &a).await?;
        let mark = attach::log_mark(&host, &a).await?;
        let port = match a.role {
            AttachRole::Sentinel => SENTINEL_PORT,
            AttachRole::Server => usual_port,
        };
        Ok(AttachedNode {
            client: a.client_or(spec.address, port),
            host,
            spec,
            attach: a,
            found: Mutex::new(found),
            mark,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Found> {
        self.found.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What discovery (or the last restart) found.
    pub fn found(&self) -> Found {
        self.lock().clone()
    }

    /// The processes of the node now known (main process first).
    pub fn procs(&self) -> Vec<ProcStamp> {
        self.lock().procs.clone()
    }

    pub fn pids(&self) -> Vec<u32> {
        self.lock().procs.iter().map(|p| p.pid).collect()
    }

    /// Look again (after a restart); does not replace what is recorded.
    pub async fn rediscover(&self) -> Result<Found, RemoteError> {
        attach::discover(&self.host, &self.attach).await
    }

    /// Record a new identity (after it went into the undo log).
    pub fn set_found(&self, f: Found) {
        *self.lock() = f;
    }

    /// Whether `f` is still the recorded server (same main pid and start).
    pub fn same_as(&self, f: &Found) -> bool {
        let now = self.lock();
        match (now.procs.first(), f.procs.first()) {
            (Some(a), Some(b)) => a.pid == b.pid && a.start == b.start,
            _ => false,
        }
    }

    /// The undo entry of `effect` on this node's host.
    pub fn undo(&self, effect: RemoteEffect) -> Undo {
        Undo::Remote {
            host: self.spec.name.clone(),
            target: self.spec.target.clone(),
            effect,
        }
    }

    /// `AttachedFound` of what is recorded now.
    pub fn found_entry(&self) -> Undo {
        self.undo(RemoteEffect::AttachedFound {
            node: self.spec.name.clone(),
            procs: self.procs(),
        })
    }

    /// `AttachedPaused` of what is recorded now.
    pub fn paused_entry(&self) -> Undo {
        self.undo(RemoteEffect::AttachedPaused {
            node: self.spec.name.clone(),
            procs: self.procs(),
        })
    }

    /// `AttachedDown` (its undo starts the node again).
    pub fn down_entry(&self) -> Undo {
        self.undo(RemoteEffect::AttachedDown {
            node: self.spec.name.clone(),
            find: Box::new(self.attach.find.clone()),
        })
    }

    /// Signal the recorded processes that still carry their stamps.
    pub async fn signal(&self, sig: Signal) -> Result<Signalled, RemoteError> {
        attach::signal(&self.host, &self.procs(), sig).await
    }

    /// SIGKILL the server and wait until its processes are gone.
    pub async fn kill(&self) -> Result<(), RemoteError> {
        let found = self.found();
        attach::kill(&self.host, &self.attach, &found).await
    }

    /// Run the node's start command.
    pub async fn start(&self) -> Result<(), RemoteError> {
        attach::start(&self.host, &self.attach).await
    }

    /// Whether a process of its description runs (a zombie does not).
    pub async fn running(&self) -> Result<bool, RemoteError> {
        attach::running(&self.host, &self.attach)
            .await
            .map(|r| r == attach::Running::Yes)
    }

    /// The tools its faults need (`iptables` when a fault cuts it off).
    pub async fn check_tools(&self, iptables: bool) -> Result<(), RemoteError> {
        attach::check_tools(&self.host, &self.attach, iptables).await
    }

    /// Its log lines since it was found (None: no log source).
    pub async fn log_since(&self) -> Result<Option<String>, RemoteError> {
        match &self.mark {
            Some(m) => attach::log_since(&self.host, &self.attach, m).await,
            None => Ok(None),
        }
    }
}

/// Redis Sentinel's usual port.
const SENTINEL_PORT: u16 = 26379;

/// The scripts `--plan` prints for a node (what the functions above send).
pub mod plan {
    pub use crate::remote::attach::script::{discover, kill, log_mark, log_since, signal, start};
    pub use crate::remote::attach::LogMark;
}

/// The handle of an attached node: faults through its stamps; `stop`
/// leaves it running.
pub(super) struct Adopted<'a> {
    pub node: &'a Node,
    pub a: &'a AttachedNode,
}

impl Adopted<'_> {
    fn rerr(&self, e: RemoteError) -> ClusterError {
        ClusterError::Unhealthy {
            node: self.node.name.clone(),
            msg: e.to_string(),
        }
    }
}

impl Handle for Adopted<'_> {
    /// Its start command (after a kill).
    fn spawn(&self, _detached: bool) -> Result<(), ClusterError> {
        super::block_on(self.a.start()).map_err(|e| self.rerr(e))
    }

    fn pause(&self) -> Result<(), ClusterError> {
        super::block_on(self.a.signal(Signal::Stop))
            .map(drop)
            .map_err(|e| self.rerr(e))
    }

    fn resume(&self) -> Result<(), ClusterError> {
        super::block_on(self.a.signal(Signal::Cont))
            .map(drop)
            .map_err(|e| self.rerr(e))
    }

    /// Never: lockjaw leaves the servers it attached to running.
    fn stop(&self) -> Result<(), ClusterError> {
        Ok(())
    }

    fn stop_with(&self, _grace: Duration, _what: &str) -> Result<(), ClusterError> {
        super::block_on(self.a.kill()).map_err(|e| self.rerr(e))
    }

    fn is_alive(&self) -> bool {
        super::block_on(self.a.rediscover()).is_ok()
    }

    fn is_paused(&self) -> bool {
        false
    }

    fn exited(&self) -> Option<String> {
        super::block_on(self.a.rediscover())
            .err()
            .map(|e| e.to_string())
    }

    fn read(&self, path: &Path) -> Option<String> {
        super::block_on(self.a.host.read_file(&path.to_string_lossy())).ok()
    }

    fn log_text(&self) -> Option<String> {
        None
    }

    fn clock_undo(&self, file: PathBuf, previous: String) -> Undo {
        // Clock faults are refused on attached nodes before a run starts.
        self.a.undo(RemoteEffect::Clock {
            file: file.to_string_lossy().into_owned(),
            previous,
        })
    }
}
