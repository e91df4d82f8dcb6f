//! The lease guard with renewals (issue 17, item 5): a critical section
//! three leases long, kept alive by renewals every third of the lease, on
//! a single Redis under `partition-holder`, fencing off.
//!
//! Each injection cuts the holder off from Redis right after its read,
//! for 2 leases: its renewals fail, its lease runs out, another worker
//! takes the lock and reads with a higher fence, and the cut-off holder
//! is back before its hold ends. Guard off, it goes on and writes: a stale
//! write the storage accepts. Guard on, its first failed renewal ends the
//! critical section and the write is abandoned: no stale write at all
//! (strict, the safety claim).
//!
//! Ports: one 100-port block per test in 51200-51599 (a free base found
//! first); Toxiproxy and the storage on port 0.

use crate::run_util::*;
use lockjaw::history::{Op, OpType};
use std::collections::BTreeMap;
use std::path::Path;

/// A 300 ms lease renewed every 100 ms through a 900 ms hold (3 × ttl),
/// a 75 ms op timeout, three workers; the holder cut off for 2 leases.
fn files(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    let w = dir.join("renewing.toml");
    std::fs::write(
        &w,
        "name = \"renewing\"\nkind = \"fenced-counter\"\nttl_ms = 300\nhold_ms = 900\n\
         renew = true\nop_timeout_ms = 75\nthink_ms = 10\nconcurrency = 3\n",
    )
    .unwrap();
    let n = dir.join("cut-holder.toml");
    std::fs::write(
        &n,
        "name = \"cut-holder\"\nfault = \"partition-holder\"\ntarget = \"holder\"\n\
         interval_ms = 200\nduration_leases = 2\n",
    )
    .unwrap();
    (w.display().to_string(), n.display().to_string())
}

/// Grants (owners) with a renewal that did not succeed, and of those the
/// ones that renewed again afterwards (the hold went on).
fn failed_renewals(ops: &[Op]) -> (usize, usize) {
    let mut by_owner: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for o in ops
        .iter()
        .filter(|o| o.f == "renew" && o.kind != OpType::Invoke)
    {
        by_owner
            .entry(o.owner.as_deref().unwrap_or(""))
            .or_default()
            .push(o);
    }
    let (mut failed, mut went_on) = (0, 0);
    for renews in by_owner.values_mut() {
        renews.sort_by_key(|o| o.time);
        if let Some(i) = renews.iter().position(|o| o.kind != OpType::Ok) {
            failed += 1;
            went_on += usize::from(i + 1 < renews.len());
        }
    }
    (failed, went_on)
}

/// What one run with the guard on or off did.
struct Outcome {
    stale: u64,
    abandoned: u64,
    injections: usize,
    /// Grants with a failed renewal, and of those the ones renewed again.
    failed: (usize, usize),
}

fn partitioned(guard: &str, block: u16) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let (w, n) = files(tmp.path());
    let args = [
        "--system",
        "redis",
        "--workload",
        &w,
        "--nemesis",
        &n,
        "--fencing",
        "off",
        "--lease-guard",
        guard,
        "--time-limit",
        "5",
        "--seed",
        "17",
    ];
    let r = run_local(&format!("renew-guard-{guard}"), tmp.path(), block, &args);
    assert!(matches!(r.code, 0..=2), "exit {}: {}", r.code, r.stderr);
    let o = Outcome {
        stale: r.lock()["checks"]["stale_writes"]["count"]
            .as_u64()
            .unwrap_or(0),
        abandoned: r.run_json()["counts"]["abandoned_writes"].as_u64().unwrap(),
        injections: r.nemesis()["injections"].as_array().map_or(0, |a| a.len()),
        failed: failed_renewals(&r.history().1),
    };
    assert_nothing_left(&r.dir);
    eprintln!(
        "guard {guard}: {} stale writes accepted, {} abandoned, {} injections, \
         {:?} grants with a failed renewal / renewed after it",
        o.stale, o.abandoned, o.injections, o.failed
    );
    o
}

#[test]
fn renewing_holder_cut_off_guard_off_writes_stale() {
    let o = partitioned("off", 51200);
    assert!(o.injections >= 2, "{} injections", o.injections);
    assert!(o.stale >= 1, "{} stale writes", o.stale);
    assert_eq!(o.abandoned, 0);
    // Fail-open: the hold goes on renewing after a failed renewal.
    assert!(o.failed.0 >= 1 && o.failed.1 >= 1, "{:?}", o.failed);
}

#[test]
fn renewing_holder_cut_off_guard_on_abandons_instead() {
    let o = partitioned("on", 51300);
    assert!(o.injections >= 2, "{} injections", o.injections);
    assert_eq!(o.stale, 0, "the guard lets no stale write through");
    assert!(o.abandoned >= 1, "{} abandoned", o.abandoned);
    // The first failed renewal ended the critical section: no grant
    // renewed again after one.
    assert!(o.failed.0 >= 1, "{:?}", o.failed);
    assert_eq!(
        o.failed.1, 0,
        "holds went on after a failed renewal: {:?}",
        o.failed
    );
}
