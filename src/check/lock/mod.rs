//! Lock-safety checks on lock histories (issue 3): mutual exclusion under
//! leases, fence order, locks without leases (service); stale writes
//! accepted and lost updates (resource); stale holders (information);
//! for the jobs workload duplicate effects (resource) and executions.
//!
//! Public API: [`check_file`] (a JSONL history, possibly gzipped; other
//! formats through the importers),
//! [`check_ops`] (ops in memory, e.g. from the runner), and
//! [`LockChecker`] to feed ops one by one (with a running anomaly count).
//! Every check is sound: it reports only what a correct service with
//! honest clocks (drift within ρ, plus ε) could not have produced, judged
//! from real-time order alone. `docs/histories.md` ("Lock histories")
//! documents the vocabulary and how each check decides.
//!
//! Streaming: memory holds the open grants, the ops in flight, the reorder
//! window, (for sets) the set, and the leases past their end that a later
//! renew could still prove something about (bounded: see `stale`), never
//! the history.

mod credit;
mod engine;
mod event;
mod failover;
mod fence;
mod input;
mod jobs;
mod lease;
mod leaseless;
mod liveness;
mod lost;
mod overwrite;
mod pair;
mod params;
mod renew;
mod report;
mod service;
mod stale;
mod storage;
mod unprotected;
mod verdict;
mod witness;
mod zombie;

pub use engine::LockChecker;
/// The role an op's `f` plays in the lock vocabulary (`campaign` plays
/// acquire, `resign` and `lost-leadership` release, ...).
pub use event::Fun as LockFun;
pub use failover::{FailoverSample, FailoverStats, Spread};
pub use liveness::{
    Figure, Liveness, OrphanRenewal, OrphanedRenewals, StuckLock, StuckStretch, ZombieHolder,
    ZombieTime,
};
pub use params::{DEFAULT_DRIFT, DEFAULT_EPSILON_MS, DEFAULT_WINDOW_MS};
pub use report::{
    CheckResult, Checks, EffectiveParams, LockReport, StaleHolders, StaleOverlap, Stats,
    UnprotectedWrite, UnprotectedWrites, Verdict, MAX_WITNESSES,
};
pub use witness::{GrantRef, RequestRef, Witness, WitnessData};

use crate::history::import::{self, Format};
use crate::history::{HistoryError, Meta, Op};
use std::path::Path;

/// Parameters that override or complete the history's meta record.
#[derive(Clone, Debug, Default)]
pub struct LockOptions {
    /// Meta fields given on the command line; they fill in what the file's
    /// own meta record lacks.
    pub meta_override: Option<Meta>,
    /// How far (ms) an op's time may lag behind an earlier line's and
    /// still be put in order; default [`DEFAULT_WINDOW_MS`]. Memory grows
    /// with the ops inside this window. [`check_file`] reruns with the
    /// exact lag when the file needs more; [`check_ops`] cannot, and
    /// reports unknown instead.
    pub reorder_window_ms: Option<u64>,
    /// How many witnesses each check keeps (default
    /// [`MAX_WITNESSES`]); counts always cover every anomaly.
    pub max_witnesses: Option<usize>,
    /// Time budget of the exact owned-mutex search for locks without
    /// leases (check 7); default 60 s. Past it the check is unknown.
    pub search_timeout: Option<std::time::Duration>,
    /// Memory cap (bytes) of that search's memo; default the search's own.
    pub search_max_memory: Option<usize>,
    /// How many overlaps and writes may wait, in all, on leases past their
    /// certain end whose owner could still prove more (a late renew);
    /// default 1,000,000. Past it the oldest such leases are judged as
    /// they stand and the checks they feed become unknown, never valid.
    pub max_waiting: Option<usize>,
}

/// Check the lock history at `path` (JSONL, possibly gzipped). Reads the
/// file a second time, with a wide enough window, only if some op lagged
/// more than the reorder window.
pub fn check_file(path: &Path, opts: &LockOptions) -> Result<LockReport, HistoryError> {
    if import::open(path, None)?.format != Format::Jsonl {
        return check_imported(path, opts);
    }
    let first = input::check_path(path, opts)?;
    let mut r = if first.stats.late_ops == 0 {
        first
    } else {
        let mut o = opts.clone();
        o.reorder_window_ms = Some(first.stats.max_lateness_ms.ceil() as u64 + 1);
        let mut second = input::check_path(path, &o)?;
        second.stats.passes = 2;
        second
    };
    let m = &r.checks.mutex;
    if m.applicable && m.count == 0 && m.valid == crate::check::Validity::Unknown {
        // Locks without leases: one more pass collects their ops for the
        // exact owned-mutex search.
        let mut tap = leaseless::LeaselessTap::default();
        for op in crate::history::jsonl::JsonlReader::open(path)? {
            tap.push(&op?);
        }
        tap.settle(&mut r, opts);
    }
    Ok(r)
}

/// A history in another format (EDN, e.g. from `lockjaw convert`): ops
/// through the importer, one by one; a second pass with the exact window
/// if some op lagged more than the reorder window.
fn check_imported(path: &Path, opts: &LockOptions) -> Result<LockReport, HistoryError> {
    let pass = |o: &LockOptions| -> Result<LockReport, HistoryError> {
        let src = import::open(path, None)?;
        let meta = src.meta.clone();
        let tail = src.partial_tail();
        let mut c = LockChecker::for_file(&src.file, meta.as_ref(), o)?;
        for item in src {
            let (line, op) = item?;
            c.push_line(op, line)?;
        }
        let mut r = c.finish()?;
        r.partial_line = tail.line();
        Ok(r)
    };
    let first = pass(opts)?;
    if first.stats.late_ops == 0 {
        return Ok(first);
    }
    let mut o = opts.clone();
    o.reorder_window_ms = Some(first.stats.max_lateness_ms.ceil() as u64 + 1);
    let mut second = pass(&o)?;
    second.stats.passes = 2;
    Ok(second)
}

/// Check ops held in memory (or produced as a run goes). `meta` is the
/// history's meta record.
pub fn check_ops<I>(meta: &Meta, ops: I) -> Result<LockReport, HistoryError>
where
    I: IntoIterator<Item = Result<Op, HistoryError>>,
{
    check_ops_with(meta, &LockOptions::default(), ops)
}

/// [`check_ops`] with options.
pub fn check_ops_with<I>(
    meta: &Meta,
    opts: &LockOptions,
    ops: I,
) -> Result<LockReport, HistoryError>
where
    I: IntoIterator<Item = Result<Op, HistoryError>>,
{
    let mut c = LockChecker::new(Some(meta), opts)?;
    for op in ops {
        c.push(op?)?;
    }
    c.finish()
}
