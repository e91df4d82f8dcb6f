//! The unprotected-writes figures of the lock checks on hand-written
//! histories: writes invoked after their writer's lease had certainly
//! ended, and past the lower bound of its end; unknown where not every
//! renewal is recorded; never a verdict.

use lockjaw::check::lock::{check_file, check_ops, LockOptions, UnprotectedWrites};
use lockjaw::check::Validity;
use lockjaw::history::{Meta, Op};
use std::path::Path;

fn example(name: &str) -> lockjaw::check::lock::LockReport {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/lock")
        .join(format!("{name}.jsonl"));
    check_file(&p, &LockOptions::default()).unwrap()
}

fn figures(u: &UnprotectedWrites) -> (u64, Option<u64>, u64, u64, u64) {
    (
        u.writes,
        u.after_lease_end,
        u.past_lower_bound,
        u.past_lower_bound_accepted,
        u.unattributed,
    )
}

#[test]
fn writes_past_the_lease_are_counted_by_bound_and_leave_the_verdict_alone() {
    // Lease 1000 ms, ρ = 0.001, ε = 2 ms; a renew invoked at 300 ms
    // (done 310 ms) bounds the lease's end to [1297 ms, 1313 ms].
    let r = example("unprotected-writes");
    assert_eq!(r.valid, Validity::True, "{}", r.summary_text());
    let u = r
        .unprotected_writes
        .as_ref()
        .expect("the history has writes");
    // Judged: the writes at 400, 1200, 1300 and 2000 ms; the write of
    // process 7 names no grant. Past the lower bound: 1300 (accepted) and
    // 2000 (refused); certainly after the end: 2000.
    assert_eq!(figures(u), (4, Some(1), 2, 1, 1), "{}", r.summary_text());
    let kinds: Vec<(&str, u64)> = u
        .list
        .iter()
        .map(|w| (w.kind.as_str(), w.write.op))
        .collect();
    assert_eq!(kinds, [("past-lower-bound", 9), ("after-lease-end", 11)]);
    assert_eq!(u.list[1].lease_over_by_ns, Some(1_313_000_000));
    assert_eq!(u.list[1].late_ms, 687.0);
    assert!(
        u.list[0].text.contains("write op 9 of 'counter'"),
        "{}",
        u.list[0].text
    );
    assert!(r
        .summary_text()
        .contains("unprotected writes: 1 invoked after"));
    // In results.json, next to the stale holders.
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["unprotected_writes"]["after_lease_end"], 1);
}

#[test]
fn where_only_some_renewals_are_recorded_the_certain_figure_is_unknown() {
    let r = example("adapter-some-renewals");
    let u = r.unprotected_writes.as_ref().unwrap();
    assert_eq!(u.after_lease_end, None);
    assert!(u.unknown.as_deref().unwrap().contains("renewals"));
    let v = serde_json::to_value(&r).unwrap();
    assert!(v["unprotected_writes"]["after_lease_end"].is_null());
}

fn op(line: &str) -> Result<Op, lockjaw::history::HistoryError> {
    Ok(serde_json::from_str(line).unwrap())
}

#[test]
fn a_session_lease_is_counted_from_its_last_refresh_even_before_the_acquire() {
    // etcd-like: the lease (owner 7) is refreshed at 0 ms, granted the lock
    // at 100 ms; ends in [997 ms, 1003 ms + done].
    let meta: Meta = serde_json::from_str(
        r#"{"checkers": ["lock"], "workload": "fenced-counter", "acquire_sets_ttl": false, "initial": 0}"#,
    )
    .unwrap();
    let lines = [
        r#"{"index":0,"time":0,"process":"1-lease","type":"invoke","f":"renew","owner":"7"}"#,
        r#"{"index":1,"time":1000000,"process":"1-lease","type":"ok","f":"renew","owner":"7","lease_ms":1000}"#,
        r#"{"index":2,"time":100000000,"process":1,"type":"invoke","f":"acquire","key":"l","owner":"7"}"#,
        r#"{"index":3,"time":101000000,"process":1,"type":"ok","f":"acquire","key":"l","owner":"7","fence":5,"lease_ms":1000}"#,
        r#"{"index":4,"time":900000000,"process":1,"type":"invoke","f":"write","key":"c","owner":"7","fence":5,"value":1}"#,
        r#"{"index":5,"time":901000000,"process":1,"type":"ok","f":"write","key":"c","owner":"7","fence":5,"value":1,"seq":1}"#,
        r#"{"index":6,"time":1500000000,"process":1,"type":"invoke","f":"write","key":"c","owner":"7","fence":5,"value":2}"#,
        r#"{"index":7,"time":1501000000,"process":1,"type":"ok","f":"write","key":"c","owner":"7","fence":5,"value":2,"seq":2}"#,
        r#"{"index":8,"time":1600000000,"process":1,"type":"invoke","f":"read","key":"c"}"#,
        r#"{"index":9,"time":1601000000,"process":1,"type":"ok","f":"read","key":"c","value":2,"seq":3}"#,
    ];
    let r = check_ops(&meta, lines.into_iter().map(op)).unwrap();
    let u = r.unprotected_writes.as_ref().unwrap();
    // The acquire at 101 ms proves the lease alive then, so it had
    // certainly ended only by 101 + 1001 + 2 = 1104 ms: the write at
    // 1500 ms is after that, the one at 900 ms inside the lower bound.
    assert_eq!(figures(u), (2, Some(1), 1, 1, 0), "{}", r.summary_text());
    assert_eq!(r.valid, Validity::True);
}
