//! The node handle: one server (or sentinel) of a cluster, its ports, files,
//! cgroup and process, with the process faults nemeses use (pause, resume,
//! kill, stop, restart via [`super::Cluster::restart`]) and the libfaketime
//! clock control of Redis nodes started with `--faketime`.
//!
//! What differs between a node here and one on another host is behind
//! [`Handle`]: [`local`] signals and reads on this machine, [`remote`]
//! over SSH. `Node`'s own methods pick the handle and hold what both
//! share.

mod attached;
mod local;
mod remote;

pub use attached::{plan as attach_plan, AttachedNode};
pub(crate) use remote::block_on;
pub use remote::RemoteNode;

use super::ClusterError;
use crate::process::faketime::check_offset;
use crate::process::{self, Cgroup, Child, ProcId, Spec};
use crate::remote::SshTarget;
use crate::undo::Undo;
use attached::Adopted;
use local::Here;
use remote::OnHost;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Where a node runs, and so how its process is signalled and its files
/// read: one implementation for this machine, one for another host.
trait Handle {
    /// Start it (`detached`: it outlives lockjaw).
    fn spawn(&self, detached: bool) -> Result<(), ClusterError>;
    fn pause(&self) -> Result<(), ClusterError>;
    fn resume(&self) -> Result<(), ClusterError>;
    /// Stop it and remove what it leaves here (a started node only).
    fn stop(&self) -> Result<(), ClusterError>;
    /// SIGTERM, `grace`, SIGKILL (`what` names the fault for errors).
    fn stop_with(&self, grace: Duration, what: &str) -> Result<(), ClusterError>;
    fn is_alive(&self) -> bool;
    fn is_paused(&self) -> bool;
    /// `Some(why)` once its process is gone.
    fn exited(&self) -> Option<String>;
    /// A file of the node, where it runs.
    fn read(&self, path: &Path) -> Option<String>;
    /// Its log (at least its last lines).
    fn log_text(&self) -> Option<String>;
    /// The undo entry that writes `previous` back into its clock file.
    fn clock_undo(&self, file: PathBuf, previous: String) -> Undo;
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeRole {
    /// A server that holds lock state (Redis, etcd member, ZooKeeper peer).
    Server,
    /// A Redis Sentinel.
    Sentinel,
}

/// The loopback ports a node listens on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    /// Where clients connect.
    pub client: u16,
    /// etcd peer port, ZooKeeper quorum port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<u16>,
    /// ZooKeeper leader-election port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub election: Option<u16>,
    /// Redis Cluster's bus port (`cluster-port`); its peers use the
    /// client port too (replication).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<u16>,
}

impl Ports {
    pub fn all(&self) -> Vec<u16> {
        std::iter::once(self.client)
            .chain(self.peer)
            .chain(self.election)
            .chain(self.bus)
            .collect()
    }
}

/// The serialisable description of a node (one entry of the state file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub name: String,
    pub role: NodeRole,
    pub addr: String,
    pub ports: Ports,
    pub log: PathBuf,
    pub data_dir: PathBuf,
    #[serde(default)]
    pub cgroup: Option<Cgroup>,
    #[serde(default)]
    pub faketime_file: Option<PathBuf>,
    /// How to start it again (`None` for a node lockjaw did not start).
    #[serde(default)]
    pub launch: Option<Spec>,
    /// The running process, once spawned.
    #[serde(default)]
    pub proc: Option<ProcId>,
    /// On another host (`--hosts`): which, and the tag its processes carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteInfo>,
}

/// Where a node on another host runs (the state file's record of it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemoteInfo {
    /// The host's name in the hosts file.
    pub host: String,
    pub target: SshTarget,
    /// `LOCKJAW_TAG` of its processes.
    pub tag: String,
}

#[derive(Debug, Default)]
struct Proc {
    id: Option<ProcId>,
    child: Option<Child>,
}

/// One node of a cluster.
#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub role: NodeRole,
    /// Client endpoint, `127.0.0.1:PORT`.
    pub addr: String,
    pub ports: Ports,
    pub log: PathBuf,
    pub data_dir: PathBuf,
    /// Its cgroup v2 (`iptables -A OUTPUT -m cgroup --path <iptables_path>`).
    pub cgroup: Option<Cgroup>,
    /// libfaketime control file (`--faketime` Redis nodes only).
    pub faketime_file: Option<PathBuf>,
    pub launch: Option<Spec>,
    /// Set for a node on another host (`--hosts`).
    pub remote: Option<RemoteNode>,
    /// Set for a server lockjaw attached to (`--attach`; `remote` then
    /// carries its host for the partition rules).
    pub attached: Option<std::sync::Arc<AttachedNode>>,
    proc: Mutex<Proc>,
}

impl Node {
    pub(crate) fn planned(info: NodeInfo) -> Node {
        Node::from_info(info)
    }

    pub(crate) fn from_info(info: NodeInfo) -> Node {
        Node {
            name: info.name,
            role: info.role,
            addr: info.addr,
            ports: info.ports,
            log: info.log,
            data_dir: info.data_dir,
            cgroup: info.cgroup,
            faketime_file: info.faketime_file,
            launch: info.launch,
            remote: None,
            attached: None,
            proc: Mutex::new(Proc {
                id: info.proc,
                child: None,
            }),
        }
    }

    pub(crate) fn external(system: &str, i: usize, endpoint: &str) -> Node {
        Node::dialled(format!("{system}{}", i + 1), NodeRole::Server, endpoint)
    }

    /// A node lockjaw knows only by the address clients dial (`--endpoints`,
    /// `--attach`): no process, files or ports of its own here.
    pub(crate) fn dialled(name: String, role: NodeRole, endpoint: &str) -> Node {
        let port = endpoint
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(0);
        Node::from_info(NodeInfo {
            name,
            role,
            addr: endpoint.to_string(),
            ports: Ports {
                client: port,
                ..Ports::default()
            },
            log: PathBuf::new(),
            data_dir: PathBuf::new(),
            cgroup: None,
            faketime_file: None,
            launch: None,
            proc: None,
            remote: None,
        })
    }

    /// The state-file form of this node.
    pub fn info(&self) -> NodeInfo {
        NodeInfo {
            name: self.name.clone(),
            role: self.role,
            addr: self.addr.clone(),
            ports: self.ports,
            log: self.log.clone(),
            data_dir: self.data_dir.clone(),
            cgroup: self.cgroup.clone(),
            faketime_file: self.faketime_file.clone(),
            launch: self.launch.clone(),
            proc: self.proc_id(),
            remote: self.remote.as_ref().map(RemoteNode::info),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Proc> {
        self.proc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current process (PID + start time), if one was started.
    pub fn proc_id(&self) -> Option<ProcId> {
        self.lock().id
    }

    /// Whether lockjaw can signal it: it started it, or attached to it.
    pub fn signallable(&self) -> bool {
        self.launch.is_some() || self.attached.is_some()
    }

    fn need_proc(&self, what: &str) -> Result<ProcId, ClusterError> {
        if self.launch.is_none() {
            return Err(ClusterError::NoProcess {
                node: self.name.clone(),
                what: what.to_string(),
            });
        }
        self.proc_id()
            .ok_or_else(|| ClusterError::Usage(format!("node {} was never started", self.name)))
    }

    /// The handle for where the node runs: here or on its host.
    fn with<T>(&self, f: impl FnOnce(&dyn Handle) -> T) -> T {
        match (&self.attached, &self.remote) {
            (Some(a), _) => f(&Adopted { node: self, a }),
            (None, Some(r)) => f(&OnHost { node: self, r }),
            (None, None) => f(&Here(self)),
        }
    }

    pub(crate) fn spawn(&self, detached: bool) -> Result<(), ClusterError> {
        self.with(|h| h.spawn(detached))
    }

    /// The node's cgroup when faults must reach all of it (its children
    /// leave its process group, [`Spec::whole_cgroup`]).
    pub fn whole_cgroup(&self) -> Option<&Cgroup> {
        self.launch
            .as_ref()
            .filter(|l| l.whole_cgroup)
            .and(self.cgroup.as_ref())
    }

    /// SIGSTOP the node's process group (or freeze its whole cgroup);
    /// returns once the kernel reports it stopped (at most 2 s).
    pub fn pause(&self) -> Result<(), ClusterError> {
        self.with(|h| h.pause())
    }

    /// SIGCONT the node's process group (or thaw its whole cgroup).
    pub fn resume(&self) -> Result<(), ClusterError> {
        self.with(|h| h.resume())
    }

    /// SIGKILL the node's process group (or everything in its whole
    /// cgroup) and wait until it is gone.
    pub fn kill(&self) -> Result<(), ClusterError> {
        self.with(|h| h.stop_with(Duration::ZERO, "kill"))
    }

    /// Graceful stop (SIGCONT, SIGTERM, grace, SIGKILL); removes the cgroup.
    /// A no-op for nodes lockjaw did not start.
    pub fn stop(&self) -> Result<(), ClusterError> {
        if self.launch.is_none() {
            return Ok(());
        }
        self.with(|h| h.stop())
    }

    fn perr(&self, source: process::ProcessError) -> ClusterError {
        ClusterError::Process {
            node: self.name.clone(),
            source,
        }
    }

    /// True while its process runs (stopped counts as running).
    pub fn is_alive(&self) -> bool {
        self.with(|h| h.is_alive())
    }

    /// True while its process is stopped by SIGSTOP (or its whole cgroup
    /// is frozen).
    pub fn is_paused(&self) -> bool {
        self.with(|h| h.is_paused())
    }

    /// `Some(status)` if the process lockjaw started has exited.
    pub(crate) fn exited(&self) -> Option<String> {
        self.with(|h| h.exited())
    }

    pub(crate) fn detach(&self) {
        if let Some(c) = self.lock().child.as_mut() {
            c.detach();
        }
    }

    /// Jump this node's clock: write a libfaketime offset such as `"+30s"`
    /// or `"-2m"` to its control file (read on every clock call).
    pub fn set_clock_offset(&self, offset: &str) -> Result<(), ClusterError> {
        let f = self.faketime_file.as_ref().ok_or_else(|| {
            if self.launch.is_none() {
                ClusterError::NoProcess {
                    node: self.name.clone(),
                    what: "a clock jump".into(),
                }
            } else {
                ClusterError::NoFaketime {
                    node: self.name.clone(),
                }
            }
        })?;
        check_offset(offset).map_err(ClusterError::Usage)?;
        super::write_file(f, &format!("{offset}\n"))
    }

    /// Put this node's clock back to the real time (offset `+0`).
    pub fn restore_clock(&self) -> Result<(), ClusterError> {
        self.set_clock_offset("+0")
    }

    /// The offset its libfaketime control file holds now (`+0` when the
    /// file is missing or empty).
    pub fn clock_offset(&self) -> String {
        let Some(f) = &self.faketime_file else {
            return "+0".into();
        };
        self.with(|h| h.read(f))
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "+0".into())
    }

    /// The undo entry that writes `previous` back to its clock's control
    /// file (here or on its host).
    pub fn clock_undo(&self, previous: String) -> Option<Undo> {
        let file = self.faketime_file.clone()?;
        Some(self.with(|h| h.clock_undo(file, previous)))
    }

    /// The last lines of its log, for error messages.
    pub fn log_tail(&self) -> String {
        let Some(text) = self.with(|h| h.log_text()) else {
            return String::new();
        };
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(8)..].join("\n    ");
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its last lines:\n    {tail}")
        }
    }

    pub(crate) fn unhealthy(&self, waited: Duration, why: String) -> ClusterError {
        ClusterError::Unhealthy {
            node: self.name.clone(),
            msg: format!(
                "{} not healthy after {waited:?}: {why}; see its log {}{}",
                self.addr,
                self.log.display(),
                self.log_tail()
            ),
        }
    }
}
