//! Learning what a client sends: fault-free runs with the wire tap on
//! (`lockjaw run --tap-wire`, `wire.jsonl` in each run directory), read
//! back with the history, give every request kind each framed link
//! carried, the phases it was sent in (from the history's op intervals
//! and the adapter's `renewed` events), the lease and the timings.
//!
//! CONTRACT (issue 41): the types are fixed; `learn` is filled in by the
//! wire-tap work.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Where in a worker's cycle a request was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Inside an acquire op's interval.
    Acquire,
    /// Between a grant and the release, outside a write or renewal.
    Hold,
    /// Inside a protected write's interval (storage).
    Write,
    /// Inside a release op's interval.
    Release,
    /// Inside a renewal (lockjaw's `renew` op or the library's own, as the
    /// adapter's `renewed` event or the wire showed it).
    Renew,
    /// None of these: between cycles, background traffic.
    Idle,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Acquire,
        Phase::Hold,
        Phase::Write,
        Phase::Release,
        Phase::Renew,
        Phase::Idle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Acquire => "acquire",
            Phase::Hold => "hold",
            Phase::Write => "write",
            Phase::Release => "release",
            Phase::Renew => "renew",
            Phase::Idle => "idle",
        }
    }
}

/// Which link carried a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkKind {
    /// A worker's link to a lock-service node.
    Lock,
    /// A worker's link to the storage.
    Storage,
}

/// One kind of request a link carried, as a strike can match it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestKind {
    /// `redis` or `zookeeper`.
    pub proto: String,
    pub link: LinkKind,
    /// Redis: the command name upper case (`SET`, `EVALSHA`); ZooKeeper:
    /// the op name (`create`, `getChildren2`). What `strike.command` takes.
    pub command: String,
    /// `EVAL`/`EVALSHA`: the script's SHA1 (what `strike.sha1` takes).
    pub sha1: Option<String>,
    /// `EVAL`/`EVALSHA`: the first words of the script, when the proxy saw
    /// it (for people; a strike matches by `sha1`).
    pub words: Option<String>,
    /// The phases it was sent in.
    pub phases: BTreeSet<Phase>,
    /// How many were sent, over every learn run.
    pub count: u64,
    /// Replies that were errors (RESP `-`, a ZooKeeper error code).
    pub errors: u64,
}

impl RequestKind {
    /// `SET`, `EVALSHA 1a2b3c4d (if redis.call("get",...)`, `create`.
    pub fn label(&self) -> String {
        match (&self.sha1, &self.words) {
            (Some(s), Some(w)) => format!("{} {} ({w})", self.command, &s[..s.len().min(8)]),
            (Some(s), None) => format!("{} {}", self.command, &s[..s.len().min(8)]),
            _ => self.command.clone(),
        }
    }
}

/// A link that was not framed (etcd's gRPC, SQL, TLS): faults on it act
/// per connection, by phase and time only.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpaqueLink {
    pub link: LinkKind,
    /// The node (or `storage`) it leads to.
    pub node: String,
    /// Why it is opaque (`TLS`, `HTTP/2 (gRPC)`, `PostgreSQL`, ...).
    pub why: String,
}

/// Everything the learn runs showed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// The learn runs read, in order.
    pub runs: Vec<PathBuf>,
    /// The lease (ms) the runs used.
    pub lease_ms: u64,
    /// Every framed request kind, sorted.
    pub kinds: Vec<RequestKind>,
    /// Links no request could be framed on.
    pub opaque: Vec<OpaqueLink>,
    /// Median and p99 of the lock requests' round trips (ms).
    pub rtt_ms: (f64, f64),
    /// Mean seconds one learn run took, start to end (for the budget).
    pub run_secs: f64,
    /// Renewals seen on the wire (the owner's token, a successful reply).
    pub wire_renewals: u64,
    /// Renewals the adapter reported (`renewed` events).
    pub adapter_renewals: u64,
    /// Anomalies the fault-free runs showed (findings at point `none`):
    /// (run directory, the report's kind slug, count).
    pub anomalies: Vec<(PathBuf, String, u64)>,
}

/// Read finished learn runs (each a run directory with `wire.jsonl`).
pub fn learn(dirs: &[PathBuf]) -> Result<Learned, String> {
    let _ = dirs;
    Err("learn: not built yet (issue 41 contract)".into())
}
