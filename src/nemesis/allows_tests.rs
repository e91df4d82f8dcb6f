//! Tests of the allows-rule (src/nemesis/allows.rs) and the tables of
//! expected verdicts it generates for docs/faults.md.

use super::*;
use crate::nemesis::spec;
use crate::service::systems;

/// A system by its name (no code outside src/service/ names a `System`
/// variant, tests included here).
fn sys(name: &str) -> System {
    System::named(name).expect("a system")
}

fn load(name: &str) -> NemesisSpec {
    spec::load(name).unwrap_or_else(|e| panic!("{e}"))
}

fn promise(validity: Option<bool>, renews: Option<bool>) -> Promises {
    Promises {
        own_token_release: Some(true),
        validity_check: validity,
        renews_itself: renews,
    }
}

/// Every promise a library may declare.
fn every_promise() -> Vec<Promises> {
    let v = [Some(true), Some(false), None];
    let mut out = Vec::new();
    for a in v {
        for b in v {
            for c in v {
                out.push(Promises {
                    own_token_release: a,
                    validity_check: b,
                    renews_itself: c,
                });
            }
        }
    }
    out
}

fn on(name: &str, system: System, fencing: bool, p: &Promises, kind: Kind) -> Allowance {
    allows(&load(name), system.name(), fencing, p, kind.name())
}

#[test]
fn no_fault_allows_nothing() {
    let none = load("none");
    for &s in systems() {
        for p in every_promise() {
            for fencing in [false, true] {
                for k in Kind::ALL {
                    let a = allows(&none, s.name(), fencing, &p, k.name());
                    assert_eq!(a, Allowance::Finding, "{s:?} {k:?} {p:?}");
                }
            }
        }
    }
}

#[test]
fn every_allowed_or_undecided_word_says_why() {
    for (name, _) in spec::BUILTIN {
        let n = load(name);
        for &s in systems() {
            for p in every_promise() {
                for fencing in [false, true] {
                    for k in Kind::ALL {
                        match allows(&n, s.name(), fencing, &p, k.name()) {
                            Allowance::Allowed(w) | Allowance::Undecided(w) => {
                                assert!(w.len() > 10, "{name} {s:?} {k:?}: {w:?}")
                            }
                            Allowance::Finding => {}
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn an_unfenced_holder_past_its_lease_may_write_stale_and_a_fenced_one_may_not() {
    let p = builtin_promises(sys("redis"));
    for fault in ["pause-holder", "partition-holder", "delay-storage"] {
        let off = on(fault, sys("redis"), false, &p, Kind::StaleWriteAccepted);
        assert!(matches!(off, Allowance::Allowed(_)), "{fault}: {off:?}");
        let lost = on(fault, sys("redis"), false, &p, Kind::LostUpdates);
        assert!(matches!(lost, Allowance::Allowed(_)), "{fault}: {lost:?}");
        let fenced = on(fault, sys("redis"), true, &p, Kind::StaleWriteAccepted);
        assert_eq!(fenced, Allowance::Finding, "{fault}");
        // The lease ended before anyone else was granted: never two holders.
        assert_eq!(
            on(fault, sys("redis"), false, &p, Kind::TwoHolders),
            Allowance::Finding
        );
    }
    // Redlock's grants carry no fence: fencing cannot refuse the write.
    let r = on(
        "pause-holder",
        sys("redlock"),
        true,
        &p,
        Kind::StaleWriteAccepted,
    );
    assert!(matches!(r, Allowance::Allowed(_)), "{r:?}");
    // A session lock stays with a paused holder: its late write is its own.
    let pg = on(
        "pause-holder",
        sys("postgres"),
        false,
        &p,
        Kind::StaleWriteAccepted,
    );
    assert_eq!(pg, Allowance::Finding);
    // A library that renews by itself keeps its lease while its write is
    // held; one that does not say is not judged.
    let renews = promise(None, Some(true));
    assert_eq!(
        on(
            "delay-storage",
            sys("etcd"),
            false,
            &renews,
            Kind::StaleWriteAccepted
        ),
        Allowance::Finding
    );
    let silent = promise(None, None);
    let a = on(
        "delay-storage",
        sys("redis"),
        false,
        &silent,
        Kind::StaleWriteAccepted,
    );
    assert!(matches!(a, Allowance::Undecided(_)), "{a:?}");
}

#[test]
fn a_server_clock_jump_allows_two_holders_where_it_decides_the_lock() {
    let p = builtin_promises(sys("redis"));
    let two = |name: &str, s: System| on(name, s, false, &p, Kind::TwoHolders);
    assert!(matches!(
        two("clock-jump", sys("redis")),
        Allowance::Allowed(_)
    ));
    assert!(matches!(
        two("clock-jump", sys("redlock")),
        Allowance::Allowed(_)
    ));
    let mut minority = load("clock-jump");
    minority.target = Target::Minority;
    let a = allows(&minority, "redlock", false, &p, "two-holders");
    assert_eq!(
        a,
        Allowance::Finding,
        "a minority's clock cannot give Redlock's lock away"
    );
    // Fences survive a jump.
    assert_eq!(
        on(
            "clock-jump",
            sys("redis"),
            true,
            &p,
            Kind::StaleWriteAccepted
        ),
        Allowance::Finding
    );
}

#[test]
fn a_grant_held_past_its_whole_lease_is_a_finding_for_a_library_that_checks_validity() {
    let mut held = load("delay-grant");
    let lost = |spec: &NemesisSpec, v| {
        allows(
            spec,
            "redlock",
            false,
            &promise(v, None),
            Kind::LostUpdates.name(),
        )
    };
    // Half a lease (the default): the critical section may outlast what
    // was left, so undecided.
    assert!(matches!(lost(&held, Some(true)), Allowance::Undecided(_)));
    held.duration_leases = Some(1.5);
    assert_eq!(lost(&held, Some(true)), Allowance::Finding);
    // A library that does not check, or does not say: as before.
    assert!(matches!(lost(&held, Some(false)), Allowance::Allowed(_)));
    assert!(matches!(lost(&held, None), Allowance::Undecided(_)));
    held.duration_leases = Some(0.99);
    assert!(matches!(lost(&held, Some(true)), Allowance::Undecided(_)));
}

#[test]
fn a_delayed_grant_allows_two_holders_only_without_a_validity_check() {
    let two = |v| {
        on(
            "delay-grant",
            sys("redis"),
            true,
            &promise(v, None),
            Kind::TwoHolders,
        )
    };
    assert!(matches!(two(Some(false)), Allowance::Allowed(_)));
    assert_eq!(two(Some(true)), Allowance::Finding);
    assert!(matches!(two(None), Allowance::Undecided(_)));
    // etcd's lease lives on by keep-alives: a late grant shortens nothing.
    let etcd = on(
        "delay-grant",
        sys("etcd"),
        false,
        &promise(Some(false), None),
        Kind::TwoHolders,
    );
    assert_eq!(etcd, Allowance::Finding);
}

#[test]
fn a_stuck_lock_is_a_finding_under_a_crash_and_data_loss_allows_two_holders() {
    let p = builtin_promises(sys("redis"));
    for fault in ["kill-holder", "drop-release", "pause-holder"] {
        assert_eq!(
            on(fault, sys("redis"), false, &p, Kind::StuckLock),
            Allowance::Finding
        );
    }
    let empty = on("restart-empty", sys("redlock"), false, &p, Kind::TwoHolders);
    assert!(matches!(empty, Allowance::Allowed(_)), "{empty:?}");
    let delayed = on(
        "restart-empty-delayed",
        sys("redlock"),
        false,
        &p,
        Kind::TwoHolders,
    );
    assert_eq!(delayed, Allowance::Finding);
    let aof = on("restart-aof", sys("redlock"), false, &p, Kind::TwoHolders);
    assert_eq!(
        aof,
        Allowance::Finding,
        "appendfsync always keeps every grant"
    );
    assert!(matches!(
        on(
            "failover",
            sys("sentinel"),
            true,
            &p,
            Kind::StaleWriteAccepted
        ),
        Allowance::Allowed(_)
    ));
    assert_eq!(
        on(
            "failover-coordinated",
            sys("redis-cluster"),
            true,
            &p,
            Kind::TwoHolders
        ),
        Allowance::Finding
    );
    // A quorum system keeps its guarantee under node faults.
    let etcd = builtin_promises(sys("etcd"));
    assert_eq!(
        on("pause-node", sys("etcd"), true, &etcd, Kind::TwoHolders),
        Allowance::Finding
    );
}

#[test]
fn a_pair_is_allowed_by_either_fault_a_finding_by_both_else_undecided() {
    let a = Allowance::Allowed("a reason".into());
    let f = Allowance::Finding;
    let u = Allowance::Undecided("a doubt".into());
    let n = ["x", "y"];
    assert_eq!(combine(&a, &f, n), Allowance::Allowed("x: a reason".into()));
    assert_eq!(combine(&f, &a, n), Allowance::Allowed("y: a reason".into()));
    assert_eq!(combine(&u, &a, n), Allowance::Allowed("y: a reason".into()));
    assert_eq!(combine(&f, &f, n), Allowance::Finding);
    assert_eq!(
        combine(&u, &f, n),
        Allowance::Undecided("x: a doubt".into())
    );
    assert_eq!(
        combine(&f, &u, n),
        Allowance::Undecided("y: a doubt".into())
    );
    // K2 on etcd: the cut-off holder's lease may end, so unfenced stale
    // writes are allowed by the pair; fenced, neither fault allows one.
    let etcd = builtin_promises(sys("etcd"));
    let k2 = |fencing| {
        on(
            "k2-etcd",
            sys("etcd"),
            fencing,
            &etcd,
            Kind::StaleWriteAccepted,
        )
    };
    assert!(matches!(k2(false), Allowance::Allowed(w) if w.starts_with("partition-holder")));
    assert_eq!(k2(true), Allowance::Finding);
    // Over every shipped file, system and promise: the pair agrees with
    // its parts.
    let pair = load("together");
    let [x, y] = crate::nemesis::together::parts(&pair).unwrap();
    for &s in systems() {
        for p in every_promise() {
            for k in Kind::ALL {
                let one = |n: &NemesisSpec| allows(n, s.name(), false, &p, k.name());
                let (ax, ay, both) = (one(&x), one(&y), one(&pair));
                let allowed = |a: &Allowance| matches!(a, Allowance::Allowed(_));
                assert_eq!(allowed(&both), allowed(&ax) || allowed(&ay), "{s:?} {k:?}");
                let finding = ax == Allowance::Finding && ay == Allowance::Finding;
                assert_eq!(both == Allowance::Finding, finding, "{s:?} {k:?}");
            }
        }
    }
}

#[test]
fn what_the_rule_is_not_told_is_undecided() {
    let p = Promises::default();
    let n = load("pause-holder");
    assert!(matches!(
        allows(&n, "redis", false, &p, "stale"),
        Allowance::Undecided(_)
    ));
    assert!(matches!(
        allows(&n, "mongo", false, &p, "two-holders"),
        Allowance::Undecided(_)
    ));
    assert!(matches!(
        allows(&load("mixed"), "redis", false, &p, "two-holders"),
        Allowance::Undecided(_)
    ));
}

#[test]
fn docs_faults_md_carries_the_current_verdict_tables() {
    let page = include_str!("../../docs/faults.md");
    for (name, table) in [("verdict", verdict_table()), ("promises", promises_table())] {
        assert!(
            page.contains(&table),
            "docs/faults.md's {name} table is out of date (hint: paste this):\n{table}"
        );
    }
}
