//! One test per rule of [`super::decide`].

use super::*;

fn facts() -> RunFacts {
    RunFacts {
        checks: Validity::True,
        check_errors: vec![],
        workload: Kind::FencedCounter,
        locks: true,
        nemesis: Some(NemesisFacts {
            injections: 3,
            landed: 3,
            errors: vec![],
            not_started: 0,
        }),
        grants: 412,
        writes: 1206,
        require_landed: None,
    }
}

#[test]
fn a_run_that_tested_something_is_valid_and_says_what_it_covers() {
    let v = decide(&facts());
    assert_eq!(v.valid, Validity::True);
    assert_eq!(
        v.line(),
        "valid: 3 of 3 faults landed, 412 grants, 1,206 protected writes"
    );
    assert!(v.unknown.is_empty() && v.warnings.is_empty(), "{v:?}");
}

#[test]
fn a_nemesis_error_makes_the_run_unknown() {
    let mut f = facts();
    f.nemesis.as_mut().unwrap().errors = vec!["cannot pause worker 1: gone".into()];
    let v = decide(&f);
    assert_eq!(v.valid, Validity::Unknown);
    assert!(
        v.unknown[0].contains("the nemesis failed: cannot pause worker 1"),
        "{v:?}"
    );
}

#[test]
fn a_nemesis_that_applied_nothing_makes_the_run_unknown() {
    let mut f = facts();
    f.nemesis = Some(NemesisFacts::default());
    let v = decide(&f);
    assert_eq!(v.valid, Validity::Unknown);
    assert_eq!(v.unknown, ["the nemesis applied none of its faults"]);
    assert!(v.line().contains("0 of 0 faults landed"), "{}", v.line());
}

#[test]
fn nemesis_none_never_makes_the_run_unknown() {
    let mut f = facts();
    f.nemesis = None;
    f.require_landed = Some(2);
    let v = decide(&f);
    assert_eq!(v.valid, Validity::True);
    assert_eq!(
        v.line(),
        "valid: no faults (nemesis none), 412 grants, 1,206 protected writes"
    );
}

#[test]
fn no_grant_makes_a_lock_run_unknown() {
    for kind in [Kind::Lock, Kind::Leader, Kind::FencedCounter, Kind::Jobs] {
        let mut f = facts();
        f.workload = kind;
        f.grants = 0;
        f.writes = 0;
        let v = decide(&f);
        assert_eq!(v.valid, Validity::Unknown, "{kind:?}");
        assert!(v.unknown[0].starts_with("no acquire succeeded"), "{v:?}");
    }
}

#[test]
fn no_protected_write_makes_a_writing_run_unknown_but_not_a_lock_run() {
    let mut f = facts();
    f.writes = 0;
    let v = decide(&f);
    assert_eq!(v.valid, Validity::Unknown);
    assert_eq!(v.unknown, ["no write succeeded (0 protected writes)"]);
    f.workload = Kind::Lock;
    let v = decide(&f);
    assert_eq!(v.valid, Validity::True, "{v:?}");
    assert_eq!(v.line(), "valid: 3 of 3 faults landed, 412 grants");
}

#[test]
fn a_system_without_a_lock_needs_no_grant_only_writes() {
    let mut f = facts();
    f.locks = false;
    f.grants = 0;
    let v = decide(&f);
    assert_eq!(v.valid, Validity::True, "{v:?}");
    assert_eq!(
        v.line(),
        "valid: 3 of 3 faults landed, 1,206 protected writes"
    );
    f.writes = 0;
    assert_eq!(
        decide(&f).unknown,
        ["no write succeeded (0 protected writes)"]
    );
}

#[test]
fn no_applied_write_makes_a_register_run_unknown() {
    let mut f = facts();
    f.workload = Kind::Register;
    f.grants = 0;
    assert_eq!(decide(&f).valid, Validity::True, "grants do not matter");
    f.writes = 0;
    let v = decide(&f);
    assert_eq!(v.valid, Validity::Unknown);
    assert_eq!(v.unknown, ["no write succeeded (0 applied writes)"]);
}

#[test]
fn a_check_that_could_not_run_makes_the_run_unknown() {
    let mut f = facts();
    f.checks = Validity::Unknown;
    f.check_errors = vec!["lock: history.jsonl:7: not JSON".into()];
    let v = decide(&f);
    assert_eq!(v.valid, Validity::Unknown);
    assert_eq!(
        v.unknown,
        ["a check could not run: lock: history.jsonl:7: not JSON"]
    );
    f.check_errors.clear();
    assert_eq!(decide(&f).unknown, ["the checks could not decide"]);
}

#[test]
fn invalid_beats_unknown_and_keeps_the_reasons_as_warnings() {
    let mut f = facts();
    f.checks = Validity::False;
    f.nemesis.as_mut().unwrap().errors = vec!["the nemesis task failed: panic".into()];
    let v = decide(&f);
    assert_eq!(v.valid, Validity::False);
    assert!(v.unknown.is_empty());
    assert!(v.warnings.iter().any(|w| w.contains("panic")), "{v:?}");
}

#[test]
fn faults_that_did_not_land_warn_and_require_landed_makes_them_unknown() {
    let mut f = facts();
    f.nemesis.as_mut().unwrap().landed = 1;
    let v = decide(&f);
    assert_eq!(v.valid, Validity::True);
    assert_eq!(
        v.warnings,
        ["2 of 3 faults did not land (see nemesis.json)"]
    );
    f.require_landed = Some(1);
    assert_eq!(decide(&f).valid, Validity::True);
    f.require_landed = Some(2);
    let v = decide(&f);
    assert_eq!(v.valid, Validity::Unknown);
    assert_eq!(
        v.unknown,
        ["1 of 3 faults landed, fewer than --require-landed 2"]
    );
}

#[test]
fn landed_faults_are_counted_as_the_report_counts_them() {
    use crate::nemesis::Injection;
    use serde_json::json;
    let inj = |id, detail: Value, error: Option<&str>| Injection {
        id,
        fault: "pause-holder".into(),
        start_ns: 0,
        started_ns: 0,
        stop_ns: None,
        target: json!({}),
        detail,
        error: error.map(str::to_string),
    };
    let s = NemesisSummary {
        injections: vec![
            inj(1, json!({"landed_inside": true}), None),
            inj(2, json!({"landed_inside": false}), None),
            inj(3, json!({"cut_short": true}), None),
            inj(4, Value::Null, Some("cannot resume")),
            inj(5, Value::Null, None),
        ],
        errors: vec!["cannot pause".into()],
        ..NemesisSummary::default()
    };
    let n = NemesisFacts::of(&s);
    assert_eq!((n.injections, n.landed), (5, 2));
    assert_eq!(n.errors.len(), 2);
    assert!(n.errors[1].contains("fault 4 (pause-holder): cannot resume"));
}

/// Trust on the operator's hosts, part 7: a start the run's end cut off
/// (the next injection's leader lookup outlasting the run) is not started,
/// not an error: with every injection landed the run stays valid and says
/// so; a start that was due within the run and failed still makes it
/// unknown.
#[test]
fn a_start_the_run_end_cut_off_leaves_the_run_valid() {
    use crate::nemesis::NotStarted;
    let cut = NotStarted {
        at_ns: 15_000_000_000,
        reason: "the run ended while it was starting: nemesis partition-node: the run ended before a leader was found (0.2 s of looking): no node claims to lead".into(),
    };
    let inj = |id| crate::nemesis::Injection {
        id,
        fault: "partition-node".into(),
        start_ns: 0,
        started_ns: 0,
        stop_ns: Some(1),
        target: serde_json::json!({}),
        detail: Value::Null,
        error: None,
    };
    let s = NemesisSummary {
        injections: vec![inj(1), inj(2)],
        not_started: vec![cut],
        ..NemesisSummary::default()
    };
    let mut f = facts();
    f.nemesis = Some(NemesisFacts::of(&s));
    let v = decide(&f);
    assert_eq!(v.valid, Validity::True, "{v:?}");
    assert!(v.warnings.is_empty(), "{v:?}");
    assert_eq!(
        v.line(),
        "valid: 2 of 2 faults landed (1 not started: the run ended first), 412 grants, 1,206 protected writes"
    );
    // The same failure while the run was going is the nemesis's error.
    let s = NemesisSummary {
        injections: vec![inj(1), inj(2)],
        errors: vec!["nemesis partition-node: no leader after 15s: no node claims to lead".into()],
        ..NemesisSummary::default()
    };
    f.nemesis = Some(NemesisFacts::of(&s));
    let v = decide(&f);
    assert_eq!(v.valid, Validity::Unknown, "{v:?}");
    assert!(v.unknown[0].contains("no leader after 15s"), "{v:?}");
}
