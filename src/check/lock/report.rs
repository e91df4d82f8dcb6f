//! The lock checks' results: `LockReport` (serialized as a run's
//! `results.json`), per-check results, witnesses, stale-holder information,
//! and the human-readable summary.

use super::witness::Witness;
use crate::check::Validity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many witnesses each check keeps by default (the count covers all).
pub const MAX_WITNESSES: usize = 10;
/// How many stale-holder entries the report lists.
pub const MAX_STALE_LISTED: usize = 50;

/// The outcome of the lock checks on one history.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LockReport {
    /// Overall: service and resource composed false > unknown > true.
    pub valid: Validity,
    /// The lock service's own guarantees: checks 2, 3 and 7.
    pub service: Verdict,
    /// Damage to the protected storage: checks 4 and 5.
    pub resource: Verdict,
    /// Every check, with its verdict, counts and first witnesses.
    pub checks: Checks,
    /// Information, not a verdict: holders that kept acting after their
    /// lease, and overlaps the history cannot decide.
    pub stale_holders: StaleHolders,
    /// The parameters the checks used (meta record + overrides + defaults).
    pub params: EffectiveParams,
    /// What was read and how it was ordered.
    pub stats: Stats,
    /// Caveats a reader should know (partial checks, late ops, ...).
    pub notes: Vec<String>,
    /// Information, not a verdict: writes invoked outside their writer's
    /// lease; absent when the history has no storage write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unprotected_writes: Option<UnprotectedWrites>,
    /// Availability, not a verdict: the time without a holder after each
    /// fault aimed at one (leader election's failover time); absent when
    /// the history has no such fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<super::failover::FailoverStats>,
    /// Liveness, not a verdict: stuck lock, zombie time, orphaned
    /// renewals; absent from results.json files older than the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<super::liveness::Liveness>,
    /// A cut-off last line the reader ignored (its line number); the
    /// check path turns it into a warning of `results.json`.
    #[serde(skip)]
    pub partial_line: Option<u64>,
}

/// A composed verdict over several checks.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Verdict {
    pub valid: Validity,
    /// False when the history has nothing this verdict judges (e.g. no
    /// storage ops); such a verdict is valid and does not lower the overall.
    pub applicable: bool,
}

/// All checks by name.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Checks {
    /// Check 2, service: a grant while another owner's lease was valid.
    pub safety: CheckResult,
    /// Check 3, service: fences not increasing with real-time order.
    pub fence_order: CheckResult,
    /// Check 7, service: locks without leases (owned-mutex).
    pub mutex: CheckResult,
    /// Check 4, resource: the storage accepted a lower fence after a higher.
    pub stale_writes: CheckResult,
    /// Check 5, resource: acknowledged updates missing from the final read.
    pub lost_updates: CheckResult,
    /// The jobs workload, resource: job ids the final read holds more than
    /// once; its counts carry the duplicate executions (absent from
    /// results.json for other workloads).
    #[serde(default, skip_serializing_if = "CheckResult::not_applicable")]
    pub duplicate_effects: CheckResult,
}

/// One check's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckResult {
    pub valid: Validity,
    /// False when nothing in the history is subject to this check.
    pub applicable: bool,
    /// How many anomalies the check found.
    pub count: u64,
    /// Check-specific counters (e.g. `lost`, `stale_reads_accepted`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, i64>,
    /// Why the verdict is unknown or partial, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The first anomalies found, at most [`MAX_WITNESSES`] unless the
    /// options say otherwise.
    pub witnesses: Vec<Witness>,
    /// How many witnesses to keep.
    #[serde(skip, default = "default_limit")]
    pub(crate) limit: usize,
}

fn default_limit() -> usize {
    MAX_WITNESSES
}

impl Default for CheckResult {
    fn default() -> Self {
        CheckResult {
            valid: Validity::True,
            applicable: false,
            count: 0,
            counts: BTreeMap::new(),
            note: None,
            witnesses: Vec::new(),
            limit: MAX_WITNESSES,
        }
    }
}

impl CheckResult {
    /// Record one anomaly: count it, keep its witness if there is room.
    pub(crate) fn add(&mut self, w: Witness) {
        self.count += 1;
        self.valid = Validity::False;
        if self.witnesses.len() < self.limit {
            self.witnesses.push(w);
        }
    }

    /// Record `n` anomalies shown by one witness.
    pub(crate) fn add_many(&mut self, n: u64, w: Witness) {
        self.add(w);
        self.count += n.saturating_sub(1);
    }

    /// Whether another witness would still be kept (so callers can skip
    /// building expensive witness text).
    pub(crate) fn wants_witness(&self) -> bool {
        self.witnesses.len() < self.limit
    }

    /// For `skip_serializing_if`: a check with nothing to judge.
    pub fn not_applicable(&self) -> bool {
        !self.applicable
    }

    pub(crate) fn bump(&mut self, name: &str, by: i64) {
        *self.counts.entry(name.to_string()).or_insert(0) += by;
    }
}

/// Holders that kept the lock after their lease, and undecidable overlaps.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StaleHolders {
    /// Grants another owner acquired after this grant's lease had
    /// certainly ended (honest clocks, every refresh recorded) but before
    /// its holder started releasing it.
    pub stale: u64,
    /// Overlaps where the first lease may or may not have been valid when
    /// the second grant was made: not decidable from the history.
    pub possibly_stale: u64,
    /// The first of them, with durations.
    pub list: Vec<StaleOverlap>,
    /// Why the figures are unknown (a client adapter that reports only
    /// some of its library's renewals: a lease may have lasted longer than
    /// the history shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

/// One overlap of two holds, as information.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StaleOverlap {
    /// `stale` or `possibly-stale`.
    pub kind: String,
    pub key: String,
    /// The earlier holder.
    pub holder: super::witness::GrantRef,
    /// The later grant that overlapped it.
    pub next: super::witness::GrantRef,
    /// The earlier lease certainly lasted until here (ns).
    pub lease_valid_until_ns: Option<u64>,
    /// The earlier lease had certainly ended here (ns), assuming honest
    /// clocks and every refresh recorded.
    pub lease_over_by_ns: Option<u64>,
    /// When the earlier holder began releasing, if it did (ns).
    pub holder_release_ns: Option<u64>,
    /// How long the earlier holder kept the lock after its lease had
    /// certainly ended (ms), when it released it.
    pub held_past_lease_ms: Option<f64>,
    /// How long both believed they held the lock (ms), when known.
    pub overlap_ms: Option<f64>,
    pub text: String,
}

/// Writes invoked outside their writer's lease (information, like stale
/// holders: the damage they do is judged by the resource checks).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UnprotectedWrites {
    /// Writes judged: made under a grant whose lease the history bounds.
    pub writes: u64,
    /// Writes invoked after their lease had certainly ended (the end the
    /// stale-holder rule uses: honest clocks, every refresh recorded);
    /// `null` when unknown (see `unknown`).
    pub after_lease_end: Option<u64>,
    /// Writes invoked after the lower bound of their lease's end: nothing
    /// proves the lease still held (includes `after_lease_end`).
    pub past_lower_bound: u64,
    /// Of `past_lower_bound`, the writes the storage accepted.
    pub past_lower_bound_accepted: u64,
    /// Writes not judged: no grant of their owner known when they were
    /// invoked, or a lease with no known length.
    pub unattributed: u64,
    /// Why `after_lease_end` is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// The first writes past the lower bound.
    pub list: Vec<UnprotectedWrite>,
}

impl Default for UnprotectedWrites {
    fn default() -> Self {
        UnprotectedWrites {
            writes: 0,
            after_lease_end: Some(0),
            past_lower_bound: 0,
            past_lower_bound_accepted: 0,
            unattributed: 0,
            unknown: None,
            list: Vec::new(),
        }
    }
}

/// One write invoked outside its lease.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UnprotectedWrite {
    /// `after-lease-end` or `past-lower-bound`.
    pub kind: String,
    pub key: String,
    pub write: super::witness::RequestRef,
    /// Whether the storage accepted it (`ok`).
    pub accepted: bool,
    /// The writer's lease certainly lasted until here (ns).
    pub lease_valid_until_ns: Option<u64>,
    /// The writer's lease had certainly ended here (ns).
    pub lease_over_by_ns: Option<u64>,
    /// How long after that bound (the end for `after-lease-end`, else the
    /// lower bound) the write was invoked (ms).
    pub late_ms: f64,
    pub text: String,
}

/// The parameters the checks ran with.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EffectiveParams {
    pub workload: Option<String>,
    pub acquire_sets_ttl: bool,
    pub drift: f64,
    pub epsilon_ms: f64,
    pub initial: serde_json::Value,
    /// The out-of-order window used to put ops in time order (ms).
    pub reorder_window_ms: f64,
}

/// Counters about the input.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    /// Lines with an op (invocations and completions).
    pub ops: u64,
    pub grants: u64,
    pub storage_requests: u64,
    pub lock_keys: u64,
    pub storage_keys: u64,
    /// Ops that are not lock or storage ops, by `f` (nemesis ops under
    /// `nemesis`); they do not enter the checks.
    pub ignored: BTreeMap<String, u64>,
    /// Invocations never completed by the end of the history.
    pub incomplete: u64,
    /// The largest amount by which an op's time lagged behind an earlier
    /// line's time (ms): how far out of order the file was.
    pub max_lateness_ms: f64,
    /// Ops that arrived later than the reorder window and were skipped.
    pub late_ops: u64,
    /// Passes over the input (2 when the first window was too small).
    pub passes: u32,
    /// The most events the reorder buffer held at once.
    pub peak_buffered_events: u64,
    /// The most leases (with their open grants) held at once.
    pub peak_live_leases: u64,
    /// Storage writes (and `apply`s) the storage accepted (`ok`): what the
    /// resource checks had to judge.
    #[serde(default)]
    pub protected_writes: u64,
}

impl LockReport {
    /// Why this history tested nothing, if so: no acquire (or campaign)
    /// succeeded, or, for a workload that writes (`fenced-counter`,
    /// `lock-set`, `jobs`), the storage accepted no write. A pure function
    /// of the report; the lock checks' verdict is then unknown unless an
    /// anomaly was found (invalid beats unknown).
    pub fn nothing_tested(&self) -> Option<String> {
        // A history with storage ops and no lock op at all is lock-free
        // (`--system cas`): its writes are what it tests.
        let lock_free = self.stats.lock_keys == 0 && self.stats.storage_requests > 0;
        if self.stats.grants == 0 && !lock_free {
            return Some("no acquire succeeded: nothing was tested".into());
        }
        let writes = self
            .params
            .workload
            .as_deref()
            .is_some_and(writing_workload);
        if writes && self.stats.protected_writes == 0 {
            return Some(
                "no write was accepted under the lock: the protected resource was not tested"
                    .into(),
            );
        }
        None
    }

    /// What the verdict covers: `412 grants, 1,206 protected writes` (the
    /// writes where the history has storage ops or its workload writes).
    pub fn coverage(&self) -> String {
        let mut s = format!("{} grant(s)", grouped(self.stats.grants));
        let writes = self
            .params
            .workload
            .as_deref()
            .is_some_and(writing_workload);
        if writes || self.stats.storage_requests > 0 {
            s.push_str(&format!(
                ", {} protected write(s)",
                grouped(self.stats.protected_writes)
            ));
        }
        s
    }

    /// Sentences a person can follow, one per line: the verdicts, each
    /// check's count, the first witnesses, and the stale holders.
    pub fn summary_text(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "lock checks: {} (service: {}, resource: {}); covers {}",
            self.valid.as_str(),
            verdict_word(&self.service),
            verdict_word(&self.resource),
            self.coverage()
        );
        match self.nothing_tested() {
            Some(why) if self.valid != crate::check::Validity::False => {
                let _ = writeln!(s, "; unknown: {why}");
            }
            _ => {
                let _ = writeln!(s);
            }
        }
        let c = &self.checks;
        let rows = [
            ("service", "mutual exclusion under leases", &c.safety),
            ("service", "fence order", &c.fence_order),
            ("service", "locks without leases", &c.mutex),
            ("resource", "stale writes accepted", &c.stale_writes),
            ("resource", "lost updates", &c.lost_updates),
        ];
        let jobs = [("resource", "duplicate effects (jobs)", &c.duplicate_effects)];
        let shown = if c.duplicate_effects.applicable {
            &jobs[..]
        } else {
            &[]
        };
        for (side, name, r) in rows.iter().chain(shown).copied() {
            write_check(&mut s, side, name, r);
        }
        let sh = &self.stale_holders;
        if let Some(why) = &sh.unknown {
            let _ = writeln!(s, "information: stale holders unknown: {why}");
        } else if sh.stale + sh.possibly_stale > 0 {
            let _ = writeln!(
                s,
                "information: {} grant(s) made after another holder's lease had certainly \
                 ended while it still held the lock; {} overlap(s) not decidable from the history",
                sh.stale, sh.possibly_stale
            );
            for o in sh.list.iter().take(5) {
                let _ = writeln!(s, "  - {}", o.text);
            }
        }
        if let Some(u) = &self.unprotected_writes {
            let _ = writeln!(s, "{}", u.summary_line());
            for w in u.list.iter().take(3) {
                let _ = writeln!(s, "  - {}", w.text);
            }
        }
        if let Some(f) = &self.failover {
            let _ = writeln!(s, "{}", f.summary_line());
        }
        if let Some(l) = &self.liveness {
            let _ = writeln!(s, "liveness (information): {}", l.lines().join("; "));
            for w in l.witness_lines(3) {
                let _ = writeln!(s, "  - {w}");
            }
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

impl UnprotectedWrites {
    /// One line for the summary.
    pub fn summary_line(&self) -> String {
        let end = match (self.after_lease_end, &self.unknown) {
            (Some(n), _) => format!("{n} invoked after the writer's lease had certainly ended"),
            (None, Some(why)) => format!("after the writer's lease had ended: unknown ({why})"),
            (None, None) => "after the writer's lease had ended: unknown".into(),
        };
        format!(
            "information: unprotected writes: {end}; {} invoked past the lower bound of its \
             end ({} accepted), of {} write(s) judged ({} not attributed to a lease)",
            self.past_lower_bound, self.past_lower_bound_accepted, self.writes, self.unattributed
        )
    }
}

/// Workloads whose purpose includes writes to the protected storage.
fn writing_workload(w: &str) -> bool {
    matches!(
        w,
        "fenced-counter" | "counter" | "lock-set" | "set" | "jobs"
    )
}

/// `1206` as `1,206`.
pub fn grouped(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn verdict_word(v: &Verdict) -> String {
    if v.applicable {
        v.valid.as_str().to_string()
    } else {
        "valid, not applicable".to_string()
    }
}

fn write_check(s: &mut String, side: &str, name: &str, r: &CheckResult) {
    if !r.applicable {
        let _ = writeln!(s, "{side} / {name}: not applicable");
        return;
    }
    let _ = write!(s, "{side} / {name}: {}", r.valid.as_str());
    if r.count > 0 {
        let _ = write!(s, ", {} found", r.count);
    }
    let extra: Vec<String> = r
        .counts
        .iter()
        .filter(|(_, v)| **v != 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if !extra.is_empty() {
        let _ = write!(s, " ({})", extra.join(", "));
    }
    let _ = writeln!(s);
    if let Some(n) = &r.note {
        let _ = writeln!(s, "  ({n})");
    }
    for w in r.witnesses.iter().take(3) {
        let _ = writeln!(s, "  - {}", w.text);
    }
}
