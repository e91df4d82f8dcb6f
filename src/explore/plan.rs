//! The fault points: one injection each, each printed as a nemesis file
//! `lockjaw run --nemesis` accepts, in search order.
//!
//! CONTRACT (issue 41): the types are fixed; `plan` is filled in by the
//! planner work.

use super::learn::{Learned, Phase};
use serde::{Deserialize, Serialize};

/// The fault family of a point (the coverage's columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// `strike-command` on one learned request kind.
    Strike,
    /// The holder (or a waiter, a renewer) paused or killed in a phase.
    Process,
    /// A client's clock jumped or strobed.
    ClientClock,
    /// One worker's links cut, delayed, one direction at a time.
    Network,
    /// A server fault (lockjaw's own cluster only).
    Server,
    /// Two faults as one injection (`fault = "together"`).
    Together,
}

/// One fault point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Stable over a plan: `strike-crash-after-SETNX`,
    /// `pause-holder-2.5l`, `together:<a>+<b>`. The nemesis file's `name`.
    pub id: String,
    pub family: Family,
    /// The nemesis file (TOML text) that injects exactly this point.
    pub nemesis: String,
    /// The learned request kind it strikes (`RequestKind::label`).
    pub kind: Option<String>,
    /// The phase it is aimed at.
    pub phase: Option<Phase>,
    /// Its effects outlive its window, or its anomaly shows only at the
    /// final read: it gets a run of its own.
    pub own_run: bool,
    /// A note for the coverage (`server fault: lockjaw's own cluster`).
    pub label: Option<String>,
    /// `together`: the ids of its two points.
    pub parts: Vec<String>,
}

/// What the planner is told beside what was learned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// The system (`redis`, `etcd`, ...), as `--system` takes it.
    pub system: String,
    /// The cluster is lockjaw's own (server faults allowed).
    pub own_cluster: bool,
    /// The workload kinds the client supports that were learned.
    pub workloads: Vec<String>,
}

/// Every point, single points first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub points: Vec<Point>,
}

/// The plan for what was learned.
pub fn plan(learned: &Learned, opts: &PlanOptions) -> Plan {
    let _ = (learned, opts);
    Plan::default()
}
