//! The decisions of a shrink driven by fake run outcomes: the kept and
//! confirmation rules, fresh seeds, the budget, a failed confirmation and
//! resuming from the saved state.

use super::*;
use crate::runner::shrink::search::{Dim, Knob};

const TIME: u64 = 10_000;

fn search() -> Search {
    Search {
        knobs: vec![
            Knob::new(Dim::Workers, 5, 2),
            Knob::new(Dim::TimeLimit, 20_000, 8_000),
            Knob::new(Dim::HoldMs, 200, 0),
        ],
    }
}

fn time(s: &Search) -> u64 {
    s.value(Dim::TimeLimit).unwrap_or(TIME)
}

fn limits(left_ms: u64) -> Limits {
    Limits {
        runs: 3,
        confirm: 10,
        jobs: 1,
        left_ms,
    }
}

/// Take one step the way the shrink does, with `repro(command, seed)`
/// deciding each run. Returns what was decided.
fn one(st: &mut State, l: Limits, repro: &dyn Fn(&Search, u64) -> bool) -> Next {
    let next = st.next(l, time);
    let Some((role, s, n)) = st.plan(&next, l) else {
        return next;
    };
    let first = st.seeds(n);
    let runs = (0..n)
        .map(|i| RunRecord {
            seed: first + i,
            dir: PathBuf::from(format!("runs/step-{}/run-{}", st.next_step, i + 1)),
            outcome: if repro(&s, first + i) {
                Outcome::Reproduced
            } else {
                Outcome::Missed { why: "no".into() }
            },
            wall_ms: time(&s) + 2000,
            witness: None,
        })
        .collect();
    let step = Step {
        n: st.next_step,
        role,
        change: String::new(),
        command: String::new(),
        runs,
        kept: false,
        undone: false,
    };
    st.next_step += 1;
    st.record(step, time(&s));
    next
}

fn drive(st: &mut State, left_ms: u64, repro: &dyn Fn(&Search, u64) -> bool) -> Next {
    loop {
        match one(st, limits(left_ms), repro) {
            n @ (Next::Done | Next::NotReproducing | Next::OutOfBudget) => return n,
            _ => assert!(st.steps.len() < 60, "the shrink ends"),
        }
    }
}

/// Reproduces with 3 workers or more, in 2 runs of 3 (seed % 3 != 0).
fn three_workers(s: &Search, seed: u64) -> bool {
    s.value(Dim::Workers).unwrap() >= 3 && seed % 3 != 0
}

#[test]
fn kept_steps_meet_the_rule_and_confirmation_uses_fresh_seeds() {
    let mut st = State::new(Path::new("r"), "two-holders", "clock-jump", search(), 100);
    assert_eq!(drive(&mut st, u64::MAX, &three_workers), Next::Done);
    for s in &st.steps {
        let (k, n) = (s.reproduced(), s.total());
        match s.role {
            Role::Confirm => assert_eq!(s.kept, 2 * k >= n, "{s:?}"),
            _ => assert_eq!(s.kept, 3 * k >= 2 * n, "{s:?}"),
        }
    }
    let confirm = st.confirmed().expect("confirmed");
    let earlier: Vec<u64> = st.steps[..st.steps.len() - 1]
        .iter()
        .flat_map(|s| s.runs.iter().map(|r| r.seed))
        .collect();
    assert!(confirm.runs.iter().all(|r| !earlier.contains(&r.seed)));
    assert_eq!(st.search.value(Dim::Workers), Some(3));
    assert_eq!(st.search.value(Dim::TimeLimit), Some(8_000));
    assert_eq!(st.search.value(Dim::HoldMs), Some(12));
    assert_eq!(st.overhead_ms, 2000, "measured from the runs");
}

#[test]
fn the_original_not_reproducing_ends_the_shrink() {
    let mut st = State::new(Path::new("r"), "two-holders", "clock-jump", search(), 1);
    // 1 of 3.
    let rare = |_: &Search, seed: u64| seed == 1;
    assert_eq!(drive(&mut st, u64::MAX, &rare), Next::NotReproducing);
    assert_eq!(st.steps.len(), 1);
    assert_eq!(st.steps[0].reproduced(), 1);
}

#[test]
fn a_failed_confirmation_takes_back_the_last_kept_candidate() {
    let mut st = State::new(Path::new("r"), "two-holders", "clock-jump", search(), 0);
    // Every candidate's runs reproduce (seeds 0 to 23: 8 steps of 3);
    // the shortest hold only in 2 of its 10 confirmation runs.
    let repro = |s: &Search, seed: u64| s.value(Dim::HoldMs).unwrap() > 20 || seed < 26;
    assert_eq!(drive(&mut st, u64::MAX, &repro), Next::Done);
    let undone: Vec<&Step> = st.steps.iter().filter(|s| s.undone).collect();
    assert!(!undone.is_empty(), "{:#?}", st.steps);
    assert!(undone
        .iter()
        .all(|s| matches!(s.role, Role::Candidate { knob: 2, .. })));
    assert_eq!(st.search.value(Dim::HoldMs), Some(25));
    let confirms = st.steps.iter().filter(|s| s.role == Role::Confirm).count();
    assert!(confirms >= 2);
}

#[test]
fn the_budget_keeps_room_for_the_confirmation() {
    let mut st = State::new(Path::new("r"), "two-holders", "clock-jump", search(), 0);
    let always = |_: &Search, _: u64| true;
    one(&mut st, limits(u64::MAX), &always);
    // A run costs its limit + 2 s: 10 confirmation runs of 20 s are 220 s.
    assert_eq!(st.next(limits(219_000), time), Next::OutOfBudget);
    assert_eq!(st.next(limits(220_000), time), Next::Confirm);
    assert!(matches!(
        st.next(limits(220_000 + 3 * 22_000), time),
        Next::Candidate(_)
    ));
}

#[test]
fn a_resumed_shrink_goes_on_where_it_stopped() {
    let mut whole = State::new(Path::new("r"), "two-holders", "clock-jump", search(), 7);
    drive(&mut whole, u64::MAX, &three_workers);
    let mut part = State::new(Path::new("r"), "two-holders", "clock-jump", search(), 7);
    for _ in 0..3 {
        one(&mut part, limits(u64::MAX), &three_workers);
    }
    let saved = serde_json::to_string(&part).unwrap();
    let mut resumed: State = serde_json::from_str(&saved).unwrap();
    assert_eq!(resumed, part);
    assert_eq!(drive(&mut resumed, u64::MAX, &three_workers), Next::Done);
    assert_eq!(resumed, whole);

    let d = tempfile::tempdir().unwrap();
    resumed.save(d.path()).unwrap();
    assert_eq!(State::load(d.path()).unwrap(), Some(resumed));
    std::fs::write(d.path().join(DIR).join(FILE), "{").unwrap();
    assert!(State::load(d.path()).unwrap_err().contains("hint"));
    assert_eq!(State::load(&d.path().join("none")).unwrap(), None);
}
