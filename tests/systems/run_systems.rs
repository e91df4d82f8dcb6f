//! The baseline on the other systems: with no faults, Redlock, Redis +
//! Sentinel and ZooKeeper show zero anomalies. Short runs (6 s, 2 s leases).
//! Ports: one 100-port block per test in 35800-36099 and 36600-36799.

use crate::run_util::*;

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
    // The settings that decide verdicts, as the servers report them.
    let settings = &r.run_json()["server_settings"];
    let want: &[(&str, &str)] = match system {
        "zookeeper" => &[
            ("tickTime", "250"),
            ("minSessionTimeout", "500"),
            ("maxSessionTimeout", "5000"),
        ],
        _ => &[("appendonly", "yes"), ("appendfsync", "everysec")],
    };
    for (k, v) in want {
        assert_eq!(settings[k], *v, "{k}: {settings}");
    }
    assert_nothing_left(&r.dir);
}

#[test]
fn redlock_none_is_clean() {
    baseline("redlock", 35800);
}

#[test]
fn sentinel_none_is_clean() {
    baseline("sentinel", 35900);
}

#[test]
fn zookeeper_none_is_clean() {
    baseline("zookeeper", 36000);
}

/// ZooKeeper under pause-holder: the session of the paused holder expires,
/// so the service stays valid; the fence decides the resource.
fn zookeeper_pause(fencing: &str, block: u16) -> (tempfile::TempDir, Run) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("zookeeper-pause-{fencing}");
    let r = run_local(
        &name,
        tmp.path(),
        block,
        &[
            "--system",
            "zookeeper",
            "--nemesis",
            "pause-holder",
            "--fencing",
            fencing,
            "--time-limit",
            "8",
            "--ttl-ms",
            "2000",
            "--seed",
            "32",
        ],
    );
    let res = r.lock();
    assert_eq!(res["service"]["valid"], true, "{res}");
    let l = &r.nemesis()["landed_inside"];
    assert!(l["judged"].as_u64().unwrap_or(0) >= 2, "{l}");
    (tmp, r)
}

#[test]
fn zookeeper_pause_holder_with_fencing_is_valid() {
    let (_tmp, r) = zookeeper_pause("on", 36600);
    assert_eq!(r.lock()["resource"]["valid"], true);
    assert_eq!(r.code, 0);
}

#[test]
fn zookeeper_pause_holder_without_fencing_damages_the_resource() {
    let (_tmp, r) = zookeeper_pause("off", 36700);
    assert_eq!(r.lock()["resource"]["valid"], false);
    assert_eq!(r.code, 1);
}

/// Longer baselines on every system (make test-long).
#[test]
#[ignore]
fn every_system_stays_clean_for_30_seconds() {
    for (i, system) in ["redis", "redlock", "sentinel", "etcd", "zookeeper"]
        .iter()
        .enumerate()
    {
        let tmp = tempfile::tempdir().unwrap();
        let r = run_local(
            &format!("{system}-none-long"),
            tmp.path(),
            36800 + (i as u16 % 2) * 100,
            &[
                "--system",
                system,
                "--nemesis",
                "none",
                "--time-limit",
                "30",
                "--workload",
                "lock-set",
            ],
        );
        assert_eq!(r.code, 0, "{system}: {}", r.results());
    }
}

/// etcd: a killed holder's lease runs out before anyone else is granted
/// the lock (make test-long).
#[test]
#[ignore]
fn etcd_kill_holder_next_grant_after_the_lease() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "etcd-kill",
        tmp.path(),
        36800,
        &[
            "--system",
            "etcd",
            "--nemesis",
            "kill-holder",
            "--workload",
            "lock",
            "--time-limit",
            "20",
        ],
    );
    let gaps = r.nemesis()["kill_gaps"].as_array().cloned().unwrap();
    assert!(gaps.iter().any(|g| g["after_lease"] == true), "{gaps:?}");
    assert!(gaps.iter().all(|g| g["after_lease"] != false), "{gaps:?}");
    assert_eq!(r.lock()["service"]["valid"], true);
}
