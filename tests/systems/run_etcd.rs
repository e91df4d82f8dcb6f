//! `lockjaw run` on a real local 3-node etcd: the baseline is clean; a
//! paused holder never breaks etcd's own guarantees (its lease simply
//! expires), but an unfenced resource is damaged and a fenced one is not.
//! Short runs (8 s, 2 s leases). Ports: one 100-port block per test in 35500-35799.

use crate::run_util::*;

const SHORT: &[&str] = &[
    "--system",
    "etcd",
    "--time-limit",
    "8",
    "--ttl-ms",
    "2000",
    "--seed",
    "21",
];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = SHORT.to_vec();
    v.extend_from_slice(extra);
    v
}

#[test]
fn none_finds_no_anomalies() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "etcd-none",
        tmp.path(),
        35500,
        &args(&["--nemesis", "none"]),
    );
    let (acked, info, stale, last) = storage_facts(&r.history().1);
    assert!(acked > 5, "the workers made progress");
    assert_eq!((stale, info, last), (0, 0, Some(acked as i64)));
    let (meta, ops) = r.history();
    assert_eq!(meta_param(&meta, "acquire_sets_ttl"), false);
    assert!(
        ops.iter().any(|o| o.f == "renew"),
        "lease grants and keep-alives are recorded"
    );
    let res = r.results();
    assert_eq!(res["valid"], true, "{res}");
    assert_eq!(r.code, 0);
    assert_eq!(check_exit(&r.dir), 0);
    // The raft timing, from the members' command lines in /debug/vars.
    let settings = &r.run_json()["server_settings"];
    assert_eq!(settings["heartbeat-interval"], "100", "{settings}");
    assert_eq!(settings["election-timeout"], "500", "{settings}");
    assert_nothing_left(&r.dir);
}

#[test]
fn pause_holder_service_valid_and_fenced_resource_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "etcd-pause-on",
        tmp.path(),
        35600,
        &args(&["--nemesis", "pause-holder", "--fencing", "on"]),
    );
    let (_, _, stale, _) = storage_facts(&r.history().1);
    assert_eq!(stale, 0);
    let res = r.lock();
    assert_eq!(res["service"]["valid"], true, "{res}");
    assert_eq!(res["resource"]["valid"], true, "{res}");
    assert_eq!(r.code, 0);
}

#[test]
fn pause_holder_service_valid_but_unfenced_resource_damaged() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "etcd-pause-off",
        tmp.path(),
        35700,
        &args(&["--nemesis", "pause-holder", "--fencing", "off"]),
    );
    assert_resource_damaged_service_valid(&r, "etcd honours its leases");
}
