//! One local cluster shared by the runs of a campaign (`lockjaw run --runs
//! N` without `--fresh-cluster`): started by the first run that needs it,
//! handed to the next run only when it is as that run would find a fresh
//! one, started again otherwise.
//!
//! Each job of a campaign (`--jobs J`) holds one [`Slot`]; its runs go one
//! after another, so a cluster is never used by two runs at once. Before
//! a run gets the slot's cluster, [`Slot::take`] checks that the run asks
//! for the same cluster (system, nodes, ports, libfaketime, `appendfsync`),
//! that the run before ended cleanly (it did not fail, end early or leave
//! an undo entry pending: [`Slot::after_run`]), that every node runs
//! unpaused and answers, the cluster is ready, its settings and its
//! leader are those it started with, and that the run before left no
//! entry of its lock key (`Servers::lock_keys_left`: a lease not yet run
//! out, an orphan still renewing). Any "no" stops the cluster and starts
//! a new one, and the run records why (`run.json`'s `cluster`). A run
//! whose faults change the servers (`registry::changes_servers`), runs a
//! client adapter (whose library's keys lockjaw cannot list) or a workload
//! without a lock gets a cluster of its own, as without a campaign.
//!
//! The shared cluster lives in `shared-cluster/` inside the run directory
//! of the run that started it, with an undo log of its own (its cgroup
//! group `lockjaw/<id>` and the cluster), a `controller.json` and
//! `shared-cluster.json` (its id); the runs' own undo logs never name it.
//! The campaign drains that log when it ends ([`Slot::close`]). After a
//! SIGKILL, `lockjaw heal RUN_DIR` of any run on it follows `run.json`'s
//! `cluster.home` there and stops it (`super::heal`).

use super::controller::{RunConfig, RunError, RunOutcome};
use crate::cluster::{Cluster, ClusterSpec};
use crate::nemesis::registry;
use crate::process::ports::{self, PortBlock};
use crate::undo::{Undo, UndoLog, UNDO_FILE};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shared cluster's directory inside the run directory that started it.
pub const HOME: &str = "shared-cluster";
/// The file in [`HOME`] with the cluster's id (`run_id`, as heal reads it).
pub const MARK: &str = "shared-cluster.json";

/// What `run.json` records of the local cluster a run used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterUse {
    /// The cluster's id: its cgroup group `lockjaw/<id>`; a cluster of the
    /// run's own has the run's id.
    pub id: String,
    /// Whether an earlier run of the campaign used it first.
    pub reused: bool,
    /// This run's number among the runs on it (1: it started it).
    pub run_on_it: u32,
    /// A shared cluster's directory (its state file, logs and undo log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// In a campaign that shares clusters: why this run did not get the
    /// one the runs before it used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_because: Option<String>,
}

impl ClusterUse {
    /// A cluster of the run's own (`fresh_because`: why, in a campaign
    /// that shares).
    pub fn own(run_id: &str, fresh_because: Option<String>) -> ClusterUse {
        ClusterUse {
            id: run_id.to_string(),
            reused: false,
            run_on_it: 1,
            home: None,
            fresh_because,
        }
    }
}

/// One job's cluster across its runs (see the module doc).
#[derive(Default)]
pub struct Slot {
    state: tokio::sync::Mutex<State>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

#[derive(Default)]
struct State {
    current: Option<Shared>,
    /// Why the current cluster must not be handed on (the last run's end).
    dirty: Option<String>,
    /// The lock key of the last run on the current cluster.
    last_key: Option<String>,
}

/// What a run asks of its cluster: a cluster started for other values is
/// not given to it.
#[derive(Clone, Debug, PartialEq)]
struct Wants {
    system: &'static str,
    nodes: Option<usize>,
    base_port: Option<u16>,
    faketime: bool,
    appendfsync: String,
}

impl Wants {
    fn of(cfg: &RunConfig) -> Wants {
        Wants {
            system: cfg.system.name(),
            nodes: cfg.nodes,
            base_port: cfg.base_port,
            faketime: registry::needs_faketime(&cfg.nemesis, cfg.system),
            appendfsync: format!("{:?}", cfg.nemesis.appendfsync),
        }
    }
}

/// A running shared cluster.
struct Shared {
    id: String,
    home: PathBuf,
    cluster: Arc<Cluster>,
    /// The home's undo log: the cluster's cgroup group and the cluster.
    undo: UndoLog,
    _ports: PortBlock,
    wants: Wants,
    settings: BTreeMap<String, String>,
    leader: Option<String>,
    runs: u32,
}

/// Why a run of `cfg` cannot share a cluster, if it cannot (it then gets
/// one of its own, as without a campaign).
pub fn unshareable(cfg: &RunConfig) -> Option<String> {
    if cfg.endpoints.is_some() || cfg.hosts.is_some() || !cfg.system.facts().lock.is_yes() {
        return Some("lockjaw starts no local cluster for it".into());
    }
    if registry::changes_servers(&cfg.nemesis) {
        return Some(format!(
            "nemesis {} changes the servers' state",
            cfg.nemesis.name
        ));
    }
    if let Some(a) = &cfg.adapter {
        return Some(format!(
            "client {}: lockjaw cannot list the keys its library leaves",
            a.offer.title()
        ));
    }
    if !cfg.workload.kind.uses_lock() {
        return Some(format!(
            "workload {} takes no lock (lockjaw lists only what a lock leaves)",
            cfg.workload.name
        ));
    }
    None
}

fn err(msg: impl Into<String>) -> RunError {
    RunError::new(msg)
}

impl Slot {
    /// The cluster for the run of `cfg` in `dir` (run id `run_id`): the
    /// slot's, if it passes every check, else a new one started in
    /// `dir/shared-cluster`. `Ok(None)` when the run cannot share (see
    /// [`unshareable`]; the reason is in the returned use).
    pub async fn take(
        &self,
        cfg: &RunConfig,
        dir: &Path,
        run_id: &str,
    ) -> Result<(Option<Arc<Cluster>>, ClusterUse), RunError> {
        if let Some(why) = unshareable(cfg) {
            return Ok((None, ClusterUse::own(run_id, Some(why))));
        }
        let mut guard = self.state.lock().await;
        let st = &mut *guard;
        let mut why = st.dirty.take();
        if let (None, Some(sh)) = (&why, &st.current) {
            why = sh.vet(cfg, st.last_key.as_deref()).await.err();
        }
        let key = cfg.workload.lock_key.clone();
        if why.is_none() {
            if let Some(sh) = st.current.as_mut() {
                sh.runs += 1;
                let (c, use_) = (sh.cluster.clone(), sh.use_(true, None));
                st.last_key = Some(key);
                return Ok((Some(c), use_));
            }
        }
        if let Some(old) = st.current.take() {
            old.close().await;
        }
        let sh = Shared::start(cfg, dir, run_id).await?;
        let (c, use_) = (sh.cluster.clone(), sh.use_(false, why));
        st.current = Some(sh);
        st.last_key = Some(key);
        Ok((Some(c), use_))
    }

    /// After run `index` ended with `result`: whether its cluster may go
    /// to the next run (not when it failed, ended early, or left an undo
    /// entry pending). Call outside any async runtime.
    pub fn after_run(&self, index: usize, result: &Result<RunOutcome, RunError>) {
        let why = match result {
            Err(e) => Some(format!("run {index} failed: {}", e.msg)),
            Ok(o) => left_behind(index, o),
        };
        let mut st = self.state.blocking_lock();
        if st.current.is_some() {
            if let Some(w) = why {
                st.dirty.get_or_insert(w);
            }
        }
    }

    /// Stop the slot's cluster, if any, and drain its undo log. Call
    /// outside any async runtime.
    pub fn close(&self) {
        let Some(sh) = self.state.blocking_lock().current.take() else {
            return;
        };
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt.block_on(sh.close()),
            Err(e) => crate::exit::say(&format!(
                "error: cannot stop the shared cluster in {}: {e} (hint: `lockjaw heal {}`)",
                sh.home.display(),
                sh.home.display()
            )),
        }
    }
}

/// Whether a run that ended left anything behind (`Some(what)`).
fn left_behind(index: usize, o: &RunOutcome) -> Option<String> {
    if let Some(e) = &o.error {
        return Some(format!("run {index}: {e}"));
    }
    match super::rundir::RunInfo::read(&o.dir) {
        Ok(info) if info.outcome != "completed" => {
            return Some(format!("run {index} ended early: {}", info.outcome))
        }
        Ok(_) => {}
        Err(e) => return Some(format!("run {index}: {e}")),
    }
    match crate::undo::read_pending(&o.dir.join(UNDO_FILE)) {
        Ok(p) if p.is_empty() => None,
        Ok(p) => Some(format!(
            "run {index} left {} effect(s) not undone in {}",
            p.len(),
            o.dir.join(UNDO_FILE).display()
        )),
        Err(e) => Some(format!("run {index}: its undo log: {e}")),
    }
}

impl Shared {
    /// Start a cluster for `cfg` in `dir/shared-cluster`, its undo log
    /// written before anything is created.
    async fn start(cfg: &RunConfig, dir: &Path, run_id: &str) -> Result<Shared, RunError> {
        // Absolute: `run.json` names it, for a heal from anywhere.
        let home = std::path::absolute(dir.join(HOME))
            .map_err(|e| err(format!("{}: {e}", dir.display())))?;
        std::fs::create_dir_all(&home).map_err(|e| err(format!("{}: {e}", home.display())))?;
        let id = super::rundir::new_run_id();
        let mark = serde_json::json!({"run_id": id, "system": cfg.system, "started_by": run_id});
        super::rundir::write_json(&home.join(MARK), &mark)
            .map_err(|e| err(format!("{}: {e}", home.join(MARK).display())))?;
        super::heal::write_controller(&home);
        let undo = UndoLog::open(&home.join(UNDO_FILE), super::heal::executor())
            .map_err(|e| err(format!("cannot create the shared cluster's undo log: {e}")))?
            .with_run_id(&id);
        let push = |u: Undo| {
            undo.push(u)
                .map(drop)
                .map_err(|e| err(format!("cannot write the undo log: {e}")))
        };
        if crate::process::Cgroup::root().is_some() {
            push(Undo::Cgroup {
                group: format!("{}/{id}", crate::process::cgroup::TOP),
            })?;
        }
        let mut spec = ClusterSpec::new(cfg.system.servers(), &home);
        spec.nodes = cfg.nodes;
        let span = u16::try_from(spec.port_span())
            .map_err(|_| err(format!("--nodes {}: too many nodes", spec.node_count())))?;
        let ports = ports::reserve(cfg.base_port, span).map_err(err)?;
        spec.base_port = Some(ports.base);
        spec.group = Some(id.clone());
        spec.faketime = registry::needs_faketime(&cfg.nemesis, cfg.system);
        spec.appendfsync = cfg.nemesis.appendfsync;
        push(Undo::Cluster { dir: home.clone() })?;
        let c = match Cluster::start(&spec).await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                let _ = undo.drain().await;
                return Err(err(format!("cannot start the {} cluster: {e}", cfg.system)));
            }
        };
        let settings = c.settings().await;
        let leader = leader_of(&c).await;
        Ok(Shared {
            id,
            home,
            cluster: c,
            undo,
            _ports: ports,
            wants: Wants::of(cfg),
            settings,
            leader,
            runs: 1,
        })
    }

    fn use_(&self, reused: bool, fresh_because: Option<String>) -> ClusterUse {
        ClusterUse {
            id: self.id.clone(),
            reused,
            run_on_it: self.runs,
            home: Some(self.home.clone()),
            fresh_because,
        }
    }

    /// `Err(why)` when the cluster is not as a fresh one would be for
    /// `cfg` (see the module doc); `last_key`: the lock key of the run
    /// before on it.
    async fn vet(&self, cfg: &RunConfig, last_key: Option<&str>) -> Result<(), String> {
        let wants = Wants::of(cfg);
        if wants != self.wants {
            return Err(format!(
                "the run asks for another cluster ({wants:?}, not {:?})",
                self.wants
            ));
        }
        let c = &self.cluster;
        for n in c.nodes() {
            if !n.is_alive() {
                return Err(format!("node {} no longer runs", n.name));
            }
            if n.is_paused() {
                return Err(format!("node {} is paused", n.name));
            }
            c.probe(n)
                .await
                .map_err(|e| format!("node {} does not answer: {e}", n.name))?;
        }
        let t = Duration::from_secs(2);
        c.system
            .wait_cluster_ready(c, Instant::now() + t, t)
            .await
            .map_err(|e| format!("the cluster is not ready: {e}"))?;
        let settings = c.settings().await;
        if settings != self.settings {
            return Err(format!(
                "its settings changed: {settings:?}, at its start {:?}",
                self.settings
            ));
        }
        let leader = leader_of(c).await;
        if leader != self.leader {
            return Err(format!(
                "its leader changed: {}, at its start {}",
                leader.as_deref().unwrap_or("none"),
                self.leader.as_deref().unwrap_or("none")
            ));
        }
        let Some(key) = last_key else {
            return Ok(());
        };
        match c.system.lock_keys_left(c, key).await {
            Ok(Some(0)) => Ok(()),
            Ok(Some(n)) => Err(format!(
                "the run before left {n} entr{} of its lock key {key:?}",
                if n == 1 { "y" } else { "ies" }
            )),
            Ok(None) => Err(format!(
                "lockjaw cannot list what a run leaves on {}",
                c.system.name()
            )),
            Err(e) => Err(format!("cannot list the lock key {key:?}: {e}")),
        }
    }

    /// Stop the cluster and drain the home's undo log (the cgroup group).
    async fn close(self) {
        let c = self.cluster.clone();
        let stopped = tokio::task::spawn_blocking(move || c.close()).await;
        if let Ok(Err(e)) = stopped {
            tracing::warn!("stopping the shared cluster: {e}");
        }
        for e in self.undo.drain().await.iter().filter(|e| !e.repeated) {
            crate::exit::say(&format!(
                "error: the shared cluster in {}: {e} (hint: `lockjaw heal {}`)",
                self.home.display(),
                self.home.display()
            ));
        }
    }
}

/// The leader's (or primary's) address, where one claims it.
async fn leader_of(c: &Cluster) -> Option<String> {
    c.leader().await.ok().flatten().map(|n| n.addr.clone())
}
