//! The baseline on the other systems: with no faults, Redlock, Redis +
//! Sentinel and ZooKeeper show zero anomalies. Short runs (6 s, 2 s leases).
//! Ports: clusters on 35200-35299 would collide with run_heal; these use
//! 35300-35399.

mod run_util;

use run_util::*;

fn baseline(system: &str, port: u16) {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        &format!("{system}-none"),
        tmp.path(),
        port,
        &[
            "--system",
            system,
            "--nemesis",
            "none",
            "--time-limit",
            "6",
            "--ttl-ms",
            "2000",
            "--seed",
            "31",
        ],
    );
    let (acked, info, stale, last) = storage_facts(&r.history().1);
    assert!(acked > 3, "the workers made progress");
    assert_eq!((stale, info, last), (0, 0, Some(acked as i64)));
    let res = r.results();
    assert_eq!(res["valid"], true, "{res}");
    assert_eq!(r.code, 0);
    assert_nothing_left(&r.dir);
}

#[test]
fn redlock_none_is_clean() {
    baseline("redlock", 35300);
}

#[test]
fn sentinel_none_is_clean() {
    baseline("sentinel", 35310);
}

#[test]
fn zookeeper_none_is_clean() {
    baseline("zookeeper", 35320);
}
