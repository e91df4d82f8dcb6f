//! The java-curator adapter (`clients/java-curator`: Curator's
//! InterProcessMutex) under `lockjaw run --client java-curator` on
//! ZooKeeper: a fault-free run, and a holder paused past its session
//! timeout with fencing off; the other cells of docs/client-findings.md are
//! `#[ignore]` (make test-long). Three workers in the short runs: each
//! starts a JVM, and two tests may run side by side on two cores. Ports:
//! one 100-port block per test in 47600-47799.

use crate::adapters_node::{cell, clean_run, library_in_meta, require_installed, run_client};
use crate::run_util::*;

const INSTALLED: &str = "classes/adapter.jar";

#[test]
fn java_curator_fault_free_run_is_valid_with_grants_from_every_worker() {
    require_installed("java-curator", INSTALLED);
    let (_tmp, r) = clean_run("java-curator", "zookeeper", 47600, "3", 3);
    library_in_meta(&r, "curator", "5.4");
}

/// The paused holder's session expires on the server, its ephemeral node
/// goes and the next waiter is granted; the woken holder's write carries a
/// lower fence than the new holder's, and with fencing off the storage
/// accepts it: stale writes accepted, the service itself stays valid.
#[test]
fn java_curator_pause_holder_unfenced_stale_write_lands() {
    require_installed("java-curator", INSTALLED);
    let args = [
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
    ];
    let (_tmp, r) = run_client("java-curator", "zookeeper", "pause-holder", 47700, &args);
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
    require_installed("java-curator", INSTALLED);
    let (_t, r) = cell("java-curator", "zookeeper", "pause-holder", "on", 47620);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
    assert!(r.run_json()["counts"]["stale_rejected"].as_u64().unwrap() > 0);
}

/// A killed holder's session expires with its timeout: valid.
#[test]
#[ignore = "12 s; make test-long"]
fn java_curator_kill_holder_stays_valid() {
    require_installed("java-curator", INSTALLED);
    let (_t, r) = cell("java-curator", "zookeeper", "kill-holder", "on", 47640);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
}

/// Cut off from the ensemble, the holder's probe times out (`info`, the
/// adapter replaced) and its session expires: valid.
#[test]
#[ignore = "12 s; make test-long"]
fn java_curator_partition_holder_times_out_and_stays_valid() {
    require_installed("java-curator", INSTALLED);
    let (_t, r) = cell("java-curator", "zookeeper", "partition-holder", "on", 47660);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.run_json()["counts"]["infos"].as_u64().unwrap() > 0);
}
