//! The hand-written lock histories in `histories/examples/lock/`: one per
//! anomaly kind and per tricky non-violation, each with its expected
//! verdicts and counts; plus the report's JSON shape, witness sentences,
//! out-of-order input, gzip, and bad input.

use lockjaw::check::lock::{
    check_file, check_ops, check_ops_with, LockChecker, LockOptions, LockReport, WitnessData,
};
use lockjaw::check::Validity::{self, False as F, True as T, Unknown as U};
use lockjaw::history::jsonl::read_all;
use lockjaw::history::Meta;
use std::io::Write;
use std::path::{Path, PathBuf};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/lock")
        .join(format!("{name}.jsonl"))
}

fn check(name: &str) -> LockReport {
    check_file(&example(name), &LockOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Expected: overall, service, resource; then counts of safety, fence
/// order, mutex, stale writes, lost updates; then stale and possibly
/// stale overlaps.
type Row = (&'static str, [Validity; 3], [u64; 5], [u64; 2]);

const EXPECTED: &[Row] = &[
    ("safety-violation", [F, F, T], [1, 0, 0, 0, 0], [0, 0]),
    ("renew-extends-etcd", [F, F, T], [1, 0, 0, 0, 0], [0, 0]),
    ("renew-extends-redis", [F, F, T], [1, 0, 0, 0, 0], [0, 0]),
    (
        "violation-proven-by-later-renew",
        [F, F, T],
        [1, 0, 0, 0, 0],
        [0, 0],
    ),
    ("out-of-order-violation", [F, F, T], [1, 0, 0, 0, 0], [0, 0]),
    // A session lease (PostgreSQL): the old session's statement after
    // the takeover proves both held the lock at once.
    (
        "session-lease-violation",
        [F, F, T],
        [1, 0, 0, 0, 0],
        [0, 0],
    ),
    ("fence-order", [F, F, T], [0, 2, 0, 0, 0], [0, 0]),
    ("mutex-violation", [F, F, T], [0, 0, 1, 0, 0], [0, 0]),
    // Lease-less: only the exact owned-mutex search sees it.
    ("mutex-foreign-release", [F, F, T], [0, 0, 1, 0, 0], [0, 0]),
    ("stale-write-accepted", [F, T, F], [0, 0, 0, 1, 1], [1, 0]),
    ("lost-update-unfenced", [F, T, F], [0, 0, 0, 0, 1], [1, 0]),
    // Two acknowledged writes of one value prove a lost update without a
    // final read (a local proof); a loss only the final read shows is the
    // total's.
    (
        "lost-update-pair-no-final-read",
        [F, T, F],
        [0, 0, 0, 0, 1],
        [1, 0],
    ),
    ("lost-update-final-read", [F, T, F], [0, 0, 0, 0, 1], [0, 0]),
    // The same history from a client adapter: reporting only some
    // renewals makes the stale holders unknown (counted 0, see below); a
    // `lost` event before the takeover ends the hold as a release does.
    ("adapter-some-renewals", [F, T, F], [0, 0, 0, 0, 1], [0, 0]),
    ("adapter-lost-event", [F, T, F], [0, 0, 0, 0, 1], [0, 0]),
    ("phantom-write", [F, T, F], [0, 0, 0, 0, 1], [0, 0]),
    ("set-lost", [F, T, F], [0, 0, 0, 0, 1], [1, 0]),
    ("no-final-read", [U, T, U], [0, 0, 0, 0, 0], [1, 0]),
    // Tricky non-violations.
    (
        "acquire-overlaps-release",
        [T, T, T],
        [0, 0, 0, 0, 0],
        [0, 0],
    ),
    ("failed-renew", [T, T, T], [0, 0, 0, 0, 0], [1, 0]),
    ("info-acquire", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    ("two-keys", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    ("redlock-no-fences", [T, T, T], [0, 0, 0, 0, 0], [1, 0]),
    (
        "etcd-refreshed-before-acquire",
        [T, T, T],
        [0, 0, 0, 0, 0],
        [0, 1],
    ),
    ("same-owner-reentrant", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    // A session lease taken over after its session died, with no
    // statement after: valid; stale holders unknown (counted 0).
    ("session-lease-takeover", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    // Lease-less, with an acquire of unknown outcome: valid, not unknown.
    ("mutex-exact-valid", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    ("keyless-release", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    ("stale-write-rejected", [T, T, T], [0, 0, 0, 0, 0], [1, 0]),
    // Writes outside their lease are information (`unprotected_writes`).
    ("unprotected-writes", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    // Liveness figures (`liveness.rs`) never change a verdict.
    ("liveness-stuck", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    ("liveness-not-stuck", [T, T, T], [0, 0, 0, 0, 0], [1, 0]),
    ("liveness-zombie", [T, T, T], [0, 0, 0, 0, 0], [1, 0]),
    ("liveness-zombie-zero", [T, T, T], [0, 0, 0, 0, 0], [0, 0]),
    (
        "liveness-orphaned-renewal",
        [T, T, T],
        [0, 0, 0, 0, 0],
        [0, 0],
    ),
    (
        "liveness-etcd-renew-after-release",
        [T, T, T],
        [0, 0, 0, 0, 0],
        [0, 0],
    ),
];

#[test]
fn every_example_has_its_expected_verdicts_and_counts() {
    for (name, [all, service, resource], counts, [stale, possibly]) in EXPECTED {
        let r = check(name);
        let c = &r.checks;
        let got = [
            c.safety.count,
            c.fence_order.count,
            c.mutex.count,
            c.stale_writes.count,
            c.lost_updates.count,
        ];
        let ctx = format!("{name}:\n{}", r.summary_text());
        assert_eq!(
            [r.valid, r.service.valid, r.resource.valid],
            [*all, *service, *resource],
            "{ctx}"
        );
        assert_eq!(&got, counts, "{ctx}");
        assert_eq!(
            [r.stale_holders.stale, r.stale_holders.possibly_stale],
            [*stale, *possibly],
            "{ctx}"
        );
    }
}

#[test]
fn every_example_file_is_in_the_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("histories/examples/lock");
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "jsonl") {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            assert!(
                EXPECTED.iter().any(|r| r.0 == stem),
                "{stem} has no expected verdict"
            );
        }
    }
}

#[test]
fn in_memory_ops_give_the_same_verdicts_as_the_file() {
    for (name, ..) in EXPECTED {
        let (meta, ops) = read_all(&example(name)).unwrap();
        let r = check_ops(&meta.unwrap(), ops.into_iter().map(Ok)).unwrap();
        let f = check(name);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::to_value(&f).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn a_history_without_storage_has_a_valid_inapplicable_resource_verdict() {
    let r = check("safety-violation");
    assert!(!r.resource.applicable);
    assert_eq!(r.resource.valid, T);
    let r = check("two-keys");
    assert_eq!((r.valid, r.resource.applicable), (T, false));
    assert!(!r.checks.lost_updates.applicable && !r.checks.stale_writes.applicable);
}

#[test]
fn safety_witness_names_both_grants_and_the_proof() {
    let r = check("renew-extends-etcd");
    let w = &r.checks.safety.witnesses[0];
    let WitnessData::SafetyViolation {
        key,
        first,
        second,
        lease_valid_until_ns,
        lease_evidence_op,
    } = &w.data
    else {
        panic!("{:?}", w.data)
    };
    assert_eq!((key.as_str(), first.owner.as_str()), ("lock", "L1"));
    assert_eq!((second.owner.as_str(), second.acquire_op), ("L2", 13));
    // The keep-alive invoked at 1.200 s (op 11) carried the lease to
    // 1.200 + 1.000 × 0.999 − 0.002 s.
    assert_eq!(
        (*lease_evidence_op, *lease_valid_until_ns),
        (11, 2_197_000_000)
    );
    for part in [
        "owner L1 (op 3)",
        "fence 10",
        "2.197 s",
        "op 11",
        "owner L2 (op 13)",
    ] {
        assert!(w.text.contains(part), "{part:?} not in {}", w.text);
    }
}

#[test]
fn stale_write_witness_tells_the_whole_story() {
    let r = check("stale-write-accepted");
    let w = &r.checks.stale_writes.witnesses[0];
    for part in [
        "owner a (op 1) acquired fence 33 at 0.010 s",
        "its lease had certainly ended by 1.013 s",
        "owner b (op 5) acquired fence 34 at 1.510 s",
        "a wrote counter=1 with fence 33 at 5.000 s (op 13, seq 4)",
        "ACCEPTED it after seeing fence 34",
    ] {
        assert!(w.text.contains(part), "{part:?} not in {}", w.text);
    }
    let v = serde_json::to_value(w).unwrap();
    assert_eq!(v["kind"], "stale-write-accepted");
    assert_eq!(v["request"]["op"], 13);
    assert_eq!(v["seen"]["fence"], 34);
    assert_eq!(v["stale_grant"]["acquire_op"], 1);
    assert_eq!(v["newer_grant"]["owner"], "b");
}

#[test]
fn stale_holders_are_unknown_when_an_adapter_reports_only_some_renewals() {
    let r = check("adapter-some-renewals");
    let why = r.stale_holders.unknown.as_deref().unwrap_or_default();
    assert!(why.contains("only some"), "{why:?}");
    assert!(r.summary_text().contains("stale holders unknown"));
    assert!(check("lost-update-unfenced")
        .stale_holders
        .unknown
        .is_none());
}

#[test]
fn stale_holders_are_unknown_with_session_leases() {
    let r = check("session-lease-takeover");
    let why = r.stale_holders.unknown.as_deref().unwrap_or_default();
    assert!(why.contains("session leases"), "{why:?}");
    assert_eq!(r.stale_holders.stale, 0);
}

#[test]
fn report_json_has_the_documented_shape() {
    let v = serde_json::to_value(check("stale-write-accepted")).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(
        v["service"],
        serde_json::json!({"valid": true, "applicable": true})
    );
    assert_eq!(v["resource"]["valid"], false);
    for c in [
        "safety",
        "fence_order",
        "mutex",
        "stale_writes",
        "lost_updates",
    ] {
        let r = &v["checks"][c];
        assert!(
            r["valid"].is_boolean() || r["valid"] == "unknown",
            "{c}: {r}"
        );
        assert!(r["count"].is_u64() && r["witnesses"].is_array(), "{c}: {r}");
    }
    assert_eq!(v["checks"]["lost_updates"]["counts"]["lost"], 1);
    assert_eq!(v["stale_holders"]["list"][0]["kind"], "stale");
    assert_eq!(v["stale_holders"]["list"][0]["held_past_lease_ms"], 4007.0);
    assert_eq!(v["params"]["acquire_sets_ttl"], true);
    assert_eq!(v["stats"]["ops"], 18);
    let unknown = serde_json::to_value(check("no-final-read")).unwrap();
    assert_eq!(unknown["valid"], "unknown");
}

#[test]
fn summary_text_gives_verdicts_and_first_witnesses() {
    let s = check("fence-order").summary_text();
    assert!(
        s.starts_with("lock checks: invalid (service: invalid, resource: valid, not applicable)")
    );
    assert!(s.contains("service / fence order: invalid, 2 found"), "{s}");
    assert!(s.contains("was granted fence 4 (op 9), not above 5"), "{s}");
}

#[test]
fn a_file_later_than_the_window_is_reread_with_a_wide_enough_one() {
    let opts = LockOptions {
        reorder_window_ms: Some(1),
        ..LockOptions::default()
    };
    let r = check_file(&example("out-of-order-violation"), &opts).unwrap();
    assert_eq!((r.stats.passes, r.stats.late_ops), (2, 0));
    assert_eq!((r.valid, r.checks.safety.count), (F, 1));
    assert!(r.stats.max_lateness_ms >= 100.0);
}

#[test]
fn in_memory_ops_later_than_the_window_make_the_verdict_unknown() {
    let (meta, ops) = read_all(&example("out-of-order-violation")).unwrap();
    let opts = LockOptions {
        reorder_window_ms: Some(1),
        ..LockOptions::default()
    };
    let r = check_ops_with(&meta.unwrap(), &opts, ops.into_iter().map(Ok)).unwrap();
    assert!(r.stats.late_ops > 0);
    assert_eq!(r.valid, U);
    assert!(r.notes[0].contains("reorder window"), "{:?}", r.notes);
}

#[test]
fn the_incremental_checker_counts_anomalies_as_it_goes() {
    let (meta, ops) = read_all(&example("fence-order")).unwrap();
    let mut c = LockChecker::new(meta.as_ref(), &LockOptions::default()).unwrap();
    let mut seen = Vec::new();
    for op in ops {
        c.push(op).unwrap();
        seen.push(c.anomalies());
    }
    // Events are handed out once they fall behind the reorder window, so
    // the running count may lag; it never exceeds the final one.
    assert!(seen.iter().all(|&n| n <= 2));
    assert_eq!(c.finish().unwrap().checks.fence_order.count, 2);
}

#[test]
fn gzipped_histories_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("h.jsonl.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(&std::fs::read(example("safety-violation")).unwrap())
        .unwrap();
    e.finish().unwrap();
    let r = check_file(&gz, &LockOptions::default()).unwrap();
    assert_eq!(r.checks.safety.count, 1);
}

fn write_tmp(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("h.jsonl");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn missing_acquire_sets_ttl_is_an_error_unless_the_override_gives_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(
        dir.path(),
        "{\"type\":\"meta\",\"checkers\":[\"lock\"],\"workload\":\"lock\"}\n\
         {\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"acquire\"}\n",
    );
    let e = check_file(&p, &LockOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("h.jsonl:1: ") && e.contains("acquire_sets_ttl"),
        "{e}"
    );
    assert!(e.contains("hint:"), "{e}");
    let over: Meta = serde_json::from_str(r#"{"acquire_sets_ttl": false}"#).unwrap();
    let opts = LockOptions {
        meta_override: Some(over),
        ..LockOptions::default()
    };
    let r = check_file(&p, &opts).unwrap();
    assert_eq!(r.stats.incomplete, 1);
    assert!(!r.params.acquire_sets_ttl);
}

#[test]
fn bad_lines_name_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let meta = "{\"type\":\"meta\",\"acquire_sets_ttl\":true,\"workload\":\"lock\"}\n";
    let cases = [
        (
            "{\"time\":\"soon\",\"process\":0,\"type\":\"invoke\",\"f\":\"acquire\"}\n",
            ":2: bad op:",
            "time",
        ),
        (
            "\n{\"time\":5,\"process\":3,\"type\":\"ok\",\"f\":\"acquire\"}\n",
            ":3: op index 0 (process 3)",
            "without a pending invocation",
        ),
        (
            "{\"time\":5,\"process\":3,\"type\":\"invoke\",\"f\":\"acquire\"}\n\
             {\"time\":4,\"process\":3,\"type\":\"ok\",\"f\":\"acquire\"}\n",
            ":3: ",
            "field `time` 4 is before its invocation's time 5",
        ),
        (
            "{\"time\":5,\"process\":3,\"type\":\"invoke\",\"f\":\"acquire\"}\n\
             {\"time\":6,\"process\":3,\"type\":\"invoke\",\"f\":\"release\"}\n",
            ":3: ",
            "still pending",
        ),
    ];
    for (body, place, what) in cases {
        let p = write_tmp(dir.path(), &format!("{meta}{body}"));
        let e = check_file(&p, &LockOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("h.jsonl{place}")), "{e}");
        assert!(e.contains(what), "{e}");
    }
}

#[test]
fn a_value_of_the_wrong_type_is_an_error_naming_the_op() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(
        dir.path(),
        "{\"type\":\"meta\",\"acquire_sets_ttl\":true,\"workload\":\"fenced-counter\"}\n\
         {\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"key\":\"c\"}\n\
         {\"time\":2,\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"key\":\"c\",\"value\":\"seven\"}\n",
    );
    let e = check_file(&p, &LockOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("h.jsonl") && e.contains("op index 1"), "{e}");
    assert!(e.contains("counter must be an integer"), "{e}");
}

#[test]
fn the_checker_and_its_report_can_move_between_threads() {
    fn send<T: Send + 'static>() {}
    send::<LockChecker>();
    send::<LockReport>();
}

#[test]
fn two_writes_of_one_value_are_listed_as_a_local_proof_after_the_total() {
    let r = check("lost-update-unfenced");
    let l = &r.checks.lost_updates;
    assert_eq!((l.count, l.counts["local_proofs"]), (1, 1));
    assert!(matches!(
        l.witnesses[0].data,
        WitnessData::LostUpdates { .. }
    ));
    let WitnessData::LostUpdatePair {
        rule,
        first,
        second,
        lost,
        ..
    } = &l.witnesses[1].data
    else {
        panic!("{:?}", l.witnesses)
    };
    assert_eq!(
        (rule.as_str(), first.op, second.op, *lost),
        ("same-value", 9, 13, 1)
    );
    assert!(l.witnesses[1].text.contains("set 'counter' to 1"));
    // Without a final read the total is unknown; the pair decides.
    let r = check("lost-update-pair-no-final-read");
    let l = &r.checks.lost_updates;
    assert_eq!((l.valid, l.count, l.witnesses.len()), (F, 1, 1));
    assert!(l
        .note
        .as_deref()
        .unwrap_or_default()
        .contains("no final read"));
    // A loss only the final read shows has no pair.
    let r = check("lost-update-final-read");
    let l = &r.checks.lost_updates;
    assert!(!l.counts.contains_key("local_proofs"));
    assert_eq!(l.counts["lost"], 1);
}
