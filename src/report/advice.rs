//! Lease advice: how long a lease must be, from what one run measured.
//!
//! The rule (times in ms, ρ the clock drift and ε the clock error the
//! checker allows):
//!
//! ```text
//! lease > (acquire RTT + CS + [renew interval + renew RTT] + pause budget) / (1 − ρ) + ε
//! ```
//!
//! - acquire RTT: p99 of successful acquires, invocation to completion;
//! - CS, the critical section: p99 from a grant's acquire completion to its
//!   release's invocation (or its last protected op's completion when it
//!   has no release). With renewals a critical section may outlast the
//!   lease; only the part of it between two proofs of the lease is at
//!   risk, so the term is min(CS p99, renew interval);
//! - renew interval: the largest gap between successive successful renewal
//!   invocations of one grant (same worker, same owner; with
//!   `acquire_sets_ttl` the acquire's invocation is its first proof), gaps
//!   overlapping an injected fault aimed at that worker left out;
//! - renew RTT: p99 of successful renewals;
//! - pause budget: `--pause-budget-ms`, else the longest worker stall
//!   outside injected faults ([`super::stalls`]).
//!
//! Every measured part leaves out what an injected fault aimed at that
//! worker overlaps (nemesis.json): the faults under test are not the
//! system's own timing.
//!
//! Computed from the history (as a [`Timeline`]), nemesis.json, stalls.json
//! and run.json; a run whose grants carry no lease gets no advice.

use super::rundir::RunDir;
use super::stalls::{self, Injections, StallBudget};
use super::summary::percentile;
use super::timeline::{Outcome, Timeline};
use crate::check::lock::{LockFun, DEFAULT_DRIFT, DEFAULT_EPSILON_MS};
use serde_json::Value;
use std::collections::BTreeMap;

/// Where the pause budget comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Pause {
    /// `--pause-budget-ms` (on `advise`, or recorded in run.json).
    Given(f64),
    /// The worker stall meters (stalls.json).
    Measured(StallBudget),
    /// No stall records (or an unreadable stalls.json: the reason).
    NotMeasured(Option<String>),
}

/// One measured part: its value (None: not measured) and how it was taken.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Part {
    pub ms: Option<f64>,
    pub how: String,
}

/// The advice for one run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Advice {
    /// The shortest lease the service granted in the run.
    pub lease_ms: f64,
    /// The run renewed its leases (successful `renew` ops).
    pub renews: bool,
    pub acquire: Part,
    pub critical_section: Part,
    /// The critical-section term of the rule (with renewals at most the
    /// renew interval).
    pub cs_term_ms: Option<f64>,
    pub renew_interval: Part,
    pub renew_rtt: Part,
    pub pause: Part,
    pub drift: f64,
    pub epsilon_ms: f64,
    /// Time without a holder after a holder fault: (median, max, count).
    pub failover: Option<(f64, f64, u64)>,
    /// The recommended lower bound, from the parts measured.
    pub bound_ms: f64,
    /// Parts the bound lacks because they were not measured.
    pub missing: Vec<&'static str>,
    /// Whether the run's lease exceeded the bound.
    pub met: bool,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The worker slot of a lane id `w3` (lanes with the run's concurrency known).
fn slot_of(t: &Timeline, lane: u32) -> Option<u64> {
    t.lanes[lane as usize].id.strip_prefix('w')?.parse().ok()
}

/// Whether an injected fault aimed at the worker of `lane` overlaps [start, end].
fn injected(t: &Timeline, inj: &Injections, lane: u32, start: u64, end: u64) -> bool {
    slot_of(t, lane).is_some_and(|s| inj.hits(s, start, end))
}

/// p99 latency (ms) of the successful ops of `fun`, those an injected
/// fault aimed at their worker overlaps left out.
fn p99(t: &Timeline, fun: LockFun, inj: &Injections) -> Option<f64> {
    let mut v: Vec<f64> = (t.intervals.iter())
        .filter(|iv| iv.outcome == Outcome::Ok && LockFun::parse(t.f(iv)) == Some(fun))
        .filter(|iv| !injected(t, inj, iv.lane, iv.start, iv.end.unwrap_or(iv.start)))
        .filter_map(|iv| iv.latency().map(ms))
        .collect();
    percentile(&mut v, 0.99)
}

/// Critical sections (ms): each hold from its acquire's completion to its
/// release's invocation, or else to its last protected op's completion
/// (before the lane's next hold); those an injected fault aimed at their
/// worker overlaps are left out (an injected pause is no critical section).
fn critical_sections(t: &Timeline, inj: &Injections) -> Vec<f64> {
    let mut out = vec![];
    for (i, h) in t.holds.iter().enumerate() {
        let next = t.holds[i + 1..]
            .iter()
            .find(|n| n.lane == h.lane)
            .map_or(u64::MAX, |n| n.acquire_invoked);
        let end = h.end.or_else(|| {
            (t.intervals.iter())
                .filter(|iv| iv.lane == h.lane && iv.start >= h.start && iv.start < next)
                .filter(|iv| LockFun::parse(t.f(iv)).is_some_and(|f| f.is_storage()))
                .filter_map(|iv| iv.end)
                .max()
        });
        if let Some(e) = end.filter(|&e| !injected(t, inj, h.lane, h.start, e)) {
            out.push(ms(e.saturating_sub(h.start)));
        }
    }
    out
}

/// The largest gap (ms) between successive proofs of one grant's lease:
/// its successful renewals' invocations, grouped by worker lane and owner,
/// with the acquire's invocation first when the acquire sets the lease;
/// gaps an injected fault aimed at that worker overlaps are left out.
fn renew_interval(t: &Timeline, acquire_sets_ttl: bool, inj: &Injections) -> Option<f64> {
    let mut proofs: BTreeMap<(u32, Option<&str>), Vec<u64>> = BTreeMap::new();
    for iv in &t.intervals {
        if iv.outcome == Outcome::Ok && LockFun::parse(t.f(iv)) == Some(LockFun::Renew) {
            let owner = iv.owner.as_deref();
            proofs.entry((iv.lane, owner)).or_default().push(iv.start);
        }
    }
    if acquire_sets_ttl {
        for h in &t.holds {
            let key = (h.lane, h.owner.as_deref());
            if let Some(p) = proofs.get_mut(&key) {
                p.push(h.acquire_invoked);
            }
        }
    }
    let mut widest: Option<f64> = None;
    for ((lane, _), mut p) in proofs {
        p.sort_unstable();
        for w in p.windows(2) {
            if injected(t, inj, lane, w[0], w[1]) {
                continue;
            }
            let gap = ms(w[1] - w[0]);
            widest = Some(widest.map_or(gap, |x| x.max(gap)));
        }
    }
    widest
}

/// The shortest lease (ms) the run's grants carried; None without any.
fn lease_of(t: &Timeline) -> Option<u64> {
    (t.intervals.iter())
        .filter(|iv| iv.outcome == Outcome::Ok && LockFun::parse(t.f(iv)) == Some(LockFun::Acquire))
        .filter_map(|iv| iv.lease_ms.filter(|&l| l > 0))
        .min()
}

fn meta_f64(t: &Timeline, key: &str) -> Option<f64> {
    t.meta.as_ref()?.params.get(key)?.as_f64()
}

fn part(ms: Option<f64>, how: &str) -> Part {
    Part {
        ms,
        how: how.to_string(),
    }
}

/// The advice for a history (`None`: its grants carry no lease). `nemesis`
/// is nemesis.json (or `Null`), `failover` the checker's figures.
pub fn advise(
    t: &Timeline,
    nemesis: &Value,
    pause: &Pause,
    failover: Option<(f64, f64, u64)>,
) -> Option<Advice> {
    let lease_ms = lease_of(t)? as f64;
    let drift = meta_f64(t, "drift").unwrap_or(DEFAULT_DRIFT);
    let epsilon_ms = meta_f64(t, "epsilon_ms").unwrap_or(DEFAULT_EPSILON_MS);
    let sets_ttl = (t.meta.as_ref())
        .and_then(|m| m.params.get("acquire_sets_ttl")?.as_bool())
        .unwrap_or(true);
    let inj = Injections::of(nemesis);
    let renew_rtt = p99(t, LockFun::Renew, &inj);
    let renews = renew_rtt.is_some();
    let interval = renew_interval(t, sets_ttl, &inj);
    let acquire = p99(t, LockFun::Acquire, &inj);
    let cs = percentile(&mut critical_sections(t, &inj), 0.99);
    let cs_term = match (renews, cs, interval) {
        (true, Some(c), Some(i)) => Some(c.min(i)),
        (_, c, _) => c,
    };
    let pause = match pause {
        Pause::Given(v) => part(Some(*v), "--pause-budget-ms"),
        Pause::Measured(b) if b.counted == 0 => part(
            Some(b.ms),
            &format!(
                "no worker stall of {} ms or more outside injected faults ({} inside them left out); the meter's threshold",
                b.threshold_ms, b.excluded
            ),
        ),
        Pause::Measured(b) => part(
            Some(b.ms),
            &format!(
                "longest of {} worker stall(s) outside injected faults ({} inside them left out)",
                b.counted, b.excluded
            ),
        ),
        Pause::NotMeasured(why) => part(
            None,
            &why.clone().unwrap_or_else(|| {
                "not measured: the run directory has no stalls.json (give --pause-budget-ms)".into()
            }),
        ),
    };
    let mut missing = vec![];
    let mut sum = 0.0;
    let mut add = |name: &'static str, v: Option<f64>| match v {
        Some(v) => sum += v,
        None => missing.push(name),
    };
    add("acquire round trip", acquire);
    add("critical section", cs_term);
    if renews {
        add("renew interval", interval);
        add("renew round trip", renew_rtt);
    }
    add("pause budget", pause.ms);
    let bound_ms = sum / (1.0 - drift) + epsilon_ms;
    let with_renewals =
        "successful renewals, invocation to completion, p99; injected faults left out";
    Some(Advice {
        lease_ms,
        renews,
        acquire: part(
            acquire,
            "successful acquires, invocation to completion, p99; injected faults left out",
        ),
        critical_section: part(
            cs,
            "acquire completion to release invocation (or last protected op), p99; injected faults left out",
        ),
        cs_term_ms: cs_term,
        renew_interval: part(
            interval.filter(|_| renews),
            "largest gap between successive renewals of one grant, injected faults left out",
        ),
        renew_rtt: part(renew_rtt, with_renewals),
        pause,
        drift,
        epsilon_ms,
        failover,
        bound_ms,
        met: lease_ms > bound_ms,
        missing,
    })
}

/// The advice for a run directory: the pause budget from `flag` (advise's
/// `--pause-budget-ms`), else run.json's, else stalls.json.
pub fn for_run(rd: &RunDir, t: &Timeline, flag: Option<f64>) -> Option<Advice> {
    let pause = match flag.or(rd.run.pause_budget_ms) {
        Some(v) => Pause::Given(v),
        None => match stalls::read(&rd.dir) {
            Ok(Some(f)) => Pause::Measured(stalls::budget(&f, &rd.nemesis)),
            Ok(None) => Pause::NotMeasured(None),
            Err(e) => Pause::NotMeasured(Some(format!("not measured: {e}"))),
        },
    };
    let failover = rd.results.lock.as_ref().and_then(super::summary::failover);
    advise(t, &rd.nemesis, &pause, failover)
}

mod render;
pub use render::{html, markdown, text};

#[cfg(test)]
mod tests;
