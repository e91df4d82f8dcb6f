//! Tests of `together` files (src/nemesis/together.rs): what is refused,
//! naming the field with a hint, and where a pair applies.

use super::super::scope::Scope;
use super::super::spec::from_source;
use super::*;
use crate::service::System;
use crate::toml_file::Source;
use crate::workload::Kind;

fn parse(body: &str) -> Result<NemesisSpec, crate::toml_file::FileError> {
    let text = format!("name = \"x\"\nfault = \"together\"\n{body}\n");
    from_source(&Source {
        name: "nemesis/x.toml".into(),
        text,
    })
}

#[test]
fn a_pair_reads_its_two_files_and_its_delay() {
    let s = parse(
        "together = { first = \"partition-holder\", second = \"delay-storage\", delay_ms = 250 }",
    )
    .unwrap();
    let t = s.together.clone().unwrap();
    assert_eq!((t.first.as_str(), t.delay_ms), ("partition-holder", 250));
    let [a, b] = parts(&s).unwrap();
    assert_eq!(
        (a.fault.as_str(), b.fault.as_str()),
        ("partition-holder", "delay-storage")
    );
    let f: Vec<String> = leaves(&s).into_iter().map(|s| s.fault).collect();
    assert_eq!(f, ["partition-holder", "delay-storage"]);
    // The shipped pairs load, and the delay defaults to 0.
    for name in ["together", "k2-etcd"] {
        let s = spec::load(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.together.unwrap().delay_ms, 0);
    }
}

#[test]
fn a_bad_pair_is_refused_naming_the_field_with_a_hint() {
    let cases = [
        ("", "fault", "needs a `together` table"),
        (
            "together = { first = \"pause-holder\" }",
            "together",
            "missing field `second`",
        ),
        (
            "together = { first = \"pause-holder\", second = \"meteor\" }",
            "together",
            "second = \"meteor\"",
        ),
        (
            "together = { first = \"none\", second = \"delay-storage\" }",
            "together",
            "fault none",
        ),
        (
            "together = { first = \"mixed\", second = \"delay-storage\" }",
            "together",
            "fault mixed",
        ),
        (
            "together = { first = \"k2-etcd\", second = \"delay-storage\" }",
            "together",
            "cannot hold another together",
        ),
        (
            "together = { first = \"pause-holder\", second = \"delay-storage\", delay_ms = 99999999999 }",
            "together.delay_ms",
            "more than a day",
        ),
        (
            "together = { first = \"pause-holder\", second = \"delay-storage\", wait = 3 }",
            "together",
            "unknown field `wait`",
        ),
        (
            "duration_leases = 2.0\ntogether = { first = \"pause-holder\", second = \"delay-storage\" }",
            "duration_leases",
            "no length of its own",
        ),
    ];
    for (body, field, says) in cases {
        let e = parse(body).expect_err(body);
        let text = e.to_string();
        assert!(text.contains(says), "{body}: {text}");
        if field != "together" || !says.contains("field") {
            assert_eq!(e.field.as_deref(), Some(field), "{body}: {text}");
            assert!(e.hint.is_some(), "{body}: {text}");
        }
        assert!(e.line > 0, "{body}: {text}");
    }
    // Another fault with a `together` table is refused too.
    let e = from_source(&Source {
        name: "nemesis/x.toml".into(),
        text:
            "name = \"x\"\nfault = \"pause-holder\"\ntogether = { first = \"a\", second = \"b\" }\n"
                .into(),
    })
    .unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (3, Some("together")), "{e}");
    assert!(e.hint.is_some());
}

/// A system by its name (no code outside src/service/ names a `System`
/// variant).
fn sys(name: &str) -> System {
    System::named(name).expect("a system")
}

fn scope(system: System, nemesis: NemesisSpec, workload: Kind) -> Scope {
    Scope::local(system, workload, nemesis)
}

#[test]
fn a_pair_applies_where_both_its_faults_apply() {
    let k2 = spec::load("k2-etcd").unwrap();
    assert!(registry::supports(&scope(sys("etcd"), k2.clone(), Kind::FencedCounter)).is_ok());
    // delay-storage needs a workload that writes to the storage.
    let e = registry::supports(&scope(sys("etcd"), k2, Kind::Lock)).unwrap_err();
    assert!(e.contains("second fault (delay-storage)"), "{e}");
    // A clock fault in a pair starts the Redis nodes under libfaketime, and
    // does not apply to etcd.
    let clock = parse("together = { first = \"clock-jump\", second = \"pause-holder\" }").unwrap();
    assert!(registry::needs_faketime(&clock, sys("redis")));
    assert!(!registry::needs_faketime(
        &spec::load("together").unwrap(),
        sys("redis")
    ));
    let e = registry::supports(&scope(sys("etcd"), clock, Kind::FencedCounter)).unwrap_err();
    assert!(e.contains("first fault (clock-jump)"), "{e}");
}

#[test]
fn a_part_lands_by_its_own_rule() {
    use crate::nemesis::schedule::landed;
    assert!(landed(&json!({"landed_inside": true}), false));
    assert!(landed(&json!({"write_delayed": true}), false));
    assert!(!landed(&json!({"landed_inside": false}), false));
    assert!(!landed(&json!({"cut_short": true}), false));
    assert!(!landed(&Value::Null, true));
}

/// One holding event, and both faults strike that worker: the pause and
/// the toxic on its storage link are both in the undo log while in place,
/// both taken back, and the one injection names the pair and both records.
#[tokio::test]
async fn both_faults_strike_the_one_pinned_holder_and_both_are_taken_back() {
    use super::super::tests::{announce_until_stopped, fixture, holding_granted, until};
    use crate::nemesis::Links;
    use std::sync::atomic::AtomicU64;
    let mut links = Links::default();
    links.storage.insert(0, "w0-storage".into());
    let f = fixture("together", links).await;
    let (pool, history, undo, stop) = (f.pool.clone(), f.history.clone(), f.undo.clone(), f.stop);
    let api = f.ctx.toxiproxy.clone();
    let mut ctx = f.ctx;
    let holding = holding_granted(&ctx);
    *pool.last.lock().unwrap() = Some(holding.clone());
    let task = tokio::spawn(async move {
        let faults = AtomicU64::new(0);
        super::super::schedule::run(Box::<Together>::default(), &mut ctx, &faults).await
    });
    let id = pool.child.id();
    // One announcement at a time until the pair took the holder.
    announce_until_stopped(&pool, &holding).await;
    // No further announcement: the second fault strikes the pinned holder.
    let mut toxics = 0;
    for _ in 0..400 {
        toxics = api.toxics("w0-storage").await.unwrap().len();
        if toxics > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(toxics, 1, "the write is held on the pinned holder's link");
    assert!(id.is_stopped(), "both in place at once");
    assert_eq!(
        undo.pending().len(),
        2,
        "the SIGCONT and the toxic's removal"
    );
    until("continued", || !id.is_stopped()).await;
    for _ in 0..400 {
        if api.toxics("w0-storage").await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(api.toxics("w0-storage").await.unwrap().is_empty());
    stop.send(true).unwrap();
    let sum = task.await.unwrap();
    assert!(undo.pending().is_empty());
    let i = &sum.injections[0];
    assert_eq!(i.fault, "together");
    assert_eq!(i.target["faults"], json!(["pause-holder", "delay-storage"]));
    assert_eq!(i.target["slot"], 0);
    assert_eq!(i.detail["first"]["landed"], true, "{}", i.detail);
    assert_eq!(i.detail["second"]["landed"], true, "{}", i.detail);
    assert_eq!(i.detail["landed_inside"], true, "{}", i.detail);
    assert!(i.landed());
    let ops = history.0.lock().unwrap().clone();
    assert_eq!(ops[1].value["fault"], "together");
    assert_eq!(
        ops[1].value["first"]["owner"], "o7",
        "the start names each target"
    );
    assert_eq!(
        ops[3].value["first"]["target"]["owner"], "o7",
        "the stop each record"
    );
    pool.child.kill().unwrap();
}
