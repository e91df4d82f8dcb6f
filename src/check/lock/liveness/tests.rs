//! Unit tests of the liveness figures: the ε boundary, what ends a hold
//! (release ok or info, death, not a failed release or another owner's),
//! what resets it (a grant), and when a figure is unknown or not applicable.

use super::super::{check_ops, Figure, Liveness, StuckLock};
use crate::history::{Meta, Op};
use serde_json::{json, Value};

const MS: u64 = 1_000_000;

/// A history: the meta record's extra fields, then (invoke ns, done ns,
/// process, f, completion type, fields of both lines, fields of the
/// completion only).
struct H {
    meta: Value,
    ops: Vec<Op>,
}

impl H {
    fn new(meta: Value) -> H {
        let mut m = json!({"workload": "lock", "acquire_sets_ttl": true, "op_timeout_ms": 500});
        for (k, v) in meta.as_object().unwrap() {
            m[k] = v.clone();
        }
        H {
            meta: m,
            ops: Vec::new(),
        }
    }

    fn op(mut self, t: (u64, u64), p: Value, f: &str, kind: &str, both: Value, done: Value) -> H {
        let n = self.ops.len() as u64;
        let mut a =
            json!({"index": n, "time": t.0, "process": p, "type": "invoke", "f": f, "key": "lock"});
        for (k, v) in both.as_object().unwrap() {
            a[k] = v.clone();
        }
        let mut b = a.clone();
        b["index"] = json!(n + 1);
        b["time"] = json!(t.1);
        b["type"] = json!(kind);
        for (k, v) in done.as_object().unwrap() {
            b[k] = v.clone();
        }
        self.ops.push(serde_json::from_value(a).unwrap());
        self.ops.push(serde_json::from_value(b).unwrap());
        self
    }

    /// `owner` granted at `t` ms with a lease of 1000 ms.
    fn grant(self, t: u64, p: i64, owner: &str) -> H {
        let done = json!({"owner": owner, "lease_ms": 1000});
        self.op(
            (t * MS, t * MS + MS),
            json!(p),
            "acquire",
            "ok",
            json!({}),
            done,
        )
    }

    /// `owner` releases at `t` ms, completing `kind` at `t + 10` ms.
    fn release(self, t: u64, p: i64, owner: &str, kind: &str) -> H {
        let both = json!({"owner": owner});
        self.op(
            (t * MS, (t + 10) * MS),
            json!(p),
            "release",
            kind,
            both,
            json!({}),
        )
    }

    /// An acquire refused `held`, invoked at `ns`.
    fn refused(self, ns: u64, p: i64) -> H {
        let done = json!({"error": "held"});
        self.op((ns, ns + MS), json!(p), "acquire", "fail", json!({}), done)
    }

    fn fault(mut self, t: u64, fault: &str, owner: &str) -> H {
        let v = json!({"fault": fault, "owner": owner, "id": 1});
        for kind in ["invoke", "info"] {
            let n = self.ops.len();
            let op = json!({"index": n, "time": t * MS, "process": "nemesis", "type": kind, "f": "start", "value": v});
            self.ops.push(serde_json::from_value(op).unwrap());
        }
        self
    }

    fn live(self) -> Liveness {
        let meta: Meta = serde_json::from_value(self.meta).unwrap();
        let r = check_ops(&meta, self.ops.into_iter().map(Ok)).unwrap();
        r.liveness.unwrap()
    }

    fn stuck(self) -> StuckLock {
        match self.live().stuck_lock {
            Figure::Value(v) => v,
            other => panic!("{other:?}"),
        }
    }
}

/// The release of `a` completes at 110 ms: lease 1000 ms × 1.001 + ε
/// 500 ms later is 1611 ms.
const EDGE: u64 = 1611 * MS;

#[test]
fn an_acquire_at_exactly_lease_plus_epsilon_is_not_stuck_one_ns_later_it_is() {
    let h = |ns| {
        H::new(json!({}))
            .grant(0, 1, "a")
            .release(100, 1, "a", "ok")
            .refused(ns, 2)
            .stuck()
            .count
    };
    assert_eq!(h(EDGE), 0);
    assert_eq!(h(EDGE + 1), 1);
}

#[test]
fn an_info_release_ends_the_hold_a_failed_one_does_not() {
    let h = |kind| {
        H::new(json!({}))
            .grant(0, 1, "a")
            .release(100, 1, "a", kind)
            .refused(EDGE + MS, 2)
            .stuck()
    };
    let s = h("info");
    assert_eq!(
        (s.count, s.witnesses[0].after.as_str()),
        (1, "release-info")
    );
    assert_eq!(h("fail").count, 0);
}

#[test]
fn a_killed_holder_ends_the_hold_other_faults_and_owners_do_not() {
    let h = |fault, owner| {
        H::new(json!({}))
            .grant(0, 1, "a")
            .fault(110, fault, owner)
            .refused(EDGE + MS, 2)
            .stuck()
    };
    let s = h("kill-holder", "a");
    assert_eq!((s.count, s.witnesses[0].after.as_str()), (1, "death"));
    assert_eq!(s.witnesses[0].end_op, None);
    assert_eq!(h("pause-holder", "a").count, 0);
    assert_eq!(h("kill-holder", "b").count, 0);
}

#[test]
fn a_grant_in_between_resets_and_another_owners_release_does_not_end_the_hold() {
    let s = H::new(json!({}))
        .grant(0, 1, "a")
        .release(100, 1, "a", "ok")
        .grant(1200, 3, "b")
        .release(1300, 1, "a", "ok")
        .refused(5000 * MS, 2)
        .stuck();
    assert_eq!((s.count, s.stretches), (0, 0));
    // Two stretches on the same key: each ends at the next grant.
    let s = H::new(json!({}))
        .grant(0, 1, "a")
        .release(100, 1, "a", "info")
        .refused(2000 * MS, 2)
        .refused(2500 * MS, 2)
        .grant(3000, 3, "b")
        .release(3100, 3, "b", "ok")
        .refused(6000 * MS, 2)
        .stuck();
    assert_eq!((s.count, s.stretches, s.longest_ms), (3, 2, 2890.0));
    assert_eq!(s.witnesses[0].acquires, 2);
}

#[test]
fn without_the_op_timeout_in_the_meta_epsilon_is_the_checkers() {
    let mut h = H::new(json!({}));
    h.meta.as_object_mut().unwrap().remove("op_timeout_ms");
    let s = h
        .grant(0, 1, "a")
        .release(100, 1, "a", "ok")
        .refused(1113 * MS, 2)
        .stuck();
    // 110 ms + 1001 ms + ε 2 ms = 1113 ms: not after it.
    assert_eq!(
        (s.count, s.epsilon_ms, s.epsilon_from.as_str()),
        (0, 2.0, "epsilon_ms")
    );
}

#[test]
fn an_adapter_with_some_renewals_makes_stuck_unknown_not_orphans() {
    let l = H::new(json!({"client": {"renewals": "some"}}))
        .grant(0, 1, "a")
        .release(100, 1, "a", "ok")
        .refused(5000 * MS, 2)
        .live();
    assert!(matches!(&l.stuck_lock, Figure::Unknown { reason } if reason.contains("only some")));
    // (Zombie time too, where there are storage requests: see
    // tests/check/liveness.rs.)
    assert!(matches!(l.orphaned_renewals, Figure::Value(_)));
}

#[test]
fn a_lock_without_lease_or_a_session_lease_has_no_stuck_figure() {
    let done = json!({"owner": "a"});
    let l = H::new(json!({}))
        .op((0, MS), json!(1), "acquire", "ok", json!({}), done)
        .release(100, 1, "a", "ok")
        .refused(5000 * MS, 2)
        .live();
    assert!(
        matches!(&l.stuck_lock, Figure::NotApplicable { reason } if reason.contains("no lease"))
    );
    assert!(matches!(l.zombie_time, Figure::NotApplicable { .. }));
    let done = json!({"owner": "a", "lease_ms": 0});
    let l = H::new(json!({}))
        .op((0, MS), json!(1), "acquire", "ok", json!({}), done)
        .live();
    assert!(matches!(&l.stuck_lock, Figure::Unknown { reason } if reason.contains("session")));
}

#[test]
fn a_renewal_after_the_owner_acquired_again_is_no_orphan() {
    let renew = |h: H, t: u64| {
        let both = json!({"owner": "a"});
        let done = json!({"lease_ms": 1000});
        h.op(
            (t * MS, t * MS + MS),
            json!("1-lease"),
            "renew",
            "ok",
            both,
            done,
        )
    };
    let h = H::new(json!({}))
        .grant(0, 1, "a")
        .release(100, 1, "a", "ok");
    let h = renew(h, 200).grant(300, 1, "a");
    let l = renew(h, 400).live();
    match l.orphaned_renewals {
        Figure::Value(o) => {
            assert_eq!(o.count, 1);
            assert_eq!(o.witnesses[0].renew_invoked_ns, 200 * MS);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_request_after_its_lease_was_forgotten_still_counts() {
    use super::super::lease::Lease;
    use super::super::zombie::{LastRequest, Zombie};
    let mut l = Lease::new("a".into(), Some(0));
    l.upper = Some(1000 * MS);
    l.last_request = Some(LastRequest {
        inv: 500 * MS,
        op: 3,
        key: 0,
    });
    let mut z = Zombie::default();
    z.judge(&l);
    z.late_request(
        &"a".into(),
        LastRequest {
            inv: 1800 * MS,
            op: 9,
            key: 0,
        },
        2000 * MS,
    );
    let mut keys = super::super::event::Keys::default();
    keys.id("counter");
    let t = z.finish(&keys);
    assert_eq!((t.total_ms, t.holders, t.judged), (800.0, 1, 1));
    assert_eq!(
        (t.worst[0].last_request_op, t.worst[0].key.as_str()),
        (9, "counter")
    );
}

/// Issue 29: a Redis `pause-node` run counted 498 stuck acquires with no
/// lost release: timed-out acquires (`info`) had set the key late. After
/// one, refusals are counted apart until the next grant.
#[test]
fn refusals_after_an_acquire_of_unknown_outcome_are_counted_apart() {
    let s = H::new(json!({}))
        .grant(0, 1, "a")
        .release(100, 1, "a", "ok")
        .op(
            (200 * MS, 700 * MS),
            json!(4),
            "acquire",
            "info",
            json!({}),
            json!({}),
        )
        .refused(2000 * MS, 2)
        .refused(2500 * MS, 2)
        .grant(3000, 3, "b")
        .release(3100, 3, "b", "ok")
        .refused(6000 * MS, 2)
        .stuck();
    assert_eq!((s.count, s.after_unknown_acquire, s.stretches), (1, 2, 1));
}

/// An acquire invoked long after the holder's end but refused after a
/// new grant completed is not stuck: the grant explains the refusal.
#[test]
fn a_refusal_completed_after_a_new_grant_is_not_stuck() {
    let held = json!({"error": "held"});
    let s = H::new(json!({}))
        .grant(0, 1, "a")
        .release(100, 1, "a", "ok")
        .op(
            (2000 * MS, 3500 * MS),
            json!(2),
            "acquire",
            "fail",
            json!({}),
            held,
        )
        .grant(3000, 3, "b")
        .stuck();
    assert_eq!((s.count, s.after_unknown_acquire), (0, 0));
}
