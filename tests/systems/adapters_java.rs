//! The java-curator adapter (`clients/java-curator`: Curator's
//! InterProcessMutex) under `lockjaw run --client java-curator` on
//! ZooKeeper: a fault-free run, and a holder paused past its session
//! timeout with fencing off. Three workers: each starts a JVM, and the
//! two tests may run side by side on two cores. Ports: one 100-port block per test in
//! 47600-47799 (the node-redlock tests take 47400-47599).

use crate::adapters_node::{cell, clean_run, library_in_meta, require_installed};
use crate::run_util::*;

#[test]
fn java_curator_fault_free_run_is_valid_with_grants_from_every_worker() {
    require_installed("java-curator", "classes/adapter.jar");
    let (_tmp, r) = clean_run("java-curator", "zookeeper", 47600, "4", 3);
    library_in_meta(&r, "curator", "5.4");
}

/// The paused holder's session expires on the server, its ephemeral node
/// goes and the next waiter is granted; the woken holder's write carries a
/// lower fence than the new holder's, and with fencing off the storage
/// accepts it: stale writes accepted, the service itself stays valid.
#[test]
fn java_curator_pause_holder_unfenced_stale_write_lands() {
    require_installed("java-curator", "classes/adapter.jar");
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "java-curator-pause-off",
        tmp.path(),
        47700,
        &[
            "--system",
            "zookeeper",
            "--client",
            "java-curator",
            "--nemesis",
            "pause-holder",
            "--fencing",
            "off",
            "--time-limit",
            "6",
            "--ttl-ms",
            "1000",
            "--concurrency",
            "3",
            "--seed",
            "43",
        ],
    );
    let (_, _, stale, _) = storage_facts(&r.history().1);
    assert!(stale > 0, "a write accepted after a higher fence's");
    let res = r.lock();
    assert_eq!(res["service"]["valid"], true, "{res}");
    assert_eq!(res["resource"]["valid"], false, "{res}");
    assert_eq!(r.code, 1);
    assert_nothing_left(&r.dir);
}

/// With fencing on, the woken holder's write carries the older czxid and
/// the storage refuses it: the resource stays valid.
#[test]
#[ignore = "12 s; make test-long"]
fn java_curator_pause_holder_fenced_write_bounces() {
    require_installed("java-curator", "classes/adapter.jar");
    let (_t, r) = cell("java-curator", "zookeeper", "pause-holder", "on", 47620);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
    assert!(r.run_json()["counts"]["stale_rejected"].as_u64().unwrap() > 0);
}

/// A killed holder's session expires with its timeout: valid.
#[test]
#[ignore = "12 s; make test-long"]
fn java_curator_kill_holder_stays_valid() {
    require_installed("java-curator", "classes/adapter.jar");
    let (_t, r) = cell("java-curator", "zookeeper", "kill-holder", "on", 47640);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
}
