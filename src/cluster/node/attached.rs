//! A node whose server lockjaw did not start (`--attach`): its host's SSH
//! connection, its `attach` description, and the processes discovery
//! found (pid, start time, cgroup), renewed after every restart. This is
//! the one place the cluster and nemesis layers call into
//! [`crate::remote::attach`]; the [`Handle`] here never stops the server
//! at the end of a run.

use super::{Handle, Node, NodeRole};
use crate::auth::Auth;
use crate::cluster::proof::{self, Answer, Proof, ServerSays, ZkConf};
use crate::cluster::{ClusterError, Servers};
use crate::process::Signal;
use crate::remote::attach::{
    self, AttachRole, AttachSpec, Found, Listen, Listening, LogMark, ProcStamp, Signalled,
};
use crate::remote::{Host, HostSpec, RemoteError};
use crate::undo::{RemoteEffect, Undo};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a ZooKeeper process's `zoo.cfg` gave (None: its command line
/// names none).
type ZkRead = Option<Result<ZkConf, String>>;

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
    /// The last proof that the found processes are its server.
    proof: Mutex<Option<Proof>>,
    /// A ZooKeeper process's own configuration, read once per main process.
    zk: Mutex<Option<(ProcStamp, ZkRead)>>,
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
        let port = match a.role {
            AttachRole::Sentinel => SENTINEL_PORT,
            AttachRole::Server => usual_port,
        };
        let client = a.client_or(spec.address, port);
        let found = attach::discover_at(&host, &a, Listen::of(&client).as_ref()).await?;
        let mark = attach::log_mark(&host, &a).await?;
        Ok(AttachedNode {
            client,
            host,
            spec,
            attach: a,
            found: Mutex::new(found),
            mark,
            proof: Mutex::new(None),
            zk: Mutex::new(None),
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
        attach::discover_at(&self.host, &self.attach, Listen::of(&self.client).as_ref()).await
    }

    /// What the node is to its system: a server, or a Redis Sentinel.
    pub fn role(&self) -> NodeRole {
        match self.attach.role {
            AttachRole::Server => NodeRole::Server,
            AttachRole::Sentinel => NodeRole::Sentinel,
        }
    }

    /// The last proof that its found processes are its server.
    pub fn proof(&self) -> Option<Proof> {
        self.proof.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Prove that the recorded processes are the node's server
    /// ([`proof`]): the server's own answer (`servers`' identity, with
    /// `auth`), else a listening socket on its client address held by one
    /// of them, read with discovery when `fresh`, else asked of the host
    /// now (one round trip through the kept-open shell). Err: why not
    /// (then nothing may be signalled). The proof is kept.
    pub async fn prove(
        &self,
        servers: &dyn Servers,
        auth: &Auth,
        fresh: bool,
    ) -> Result<Proof, String> {
        let found = self.found();
        let says = servers
            .identity(&self.client, self.role(), auth, Duration::from_secs(2))
            .await;
        let zk = match &says {
            Ok(Some(ServerSays::Zk { .. })) => self.zk_conf(&found).await,
            _ => None,
        };
        let a = proof::answer(&self.client, &found, &says, zk.as_ref());
        let listening = match (&a, fresh) {
            (_, true) => found.facts.listening.clone(),
            (Answer::Unusable(_), false) => match Listen::of(&self.client) {
                Some(l) => attach::listening(&self.host, &found.procs, &l)
                    .await
                    .map_err(|e| e.to_string())?,
                None => Listening::NotAsked,
            },
            _ => Listening::NotAsked,
        };
        let p = proof::judge(&self.client, &found, a, &listening)?;
        *self.proof.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.clone());
        Ok(p)
    }

    /// The ZooKeeper configuration of the main process (read on the host
    /// once per main process).
    async fn zk_conf(&self, found: &Found) -> ZkRead {
        let main = found.procs.first()?.clone();
        if let Some((stamp, c)) = self.zk.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if *stamp == main {
                return c.clone();
            }
        }
        let c = crate::cluster::zookeeper::configured(&self.host, &found.facts.cmdline).await;
        *self.zk.lock().unwrap_or_else(|e| e.into_inner()) = Some((main, c.clone()));
        c
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
    pub use crate::remote::attach::script::{
        discover, discover_at, kill, listening, log_mark, log_since, signal, start,
    };
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
