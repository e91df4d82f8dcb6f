//! Client clock faults (issue 33): `client-clock-jump` moves the lock
//! holder's wall clock (its worker and its adapter run under libfaketime)
//! and nothing else. The clock-probe adapter
//! (`tests/adapters/clock-probe/adapter`) logs `time.time() -
//! time.monotonic()` with every request: the holder's moves by the offset,
//! the monotonic clock does not. lockjaw's own client times leases with
//! the monotonic clock, so its run stays valid.
//!
//! Ports: the first free 10-port base from 42800 (adapter) and 42900
//! (built-in); Toxiproxy and the storage on port 0.

use crate::run_util::*;
use std::collections::BTreeSet;
use std::path::Path;

/// The distinct `wall_minus_mono_ms` values a worker's adapter logged.
fn wall_offsets(log: &Path) -> BTreeSet<i64> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split("wall_minus_mono_ms=").nth(1))
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

#[test]
fn client_clock_jump_moves_the_holders_wall_clock_only() {
    let tmp = tempfile::tempdir().unwrap();
    let adapter = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adapters/clock-probe/adapter");
    let r = run_local(
        "client-clock-jump",
        tmp.path(),
        42800,
        &[
            "--system",
            "redis",
            "--client",
            adapter.to_str().unwrap(),
            "--workload",
            "lock",
            "--nemesis",
            "client-clock-jump",
            "--ttl-ms",
            "1000",
            "--hold-ms",
            "300",
            "--concurrency",
            "2",
            "--time-limit",
            "3",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let inj = injections(&r);
    assert!(!inj.is_empty(), "no injection");
    let offset = inj[0]["target"]["offset_ms"].as_i64().unwrap();
    assert_eq!(offset, 2000, "2 leases by default");
    let holders: BTreeSet<u64> = inj
        .iter()
        .map(|i| i["target"]["holder"]["slot"].as_u64().unwrap())
        .collect();
    for slot in 0..2u64 {
        let seen = wall_offsets(&r.dir.join(format!("logs/worker-{slot}.log")));
        assert!(!seen.is_empty(), "worker {slot} logged no clock line");
        // Within a few ms of each other, or the offset apart.
        let (lo, hi) = (*seen.first().unwrap(), *seen.last().unwrap());
        if holders.contains(&slot) {
            assert!((hi - lo - offset).abs() < 100, "worker {slot}: {seen:?}");
        } else {
            assert!(
                hi - lo < 100,
                "worker {slot} was never the holder: {seen:?}"
            );
        }
    }
    // Every control file is back at the real time.
    for slot in 0..2 {
        let f = r.dir.join(format!("faketime/worker-{slot}.offset"));
        assert_eq!(std::fs::read_to_string(&f).unwrap().trim(), "+0", "{f:?}");
    }
    assert_nothing_left(&r.dir);
}

#[test]
fn builtin_client_stays_valid_under_client_clock_jump() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "builtin-client-clock-jump",
        tmp.path(),
        42900,
        &[
            "--system",
            "redis",
            "--nemesis",
            "client-clock-jump",
            "--fencing",
            "off",
            "--ttl-ms",
            "1000",
            "--hold-ms",
            "300",
            "--time-limit",
            "3",
        ],
    );
    assert!(!injections(&r).is_empty(), "no injection");
    assert_eq!(r.lock()["valid"], true, "{}", r.stdout);
    assert_eq!(r.code, 0);
    assert_nothing_left(&r.dir);
}
