//! The liveness figures of the lock checks (stuck lock, zombie time,
//! orphaned renewals) on the hand-written histories
//! `histories/examples/lock/liveness-*.jsonl`, asserted exactly; and that
//! they never touch a verdict.

use lockjaw::check::lock::{check_file, Figure, Liveness, LockOptions, LockReport};
use lockjaw::check::Validity;
use std::path::Path;

fn check(name: &str) -> LockReport {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/lock")
        .join(format!("{name}.jsonl"));
    let r = check_file(&p, &LockOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(r.valid, Validity::True, "{name}: {}", r.summary_text());
    r
}

fn live(name: &str) -> Liveness {
    check(name)
        .liveness
        .expect("a lock report has liveness figures")
}

fn value<T: std::fmt::Debug>(f: Figure<T>) -> T {
    match f {
        Figure::Value(v) => v,
        other => panic!("expected a value, got {other:?}"),
    }
}

fn not_applicable<T: std::fmt::Debug>(f: &Figure<T>) -> &str {
    match f {
        Figure::NotApplicable { reason } => reason,
        other => panic!("expected not applicable, got {other:?}"),
    }
}

#[test]
fn a_lost_release_leaves_the_lock_stuck() {
    // Lease 1000 ms, ρ 0.001, ε = the op timeout 500 ms: the release
    // ended `info` at 600 ms, so acquires invoked after 2101 ms are stuck;
    // the one at exactly 2101 ms is not, nor the one at 1000 ms.
    let s = value(live("liveness-stuck").stuck_lock);
    assert_eq!((s.count, s.stretches, s.longest_ms), (2, 1, 4400.0));
    assert_eq!(
        (s.epsilon_ms, s.epsilon_from.as_str()),
        (500.0, "op_timeout_ms")
    );
    let w = &s.witnesses[0];
    assert_eq!(
        (w.holder.as_str(), w.after.as_str(), w.end_op, w.end_ns),
        ("a", "release-info", Some(3), 600_000_000)
    );
    assert_eq!(
        (w.acquires, w.first_acquire_op, w.last_acquire_op, w.gap_ms),
        (2, 9, 11, 4400.0)
    );
}

#[test]
fn a_grant_after_the_lease_means_not_stuck_after_a_lost_release_or_a_death() {
    let l = live("liveness-not-stuck");
    let s = value(l.stuck_lock);
    assert_eq!((s.count, s.stretches, s.witnesses.len()), (0, 0, 0));
    value(l.orphaned_renewals);
}

#[test]
fn zombie_time_counts_requests_after_the_certain_end_of_the_lease() {
    // a's lease: acquire done at 10 ms + 1000 ms × 1.001 + ε 2 ms = 1013
    // ms; its last request (a read refused for a stale fence) was invoked
    // at 2100 ms: 1087 ms. b sent everything inside its lease.
    let z = value(live("liveness-zombie").zombie_time);
    assert_eq!((z.total_ms, z.holders, z.judged), (1087.0, 1, 2));
    let w = &z.worst[0];
    assert_eq!(
        (w.owner.as_str(), w.key.as_str(), w.lease_over_by_ns),
        ("a", "counter", 1_013_000_000)
    );
    assert_eq!((w.last_request_op, w.last_request_ns), (15, 2_100_000_000));
    let l = live("liveness-zombie-zero");
    let z = value(l.zombie_time);
    assert_eq!(
        (z.total_ms, z.holders, z.judged, z.worst.len()),
        (0.0, 0, 2, 0)
    );
    // Renewals before the release are no orphans.
    assert_eq!(value(l.orphaned_renewals).count, 0);
}

#[test]
fn a_redis_renewal_after_the_release_is_orphaned() {
    let o = value(live("liveness-orphaned-renewal").orphaned_renewals);
    assert_eq!(o.count, 1);
    let w = &o.witnesses[0];
    assert_eq!(
        (
            w.owner.as_str(),
            w.renew_op,
            w.release_op,
            w.after_release_ms
        ),
        ("a", 7, 5, 190.0)
    );
}

#[test]
fn an_etcd_keep_alive_after_the_release_is_not_counted() {
    let l = live("liveness-etcd-renew-after-release");
    assert!(not_applicable(&l.orphaned_renewals).contains("etcd lease"));
    assert_eq!(value(l.stuck_lock).count, 0);
    assert!(not_applicable(&l.zombie_time).contains("no storage request"));
}

#[test]
fn an_adapter_with_some_renewals_makes_stuck_and_zombie_unknown() {
    let r = check_file(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("histories/examples/lock/adapter-some-renewals.jsonl"),
        &LockOptions::default(),
    )
    .unwrap();
    let l = r.liveness.unwrap();
    for f in [
        serde_json::to_value(&l.stuck_lock).unwrap(),
        serde_json::to_value(&l.zombie_time).unwrap(),
    ] {
        assert_eq!(f["status"], "unknown", "{f}");
        assert!(f["reason"].as_str().unwrap().contains("only some"), "{f}");
    }
    // Without `op_timeout_ms` in the meta record, ε falls back to the
    // checker's and says so.
    let s = value(check("liveness-not-stuck").liveness.unwrap().stuck_lock);
    assert_eq!(s.epsilon_from, "op_timeout_ms");
    let s = value(
        check_file(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("histories/examples/lock/two-keys.jsonl"),
            &LockOptions::default(),
        )
        .unwrap()
        .liveness
        .unwrap()
        .stuck_lock,
    );
    assert_eq!((s.epsilon_ms, s.epsilon_from.as_str()), (2.0, "epsilon_ms"));
}

#[test]
fn results_json_carries_the_figures_tagged_by_status() {
    let r = check("liveness-stuck");
    let v = serde_json::to_value(&r).unwrap();
    let l = &v["liveness"];
    assert_eq!(l["stuck_lock"]["status"], "value");
    assert_eq!(l["stuck_lock"]["count"], 2);
    assert_eq!(l["zombie_time"]["status"], "not-applicable");
    assert_eq!(l["orphaned_renewals"]["count"], 0);
    let back: LockReport = serde_json::from_value(v).unwrap();
    assert_eq!(back.liveness, r.liveness);
    assert!(r
        .summary_text()
        .contains("liveness (information): stuck lock: 2 acquire(s)"));
}

/// Issue 43, item 4: a `strike-command` crash record names the lock key
/// its acquire took, and ends only that key's hold; a record without
/// `key` (older histories) ends every key's, as before.
#[test]
fn a_strike_crash_ends_the_hold_of_the_key_it_names() {
    let history = |key: &str| {
        format!(
            "{{\"type\":\"meta\",\"checkers\":[\"lock\"],\"workload\":\"lock\",\"acquire_sets_ttl\":true}}\n\
             {{\"index\":0,\"time\":0,\"process\":1,\"type\":\"invoke\",\"f\":\"acquire\",\"key\":\"b\"}}\n\
             {{\"index\":1,\"time\":1000000,\"process\":1,\"type\":\"ok\",\"f\":\"acquire\",\"key\":\"b\",\"owner\":\"x\",\"lease_ms\":10000}}\n\
             {{\"index\":2,\"time\":2000000,\"process\":2,\"type\":\"invoke\",\"f\":\"acquire\",\"key\":\"a\"}}\n\
             {{\"index\":3,\"time\":3000000,\"process\":\"nemesis\",\"type\":\"invoke\",\"f\":\"start\",\"value\":{{\"fault\":\"strike-command\",\"crashed_process\":2,\"lease_ms\":100{key}}}}}\n\
             {{\"index\":4,\"time\":500000000,\"process\":3,\"type\":\"invoke\",\"f\":\"acquire\",\"key\":\"b\"}}\n\
             {{\"index\":5,\"time\":501000000,\"process\":3,\"type\":\"fail\",\"f\":\"acquire\",\"key\":\"b\",\"error\":\"held\"}}\n"
        )
    };
    let stuck = |text: String| {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.jsonl");
        std::fs::write(&p, text).unwrap();
        let r = check_file(&p, &LockOptions::default()).unwrap();
        value(r.liveness.unwrap().stuck_lock).count
    };
    // b's holder x is no crash's: its refusal is the lock working.
    assert_eq!(stuck(history(",\"key\":\"a\"")), 0);
    assert_eq!(stuck(history("")), 1, "an older record: every key");
}
