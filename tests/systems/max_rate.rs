//! A load ceiling (trust on the operator's hosts, part 6): `--max-rate
//! OPS` bounds the requests the workers together send to the lock
//! service, read back from the history; `--max-workers` and bad values are
//! refused before anything starts.
//!
//! Ports: the paced run 42100–42199, the unpaced one 42200–42299 (a free
//! base found first).

use crate::run_util::*;
use lockjaw::history::OpType;

const SECOND: u64 = 1_000_000_000;

/// The invoke times of the ops sent to the lock service (the lock workload
/// writes no storage: acquire, release, renew), sorted.
fn service_invokes(r: &Run) -> Vec<u64> {
    let mut t: Vec<u64> = r
        .history()
        .1
        .iter()
        .filter(|o| {
            o.kind == OpType::Invoke && ["acquire", "release", "renew"].contains(&o.f.as_str())
        })
        .map(|o| o.time)
        .collect();
    t.sort_unstable();
    t
}

/// Most of `times` in any closed window of one second.
fn busiest_second(times: &[u64]) -> usize {
    lockjaw::client::pace::busiest(times, SECOND)
}

/// Four workers on one Redis lock, no think time: with `--max-rate 20` no
/// second of the history holds more than 20 + 2 invokes to the service
/// (the grid allows OPS · T + 1 by construction; an invoke is recorded a
/// moment after its slot, so one more is allowed for that delay); without
/// it the same run sends many times more.
#[test]
fn max_rate_bounds_what_the_workers_send_together() {
    let tmp = tempfile::tempdir().unwrap();
    let common = [
        "--system",
        "redis",
        "--workload",
        "lock",
        "--nemesis",
        "none",
        "--concurrency",
        "4",
        "--hold-ms",
        "5",
        "--think-ms",
        "0",
        "--seed",
        "1",
    ];
    let paced: Vec<&str> = [&common[..], &["--max-rate", "20", "--time-limit", "3"]].concat();
    let r = run_local("max-rate", tmp.path(), 42100, &paced);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.run_json()["load"],
        serde_json::json!({"max_rate": 20.0, "max_workers": null})
    );
    let t = service_invokes(&r);
    let most = busiest_second(&t);
    eprintln!("paced: {} invokes, at most {most} in one second", t.len());
    assert!(most <= 22, "{most} invokes in one second at --max-rate 20");
    assert!(
        t.len() >= 20,
        "the paced run still works: {} invokes",
        t.len()
    );
    let free: Vec<&str> = [&common[..], &["--time-limit", "1"]].concat();
    let r = run_local("unpaced", tmp.path(), 42200, &free);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let most_free = busiest_second(&service_invokes(&r));
    eprintln!("unpaced: at most {most_free} in one second");
    assert!(most_free > 100, "without --max-rate: {most_free}");
}

/// Bad values name the flag and exit 3; a run of more workers than
/// `--max-workers` is refused before anything starts.
#[test]
fn bad_ceilings_and_too_many_workers_are_refused() {
    for bad in ["0", "-1", "abc", "inf"] {
        let e = refused(&["--system", "redis", "--max-rate", bad]);
        assert!(e.contains(&format!("--max-rate {bad}: ")), "{e}");
    }
    for bad in ["0", "-2", "x"] {
        let e = refused(&["--system", "redis", "--max-workers", bad]);
        assert!(e.contains(&format!("--max-workers {bad}: ")), "{e}");
    }
    let e = refused(&[
        "--system",
        "redis",
        "--concurrency",
        "5",
        "--max-workers",
        "4",
    ]);
    assert!(e.contains("--max-workers 4: the run has 5 workers"), "{e}");
}
