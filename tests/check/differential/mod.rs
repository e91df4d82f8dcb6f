//! Differential test of the linearizability search: random small histories
//! of six models (register, etcd-style cas-register with absent values and
//! unobserved reads, kv get/put/append, set add/read, mutex, owned mutex),
//! over one to three keys, with up to six concurrent processes, crashed ops
//! (`info`, or no completion at all) and failed ones, checked by lockjaw
//! both per key and as one state, and by the brute-force reference in
//! `reference.rs`. The verdicts must agree exactly: these histories are far
//! too small for any budget to matter, so `unknown` is a failure too.
//!
//! `PROPTEST_CASES` sets the number of cases per model (default 500, which
//! keeps `make test` quick); a one-off run with `PROPTEST_CASES=20000`
//! explores much more.

mod gen;
mod reference;

use gen::{generate, Plan};
use lockjaw::check::linear::{check_ops, LinOptions};
use lockjaw::check::Validity;
use lockjaw::history::Meta;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
pub use reference::Kind;

/// Cases per model: `PROPTEST_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn plans() -> impl Strategy<Value = Plan> {
    (
        1usize..=6,
        1usize..=12,
        1usize..=3,
        proptest::collection::vec(any::<(u8, u8, u8, u8)>(), 10..120),
        proptest::option::weighted(0.7, (any::<usize>(), any::<u8>())),
    )
        .prop_map(|(procs, ops, keys, choices, corrupt)| Plan {
            procs,
            ops,
            keys,
            choices,
            corrupt,
        })
}

/// Lockjaw's verdict on `plan`'s history, per key or as one state.
fn lockjaw(kind: Kind, plan: &Plan, one_state: bool) -> Validity {
    let ops = generate(kind, plan);
    let meta = Meta {
        model: Some(kind.model().into()),
        init: Some(kind.init()),
        ..Meta::default()
    };
    let opts = LinOptions {
        one_state,
        ..LinOptions::default()
    };
    check_ops("generated", Some(meta), gen::to_history(&ops), &opts)
        .expect("generated histories are well formed")
        .valid
}

fn agree(kind: Kind, plan: &Plan) -> Result<(), TestCaseError> {
    let ops = generate(kind, plan);
    let expected = if reference::linearizable(kind, &ops) {
        Validity::True
    } else {
        Validity::False
    };
    for one_state in [false, true] {
        let got = lockjaw(kind, plan, one_state);
        prop_assert_eq!(
            got,
            expected,
            "{:?} one_state={} history={:#?}",
            kind,
            one_state,
            ops
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(500)))]

    #[test]
    fn register_agrees_with_brute_force(plan in plans()) {
        agree(Kind::Register, &plan)?;
    }

    #[test]
    fn etcd_cas_register_agrees_with_brute_force(plan in plans()) {
        agree(Kind::Etcd, &plan)?;
    }

    #[test]
    fn kv_agrees_with_brute_force(plan in plans()) {
        agree(Kind::Kv, &plan)?;
    }

    #[test]
    fn set_agrees_with_brute_force(plan in plans()) {
        agree(Kind::Set, &plan)?;
    }

    #[test]
    fn mutex_agrees_with_brute_force(plan in plans()) {
        agree(Kind::Mutex, &plan)?;
    }

    #[test]
    fn owned_mutex_agrees_with_brute_force(plan in plans()) {
        agree(Kind::OwnedMutex, &plan)?;
    }
}

/// The generator is worth its cases: for every model a fair share of the
/// histories is linearizable and a fair share is not, many have pending
/// ops, and some reach a concurrency of five or more.
#[test]
fn generated_histories_cover_both_verdicts() {
    let mut runner = TestRunner::deterministic();
    let n = 400;
    let mut report = Vec::new();
    let mut fair = true;
    for kind in Kind::ALL {
        let (mut valid, mut pending, mut wide) = (0, 0, 0);
        for _ in 0..n {
            let plan = plans().new_tree(&mut runner).unwrap().current();
            let ops = generate(kind, &plan);
            valid += reference::linearizable(kind, &ops) as usize;
            pending += ops.iter().any(|o| o.is_pending()) as usize;
            wide += (gen::max_concurrency(&ops) >= 5) as usize;
        }
        report.push(format!(
            "{kind:?}: {valid} valid, {pending} with pending ops, {wide} with 5+ concurrent, of {n}"
        ));
        fair &= (n / 5..=n * 4 / 5).contains(&valid) && pending >= n / 5 && wide >= n / 20;
    }
    eprintln!("{}", report.join("\n"));
    assert!(fair, "{}", report.join("\n"));
}
