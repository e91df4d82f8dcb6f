//! Redis nodes restarted without their data (issue 16, item 7): Redlock
//! with a 5 s lease, a majority SIGKILLed while a worker holds the lock and
//! restarted at once. On emptied data directories the nodes forget the key
//! and a second client gets the majority inside the first one's lease (a
//! mutual-exclusion violation); restarted on their AOF (`appendfsync
//! always`) they keep it (valid); restarted empty after ttl × (1 + ρ) + ε
//! they held no live key any more (valid; `#[ignore]`d, make test-long).
//! Ports: one 100-port block per run in 49200–49499 (a free base found
//! first); the refused run names 49590 and binds nothing.

use crate::run_util::*;
use serde_json::Value;

/// Redlock, the lock workload, 5 s leases held 2 s, 4 s of run.
fn redlock(name: &str, nemesis: &str, block: u16, limit: &str) -> (tempfile::TempDir, Run) {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        name,
        tmp.path(),
        block,
        &[
            "--system",
            "redlock",
            "--workload",
            "lock",
            "--nemesis",
            nemesis,
            "--ttl-ms",
            "5000",
            "--hold-ms",
            "2000",
            "--time-limit",
            limit,
            "--seed",
            "16",
        ],
    );
    (tmp, r)
}

/// The kills whose nodes came back (a kill the run's end caught stays
/// down), each checked for its target and restart mode; at least one.
fn kills(r: &Run, restart: &str) -> Vec<Value> {
    let inj: Vec<Value> = r.nemesis()["injections"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i["detail"]["restarted"] != false)
        .collect();
    for i in &inj {
        assert_eq!(i["target"]["nodes"].as_array().unwrap().len(), 3, "{i}");
        assert_eq!(i["detail"]["restart"], restart, "{i}");
        assert_eq!(i["detail"]["restarted"], true, "{i}");
    }
    assert!(!inj.is_empty(), "no kill was restarted: {}", r.stdout);
    inj
}

fn safety(r: &Run) -> u64 {
    r.lock()["checks"]["safety"]["count"].as_u64().unwrap_or(0)
}

#[test]
fn redlock_majority_restarted_empty_grants_a_held_lock_again() {
    let (_tmp, r) = redlock("restart-empty", "restart-empty", 49200, "4");
    kills(&r, "empty");
    let lock = r.lock();
    assert_eq!(lock["service"]["valid"], false, "{lock}");
    assert!(safety(&r) > 0, "a second grant inside a valid lease");
    assert_eq!(r.code, 1);
    assert_nothing_left(&r.dir);
}

#[test]
fn redlock_majority_restarted_with_its_aof_keeps_the_lock() {
    let (_tmp, r) = redlock("restart-aof", "restart-aof", 49300, "4");
    kills(&r, "data");
    let lock = r.lock();
    assert_eq!(lock["service"]["valid"], true, "{lock}");
    assert_eq!(safety(&r), 0);
    assert!(lock["stats"]["grants"].as_u64().unwrap() > 1, "{lock}");
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_nothing_left(&r.dir);
}

#[test]
#[ignore = "a 9 s run (make test-long)"]
fn redlock_majority_restarted_empty_after_the_lease_stays_safe() {
    let (_tmp, r) = redlock("restart-delayed", "restart-empty-delayed", 49400, "9");
    for i in &kills(&r, "empty-delayed") {
        let down_ns = i["stop_ns"].as_u64().unwrap() - i["started_ns"].as_u64().unwrap();
        assert!(down_ns >= 5_007_000_000, "down {down_ns} ns: {i}");
    }
    let lock = r.lock();
    assert_eq!(lock["service"]["valid"], true, "{lock}");
    assert_eq!(safety(&r), 0);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_nothing_left(&r.dir);
}

#[test]
fn restart_empty_on_a_system_without_data_to_lose_exits_3_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    for system in ["etcd", "zookeeper"] {
        let r = run(
            "restart-empty-etcd",
            &tmp.path().join(system),
            &[
                "--system",
                system,
                "--nemesis",
                "restart-empty",
                "--base-port",
                "49590",
            ],
        );
        assert_eq!(r.code, 3, "{}", r.stderr);
        assert!(
            r.stderr.contains("restart = \"empty\"") && r.stderr.contains(system),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("hint:"), "{}", r.stderr);
        assert!(!listening(49590), "nothing was started");
    }
}
