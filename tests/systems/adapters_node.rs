//! The node-redlock adapter (`clients/node-redlock`: redlock 4.2.0 over
//! ioredis) under `lockjaw run --client node-redlock`: a fault-free Redlock
//! run, and a paused holder whose unfenced write lands after its lease
//! (Redlock has no fencing token); the other cells of
//! docs/client-findings.md and the Redis Cluster runs are `#[ignore]`
//! (make test-long). Ports: one 100-port block per test in 47400-47599.
//! The helpers here serve the Java and Python adapters' tests too.

use crate::run_util::*;
use lockjaw::history::{Op, OpType, Process};
use std::path::Path;

const INSTALLED: &str = "node_modules/redlock/package.json";

/// Panics, naming the fix, when an adapter's dependencies are missing
/// (`make test` installs them through `scripts/install-deps.sh`).
pub(crate) fn require_installed(adapter: &str, needed: &str) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("clients")
        .join(adapter)
        .join(needed);
    assert!(
        p.exists(),
        "{} is missing: the {adapter} adapter's dependencies are not installed; \
         run scripts/install-deps.sh (make test does)",
        p.display()
    );
}

/// Granted acquires per worker slot (process number modulo the workers).
pub(crate) fn grants_per_worker(ops: &[Op], workers: i64) -> Vec<usize> {
    let mut n = vec![0; workers as usize];
    for o in ops {
        if let (true, Process::Num(p)) = (o.f == "acquire" && o.kind == OpType::Ok, &o.process) {
            n[p.rem_euclid(workers) as usize] += 1;
        }
    }
    n
}

/// The history's meta record names the library and its version.
pub(crate) fn library_in_meta(r: &Run, library: &str, version: &str) {
    let meta = serde_json::to_value(r.history().0.expect("a meta record")).unwrap();
    let text = meta.to_string();
    assert!(
        text.contains(&format!("\"library\":\"{library}\""))
            && text.contains(&format!("\"version\":\"{version}")),
        "{text}"
    );
}

/// What the workers' adapters logged (`logs/worker-N.log`), all together.
fn worker_logs(r: &Run) -> String {
    let mut names: Vec<_> = std::fs::read_dir(r.dir.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("worker-")
        })
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// On Redis Cluster, the adapter (its log lines start with `tag`) followed
/// at least one MOVED reply through the worker's proxy in front of the
/// named node ("TAG: MOVED SLOT ANNOUNCED: through PROXY"), and never met
/// an address outside the hello's dial map.
pub(crate) fn moved_through_proxies(r: &Run, tag: &str) {
    let logs = worker_logs(r);
    let prefix = format!("{tag}: MOVED ");
    let moved: Vec<(&str, &str)> = logs
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|l| {
            let (announced, proxy) = l.split_once(": through ").expect(l);
            (announced.rsplit(' ').next().unwrap(), proxy)
        })
        .collect();
    assert!(!moved.is_empty(), "no MOVED followed:\n{logs}");
    for (announced, proxy) in moved {
        assert_ne!(
            announced, proxy,
            "a MOVED to {announced} went straight there"
        );
    }
    assert!(
        !logs.contains("lockjaw's dial map") && !logs.contains("lockjaw's proxies"),
        "an address outside the dial map:\n{logs}"
    );
}

/// `lockjaw run --system SYSTEM --client CLIENT --nemesis NEMESIS ARGS`.
pub(crate) fn run_client(
    client: &str,
    system: &str,
    nemesis: &str,
    block: u16,
    args: &[&str],
) -> (tempfile::TempDir, Run) {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = vec!["--system", system, "--client", client, "--nemesis", nemesis];
    a.extend_from_slice(args);
    let name = format!("{client}-{system}-{nemesis}");
    let r = run_local(&name, tmp.path(), block, &a);
    (tmp, r)
}

/// A fault-free run with an adapter and `workers` workers: exit 0, valid,
/// grants from every worker.
pub(crate) fn clean_run(
    client: &str,
    system: &str,
    block: u16,
    secs: &str,
    workers: i64,
) -> (tempfile::TempDir, Run) {
    let n = workers.to_string();
    let args = [
        "--time-limit",
        secs,
        "--ttl-ms",
        "2000",
        "--concurrency",
        &n,
        "--seed",
        "41",
    ];
    let (tmp, r) = run_client(client, system, "none", block, &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = r.results();
    assert_eq!(res["valid"], true, "{res}");
    let grants = grants_per_worker(&r.history().1, workers);
    assert!(
        grants.iter().all(|&g| g > 0),
        "grants per worker: {grants:?}"
    );
    assert_nothing_left(&r.dir);
    (tmp, r)
}

/// One library × fault cell of docs/client-findings.md (10 s, 2 s leases).
pub(crate) fn cell(
    client: &str,
    system: &str,
    nemesis: &str,
    fencing: &str,
    block: u16,
) -> (tempfile::TempDir, Run) {
    let args = [
        "--fencing",
        fencing,
        "--time-limit",
        "10",
        "--ttl-ms",
        "2000",
        "--seed",
        "7",
    ];
    run_client(client, system, nemesis, block, &args)
}

#[test]
fn node_redlock_fault_free_run_is_valid_with_grants_from_every_worker() {
    require_installed("node-redlock", INSTALLED);
    let (_tmp, r) = clean_run("node-redlock", "redlock", 47400, "4", 3);
    library_in_meta(&r, "redlock", "4.2.0");
}

/// Redlock has no fence: a holder paused past its lease wakes and writes
/// over the next holder's increment. The service stays valid (the paused
/// holder's lease had ended when the next grant came); updates are lost.
#[test]
fn node_redlock_pause_holder_unfenced_write_loses_updates() {
    require_installed("node-redlock", INSTALLED);
    let args = [
        "--fencing",
        "off",
        "--time-limit",
        "5",
        "--ttl-ms",
        "1000",
        "--seed",
        "42",
    ];
    let (_tmp, r) = run_client("node-redlock", "redlock", "pause-holder", 47500, &args);
    let (acked, _, _, last) = storage_facts(&r.history().1);
    assert!(
        last.is_some_and(|v| v < acked as i64),
        "a lost update in the history itself: {acked} acknowledged, final {last:?}"
    );
    let res = r.lock();
    assert_eq!(res["service"]["valid"], true, "{res}");
    assert_eq!(res["resource"]["valid"], false, "{res}");
    assert!(
        res["checks"]["lost_updates"]["count"].as_u64().unwrap() > 0,
        "{res}"
    );
    assert_eq!(r.code, 1);
    assert_nothing_left(&r.dir);
}

/// On a single Redis the adapter behaves as on Redlock: clean without
/// faults, updates lost under a pause (no fence).
#[test]
#[ignore = "20 s; make test-long"]
fn node_redlock_on_single_redis_clean_then_loses_updates_under_pause() {
    require_installed("node-redlock", INSTALLED);
    let (_t, r) = cell("node-redlock", "redis", "none", "off", 47420);
    assert_eq!((r.code, r.results()["valid"].clone()), (0, true.into()));
    let (_t2, r) = cell("node-redlock", "redis", "pause-holder", "off", 47440);
    assert_eq!(r.code, 1);
    assert!(
        r.lock()["checks"]["lost_updates"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(r.lock()["service"]["valid"], true);
}

/// A killed holder's keys expire with its ttl: no overlap, nothing lost.
#[test]
#[ignore = "10 s; make test-long"]
fn node_redlock_kill_holder_stays_valid() {
    require_installed("node-redlock", INSTALLED);
    let (_t, r) = cell("node-redlock", "redlock", "kill-holder", "off", 47460);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
}

/// Jumping a majority's clocks expires the holder's keys early: a second
/// client is granted while the first one's lease is still valid.
#[test]
#[ignore = "10 s; make test-long"]
fn node_redlock_clock_jump_breaks_mutual_exclusion() {
    require_installed("node-redlock", INSTALLED);
    let (_t, r) = cell("node-redlock", "redlock", "clock-jump", "off", 47480);
    assert_eq!(r.code, 1);
    let lock = r.lock();
    assert_eq!(lock["service"]["valid"], false, "{lock}");
    assert!(lock["checks"]["safety"]["count"].as_u64().unwrap() > 0);
}

/// Cut off from every node, the holder's requests time out (`info`, the
/// adapter replaced); its keys expire with their ttl: valid.
#[test]
#[ignore = "12 s; make test-long"]
fn node_redlock_partition_holder_times_out_and_stays_valid() {
    require_installed("node-redlock", INSTALLED);
    let (_t, r) = cell("node-redlock", "redlock", "partition-holder", "off", 47520);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.run_json()["counts"]["infos"].as_u64().unwrap() > 0);
}

/// On Redis Cluster redlock has one instance, the ioredis Cluster (quorum
/// 1); a fault-free run is valid with grants from every worker.
#[test]
#[ignore = "make test-long: a 6-server Redis Cluster and a 4 s run: 9 s"]
fn node_redlock_on_redis_cluster_is_valid() {
    require_installed("node-redlock", INSTALLED);
    let (_tmp, r) = clean_run("node-redlock", "redis-cluster", 47540, "4", 3);
    library_in_meta(&r, "redlock", "4.2.0");
}

/// A coordinated failover of the lock key's primary: ioredis' MOVED is
/// mapped to the worker's proxy of the new primary (never dialled as
/// announced), and the run stays valid.
#[test]
#[ignore = "make test-long: a 6-server Redis Cluster and a 12 s run: 15 s"]
fn node_redlock_on_redis_cluster_follows_moved_through_the_proxies() {
    require_installed("node-redlock", INSTALLED);
    let (_t, r) = cell(
        "node-redlock",
        "redis-cluster",
        "failover-coordinated",
        "off",
        47560,
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
    moved_through_proxies(&r, "node-redlock");
    assert_nothing_left(&r.dir);
}
