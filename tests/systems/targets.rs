//! The worker targets and `strike-command` on ZooKeeper (issue 41, step
//! 3), on a real local ZooKeeper with lockjaw's own client, and the
//! half-lease rule checked after the adapter's handshake (step 2):
//!
//! - `strike-command` holding the next ZooKeeper `delete` (a release)
//!   lands, and its stop record names the struck operation;
//! - `pause-holder` with `target = "waiter"` pauses a worker whose acquire
//!   is in flight: the history shows the paused process's acquire invoked
//!   before the pause and answered after it;
//! - a hold over half the lease is refused with an adapter whose library
//!   does not renew by itself (`renewals = "none"`), before any server
//!   starts.
//!
//! Ports: one 100-port block per run in 43600-43799 (a free base found
//! first; 43600 the strike, 43700 the waiter); Toxiproxy and the storage
//! on port 0.

use crate::run_util::*;
use lockjaw::history::{Op, OpType, Process};
use std::path::Path;

/// A lock workload of two workers holding `hold_ms` each, for `secs`.
const WORKLOAD: &str = "name = \"zk-lock\"\nkind = \"lock\"\nttl_ms = 2000\n\
think_ms = 10\nacquire_wait_ms = 1000\nop_timeout_ms = 2000\nconcurrency = 2\n";

/// `lockjaw run --system zookeeper --nodes 1` of the workload (with
/// `hold_ms`) and the nemesis `text`, in the block at `block`.
fn zk_run(name: &str, tmp: &Path, hold_ms: u64, nemesis: &str, block: u16) -> Run {
    let (w, n) = (tmp.join("w.toml"), tmp.join("n.toml"));
    std::fs::write(&w, format!("{WORKLOAD}hold_ms = {hold_ms}\n")).unwrap();
    std::fs::write(&n, nemesis).unwrap();
    let (w, n) = (w.display().to_string(), n.display().to_string());
    let args = [
        "--system",
        "zookeeper",
        "--nodes",
        "1",
        "--workload",
        &w,
        "--nemesis",
        &n,
        "--time-limit",
        "4",
    ];
    let r = run_local(name, tmp, block, &args);
    assert!(matches!(r.code, 0 | 1), "{}", r.stderr);
    r
}

#[test]
fn strike_command_holds_a_zookeeper_delete_by_its_operation_name() {
    let tmp = tempfile::tempdir().unwrap();
    let nemesis = "name = \"hold-delete\"\nfault = \"strike-command\"\ninterval_ms = 300\n\
        max_injections = 2\nstrike = { command = \"delete\", action = \"hold\", hold_ms = 200, window_ms = 2000 }\n";
    let r = zk_run("strike-zk-delete", tmp.path(), 100, nemesis, 43600);
    let landed = landed_inside(&r);
    for i in &landed {
        assert_eq!(i["detail"]["struck"], "delete", "{i}");
    }
    // A held release delays the next grant; it breaks nothing.
    assert_eq!(r.lock()["service"]["valid"], true, "{}", r.lock());
}

/// The completion of the op invoked at `inv` (same process, next op).
fn completion<'a>(ops: &'a [Op], inv: &Op) -> Option<&'a Op> {
    ops.iter().find(|o| {
        o.process == inv.process && o.kind != OpType::Invoke && o.time >= inv.time && o.f == inv.f
    })
}

#[test]
fn pause_holder_aimed_at_a_waiter_pauses_a_worker_blocked_in_acquire() {
    let tmp = tempfile::tempdir().unwrap();
    // Holds of 400 ms: the other worker's acquire waits behind them.
    let nemesis = "name = \"pause-waiter\"\nfault = \"pause-holder\"\ntarget = \"waiter\"\n\
        interval_ms = 300\nduration_ms = 200\nmax_injections = 2\n";
    let r = zk_run("pause-zk-waiter", tmp.path(), 400, nemesis, 43700);
    let landed = landed_inside(&r);
    let (_, ops) = r.history();
    for i in &landed {
        let t = &i["target"];
        assert_eq!(t["target"], "waiter", "{i}");
        assert_eq!(i["detail"]["answered_before"], false, "{i}");
        let p = t["process"].as_i64().unwrap();
        // Taken just before the SIGSTOP.
        let paused = i["start_ns"].as_u64().unwrap();
        let in_flight = ops.iter().any(|o| {
            o.process == Process::Num(p)
                && o.f == "acquire"
                && o.kind == OpType::Invoke
                && o.time <= paused
                && completion(&ops, o).is_none_or(|c| c.time > paused)
        });
        assert!(
            in_flight,
            "process {p} had no acquire in flight at {paused}: {i}"
        );
    }
    assert_eq!(r.lock()["service"]["valid"], true, "{}", r.lock());
}

#[test]
fn a_long_hold_is_refused_after_the_handshake_when_the_library_does_not_renew() {
    let long = [
        "--workload",
        "lock",
        "--hold-ms",
        "1500",
        "--ttl-ms",
        "2000",
    ];
    let with = |client: &str| {
        let mut a = vec!["--system", "redis", "--client", client];
        a.extend(long);
        refused(&a)
    };
    // example-redis answers renewals = "none".
    let e = with("example-redis");
    assert!(
        e.contains("--hold-ms") && e.contains("renewals = \"all\"") && e.contains("hint"),
        "{e}"
    );
    assert!(with("builtin").contains("too little of the 2000 ms lease"));
}
