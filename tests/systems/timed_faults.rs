//! The faults timed by the lock protocol (issue 19): `delay-grant`,
//! `delay-release`, `renew-race`, `drop-release` (and its `after-forward`
//! variant), each on real local clusters, with the verdict the system
//! should get and the struck request's outcome as `nemesis.json` records
//! it.
//!
//! In `make test`: every fault once on Redis and once on etcd or
//! ZooKeeper (short runs, small leases, injections every 200 ms), the
//! delayed grant on Redis with the lease guard off and on, and the
//! refusals (no servers). Each asserts that at least one injection landed
//! (loose: liveness) and the safety expectation strictly. The same faults
//! with client adapters: `adapter_timed.rs`.
//!
//! `#[ignore]`d (make test-long): the other cells (Redlock's delayed
//! grant, `drop-release-after` on ZooKeeper, the faults on the remaining
//! systems).
//!
//! Ports: one 100-port block per run in 51600-51999 (a free base found
//! first; Redis 51600-51799, etcd and ZooKeeper 51800-51999, the long
//! tests reuse them one at a time); Toxiproxy and the storage on port 0.

use crate::run_util::*;
use serde_json::Value;
use std::path::Path;

/// A fenced-counter workload file named `name` in `dir`, with `lines`
/// (`key = value` lines) as its settings.
fn workload(dir: &Path, name: &str, lines: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(
        &p,
        format!("name = \"{name}\"\nkind = \"fenced-counter\"\n{lines}"),
    )
    .unwrap();
    p.display().to_string()
}

/// A nemesis file for `fault`, an injection every 200 ms, with `extra`
/// lines.
fn nemesis(dir: &Path, fault: &str, extra: &str) -> String {
    let p = dir.join(format!("{fault}-timed.toml"));
    std::fs::write(
        &p,
        format!(
            "name = \"{fault}-timed\"\nfault = \"{fault}\"\ntarget = \"all-clients\"\n\
             interval_ms = 200\n{extra}"
        ),
    )
    .unwrap();
    p.display().to_string()
}

/// The delayed grant's workload: a 1 s lease, a 300 ms critical section,
/// two workers that think 300 ms between tries (so the worker the fault
/// watches is not beaten to the free lock by the one that just released),
/// an op timeout (900 ms) longer than the held reply (800 ms) and shorter
/// than the lease (the guard needs that).
const GRANT_WORKLOAD: &str = "ttl_ms = 1000\nhold_ms = 300\nthink_ms = 300\n\
                              op_timeout_ms = 900\nconcurrency = 2\n";

/// A short lock: 500 ms leases, 100 ms critical sections, an op timeout
/// longer than the longest hold of a release (so a held release comes back
/// with the server's answer, not a timeout).
const SHORT_WORKLOAD: &str = "ttl_ms = 500\nhold_ms = 100\nthink_ms = 10\n\
                              op_timeout_ms = 1000\nconcurrency = 2\n";

/// A renewing holder: a 600 ms lease renewed every 200 ms through a
/// 900 ms hold, a 150 ms op timeout (a held renewal times out: `info`).
const RENEW_WORKLOAD: &str = "ttl_ms = 600\nhold_ms = 900\nrenew = true\nthink_ms = 10\n\
                              op_timeout_ms = 150\nconcurrency = 2\n";

/// One `lockjaw run` of `fault` on `system`.
fn timed(
    name: &str,
    system: &str,
    w: &str,
    fault: (&str, &str),
    secs: &str,
    block: u16,
    extra: &[&str],
) -> (tempfile::TempDir, Run) {
    let tmp = tempfile::tempdir().unwrap();
    let w = workload(tmp.path(), name, w);
    let n = nemesis(tmp.path(), fault.0, fault.1);
    let mut args = vec![
        "--system",
        system,
        "--workload",
        &w,
        "--nemesis",
        &n,
        "--fencing",
        "off",
        "--time-limit",
        secs,
        "--seed",
        "19",
    ];
    args.extend_from_slice(extra);
    let r = run_local(name, tmp.path(), block, &args);
    assert!(matches!(r.code, 0..=2), "{name}: exit {}", r.code);
    assert_nothing_left(&r.dir);
    (tmp, r)
}

/// The injections that landed (`landed_inside`), at least one (loose),
/// each armed and fired.
fn landed_injections(r: &Run) -> Vec<Value> {
    let l = landed_inside(r);
    for i in &l {
        assert_eq!(i["detail"]["armed"], true, "{i}");
        assert_eq!(i["detail"]["fired"], true, "{i}");
    }
    l
}

/// The run's lock verdict is valid on both sides (service and resource).
fn assert_valid(r: &Run) {
    let lock = r.lock();
    assert_eq!(lock["valid"], true, "{}", r.stdout);
    assert_eq!(r.code, 0, "{}", r.stdout);
}

/// [`assert_valid`], or, when the guard abandoned every write of the run,
/// unknown (exit 2) for that reason alone: nothing reached the storage to
/// test (issue 29), which is no anomaly either.
fn assert_valid_or_no_write(r: &Run) {
    let lock = r.lock();
    if lock["valid"] == true {
        return assert_valid(r);
    }
    assert_eq!(lock["valid"], "unknown", "{}", r.stdout);
    assert_eq!(lock["service"]["valid"], true, "{}", r.stdout);
    assert_eq!(lock["stats"]["protected_writes"], 0, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("unknown: no write was accepted under the lock"),
        "{}",
        r.stdout
    );
    assert_eq!(r.code, 2, "{}", r.stdout);
}

/// The struck request's outcome type of an injection.
fn outcome(i: &Value) -> (&str, &str) {
    let o = &i["detail"]["outcome"];
    (
        o["type"].as_str().unwrap_or("none"),
        o["error"].as_str().unwrap_or(""),
    )
}

/// Unprotected writes: (past the lower bound of the lease's end, of those
/// accepted, after it had certainly ended).
fn unprotected(r: &Run) -> (u64, u64, u64) {
    let u = r.lock()["unprotected_writes"].clone();
    let n = |k: &str| u[k].as_u64().unwrap_or_else(|| panic!("{k}: {u}"));
    (
        n("past_lower_bound"),
        n("past_lower_bound_accepted"),
        n("after_lease_end"),
    )
}

/// Landed delayed grants that came back `ok` with the whole hold behind
/// them, early enough for the holder's write to fall inside the run
/// (`limit_ns`): each must be followed by that process's write past its
/// lease (its lease counts from the acquire's invocation; the reply came
/// 0.8 lease late and the critical section is 0.3 lease).
fn late_grants(r: &Run, limit_ns: u64) -> Vec<Value> {
    landed_injections(r)
        .into_iter()
        .filter(|i| {
            outcome(i).0 == "ok"
                && i["detail"]["granted_after_ms"].as_u64() >= i["target"]["hold_ms"].as_u64()
                && i["start_ns"].as_u64().unwrap() + 1_500_000_000 < limit_ns
        })
        .collect()
}

#[test]
fn redis_delay_grant_guard_off_writes_past_the_lease() {
    let (_tmp, r) = timed(
        "timed-grant-off",
        "redis",
        GRANT_WORKLOAD,
        ("delay-grant", "duration_leases = 0.8\n"),
        "5",
        51600,
        &["--lease-guard", "off"],
    );
    let late = late_grants(&r, 5_000_000_000);
    assert!(!late.is_empty(), "{:?}", injections(&r));
    // Every late grant's holder wrote after its lease's lower bound, and
    // the storage (no fencing) took it.
    let list = r.lock()["unprotected_writes"]["list"].clone();
    for i in &late {
        let p = i["detail"]["process"].as_i64().unwrap().to_string();
        let start = i["start_ns"].as_u64().unwrap();
        let hit = list.as_array().unwrap().iter().any(|u| {
            u["write"]["process"] == p.as_str()
                && u["accepted"] == true
                && u["write"]["invoked_ns"].as_u64().unwrap() > start
                && u["write"]["invoked_ns"].as_u64().unwrap() < start + 2_000_000_000
        });
        assert!(hit, "no unprotected write after the late grant {i}: {list}");
    }
    let (past, accepted, _) = unprotected(&r);
    assert!(past >= late.len() as u64 && accepted >= late.len() as u64);
    assert_eq!(r.run_json()["counts"]["abandoned_writes"], 0);
}

#[test]
fn redis_delay_grant_guard_on_abandons_the_late_write() {
    let (_tmp, r) = timed(
        "timed-grant-on",
        "redis",
        GRANT_WORKLOAD,
        ("delay-grant", "duration_leases = 0.8\n"),
        "5",
        51700,
        &["--lease-guard", "on"],
    );
    // Strict: the guard lets no write go past the lease, so nothing stale.
    assert_eq!(unprotected(&r), (0, 0, 0), "{}", r.lock());
    assert_eq!(r.lock()["checks"]["stale_writes"]["count"], 0);
    assert_valid(&r);
    let late = late_grants(&r, 5_000_000_000);
    let abandoned = r.run_json()["counts"]["abandoned_writes"].as_u64().unwrap();
    assert!(
        abandoned >= late.len() as u64 && !late.is_empty(),
        "{abandoned} abandoned, {} late grants",
        late.len()
    );
}

#[test]
fn redis_delay_release_is_refused_after_the_next_grant() {
    let (_tmp, r) = timed(
        "timed-release",
        "redis",
        SHORT_WORKLOAD,
        ("delay-release", "duration_leases = 3.0\n"),
        "4",
        51600,
        &[],
    );
    assert_valid(&r);
    // Compare-and-delete: the late unlock finds another owner's value.
    for i in landed_injections(&r) {
        assert_eq!(outcome(&i), ("fail", "not-held"), "{i}");
        assert!(i["detail"]["regranted"].is_object(), "{i}");
    }
}

#[test]
fn redis_renew_race_does_not_revive_the_lease() {
    let (_tmp, r) = timed(
        "timed-renew",
        "redis",
        RENEW_WORKLOAD,
        ("renew-race", "duration_leases = 3.0\n"),
        "4",
        51700,
        &[],
    );
    // The service's side only: a held renewal lets the lease run out while
    // the holder (no lease guard, no fence) keeps working, so a stale
    // write is a legitimate outcome whenever another worker is granted in
    // time; a renewal the service took back would show as two holders.
    let lock = r.lock();
    assert_eq!(lock["service"]["valid"], true, "{}", r.stdout);
    // Struck, not landed: whether another worker is granted while the
    // renewal is held depends on the machine's load; the safety claim
    // (no held renewal comes back ok) does not.
    let struck: Vec<Value> = injections(&r)
        .into_iter()
        .filter(|i| i["detail"]["fired"] == true)
        .collect();
    assert!(
        !struck.is_empty(),
        "no renewal was held: {:?}",
        injections(&r)
    );
    for i in struck {
        assert_ne!(outcome(&i).0, "ok", "a late renewal succeeded: {i}");
    }
}

#[test]
fn redis_drop_release_is_indeterminate_and_the_lock_frees() {
    for (reset, block) in [("before-forward", 51600), ("after-forward", 51700)] {
        let (_tmp, r) = timed(
            &format!("timed-drop-{reset}"),
            "redis",
            SHORT_WORKLOAD,
            ("drop-release", &format!("reset = \"{reset}\"\n")),
            "3",
            block,
            &[],
        );
        assert_valid(&r);
        let l = landed_injections(&r);
        for i in &l {
            assert_eq!(outcome(i).0, "info", "{i}");
        }
        // The lock became free again after each lost release (the key
        // expires): never stuck, and grants went on.
        let stuck = &r.lock()["liveness"]["stuck_lock"];
        assert_eq!(stuck["status"], "value", "{stuck}");
        assert_eq!(stuck["count"], 0, "{stuck}");
        let grants = r.run_json()["counts"]["grants"].as_u64().unwrap();
        assert!(
            grants > l.len() as u64,
            "{grants} grants, {} landed",
            l.len()
        );
    }
}

/// etcd's keep-alives share the held connection: a 1 s lease (etcd's
/// smallest) renewed every third of it through 1.5 s holds, a 250 ms op
/// timeout.
const ETCD_RENEW_WORKLOAD: &str = "ttl_ms = 1000\nhold_ms = 1500\nrenew = true\nthink_ms = 10\n\
                                   op_timeout_ms = 250\nconcurrency = 2\n";

#[test]
fn etcd_delay_grant_keeps_the_lease_alive_and_valid() {
    let (_tmp, r) = timed(
        "timed-etcd-grant",
        "etcd",
        GRANT_WORKLOAD,
        ("delay-grant", "duration_leases = 0.8\n"),
        "4",
        51800,
        &[],
    );
    // The held reply is the lease grant's; the lease is kept alive from
    // the moment etcd made it, so the late holder still owns the lock.
    assert_valid(&r);
    assert!(landed_injections(&r).iter().any(|i| outcome(i).0 == "ok"));
}

#[test]
fn etcd_delay_release_is_valid() {
    let (_tmp, r) = timed(
        "timed-etcd-release",
        "etcd",
        SHORT_WORKLOAD,
        ("delay-release", "duration_leases = 3.0\n"),
        "4",
        51900,
        &["--ttl-ms", "1000"],
    );
    assert_valid(&r);
    for i in landed_injections(&r) {
        assert_ne!(outcome(&i).0, "ok", "{i}");
    }
}

#[test]
fn etcd_renew_race_with_the_guard_on_is_valid() {
    let (_tmp, r) = timed(
        "timed-etcd-renew",
        "etcd",
        ETCD_RENEW_WORKLOAD,
        ("renew-race", "duration_leases = 3.0\n"),
        "4",
        51800,
        &["--lease-guard", "on"],
    );
    assert_valid_or_no_write(&r);
    // Strict: nothing written past the lease (no write judged at all is
    // also none: the guard may abandon every write of a short run).
    let u = &r.lock()["unprotected_writes"];
    assert!(u.is_null() || u["past_lower_bound"] == 0, "{u}");
    for i in landed_injections(&r) {
        assert_ne!(outcome(&i).0, "ok", "a late keep-alive succeeded: {i}");
    }
    // Each timed-out keep-alive ended its critical section (loose).
    let abandoned = r.run_json()["counts"]["abandoned_writes"].as_u64().unwrap();
    assert!(abandoned >= 1, "{abandoned} abandoned");
}

#[test]
fn zookeeper_drop_release_is_valid_and_leaves_the_lock_stuck() {
    // A 500 ms op timeout: the stuck-lock bound is lease × (1 + ρ) + the
    // op timeout after the lost release, well inside the run.
    let (_tmp, r) = timed(
        "timed-zk-drop",
        "zookeeper",
        "ttl_ms = 2000\nhold_ms = 200\nthink_ms = 10\nop_timeout_ms = 500\nconcurrency = 2\n",
        ("drop-release", "reset = \"before-forward\"\n"),
        "5",
        51900,
        &[],
    );
    assert_valid(&r);
    for i in landed_injections(&r) {
        assert_eq!(outcome(&i).0, "info", "{i}");
    }
    // The lost-release bug: the client reconnects, the session and its
    // lock znode survive, and the other worker finds the lock held long
    // after its holder gave it up.
    let stuck = &r.lock()["liveness"]["stuck_lock"];
    assert_eq!(stuck["status"], "value", "{stuck}");
    assert!(stuck["count"].as_u64().unwrap() >= 1, "{stuck}");
    assert_eq!(stuck["witnesses"][0]["after"], "release-info", "{stuck}");
}

#[test]
fn timed_faults_refuse_an_external_toxiproxy() {
    for fault in ["delay-grant", "delay-release", "drop-release"] {
        let e = refused(&[
            "--system",
            "redis",
            "--nemesis",
            fault,
            "--toxiproxy",
            "http://127.0.0.1:9",
        ]);
        assert!(
            e.contains(fault) && e.contains("external Toxiproxy") && e.contains("--toxiproxy"),
            "{e}"
        );
    }
}

#[test]
fn renew_race_refuses_a_workload_that_does_not_renew() {
    let e = refused(&[
        "--system",
        "redis",
        "--workload",
        "fenced-counter",
        "--nemesis",
        "renew-race",
    ]);
    assert!(
        e.contains("renew-race") && e.contains("does not renew") && e.contains("renew = true"),
        "{e}"
    );
}

/// A cell of the long test: system, workload, (fault, nemesis lines),
/// more run flags.
type Cell = (
    &'static str,
    &'static str,
    (&'static str, &'static str),
    &'static [&'static str],
);

/// The other cells, each with its expected verdict (make test-long).
#[test]
#[ignore = "make test-long: the protocol-timed faults on the other systems"]
fn timed_faults_on_the_other_systems() {
    // Redlock refuses a late grant: each node's reply is waited for a
    // tenth of the lease; the held acquires fail or time out.
    let (_t, r) = timed(
        "timed-redlock-grant",
        "redlock",
        GRANT_WORKLOAD,
        ("delay-grant", "duration_leases = 0.8\n"),
        "8",
        51600,
        &[],
    );
    assert_valid(&r);
    for i in landed_injections(&r) {
        assert_ne!(outcome(&i).0, "ok", "a late grant taken: {i}");
    }
    assert_eq!(unprotected(&r), (0, 0, 0), "{}", r.lock());
    let zk = "ttl_ms = 2000\nhold_ms = 200\nthink_ms = 10\nconcurrency = 2\n";
    let cells: [Cell; 5] = [
        (
            "zookeeper",
            zk,
            ("drop-release", "reset = \"after-forward\"\n"),
            &[],
        ),
        (
            "zookeeper",
            zk,
            ("delay-release", "duration_leases = 3.0\n"),
            &[],
        ),
        (
            "zookeeper",
            ETCD_RENEW_WORKLOAD,
            ("renew-race", "duration_leases = 3.0\n"),
            &["--ttl-ms", "2000"],
        ),
        (
            "etcd",
            SHORT_WORKLOAD,
            ("drop-release", "reset = \"before-forward\"\n"),
            &["--ttl-ms", "1000"],
        ),
        (
            "sentinel",
            SHORT_WORKLOAD,
            ("delay-release", "duration_leases = 3.0\n"),
            &[],
        ),
    ];
    for (n, (system, w, fault, extra)) in cells.into_iter().enumerate() {
        let name = format!("timed-{system}-{}-{n}", fault.0);
        let (_t, r) = timed(&name, system, w, fault, "8", 51800, extra);
        assert_valid(&r);
        // Struck, not necessarily landed: on ZooKeeper a held release
        // can leave the lock stuck, so no regrant comes to land it.
        let fired: Vec<Value> = injections(&r)
            .into_iter()
            .filter(|i| i["detail"]["fired"] == true)
            .collect();
        assert!(!fired.is_empty(), "{name}: nothing struck");
        for i in &fired {
            assert_ne!(outcome(i).0, "ok", "{name}: {i}");
        }
    }
}
