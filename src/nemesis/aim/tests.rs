//! Tests of the worker targets (`waiter`, `renewer`) in nemesis files and
//! support rules, and of `strike-command` on ZooKeeper links.

use super::super::registry::supports;
use super::*;
use crate::nemesis::spec::from_source;
use crate::nemesis::NemesisSpec;
use crate::service::System;
use crate::toml_file::Source;

fn spec(body: &str) -> Result<NemesisSpec, crate::toml_file::FileError> {
    from_source(&Source {
        name: "nemesis/t.toml".into(),
        text: format!("name = \"t\"\n{body}"),
    })
}

fn scope(system: System, workload: Kind, nemesis: NemesisSpec) -> Scope {
    Scope::local(system, workload, nemesis)
}

#[test]
fn worker_targets_are_taken_by_the_faults_aimed_at_one_worker() {
    for fault in [
        "pause-holder",
        "kill-holder",
        "client-clock-jump",
        "client-clock-strobe",
    ] {
        for target in ["holder", "waiter", "renewer"] {
            let s = spec(&format!("fault = \"{fault}\"\ntarget = \"{target}\"\n"))
                .unwrap_or_else(|e| panic!("{fault} {target}: {e}"));
            assert_eq!(s.target.name(), target);
        }
        // The default stays the holder.
        let s = spec(&format!("fault = \"{fault}\"\n")).unwrap();
        assert_eq!(s.target, Target::Holder);
    }
    for target in ["all-clients", "holder", "waiter", "renewer"] {
        let s = spec(&format!(
            "fault = \"strike-command\"\ntarget = \"{target}\"\nstrike = {{ command = \"DEL\" }}\n"
        ))
        .unwrap();
        assert_eq!(s.target.name(), target);
    }
    assert_eq!(
        spec("fault = \"strike-command\"\nstrike = { command = \"DEL\" }\n")
            .unwrap()
            .target,
        Target::AllClients
    );
}

#[test]
fn worker_targets_are_refused_elsewhere_naming_the_field_and_the_allowed_ones() {
    for (fault, target) in [
        ("latency", "waiter"),
        ("pause-node", "renewer"),
        ("delay-grant", "waiter"),
        ("partition-holder", "renewer"),
        ("kill-service", "waiter"),
    ] {
        let e = spec(&format!(
            "fault = \"{fault}\"\ntarget = \"{target}\"\nlatency_ms = 5\n"
        ))
        .unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (3, Some("target")), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("{fault} cannot target {target}"))
                && text.contains("(hint: use "),
            "{text}"
        );
    }
    let e = spec("fault = \"pause-holder\"\ntarget = \"waiters\"\n").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("target"), "{e}");
}

#[test]
fn a_waiter_or_renewer_needs_workers_that_announce_their_requests() {
    let pause = spec("fault = \"pause-holder\"\ntarget = \"waiter\"\n").unwrap();
    assert!(supports(&scope(
        System::Zookeeper,
        Kind::FencedCounter,
        pause.clone()
    ))
    .is_ok());
    let e = supports(&scope(System::Zookeeper, Kind::Leader, pause)).unwrap_err();
    assert!(
        e.contains("target waiter") && e.contains("announces none"),
        "{e}"
    );
    let jump = spec("fault = \"client-clock-jump\"\ntarget = \"renewer\"\n").unwrap();
    let e = supports(&scope(System::Redis, Kind::Register, jump)).unwrap_err();
    assert!(!e.is_empty());
    // The holder needs no announcement.
    let holder = spec("fault = \"client-clock-jump\"\n").unwrap();
    assert!(supports(&scope(System::Redis, Kind::Leader, holder)).is_ok());
}

#[test]
fn strike_command_matches_zookeeper_operations_by_their_framed_names() {
    let strike = |t: &str| spec(&format!("fault = \"strike-command\"\nstrike = {t}\n")).unwrap();
    let zk = |s| supports(&scope(System::Zookeeper, Kind::FencedCounter, s));
    assert!(zk(strike(
        "{ command = \"delete\", action = \"hold\", until = \"grant\" }"
    ))
    .is_ok());
    assert!(zk(strike("{ command = \"create|getChildren2\" }")).is_ok());
    for (t, why) in [
        ("{ command = \"DEL\" }", "\"DEL\" is no ZooKeeper operation"),
        (
            "{ command = \"DELETE\" }",
            "\"DELETE\" is no ZooKeeper operation",
        ),
        (
            "{ command = \"ping\" }",
            "\"ping\" is no ZooKeeper operation",
        ),
        (
            "{ command = \"delete\", script = \"del\" }",
            "strike.script",
        ),
    ] {
        let e = zk(strike(t)).unwrap_err();
        assert!(e.contains(why) && e.contains("(hint: "), "{t}: {e}");
        if why.contains("operation") {
            assert!(
                e.contains("strike.command") && e.contains("getChildren2"),
                "{e}"
            );
        }
    }
    // Redis as before; etcd's links are not framed.
    assert!(supports(&scope(
        System::Redis,
        Kind::FencedCounter,
        strike("{ command = \"DEL\" }")
    ))
    .is_ok());
    let e = supports(&scope(
        System::Etcd,
        Kind::FencedCounter,
        strike("{ command = \"delete\" }"),
    ))
    .unwrap_err();
    assert!(e.contains("matched by time only"), "{e}");
}
