//! Tests of the fault registry (src/nemesis/registry.rs).

use super::*;

#[test]
fn names_are_unique_and_every_fault_has_a_builtin_file() {
    let mut names: Vec<&str> = FAULTS.iter().map(|e| e.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), FAULTS.len());
    for e in FAULTS {
        assert!(
            super::super::spec::BUILTIN
                .iter()
                .any(|(n, _)| *n == e.name),
            "no nemesis/{}.toml",
            e.name
        );
    }
}

/// A campaign shares a cluster only between runs whose faults leave the
/// servers as they were: the client-side faults, not a node's.
#[test]
fn the_faults_that_change_the_servers_are_known_through_mixed_and_together() {
    let of = |n: &str| changes_servers(&super::super::spec::load(n).unwrap());
    for n in [
        "none",
        "pause-holder",
        "kill-holder",
        "partition-holder",
        "latency",
    ] {
        assert!(!of(n), "{n}");
    }
    for n in [
        "pause-node",
        "kill-node",
        "partition-node",
        "clock-jump",
        "failover",
    ] {
        assert!(of(n), "{n}");
    }
    // mixed draws kill-node among others; k2-etcd pairs two faults of
    // the holder's links.
    assert!(of("mixed"));
    assert!(!of("k2-etcd"));
}
