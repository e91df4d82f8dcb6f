//! Tests of the search's decisions (pure functions of a state).

use super::*;
use crate::explore::finding::{Hit, Judged, PointOutcome};
use crate::explore::plan::{Family, Plan};
use crate::explore::state::{settings, Outcome, RunRec, State};

fn point(id: &str, own: bool) -> Point {
    Point::sample(id, Family::Process, own, 700)
}

fn state(points: &[(&str, bool)]) -> State {
    let mut s = State::new(settings(), vec!["lock".into(), "fenced-counter".into()]);
    s.plan = Some(Plan {
        points: points.iter().map(|(id, own)| point(id, *own)).collect(),
        ..Plan::default()
    });
    s
}

/// A finished run of `stage` over `points`, each landed `landed` times,
/// `hit` a finding of two-holders at that point.
fn ran(s: &mut State, stage: Stage, points: &[&str], landed: u64, hit: Option<&str>) {
    let n = s.next_n();
    let outcomes = points
        .iter()
        .map(|p| PointOutcome {
            point: p.to_string(),
            injections: 1,
            landed,
            hits: (hit == Some(*p))
                .then(|| Hit {
                    kind: "two-holders".into(),
                    hits: 1,
                    judged: Judged::Finding,
                    note: None,
                })
                .into_iter()
                .collect(),
            dir: "d".into(),
            missed: Default::default(),
            unmeasured: Default::default(),
            changed: None,
        })
        .collect();
    s.runs.push(RunRec {
        n,
        stage,
        workload: "fenced-counter".into(),
        points: points.iter().map(|p| p.to_string()).collect(),
        seed: 1,
        attempt: 0,
        dir: format!("runs/run-{n}").into(),
        outcome: Some(Outcome::Ran {
            exit: 0,
            outcomes,
            secs: 10.0,
        }),
    });
}

#[test]
fn seeds_are_fixed_by_the_explores_seed_and_differ_per_run_and_attempt() {
    assert_eq!(seed_of(7, 3, 0), seed_of(7, 3, 0));
    let all: std::collections::BTreeSet<u64> = (1..50)
        .flat_map(|n| (0..3).map(move |a| seed_of(7, n, a)))
        .collect();
    assert_eq!(all.len(), 49 * 3);
    assert_ne!(seed_of(7, 1, 0), seed_of(8, 1, 0));
}

#[test]
fn a_point_with_lasting_effects_runs_alone_the_others_in_batches() {
    let s = state(&[
        ("a", false),
        ("b", true),
        ("c", false),
        ("d", false),
        ("e", false),
    ]);
    let pts: Vec<&Point> = s.plan.as_ref().unwrap().points.iter().collect();
    let b = batches(&pts, &s.workloads, 3, Stage::Search);
    let ids: Vec<Vec<&str>> = b
        .iter()
        .map(|r| r.points.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(ids, [vec!["a", "c", "d"], vec!["b"], vec!["e"]]);
    assert!(b.iter().all(|r| r.workload == "fenced-counter"));
    let one = batches(&pts, &s.workloads, 1, Stage::Search);
    assert_eq!(one.len(), 5);
}

#[test]
fn a_run_of_few_points_does_not_wait_behind_the_full_runs() {
    let mut s = state(&[("a", false), ("r", false), ("c", false), ("d", false)]);
    s.workloads = vec!["fenced-counter".into(), "lock-renewing".into()];
    let plan = s.plan.as_mut().unwrap();
    plan.points[1].workloads = vec!["lock-renewing".into()];
    let pts: Vec<&Point> = plan.points.iter().collect();
    let b = batches(&pts, &s.workloads, 2, Stage::Search);
    let ids: Vec<Vec<&str>> = b
        .iter()
        .map(|r| r.points.iter().map(String::as_str).collect())
        .collect();
    // The renewing run has one point only, but it holds the second point.
    assert_eq!(ids, [vec!["a", "c"], vec!["r"], vec!["d"]]);
    assert_eq!(b[1].workload, "lock-renewing");
}

#[test]
fn renewal_points_run_with_a_renewing_workload_when_one_was_learned() {
    let mut p = point("r", false);
    p.phase = Some(crate::explore::learn::Phase::Renew);
    let learned = ["lock".to_string(), "lock-renewing".to_string()];
    assert_eq!(workload_for(&p, &learned), "lock-renewing");
    assert_eq!(workload_for(&p, &learned[..1]), "lock");
    assert_eq!(workload_for(&point("x", false), &learned), "lock");
}

#[test]
fn the_search_confirms_first_then_tries_new_points_then_retries_then_pairs() {
    let mut s = state(&[("a", false), ("b", false), ("c", false), ("d", false)]);
    s.settings.per_run = 2;
    s.settings.jobs = 1;
    let Next::Runs(r) = next(&s, 100.0, 10.0) else {
        panic!()
    };
    assert_eq!(
        (r[0].stage, r[0].points.clone()),
        (Stage::Search, vec!["a".into(), "b".into()])
    );
    ran(&mut s, Stage::Search, &["a", "b"], 1, Some("b"));
    // b's finding is confirmed before anything else, alone and with
    // lockjaw's own client (the explore has --client).
    let Next::Runs(r) = next(&s, 0.0, 10.0) else {
        panic!()
    };
    let stages: Vec<Stage> = r.iter().map(|r| r.stage).collect();
    assert_eq!(stages, [Stage::Confirm, Stage::Builtin]);
    assert!(r.iter().all(|r| r.points == ["b"]));
    ran(&mut s, Stage::Confirm, &["b"], 1, Some("b"));
    // The budget is spent: no more search.
    assert_eq!(next(&s, 5.0, 10.0), Next::Done);
    let Next::Runs(r) = next(&s, 100.0, 10.0) else {
        panic!()
    };
    assert_eq!(r[0].points, ["c", "d"]);
    ran(&mut s, Stage::Search, &["c", "d"], 0, None);
    for _ in 1..MAX_TRIES {
        let Next::Runs(r) = next(&s, 100.0, 10.0) else {
            panic!()
        };
        assert_eq!(
            (r[0].stage, r[0].points.clone()),
            (Stage::Retry, vec!["c".into(), "d".into()])
        );
        ran(&mut s, Stage::Retry, &["c", "d"], 0, None);
    }
    assert_eq!(next(&s, 100.0, 10.0), Next::Pairs);
    assert_eq!(landed_points(&s), ["a", "b"]);
    s.pairs = Some(vec![point("together:a+b", false)]);
    let Next::Runs(r) = next(&s, 100.0, 10.0) else {
        panic!()
    };
    assert_eq!(
        (r[0].stage, r[0].points.clone()),
        (Stage::Pair, vec!["together:a+b".into()])
    );
    ran(&mut s, Stage::Pair, &["together:a+b"], 1, None);
    assert_eq!(next(&s, 100.0, 10.0), Next::Done);
}

#[test]
fn a_point_its_run_never_injected_is_retried_alone() {
    let mut s = state(&[("a", false), ("b", false), ("c", false)]);
    s.settings.per_run = 3;
    s.settings.jobs = 3;
    // a injected and missed; b waited to the run's end, so c (after it)
    // was never reached: neither has an outcome.
    ran(&mut s, Stage::Search, &["a"], 0, None);
    s.runs.last_mut().unwrap().points = vec!["a".into(), "b".into(), "c".into()];
    let Next::Runs(r) = next(&s, 100.0, 10.0) else {
        panic!()
    };
    let shape: Vec<(Stage, Vec<String>)> = r.iter().map(|r| (r.stage, r.points.clone())).collect();
    assert_eq!(
        shape,
        [
            (Stage::Retry, vec!["b".to_string()]),
            (Stage::Retry, vec!["c".to_string()]),
            (Stage::Retry, vec!["a".to_string()]),
        ]
    );
}

#[test]
fn without_a_second_opinion_a_candidate_is_confirmed_alone_only() {
    let mut s = state(&[("a", false), ("b", false)]);
    s.settings.second_opinion = false;
    ran(&mut s, Stage::Search, &["a", "b"], 1, Some("b"));
    let Next::Runs(r) = next(&s, 100.0, 10.0) else {
        panic!()
    };
    let stages: Vec<Stage> = r.iter().map(|r| r.stage).collect();
    assert_eq!(stages, [Stage::Confirm]);
    assert_eq!(r[0].points, ["b"]);
}

#[test]
fn a_search_wave_has_at_most_jobs_runs() {
    let mut s = state(&[("a", true), ("b", true), ("c", true)]);
    s.settings.jobs = 2;
    let Next::Runs(r) = next(&s, 100.0, 10.0) else {
        panic!()
    };
    assert_eq!(r.len(), 2);
}

#[test]
fn a_batch_is_a_sequence_of_its_points_with_two_quiet_leases_and_room_for_each() {
    let files = [Path::new("/x/points/a.toml"), Path::new("/x/points/b.toml")];
    let text = batch_nemesis(4, &files, 500);
    let t: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(t["fault"].as_str(), Some("mixed"));
    assert_eq!(t["order"].as_str(), Some("sequence"));
    assert_eq!(t["interval_ms"].as_integer(), Some(1000));
    assert_eq!(t["max_injections"].as_integer(), Some(2));
    assert_eq!(t["faults"].as_array().unwrap().len(), 2);
    let p = timing(&point("a", false).nemesis, 500);
    assert_eq!(p.length_ms, 700);
    // first gap 1 s + 2 × (1 s + 0.7 s) + 2 leases + 1 s = 6.4 s → 7.
    assert_eq!(time_limit_s(&[p, p], 500, false), 7);
    let strike = "fault = \"strike-command\"\ninterval_ms = 300\nstrike = { window_ms = 2000 }\n";
    let t = timing(strike, 500);
    assert_eq!(
        (t.first_delay_ms, t.interval_ms, t.length_ms),
        (300, 300, 2000)
    );
    // Alone: room for three injections: 0.3 + 3 × 2.3 + 2 = 9.2 → 10.
    assert_eq!(time_limit_s(&[t], 500, true), 10);
}

#[test]
fn a_runs_command_names_the_client_except_for_the_second_opinion() {
    let st = settings();
    let d = Path::new("/x/runs/run-1");
    let a = argv(&st, "lock", "none", Stage::Learn, 4, 9, d);
    assert!(a.windows(2).any(|w| w == ["--client", "python-x@1"]));
    assert_eq!(a.last().map(String::as_str), Some("--tap-wire"));
    let b = argv(&st, "lock", "/x/p.toml", Stage::Builtin, 4, 9, d);
    assert!(!b.contains(&"--client".to_string()));
    assert!(!b.contains(&"--tap-wire".to_string()));
    assert!(b.windows(2).any(|w| w == ["--seed", "9"]));
    assert!(b.windows(2).any(|w| w == ["--out", "/x/runs/run-1"]));
    // Search runs tap the wire too (the feedback); confirmations do not.
    for stage in [Stage::Search, Stage::Retry, Stage::Pair] {
        let a = argv(&st, "lock", "/x/r.toml", stage, 4, 9, d);
        assert!(a.contains(&"--tap-wire".to_string()), "{stage:?}");
    }
    let c = argv(&st, "lock", "/x/p.toml", Stage::Confirm, 4, 9, d);
    assert!(!c.contains(&"--tap-wire".to_string()));
    assert_eq!(point_file_name("together:a+b/c"), "together:a+b_c.toml");
}

/// A candidate that one run alone missed gets another (no second opinion
/// again), up to CONFIRM_TRIES; the run that shows it confirms it.
#[test]
fn a_candidate_missed_alone_gets_another_run_alone() {
    let mut s = state(&[("a", false)]);
    ran(&mut s, Stage::Search, &["a"], 1, Some("a"));
    let Next::Runs(r) = next(&s, 0.0, 10.0) else {
        panic!()
    };
    assert_eq!(
        r.iter().map(|r| r.stage).collect::<Vec<_>>(),
        [Stage::Confirm, Stage::Builtin]
    );
    ran(&mut s, Stage::Confirm, &["a"], 1, None);
    ran(&mut s, Stage::Builtin, &["a"], 1, None);
    assert!(crate::explore::confirm::confirmed(&s).is_empty());
    let Next::Runs(r) = next(&s, 0.0, 10.0) else {
        panic!()
    };
    assert_eq!(
        r.iter().map(|r| r.stage).collect::<Vec<_>>(),
        [Stage::Confirm]
    );
    ran(&mut s, Stage::Confirm, &["a"], 1, Some("a"));
    assert_eq!(next(&s, 0.0, 10.0), Next::Done);
    assert_eq!(
        crate::explore::confirm::confirmed(&s),
        [("a".to_string(), "two-holders".to_string())]
    );
    // Never shown again in CONFIRM_TRIES runs: no more, and not confirmed.
    let mut s = state(&[("a", false)]);
    ran(&mut s, Stage::Search, &["a"], 1, Some("a"));
    for _ in 0..CONFIRM_TRIES {
        assert!(matches!(next(&s, 0.0, 10.0), Next::Runs(_)));
        ran(&mut s, Stage::Confirm, &["a"], 1, None);
    }
    assert_eq!(next(&s, 0.0, 10.0), Next::Done);
    assert_eq!(crate::explore::confirm::not_again(&s).len(), 1);
}

/// Points of three groups (a, b, c: one fault each), two of each, in the
/// plan's round robin.
fn three_groups() -> State {
    let mut s = state(&[
        ("a1", false),
        ("b1", false),
        ("c1", false),
        ("a2", false),
        ("b2", false),
        ("c2", false),
    ]);
    for p in &mut s.plan.as_mut().unwrap().points {
        let fault = format!("pause-{}", &p.id[..1]);
        p.nemesis = p
            .nemesis
            .replace("pause-holder\"\ntarget", &format!("{fault}\"\ntarget"));
    }
    s.settings.per_run = 3;
    s.settings.jobs = 1;
    s
}

#[test]
fn untried_points_of_a_group_that_changed_what_the_client_sent_go_first() {
    let mut s = three_groups();
    let groups: std::collections::BTreeSet<String> = s
        .plan
        .as_ref()
        .unwrap()
        .points
        .iter()
        .map(crate::explore::plan::group_of)
        .collect();
    assert_eq!(groups.len(), 3, "{groups:?}");
    ran(&mut s, Stage::Search, &["a1", "b1", "c1"], 1, None);
    let firsts = |s: &State| {
        let Next::Runs(r) = next(s, 100.0, 10.0) else {
            panic!()
        };
        r[0].points.clone()
    };
    // Nothing read, or nothing changed: the plan's order.
    assert_eq!(firsts(&s), ["a2", "b2", "c2"]);
    let set = |s: &mut State, changed: &[(&str, &[&str])]| {
        let Some(Outcome::Ran { outcomes, .. }) = &mut s.runs[0].outcome else {
            panic!()
        };
        for o in outcomes.iter_mut() {
            let c = changed.iter().find(|(p, _)| *p == o.point);
            o.changed = c.map(|(_, v)| v.iter().map(|x| x.to_string()).collect());
        }
    };
    set(&mut s, &[("a1", &[]), ("b1", &[]), ("c1", &[])]);
    assert_eq!(firsts(&s), ["a2", "b2", "c2"]);
    // c1 made the client send its release twice: c2 moves up; the others
    // keep their order.
    set(
        &mut s,
        &[("a1", &[]), ("b1", &[]), ("c1", &["DEL twice in a row"])],
    );
    assert_eq!(firsts(&s), ["c2", "a2", "b2"]);
    assert_eq!(
        firsts(&s),
        firsts(&s.clone()),
        "a pure function of the state"
    );
    // Two groups changed: both ahead, in the plan's order.
    set(&mut s, &[("a1", &[]), ("b1", &["x"]), ("c1", &["y"])]);
    assert_eq!(firsts(&s), ["b2", "c2", "a2"]);
    // Retries are not reordered: in the plan's order.
    ran(&mut s, Stage::Search, &["c2", "b2"], 0, None);
    assert_eq!(firsts(&s), ["a2"]);
    ran(&mut s, Stage::Search, &["a2"], 0, None);
    let Next::Runs(r) = next(&s, 100.0, 10.0) else {
        panic!()
    };
    assert_eq!(
        (r[0].stage, r[0].points.clone()),
        (
            Stage::Retry,
            vec!["a2".to_string(), "b2".into(), "c2".into()]
        )
    );
}

#[test]
fn pairs_start_with_the_promising_points_then_those_that_changed_what_was_sent() {
    let mut s = three_groups();
    ran(&mut s, Stage::Search, &["a1", "b1", "c1"], 1, None);
    assert!(pair_first_points(&s).is_empty());
    let Some(Outcome::Ran { outcomes, .. }) = &mut s.runs[0].outcome else {
        panic!()
    };
    outcomes[1].changed = Some(vec!["SET twice in a row".into()]);
    outcomes[2].changed = Some(vec![]);
    outcomes[0].hits.push(Hit {
        kind: "stuck-lock".into(),
        hits: 1,
        judged: Judged::Allowed("a pause may hold the lock".into()),
        note: None,
    });
    assert_eq!(pair_first_points(&s), ["a1", "b1"]);
}
