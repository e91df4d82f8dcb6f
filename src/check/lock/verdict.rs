//! Composing the report: each check's verdict, the service and resource
//! verdicts (false > unknown > true over the applicable checks; a verdict
//! with nothing to judge is valid and not applicable), and the overall one.

use super::engine::Backend;
use super::event::Keys;
use super::lost::{CounterOutcome, KeyOutcome, SetOutcome};
use super::overwrite::Pair;
use super::report::{CheckResult, Checks, LockReport, Stats, Verdict};
use super::witness::{compact, Witness, WitnessData};
use crate::check::Validity;

pub(crate) fn assemble(mut c: Backend, stats: Stats, keys: &Keys) -> Result<LockReport, String> {
    let mut notes = Vec::new();
    let s = &mut c.service;
    let mut safety = std::mem::take(&mut s.safety);
    safety.applicable = s.grants > s.leaseless_grants;
    let mut fence_order = std::mem::take(&mut s.fence_order);
    fence_order.applicable = s.fenced_grants > 0;
    let mut mutex = std::mem::take(&mut s.mutex);
    mutex.applicable = s.leaseless_grants > 0;
    // Without a real-time violation the verdict waits for the exact
    // owned-mutex search (`leaseless::LeaselessTap::settle`), which
    // replaces this note when it can run.
    if mutex.applicable && mutex.count == 0 {
        mutex.valid = Validity::Unknown;
        mutex.note = Some(format!(
            "{} grant(s) without a lease: only the real-time part of the owned-mutex check \
             (a second grant before the holder's release) ran; the exact linearizability \
             search needs a key whose grants all lack a lease and at most 2,000,000 lock ops",
            s.leaseless_grants
        ));
    }
    let mut stale_holders = std::mem::take(&mut s.stale);
    let unknown = holders_unknown(c.p.all_renewals_recorded, s.session_grants);
    if let Some(why) = unknown {
        stale_holders = super::report::StaleHolders {
            unknown: Some(why.into()),
            ..super::report::StaleHolders::default()
        };
    }
    let mut unprotected = std::mem::take(&mut s.unprotected);
    if !c.p.all_renewals_recorded {
        unprotected.after_lease_end = None;
        unprotected.unknown = stale_holders.unknown.clone();
    }
    if s.forced > 0 {
        let why = forced_note(s.forced);
        forced_unknown(&why, &mut safety, &mut stale_holders, &mut unprotected);
        notes.push(why);
    }
    let unprotected_writes =
        (unprotected.writes + unprotected.unattributed > 0).then_some(unprotected);
    let mut stale_writes = std::mem::take(&mut c.stale_writes);
    let w = c.writes();
    stale_writes.applicable = w.fenced > 0;
    if w.unordered > 0 {
        unordered(&mut stale_writes, w.unordered, c.p.window_ns);
    }
    let lost = std::mem::replace(&mut c.lost, super::lost::Lost::new(c.p.store, None));
    let applicable = lost.applicable();
    let limit = stale_writes.limit;
    let mut lost_updates = lost_result(lost.finish()?, keys, limit);
    lost_updates.applicable = applicable;
    let mut duplicate_effects = c.jobs.take().map(|j| j.finish(limit)).unwrap_or_default();
    late_ops(
        &stats,
        c.p.window_ns,
        &mut notes,
        [
            &mut safety,
            &mut fence_order,
            &mut mutex,
            &mut stale_writes,
            &mut lost_updates,
            &mut duplicate_effects,
        ],
    );
    let failover = std::mem::take(&mut c.failover).finish();
    let basis = super::liveness::Basis {
        grants: c.service.grants,
        leaseless_grants: c.service.leaseless_grants,
        session_grants: c.service.session_grants,
        storage_requests: stats.storage_requests,
    };
    let liveness = super::liveness::assemble(
        std::mem::take(&mut c.live),
        std::mem::take(&mut c.service.zombie),
        &c.p,
        &basis,
        keys,
    );
    let service = compose(&[&safety, &fence_order, &mutex]);
    let resource = compose(&[&stale_writes, &lost_updates, &duplicate_effects]);
    let mut r = LockReport {
        valid: service.valid.merge(resource.valid),
        service,
        resource,
        checks: Checks {
            safety,
            fence_order,
            mutex,
            stale_writes,
            lost_updates,
            duplicate_effects,
        },
        stale_holders,
        unprotected_writes,
        params: c.p.effective(),
        stats,
        notes,
        failover,
        liveness: Some(liveness),
        partial_line: None,
    };
    // Nothing tested: unknown, unless an anomaly was found.
    if let Some(why) = r.nothing_tested() {
        r.valid = r.valid.merge(Validity::Unknown);
        r.notes.push(format!("unknown: {why}"));
    }
    Ok(r)
}

/// Why no lease end is certain, when none is: an adapter that reports
/// only some renewals, or session leases.
fn holders_unknown(all_renewals_recorded: bool, session_grants: u64) -> Option<&'static str> {
    if !all_renewals_recorded {
        Some(
            "the client adapter reports only some of its library's background renewals, \
             so a lease may have lasted longer than the history shows",
        )
    } else if session_grants > 0 {
        Some(
            "session leases (lease_ms 0): the lock lives as long as its session, which an \
             idle holder keeps without any recorded statement, so no lease end is certain",
        )
    } else {
        None
    }
}

/// Leases closed early by the memory bound: the checks they feed are
/// unknown (mutual exclusion only if it found nothing).
fn forced_unknown(
    why: &str,
    safety: &mut CheckResult,
    stale: &mut super::report::StaleHolders,
    unprotected: &mut super::report::UnprotectedWrites,
) {
    if safety.valid == Validity::True {
        safety.valid = Validity::Unknown;
        safety.note = Some(why.to_string());
    }
    *stale = super::report::StaleHolders {
        unknown: Some(why.to_string()),
        ..super::report::StaleHolders::default()
    };
    unprotected.after_lease_end = None;
    unprotected.unknown = Some(why.to_string());
}

/// Fenced requests whose own check 4 was skipped (they outran the reorder
/// window): state dropped to bound memory, so never valid.
fn unordered(r: &mut CheckResult, n: u64, window_ns: u64) {
    r.bump("unordered", n as i64);
    if r.valid == Validity::True {
        r.valid = Validity::Unknown;
        r.note = Some(format!(
            "{n} fenced request(s) ran longer than the reorder window ({} ms) and completed \
             after the storage order had moved past them, so their own check was skipped \
             (hint: raise --reorder-window-ms above the longest request)",
            window_ns / 1_000_000
        ));
    }
}

/// Why the checks fed by leases closed early are unknown.
fn forced_note(forced: u64) -> String {
    format!(
        "memory bound: {forced} lease(s) past their certain end were judged early, while a \
         later renew of their owner could still have proven an overlap; mutual exclusion \
         (unless a violation was found), stale holders and unprotected writes are unknown \
         (hint: raise --max-memory)"
    )
}

/// Ops that arrived later than the reorder window were skipped: every
/// applicable check is unknown then, and a note says how to avoid it.
fn late_ops(stats: &Stats, window_ns: u64, notes: &mut Vec<String>, rs: [&mut CheckResult; 6]) {
    if stats.late_ops == 0 {
        return;
    }
    notes.push(format!(
        "{} op(s) arrived more than the reorder window ({} ms) after later ones and were \
         skipped, so no verdict can be trusted (hint: raise the reorder window to at least \
         {} ms)",
        stats.late_ops,
        window_ns / 1_000_000,
        stats.max_lateness_ms.ceil()
    ));
    for r in rs {
        if r.applicable {
            r.valid = Validity::Unknown;
        }
    }
}

pub(crate) fn compose(rs: &[&CheckResult]) -> Verdict {
    let applicable = rs.iter().any(|r| r.applicable);
    let valid = rs
        .iter()
        .filter(|r| r.applicable)
        .fold(Validity::True, |v, r| v.merge(r.valid));
    Verdict { valid, applicable }
}

fn lost_result(
    mut outcomes: Vec<(KeyOutcome, Vec<Pair>)>,
    keys: &Keys,
    limit: usize,
) -> CheckResult {
    outcomes.sort_by(|a, b| keys.name(a.0.key()).cmp(keys.name(b.0.key())));
    let mut r = CheckResult {
        limit,
        ..CheckResult::default()
    };
    let mut unknown = Vec::new();
    for (o, pairs) in outcomes {
        let name = keys.name(o.key()).to_string();
        let before = r.count;
        match o {
            KeyOutcome::NoFinal {
                key,
                why,
                never_read,
            } => {
                unknown.push(format!("'{}': {why}", keys.name(key)));
                r.bump("never_read", never_read as i64);
            }
            KeyOutcome::Counter(c) => counter_result(&mut r, c, keys),
            KeyOutcome::Set(s) => set_result(&mut r, s, keys),
        }
        // Where the total shows the loss, it gives the count; the pairs
        // are its local proofs, listed after it.
        let totalled = r.count;
        pair_witnesses(&mut r, pairs, &name);
        if totalled > before {
            r.count = totalled;
        }
    }
    if !unknown.is_empty() && r.valid != Validity::False {
        r.valid = Validity::Unknown;
    }
    if !unknown.is_empty() {
        r.note = Some(format!("no final read for {}", unknown.join("; ")));
    }
    r
}

/// The local proofs of one key (check 5 on a counter, [`super::overwrite`]),
/// listed before the key's total: each counts one anomaly.
fn pair_witnesses(r: &mut CheckResult, pairs: Vec<Pair>, name: &str) {
    if pairs.is_empty() {
        return;
    }
    r.bump("local_proofs", pairs.len() as i64);
    for p in pairs {
        let text = super::overwrite::text(&p, name);
        let data = WitnessData::LostUpdatePair {
            key: name.to_string(),
            rule: p.rule.to_string(),
            first: p.first,
            second: p.second,
            lost: p.lost,
        };
        r.add(Witness { text, data });
    }
}

fn counter_result(r: &mut CheckResult, c: CounterOutcome, keys: &Keys) {
    let delta = c.final_value - c.initial;
    let lost = c.acknowledged as i64 - delta;
    let phantom = delta - (c.acknowledged + c.indeterminate) as i64;
    r.bump("acknowledged", c.acknowledged as i64);
    r.bump("indeterminate", c.indeterminate as i64);
    if lost <= 0 && phantom <= 0 {
        return;
    }
    r.bump("lost", lost.max(0));
    r.bump("phantom", phantom.max(0));
    let name = keys.name(c.key).to_string();
    let mut text = format!(
        "{} increment(s) of '{name}' were acknowledged ({} indeterminate) but the final \
         read (op {}) found {}, {delta} above the initial {}",
        c.acknowledged, c.indeterminate, c.final_op, c.final_value, c.initial
    );
    if lost > 0 {
        text.push_str(&format!(": {lost} update(s) lost"));
    } else {
        text.push_str(&format!(": {phantom} phantom write(s)"));
    }
    let data = WitnessData::LostUpdates {
        key: name,
        initial: c.initial,
        final_value: c.final_value,
        final_read_op: c.final_op,
        acknowledged: c.acknowledged,
        indeterminate: c.indeterminate,
        lost: lost.max(0),
        phantom: phantom.max(0),
    };
    r.add_many(
        (lost.max(0) + phantom.max(0)) as u64,
        Witness { text, data },
    );
}

fn set_result(r: &mut CheckResult, s: SetOutcome, keys: &Keys) {
    r.bump("acknowledged", s.acknowledged as i64);
    r.bump("stale", s.stale as i64);
    if s.lost.is_empty() && s.unexpected.is_empty() {
        return;
    }
    r.bump("lost", s.lost.len() as i64);
    r.bump("unexpected", s.unexpected.len() as i64);
    let name = keys.name(s.key).to_string();
    let text = format!(
        "the final read of '{name}' (op {}) lacks {} acknowledged element(s) {} and holds \
         {} element(s) no write carried {}",
        s.final_op,
        s.lost.len(),
        compact(&serde_json::Value::Array(s.lost.clone())),
        s.unexpected.len(),
        compact(&serde_json::Value::Array(s.unexpected.clone())),
    );
    let n = (s.lost.len() + s.unexpected.len()) as u64;
    let data = WitnessData::SetLost {
        key: name,
        final_read_op: s.final_op,
        lost: s.lost,
        unexpected: s.unexpected,
    };
    r.add_many(n, Witness { text, data });
}
