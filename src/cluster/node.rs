//! The node handle: one server (or sentinel) of a cluster, its ports, files,
//! cgroup and process, with the process faults nemeses use (pause, resume,
//! kill, stop, restart via [`super::Cluster::restart`]) and the libfaketime
//! clock control of Redis nodes started with `--faketime`.

use super::{ClusterError, System};
use crate::process::faketime::check_offset;
use crate::process::{self, Cgroup, Child, ProcId, Spec};
use crate::remote::{self as remote, Host, HostSpec, RemoteError, RemoteLaunch, SshTarget};
use crate::undo::{RemoteEffect, Undo};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

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
}

impl Ports {
    pub fn all(&self) -> Vec<u16> {
        std::iter::once(self.client)
            .chain(self.peer)
            .chain(self.election)
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

/// A node on another host: the SSH connection to it, the tag its
/// processes carry (`lockjaw-<run-id>-<node>`), and the files it needs
/// there before each start.
#[derive(Clone)]
pub struct RemoteNode {
    pub host: Arc<Host>,
    pub spec: HostSpec,
    pub tag: String,
    pub files: Vec<(String, String)>,
}

impl std::fmt::Debug for RemoteNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteNode({} {})", self.spec.name, self.tag)
    }
}

impl RemoteNode {
    fn info(&self) -> RemoteInfo {
        RemoteInfo {
            host: self.spec.name.clone(),
            target: self.spec.target.clone(),
            tag: self.tag.clone(),
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
}

/// Run `f` to its end on the SSH runtime, from a thread of its own: the
/// node handle's calls are synchronous (nemeses call them off the async
/// threads, `Drop` calls `close`), SSH is not. One runtime for the whole
/// process, so what a connection opens on it (its kept-open shell) lives on.
pub(crate) fn block_on<F>(f: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lockjaw-ssh")
            .enable_all()
            .build()
            .expect("a tokio runtime for SSH calls")
    });
    std::thread::scope(|s| s.spawn(|| rt.block_on(f)).join())
        .expect("the SSH thread does not panic")
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
            proc: Mutex::new(Proc {
                id: info.proc,
                child: None,
            }),
        }
    }

    pub(crate) fn external(system: System, i: usize, endpoint: &str) -> Node {
        let port = endpoint
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(0);
        Node::from_info(NodeInfo {
            name: format!("{system}{}", i + 1),
            role: NodeRole::Server,
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

    fn rerr(&self, e: RemoteError) -> ClusterError {
        ClusterError::Unhealthy {
            node: self.name.clone(),
            msg: e.to_string(),
        }
    }

    /// Start the node on its host: its files and directories first.
    fn spawn_remote(&self, r: &RemoteNode) -> Result<(), ClusterError> {
        let launch = self.launch.clone().ok_or_else(|| ClusterError::NoProcess {
            node: self.name.clone(),
            what: "start".into(),
        })?;
        let q = |p: &std::path::Path| crate::remote::quote(&p.to_string_lossy());
        let mut script = format!("mkdir -p {}", q(&self.data_dir));
        if let Some(f) = &self.faketime_file {
            let dir = f.parent().unwrap_or(std::path::Path::new("/"));
            let (d, f) = (q(dir), q(f));
            script.push_str(&format!(
                " {d} && {{ [ -s {f} ] || printf '+0\\n' > {f}; }}"
            ));
        }
        let env = launch
            .env
            .iter()
            .map(|(k, v)| match k.as_str() {
                "LD_PRELOAD" => (k.clone(), r.spec.faketime_preload.clone()),
                _ => (k.clone(), v.clone()),
            })
            .collect();
        let l = RemoteLaunch {
            tag: r.tag.clone(),
            program: r.spec.program(&launch.program),
            args: launch.args.clone(),
            env,
            log: self.log.to_string_lossy().into_owned(),
        };
        block_on(async {
            r.host.sh(&script).await?;
            for (path, text) in &r.files {
                r.host.write_file(path, text).await?;
            }
            remote::start(&r.host, &l).await
        })
        .map(drop)
        .map_err(|e| self.rerr(e))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Proc> {
        self.proc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current process (PID + start time), if one was started.
    pub fn proc_id(&self) -> Option<ProcId> {
        self.lock().id
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

    pub(crate) fn spawn(&self, detached: bool) -> Result<(), ClusterError> {
        if let Some(r) = &self.remote {
            return self.spawn_remote(r);
        }
        let mut spec = self.launch.clone().ok_or_else(|| ClusterError::NoProcess {
            node: self.name.clone(),
            what: "start".into(),
        })?;
        spec.die_with_parent = !detached;
        spec.cgroup = self.cgroup.as_ref().map(|c| c.dir.clone());
        // Drop the handle of an earlier (dead) process first: its close
        // removes the cgroup, which must not happen after the new start.
        let old = self.lock().child.take();
        drop(old);
        if let Some(f) = &self.faketime_file {
            if !f.exists() {
                super::write_file(f, "+0\n")?;
            }
        }
        let mut child = process::spawn(&spec).map_err(|source| ClusterError::Process {
            node: self.name.clone(),
            source,
        })?;
        if detached {
            child.detach();
        }
        let mut p = self.lock();
        p.id = Some(child.id());
        p.child = Some(child);
        Ok(())
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
        if let Some(r) = &self.remote {
            return block_on(remote::signal(&r.host, &r.tag, process::Signal::Stop))
                .map(drop)
                .map_err(|e| self.rerr(e));
        }
        let id = self.need_proc("pause")?;
        if let Some(cg) = self.whole_cgroup() {
            return process::cgroup::freeze(&cg.dir, true).map_err(|e| super::io_err(&cg.dir, e));
        }
        id.signal_group(process::Signal::Stop)
            .map_err(|e| self.perr(e))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while id.is_alive() && !id.is_stopped() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// SIGCONT the node's process group (or thaw its whole cgroup).
    pub fn resume(&self) -> Result<(), ClusterError> {
        if let Some(r) = &self.remote {
            return block_on(remote::signal(&r.host, &r.tag, process::Signal::Cont))
                .map(drop)
                .map_err(|e| self.rerr(e));
        }
        let id = self.need_proc("resume")?;
        if let Some(cg) = self.whole_cgroup() {
            return process::cgroup::freeze(&cg.dir, false).map_err(|e| super::io_err(&cg.dir, e));
        }
        id.signal_group(process::Signal::Cont)
            .map_err(|e| self.perr(e))?;
        Ok(())
    }

    /// SIGKILL the node's process group (or everything in its whole
    /// cgroup) and wait until it is gone.
    pub fn kill(&self) -> Result<(), ClusterError> {
        self.stop_with(Duration::ZERO, "kill")
    }

    /// Graceful stop (SIGCONT, SIGTERM, grace, SIGKILL); removes the cgroup.
    /// A no-op for nodes lockjaw did not start.
    pub fn stop(&self) -> Result<(), ClusterError> {
        if self.launch.is_none() {
            return Ok(());
        }
        if self.remote.is_some() {
            return self.stop_with(process::DEFAULT_GRACE, "stop");
        }
        if self.proc_id().is_some() {
            self.stop_with(process::DEFAULT_GRACE, "stop")?;
        }
        // Also for a node whose spawn failed after its leaf was made.
        if let Some(cg) = &self.cgroup {
            Cgroup::remove_dir(&cg.dir);
        }
        // A data directory outside the cluster directory goes with it.
        if super::tmpdata::is_tmp_data(&self.data_dir) {
            super::tmpdata::remove_own(&self.data_dir, &self.name).map_err(ClusterError::Io)?;
        }
        Ok(())
    }

    fn stop_with(&self, grace: Duration, what: &str) -> Result<(), ClusterError> {
        if let Some(r) = &self.remote {
            return block_on(remote::stop(&r.host, &r.tag, grace)).map_err(|e| self.rerr(e));
        }
        let id = self.need_proc(what)?;
        if let Some(cg) = self.whole_cgroup() {
            return self.stop_cgroup(id, &cg.dir, grace);
        }
        let p = self.lock();
        let r = match &p.child {
            Some(c) if c.id() == id => c.stop(grace),
            _ => process::stop_recorded(&id, grace),
        };
        r.map_err(|e| self.perr(e))
    }

    /// Thaw the cgroup, ask the main process to stop with SIGINT (a fast
    /// shutdown for PostgreSQL; SIGTERM would wait for every client to
    /// leave), give it `grace`, then kill whatever is left in the cgroup.
    fn stop_cgroup(
        &self,
        id: ProcId,
        dir: &std::path::Path,
        grace: Duration,
    ) -> Result<(), ClusterError> {
        let p = self.lock();
        let reap = || {
            if let Some(c) = &p.child {
                c.try_wait();
            }
        };
        if process::cgroup::is_frozen(dir) {
            let _ = process::cgroup::freeze(dir, false);
        }
        if !grace.is_zero() && id.signal(process::Signal::Int).map_err(|e| self.perr(e))? {
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
            Err(self.perr(process::ProcessError::Unkillable {
                pid: id.pid,
                waited: Duration::from_secs(10),
            }))
        }
    }

    fn perr(&self, source: process::ProcessError) -> ClusterError {
        ClusterError::Process {
            node: self.name.clone(),
            source,
        }
    }

    /// True while its process runs (stopped counts as running).
    pub fn is_alive(&self) -> bool {
        if let Some(r) = &self.remote {
            return block_on(remote::alive(&r.host, &r.tag)).unwrap_or(false);
        }
        let p = self.lock();
        if let Some(c) = &p.child {
            c.try_wait();
        }
        p.id.is_some_and(|id| id.is_alive())
    }

    /// True while its process is stopped by SIGSTOP (or its whole cgroup
    /// is frozen).
    pub fn is_paused(&self) -> bool {
        if let Some(r) = &self.remote {
            return block_on(remote::stopped(&r.host, &r.tag)).unwrap_or(false);
        }
        if let Some(cg) = self.whole_cgroup() {
            return process::cgroup::is_frozen(&cg.dir);
        }
        self.proc_id().is_some_and(|id| id.is_stopped())
    }

    /// `Some(status)` if the process lockjaw started has exited.
    pub(crate) fn exited(&self) -> Option<String> {
        if let Some(r) = &self.remote {
            return match block_on(remote::alive(&r.host, &r.tag)) {
                Ok(true) => None,
                Ok(false) => Some(format!(
                    "no process tagged {} on host {}",
                    r.tag, r.spec.name
                )),
                Err(e) => Some(e.to_string()),
            };
        }
        let p = self.lock();
        match (&p.child, p.id) {
            (Some(c), _) => c.try_wait().map(|s| s.to_string()),
            (None, Some(id)) if !id.is_alive() => Some("gone".into()),
            _ => None,
        }
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
        let text = match &self.remote {
            Some(r) => block_on(r.host.read_file(&f.to_string_lossy())).ok(),
            None => std::fs::read_to_string(f).ok(),
        };
        text.map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "+0".into())
    }

    /// The undo entry that writes `previous` back to its clock's control
    /// file (here or on its host).
    pub fn clock_undo(&self, previous: String) -> Option<Undo> {
        let file = self.faketime_file.clone()?;
        Some(match &self.remote {
            Some(r) => r.undo(RemoteEffect::Clock {
                file: file.to_string_lossy().into_owned(),
                previous,
            }),
            None => Undo::Clock { file, previous },
        })
    }

    /// The last lines of its log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = match &self.remote {
            Some(r) => {
                let log = crate::remote::quote(&self.log.to_string_lossy());
                block_on(r.host.sh(&format!("tail -n 8 {log}"))).ok()
            }
            None => std::fs::read_to_string(&self.log).ok(),
        };
        let Some(text) = text else {
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
