//! What a worker tells the controller while it steps: where it is in its
//! critical section ([`Phase`], in a [`StateEvent`]) and the protocol
//! moments it is about to reach, through a [`Notify`]. The nemeses that
//! strike a holder, or one request of the lock protocol, read these; they
//! need nothing else of the workload.

use super::moment::{Moment, MomentWait};
use crate::history::Op;
use serde::{Deserialize, Serialize};

/// Where a worker is in its step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The acquire succeeded.
    Granted,
    /// Inside the critical section, after the read, before the write.
    Holding,
    /// The protected write is about to be sent.
    Writing,
    /// The release is about to be sent.
    Releasing,
    /// Not holding (after the release, or after giving a grant up).
    Idle,
}

/// A worker's report of where it is, sent to the controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateEvent {
    pub phase: Phase,
    /// The process number the worker uses now.
    pub process: i64,
    /// Run-clock nanoseconds when the worker entered the phase.
    pub time: u64,
    /// The grant, for `granted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

/// Receives a worker's state changes.
pub trait Notify: Send + Sync {
    fn state(&self, ev: StateEvent);
    /// The lease guard abandoned a protected write (`ev` names the grant).
    fn abandoned(&self, _ev: StateEvent) {}
    /// The worker is about to send the request of moment `m` (`ev`: who,
    /// when, which grant). `Some` when a fault asked for this moment: the
    /// worker waits for the answer before it sends ([`moment`]).
    fn moment(&self, _m: Moment, _ev: StateEvent) -> Option<MomentWait> {
        None
    }
    /// The worker went on past announced moment `id`, with the fault
    /// armed or not (the answer came too late).
    fn passed(&self, _id: u64, _armed: bool) {}
    /// The request of announced moment `id` completed as `done`.
    fn outcome(&self, _id: u64, _done: &Op) {}
}

/// A [`Notify`] that drops everything.
pub struct NoNotify;

impl Notify for NoNotify {
    fn state(&self, _ev: StateEvent) {}
}
