//! Nemeses: faults paired with their undo, one file per family, schedules
//! from `nemesis/*.toml`.
//!
//! # Shape
//!
//! - [`spec`]: the nemesis files (which fault, target, how long, how often).
//! - [`registry`]: one entry per fault name: targets, defaults, parameter
//!   checks, where it applies (asking the system's facts in the service
//!   registry; the support table in `docs/faults.md`), constructor.
//! - [`schedule`]: the loop that runs one [`Nemesis`] for a run: wait
//!   `interval_ms`, [`Nemesis::start`], hold it for the fault's length,
//!   [`Nemesis::stop`], again, until the run ends; records every start and
//!   stop in the history and a summary of every injection ([`Injection`]).
//! - Families: [`holder`] (pause-holder, kill-holder: the holder's process),
//!   [`network`] (partition-holder, latency, delay-storage: Toxiproxy),
//!   [`node`] (pause-node, kill-node), [`outage`] (kill-service), [`partition`] (partition-node:
//!   iptables on the nodes' cgroups), [`clock`] (clock-jump, clock-strobe:
//!   libfaketime), [`failover`] (Sentinel), [`moment`] (delay-grant,
//!   delay-release, renew-race, drop-release: one-shot toxics timed by
//!   the workers' announced requests), [`mixed`], [`together`] (two faults as one injection).
//!
//! # Adding a fault (node, clock, failover, partition-node, mixed, ...)
//!
//! 1. Write one file `src/nemesis/<family>.rs` with a type implementing
//!    [`Nemesis`]. `start` finds its target through the [`Ctx`] (cluster
//!    nodes and leader discovery in [`Ctx::cluster`], workers and who holds
//!    the lock in [`Ctx::workers`], each worker's proxies in [`Ctx::links`]),
//!    writes every effect into the undo log *before* applying it (the
//!    helpers [`Ctx::pause_group`], [`Ctx::add_toxic`], [`Ctx::disable_proxy`]
//!    do; for anything else call [`Ctx::will`] with an
//!    [`Undo`](crate::undo::Undo) entry first), and returns a
//!    [`Fault`] listing those undo ids. The default [`Nemesis::stop`]
//!    undoes them newest first; override it to record more (e.g. whether a
//!    pause landed inside the critical section).
//! 2. Add one [`registry::FaultEntry`] (targets, default length, whether the
//!    local cluster must run under libfaketime, parameter check, where it
//!    applies, constructor) and a `nemesis/<name>.toml`
//!    (listed in [`spec::BUILTIN`]). New parameters go into `spec.rs`'s
//!    file struct. Update the tables in `docs/faults.md`
//!    (`crate::combination::table`; a test tells you when they are stale).
//!
//! The history gets, per injection, `start` and `stop` ops of process
//! `"nemesis"`, each an `invoke` followed by an `info`, with `value` =
//! `{"fault": name, "id": n, ...target and details}`; a holder fault's
//! `stop` carries `landed_inside`.

pub mod aim;
pub mod ctx;
pub mod holder;
pub mod network;
pub mod registry;
pub mod schedule;
pub mod scope;
pub mod spec;
// Node, partition, clock and failover faults, and the mix.
pub mod allows;
pub mod attached;
pub mod client_clock;
pub mod clock;
pub mod cluster_failover;
pub mod deadman;
pub mod failover;
pub mod mixed;
pub mod moment;
pub mod node;
pub mod outage;
pub mod partition;
pub mod strike;
pub mod together;

pub use ctx::Ctx;
pub use schedule::{Injection, NemesisSummary, NotStarted};
pub use spec::{NemesisSpec, Restart, Target};

use crate::process::ProcId;
use crate::workload::step::{Moment, StateEvent};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::broadcast;

/// Why a fault could not be applied or taken back.
#[derive(Debug, thiserror::Error)]
#[error("nemesis {fault}: {msg}")]
pub struct NemesisError {
    pub fault: String,
    pub msg: String,
}

impl NemesisError {
    pub fn new(fault: &str, msg: impl Into<String>) -> NemesisError {
        NemesisError {
            fault: fault.to_string(),
            msg: msg.into(),
        }
    }
}

/// One injected fault, as `start` returns it.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Run-clock time just before the fault was applied.
    pub invoked_at: u64,
    /// Undo-log ids of its effects, in the order applied.
    pub undo: Vec<u64>,
    /// How long to leave it in place before `stop`.
    pub hold: Duration,
    /// What it hit, for the history and the summary.
    pub target: Value,
    /// Anything `stop` needs to know (slot, owner, times).
    pub state: Value,
}

/// One kind of fault. See the module doc for how to add one.
#[async_trait]
pub trait Nemesis: Send {
    /// The fault's registry name.
    fn name(&self) -> &'static str;

    /// Wait for a target and inject one fault. `Ok(None)`: the run ended
    /// (or no target showed up) before anything was injected.
    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError>;

    /// Take `fault` back; returns details to record with its `stop` op
    /// (merged into the op's value).
    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        ctx.revert(self.name(), &fault.undo).await?;
        Ok(Value::Null)
    }
}

/// The `none` nemesis: never injects anything.
pub struct NoFault;

#[async_trait]
impl Nemesis for NoFault {
    fn name(&self) -> &'static str {
        "none"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        ctx.until_stopping().await;
        Ok(None)
    }
}

/// What the controller knows about one worker slot.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerView {
    pub slot: usize,
    pub incarnation: u32,
    /// The running worker process, if any.
    pub proc: Option<ProcId>,
    /// Its latest state report.
    pub last: Option<StateEvent>,
    pub alive: bool,
}

/// A state report of one worker, as the nemesis sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerEvent {
    pub slot: usize,
    pub incarnation: u32,
    pub state: StateEvent,
}

impl WorkerEvent {
    /// The grant a failover fault acted on, as its `holder` in `target`.
    pub fn holder_json(&self) -> Value {
        serde_json::json!({
            "slot": self.slot,
            "process": self.state.process,
            "owner": self.state.owner,
            "fence": self.state.fence,
            "granted_ns": self.state.time,
        })
    }
}

/// A worker's note about a watched protocol moment ([`WorkerPool::watch`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MomentEvent {
    pub slot: usize,
    pub incarnation: u32,
    /// The watch id.
    pub id: u64,
    pub note: MomentNote,
}

#[derive(Clone, Debug, PartialEq)]
pub enum MomentNote {
    /// The worker is about to send the request and waits for
    /// [`WorkerPool::go`]; `state` says who, when, for which grant.
    Announced { moment: Moment, state: StateEvent },
    /// It went on; `armed` false when no armed `go` came within its wait.
    Passed { armed: bool },
    /// Its request completed (`ok`, `fail`, `info`), with the error.
    Outcome {
        kind: crate::history::OpType,
        error: Option<String>,
    },
}

/// The workers of a run, as faults see them (implemented by the runner).
#[async_trait]
pub trait WorkerPool: Send + Sync {
    /// Number of worker slots.
    fn slots(&self) -> usize;
    fn view(&self, slot: usize) -> WorkerView;
    /// Every state report from now on.
    fn subscribe(&self) -> broadcast::Receiver<WorkerEvent>;
    /// SIGKILL a worker on purpose (not a crash) and wait until it is gone.
    async fn kill(&self, slot: usize) -> Result<(), String>;
    /// Start a new incarnation of a slot, with fresh process numbers.
    async fn respawn(&self, slot: usize) -> Result<(), String>;
    /// Ask the worker of `slot` to announce its next request of `moment`
    /// and wait for [`WorkerPool::go`] before sending it; returns the
    /// watch id. Announcements arrive on [`WorkerPool::moments`].
    fn watch(&self, _slot: usize, _moment: Moment) -> Result<u64, String> {
        Err("these workers cannot announce protocol moments".into())
    }
    /// Withdraw a watch; if the worker announced it meanwhile, it is told
    /// to go on unarmed.
    fn unwatch(&self, _slot: usize, _id: u64) {}
    /// Let the worker send the announced request (`armed`: the fault is in
    /// place).
    fn go(&self, _slot: usize, _id: u64, _armed: bool) {}
    /// Every moment note from now on.
    fn moments(&self) -> Option<broadcast::Receiver<MomentEvent>> {
        None
    }
    /// The libfaketime control file the worker of `slot` runs under
    /// (client clock faults), if it does.
    fn clock_file(&self, _slot: usize) -> Option<std::path::PathBuf> {
        None
    }
}

/// Each worker's own proxies (one per worker × node and worker × storage),
/// so a fault can cut or slow one client without touching the others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Links {
    /// slot → node name → proxy name.
    pub node: BTreeMap<usize, BTreeMap<String, String>>,
    /// slot → proxy name in front of the storage.
    pub storage: BTreeMap<usize, String>,
}

impl Links {
    /// The proxies between worker `slot` and the lock service's nodes.
    pub fn node_proxies(&self, slot: usize) -> Vec<String> {
        self.node
            .get(&slot)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Every worker's proxies to the lock service.
    pub fn all_node_proxies(&self) -> Vec<String> {
        self.node
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    /// Every proxy, node and storage links alike.
    pub fn all(&self) -> Vec<String> {
        let mut v = self.all_node_proxies();
        v.extend(self.storage.values().cloned());
        v
    }
}

#[cfg(test)]
mod tests;
