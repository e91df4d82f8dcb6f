//! The go-etcd-concurrency adapter (`clients/go-etcd-concurrency`: etcd's
//! Go `clientv3/concurrency.Mutex`, Debian's 3.4.23) under `lockjaw run
//! --client go-etcd-concurrency` on etcd: a fault-free run whose
//! keep-alives arrive as timed `renewed` events, a holder paused past its
//! lease with fencing off and on, a killed and a cut-off holder, and the
//! refusal of another system, and an etcd with user authentication on
//! (the test's own server, ports 36890-36891). All `#[ignore]` (make test-long): the
//! adapter is a Go build that `scripts/install-deps.sh` makes. Ports: the
//! block 36800-36899 (each run takes the first free 10-port base in it).

use crate::adapters_node::{
    cell, clean_run, grants_per_worker, library_in_meta, require_installed, run_client,
};
use crate::leftovers::{start_etcd, user_auth, PASSWORD};
use crate::run_util::*;
use lockjaw::history::{Op, OpType, Process};
use std::path::Path;
use std::process::Command;

const ADAPTER: &str = "go-etcd-concurrency";
const INSTALLED: &str = "bin/adapter";
const BLOCK: u16 = 36800;

/// Completed ops of `f` under an adapter's own process (`"<p>-adapter"`:
/// its `renewed` and `lost` events).
fn adapter_events(ops: &[Op], f: &str) -> usize {
    ops.iter()
        .filter(|o| o.f == f && o.kind == OpType::Ok)
        .filter(|o| matches!(&o.process, Process::Named(n) if n.ends_with("-adapter")))
        .count()
}

/// Every grant carries the lock key's create revision, and later grants
/// carry higher ones.
fn fences_rise(ops: &[Op]) {
    let fences: Vec<u64> = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == OpType::Ok)
        .map(|o| o.fence.expect("a grant without a fence"))
        .collect();
    assert!(!fences.is_empty());
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[test]
#[ignore = "make test-long: a Go adapter on etcd (5 s)"]
fn go_etcd_fault_free_run_is_valid_with_keep_alives_reported() {
    require_installed(ADAPTER, INSTALLED);
    let (_tmp, r) = clean_run(ADAPTER, "etcd", BLOCK, "4", 3);
    library_in_meta(&r, "etcd/clientv3/concurrency", "3.4.");
    let ops = r.history().1;
    fences_rise(&ops);
    // The session's keep-alives (every third of the 2 s lease), stamped
    // on the wire, arrive as `renewed` events while a lock is held.
    assert!(adapter_events(&ops, "renew") > 0, "no keep-alive reported");
    assert!(
        r.stdout.contains("lockjaw sent no renewals"),
        "{}",
        r.stdout
    );
}

/// The paused holder's keep-alives stop, its lease expires on the server
/// with its key, and the next waiter is granted; the woken holder's
/// session reports `lost`, but its write (a lower fence than the new
/// holder's) goes out first: with fencing off the storage accepts it.
#[test]
#[ignore = "make test-long: a Go adapter on etcd under pause-holder (8 s)"]
fn go_etcd_pause_holder_unfenced_stale_write_lands() {
    require_installed(ADAPTER, INSTALLED);
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
    let (_tmp, r) = run_client(ADAPTER, "etcd", "pause-holder", BLOCK, &args);
    let ops = r.history().1;
    let (_, _, stale, _) = storage_facts(&ops);
    assert!(stale > 0, "a write accepted after a higher fence's");
    assert!(adapter_events(&ops, "lost") > 0, "no session reported lost");
    let res = r.lock();
    assert_eq!(res["service"]["valid"], true, "{res}");
    assert_eq!(res["resource"]["valid"], false, "{res}");
    assert_eq!(r.code, 1);
    assert_nothing_left(&r.dir);
}

/// With fencing on, the woken holder's write carries the older create
/// revision and the storage refuses it: the resource stays valid.
#[test]
#[ignore = "make test-long: a Go adapter on etcd under pause-holder (12 s)"]
fn go_etcd_pause_holder_fenced_write_bounces() {
    require_installed(ADAPTER, INSTALLED);
    let (_t, r) = cell(ADAPTER, "etcd", "pause-holder", "on", BLOCK);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
    assert!(r.run_json()["counts"]["stale_rejected"].as_u64().unwrap() > 0);
}

/// A killed holder's lease expires with its TTL and its key with it: valid.
#[test]
#[ignore = "make test-long: a Go adapter on etcd under kill-holder (12 s)"]
fn go_etcd_kill_holder_stays_valid() {
    require_installed(ADAPTER, INSTALLED);
    let (_t, r) = cell(ADAPTER, "etcd", "kill-holder", "on", BLOCK);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
}

/// Cut off from the cluster, the holder's probe (a TimeToLive) times out
/// (`info`, the adapter replaced) and its lease expires: valid.
#[test]
#[ignore = "make test-long: a Go adapter on etcd under partition-holder (12 s)"]
fn go_etcd_partition_holder_times_out_and_stays_valid() {
    require_installed(ADAPTER, INSTALLED);
    let (_t, r) = cell(ADAPTER, "etcd", "partition-holder", "on", BLOCK);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.results()["valid"], true);
    assert!(r.run_json()["counts"]["infos"].as_u64().unwrap() > 0);
}

/// On another system the adapter answers `unsupported` with its reason,
/// and the run stops before any server starts (exit 3).
#[test]
#[ignore = "make test-long: needs the Go adapter's build"]
fn go_etcd_refuses_other_systems() {
    require_installed(ADAPTER, INSTALLED);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("redis");
    let r = run(
        "go-etcd-redis",
        &dir,
        &[
            "--system",
            "redis",
            "--client",
            ADAPTER,
            "--time-limit",
            "2",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("declares --system redis unsupported")
            && r.stderr.contains("speaks only etcd"),
        "{}",
        r.stderr
    );
    assert!(!dir.join("history.jsonl").exists());
}

/// `etcdctl ARGS` against `addr`; panics with its stderr on failure.
fn etcdctl(addr: &str, args: &[&str]) {
    let o = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", addr])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// No file under `dir` holds `secret`.
fn nowhere_in(dir: &Path, secret: &str) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            nowhere_in(&p, secret);
        } else if let Ok(b) = std::fs::read(&p) {
            let text = String::from_utf8_lossy(&b);
            assert!(!text.contains(secret), "{} holds the password", p.display());
        }
    }
}

/// An etcd with authentication on (one member the test starts on
/// loopback, `--endpoints`): the adapter logs in as the auth file's
/// `[user]` and is granted; without `--auth` the server refuses every
/// acquire (nothing granted). The password is in no file of either run.
#[test]
#[ignore = "make test-long: a Go adapter on an etcd with users (8 s)"]
fn go_etcd_logs_in_as_the_auth_files_user() {
    require_installed(ADAPTER, INSTALLED);
    let d = tempfile::tempdir().unwrap();
    let (addr, _etcd) = start_etcd(d.path(), 36890, 36891);
    etcdctl(&addr, &["user", "add", &format!("root:{PASSWORD}")]);
    etcdctl(&addr, &["user", "grant-role", "root", "root"]);
    etcdctl(&addr, &["auth", "enable"]);
    let auth = user_auth(d.path(), "root");
    let auth = auth.to_str().unwrap();
    let common = [
        "--system",
        "etcd",
        "--endpoints",
        &addr,
        "--client",
        ADAPTER,
    ];
    let mut args = common.to_vec();
    args.extend(["--auth", auth, "--time-limit", "3", "--seed", "44"]);
    let r = run("go-etcd-user", &d.path().join("user"), &args);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(grants_per_worker(&r.history().1, 5).iter().sum::<usize>() > 0);
    let mut args = common.to_vec();
    args.extend(["--time-limit", "2", "--seed", "44"]);
    let r = run("go-etcd-no-user", &d.path().join("no-user"), &args);
    let ops = r.history().1;
    assert_eq!(grants_per_worker(&ops, 5).iter().sum::<usize>(), 0);
    assert!(
        ops.iter().any(|o| o
            .error
            .as_deref()
            .is_some_and(|e| e.contains("user name is empty"))),
        "no acquire refused for want of a user"
    );
    nowhere_in(&d.path().join("user"), PASSWORD);
    nowhere_in(&d.path().join("no-user"), PASSWORD);
}
