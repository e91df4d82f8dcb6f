//! Issue 29, "a violation the lock checker forgets": the lock checker
//! sweeps its state every 4,096 events, and a lease past its certain end
//! must not be forgotten while a later op of its owner can still prove
//! something about it. The same small history, padded with failed
//! acquires of a bystander so that a sweep falls anywhere (before,
//! between or after the ops that matter), must get the same figures:
//! the overlap a late renew proves (rules 1 and 2), the stale holders
//! (rule 6) and the unprotected writes (rule 9).

use lockjaw::check::lock::{check_ops_with, LockOptions, LockReport};
use lockjaw::check::Validity;
use lockjaw::history::{Meta, Op};
use serde_json::{json, Value};

const MS: u64 = 1_000_000;

/// A history being written: ops get their index in order.
#[derive(Default)]
struct H {
    ops: Vec<Value>,
    /// Redis-like: the acquire sets the TTL (else etcd-like).
    sets_ttl: bool,
    /// The meta record's workload: `lock`, or `fenced-counter` for the
    /// histories with a write.
    workload: &'static str,
}

impl H {
    fn op(&mut self, time: u64, process: Value, kind: &str, f: &str, extra: Value) {
        let mut o = json!({"index": self.ops.len(), "time": time, "process": process,
            "type": kind, "f": f});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        self.ops.push(o);
    }

    /// An invoke at `t.0` and its completion `kind` at `t.1`.
    fn pair(&mut self, p: Value, f: &str, t: (u64, u64), kind: &str, inv: Value, done: Value) {
        self.op(t.0, p.clone(), "invoke", f, inv);
        self.op(t.1, p, kind, f, done);
    }

    /// `n` acquires of a bystander refused because the lock is held,
    /// from `t` on, 10 µs apart.
    fn pad(&mut self, n: u64, t: u64) -> u64 {
        for k in 0..n {
            let at = t + k * 10_000;
            let key = json!({"key": "lock", "owner": "P9"});
            let fail = json!({"key": "lock", "owner": "P9", "error": "held"});
            self.pair(json!(9), "acquire", (at, at + 5_000), "fail", key, fail);
        }
        t + n * 10_000
    }

    fn check(self) -> LockReport {
        self.check_with(&LockOptions::default())
    }

    fn check_with(self, opts: &LockOptions) -> LockReport {
        let meta: Meta = serde_json::from_value(json!({"type": "meta", "checkers": ["lock"],
            "workload": self.workload, "acquire_sets_ttl": self.sets_ttl}))
        .unwrap();
        let ops: Vec<Op> = self
            .ops
            .into_iter()
            .map(|o| serde_json::from_value(o).unwrap())
            .collect();
        check_ops_with(&meta, opts, ops.into_iter().map(Ok)).unwrap()
    }
}

fn lease(ms: u64) -> Value {
    json!({"owner": "L1", "lease_ms": ms})
}

fn acq(owner: &str, fence: u64) -> (Value, Value) {
    let inv = json!({"key": "lock", "owner": owner, "fence": fence});
    let mut ok = inv.clone();
    ok["lease_ms"] = json!(1000);
    (inv, ok)
}

/// L1 takes the lock (lease 1,000 ms, certainly over by 1.023 s) and
/// pauses; L2 takes it at 1.5 s, after `pre` refused acquires. Then `n`
/// more refused acquires. `late` then follows from L1's side.
fn history(pre: u64, n: u64, late: impl FnOnce(&mut H, u64)) -> LockReport {
    history_with(&LockOptions::default(), false, pre, n, late)
}

fn history_with(
    opts: &LockOptions,
    sets_ttl: bool,
    pre: u64,
    n: u64,
    late: impl FnOnce(&mut H, u64),
) -> LockReport {
    let mut h = H {
        sets_ttl,
        workload: "lock",
        ..H::default()
    };
    h.pair(
        json!("1-lease"),
        "renew",
        (0, 5 * MS),
        "ok",
        json!({"owner": "L1"}),
        lease(1000),
    );
    let (i, o) = acq("L1", 1);
    h.pair(json!(1), "acquire", (10 * MS, 20 * MS), "ok", i, o);
    h.pad(pre, 30 * MS);
    let (i, o) = acq("L2", 2);
    h.pair(json!(2), "acquire", (1500 * MS, 1510 * MS), "ok", i, o);
    let rel = json!({"key": "lock", "owner": "L2"});
    h.pair(
        json!(2),
        "release",
        (1520 * MS, 1530 * MS),
        "ok",
        rel.clone(),
        rel,
    );
    let t = h.pad(n, 1600 * MS);
    late(&mut h, t + MS);
    h.check_with(opts)
}

/// L1 wakes and releases.
fn release_l1(h: &mut H, t: u64) {
    let rel = json!({"key": "lock", "owner": "L1"});
    h.pair(json!(1), "release", (t, t + MS), "ok", rel.clone(), rel);
}

/// Paddings that put a sweep before, inside and after the ops that matter.
/// (the N: lockjaw said valid for 2047, 2100 and 4100).
const N: [u64; 8] = [0, 1000, 2046, 2047, 2048, 2100, 4100, 5000];

#[test]
fn a_late_renew_proves_the_overlap_wherever_the_sweep_falls() {
    for pre in [0, 3] {
        for n in N {
            let r = history(pre, n, late_renew);
            let ctx = format!("pre {pre}, n {n}:\n{}", r.summary_text());
            assert_eq!(r.valid, Validity::False, "{ctx}");
            assert_eq!(r.checks.safety.count, 1, "{ctx}");
            let s = &r.stale_holders;
            assert_eq!((s.stale, s.possibly_stale), (0, 0), "{ctx}");
        }
    }
}

/// L1's keep-alive succeeds after it wakes: its lease was valid until
/// t + 997 ms, past L2's grant.
fn late_renew(h: &mut H, t: u64) {
    let o = json!({"owner": "L1"});
    h.pair(json!("1-lease"), "renew", (t, t + MS), "ok", o, lease(1000));
    release_l1(h, t + 2 * MS);
}

#[test]
fn a_late_renew_of_a_redis_key_proves_the_overlap_wherever_the_sweep_falls() {
    for n in N {
        let r = history_with(&LockOptions::default(), true, 0, n, |h, t| {
            // The woken holder's PEXPIRE on its key succeeds (a tokenless
            // PEXPIRE, as in tests/adapters/broken-redis).
            let o = json!({"owner": "L1", "key": "lock"});
            let mut ok = o.clone();
            ok["lease_ms"] = json!(1000);
            h.pair(json!("1-lease"), "renew", (t, t + MS), "ok", o, ok);
            release_l1(h, t + 2 * MS);
        });
        let ctx = format!("n {n}:\n{}", r.summary_text());
        assert!(r.params.acquire_sets_ttl, "{ctx}");
        assert_eq!(r.checks.safety.count, 1, "{ctx}");
    }
}

#[test]
fn a_killed_holder_is_closed_and_stays_a_stale_holder() {
    for n in N {
        let r = history(0, n, |h, t| {
            let kill = json!({"value": {"fault": "kill-holder", "owner": "L1"}});
            h.pair(
                json!("nemesis"),
                "start",
                (t, t),
                "info",
                kill.clone(),
                kill,
            );
            let (i, o) = acq("L3", 3);
            h.pair(json!(3), "acquire", (t + MS, t + 2 * MS), "ok", i, o);
        });
        let ctx = format!("n {n}:\n{}", r.summary_text());
        assert_eq!(r.valid, Validity::True, "{ctx}");
        let s = &r.stale_holders;
        assert_eq!((s.stale, s.possibly_stale), (2, 0), "{ctx}");
    }
}

#[test]
fn a_memory_bound_that_forgets_a_waiting_overlap_makes_it_unknown() {
    let opts = LockOptions {
        max_waiting: Some(1),
        ..LockOptions::default()
    };
    // No sweep before the renew: the bound never bites.
    let r = history_with(&opts, false, 0, 10, late_renew);
    assert_eq!(r.checks.safety.count, 1, "{}", r.summary_text());
    // A sweep while L1's overlap waits: closed early, so unknown.
    let r = history_with(&opts, false, 0, 5000, late_renew);
    let ctx = r.summary_text();
    assert_eq!(r.valid, Validity::Unknown, "{ctx}");
    assert_eq!(r.checks.safety.valid, Validity::Unknown, "{ctx}");
    assert!(r.stale_holders.unknown.is_some(), "{ctx}");
    assert!(ctx.contains("memory bound"), "{ctx}");
}

#[test]
fn a_stale_holder_stays_one_until_it_releases() {
    for n in N {
        let r = history(0, n, |h, t| {
            // L3 takes the lock while L1 (paused, never released) is
            // stale: a second stale pair.
            let (i, o) = acq("L3", 3);
            h.pair(json!(3), "acquire", (t, t + MS), "ok", i, o);
            let rel = json!({"key": "lock", "owner": "L3"});
            h.pair(
                json!(3),
                "release",
                (t + 2 * MS, t + 3 * MS),
                "ok",
                rel.clone(),
                rel,
            );
            release_l1(h, t + 4 * MS);
        });
        let ctx = format!("n {n}:\n{}", r.summary_text());
        assert_eq!(r.valid, Validity::True, "{ctx}");
        let s = &r.stale_holders;
        assert_eq!((s.stale, s.possibly_stale), (2, 0), "{ctx}");
        assert!(
            s.list.iter().all(|o| o.holder_release_ns.is_some()),
            "{ctx}"
        );
    }
}

#[test]
fn a_write_after_the_lease_is_judged_wherever_the_sweep_falls() {
    for n in N {
        let r = history(0, n, |h, t| {
            // L1 wakes and writes: certainly after its lease.
            h.workload = "fenced-counter";
            let w = json!({"key": "counter", "owner": "L1", "fence": 1, "value": 1});
            h.pair(json!(1), "write", (t, t + MS), "ok", w.clone(), w);
            let rd = json!({"key": "counter", "owner": "L1"});
            let mut v = rd.clone();
            v["value"] = json!(1);
            h.pair(json!(1), "read", (t + 2 * MS, t + 3 * MS), "ok", rd, v);
            release_l1(h, t + 4 * MS);
        });
        let ctx = format!("n {n}:\n{}", r.summary_text());
        let u = r.unprotected_writes.as_ref().expect("a write");
        let got = (
            u.writes,
            u.after_lease_end,
            u.past_lower_bound,
            u.unattributed,
        );
        assert_eq!(got, (1, Some(1), 1, 0), "{ctx}");
    }
}

/// An etcd lease outlives its grant: L1 writes after its last proof,
/// releases, and only later its keep-alive succeeds again, which proves the
/// lease held at the write. Wherever the sweep falls, the write is not
/// past the lower bound.
#[test]
fn a_keep_alive_after_the_release_still_clears_an_earlier_write() {
    for n in N {
        let mut h = H {
            workload: "fenced-counter",
            ..H::default()
        };
        let o = json!({"owner": "L1"});
        h.pair(
            json!("1-lease"),
            "renew",
            (0, 5 * MS),
            "ok",
            o.clone(),
            lease(1000),
        );
        let (i, ok) = acq("L1", 1);
        h.pair(json!(1), "acquire", (10 * MS, 20 * MS), "ok", i, ok);
        // Past the lower bound (0.997 s), before the upper (1.023 s).
        let w = json!({"key": "counter", "owner": "L1", "fence": 1, "value": 1});
        h.pair(
            json!(1),
            "write",
            (1000 * MS, 1001 * MS),
            "ok",
            w.clone(),
            w,
        );
        let rd = json!({"key": "counter", "owner": "L1"});
        let mut v = rd.clone();
        v["value"] = json!(1);
        h.pair(json!(1), "read", (1002 * MS, 1003 * MS), "ok", rd, v);
        release_l1(&mut h, 1004 * MS);
        let t = h.pad(n, 1100 * MS);
        h.pair(json!("1-lease"), "renew", (t, t + MS), "ok", o, lease(1000));
        let r = h.check();
        let ctx = format!("n {n}:\n{}", r.summary_text());
        let u = r.unprotected_writes.as_ref().expect("a write");
        let got = (
            u.writes,
            u.after_lease_end,
            u.past_lower_bound,
            u.unattributed,
        );
        assert_eq!(got, (1, Some(0), 0, 0), "{ctx}");
    }
}

/// The storage order (check 4) stops waiting for a request running longer
/// than the reorder window; if it then completes with a `seq` already
/// passed, its own check is skipped. That is state dropped to bound
/// memory, so the check is unknown, never valid.
#[test]
fn a_request_whose_stale_write_check_was_skipped_makes_it_unknown() {
    let mut h = H {
        workload: "fenced-counter",
        ..H::default()
    };
    let (i, o) = acq("L1", 1);
    h.pair(json!(1), "acquire", (0, MS), "ok", i, o);
    let w =
        |seq: u64, v: u64| json!({"key": "c", "owner": "L1", "fence": 1, "seq": seq, "value": v});
    // Write 1 runs from 2 ms to 20 s; writes 2 and 3 complete meanwhile.
    h.op(2 * MS, json!(2), "invoke", "write", w(1, 1));
    h.pair(
        json!(3),
        "write",
        (1000 * MS, 2000 * MS),
        "ok",
        w(2, 2),
        w(2, 2),
    );
    h.pair(
        json!(4),
        "write",
        (11_000 * MS, 11_100 * MS),
        "ok",
        w(3, 3),
        w(3, 3),
    );
    h.op(20_000 * MS, json!(2), "ok", "write", w(1, 1));
    let rd = json!({"key": "c", "owner": "L1"});
    let mut v = rd.clone();
    v["value"] = json!(3);
    h.pair(json!(3), "read", (21_000 * MS, 21_001 * MS), "ok", rd, v);
    let r = h.check();
    let ctx = r.summary_text();
    let s = &r.checks.stale_writes;
    assert_eq!(s.counts.get("unordered"), Some(&1), "{ctx}");
    assert_eq!(s.valid, Validity::Unknown, "{ctx}");
}
