//! The switch's scripts, run here with the local `sh` (the scripts are
//! the ones a host gets): a switch fires after its time, one disarmed in
//! time never does, and neither leaves a tagged process; the undo of
//! each fault is the script lockjaw's own undo runs.

use super::*;
use crate::remote::{RemoteChain, RemoteRule};
use crate::undo::remote::ProcStamp;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn sh(script: &str) -> (bool, String) {
    let out = Command::new("sh").arg("-c").arg(script).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The pids carrying `tag`, as the scripts find them.
fn tagged(tag: &str) -> Vec<String> {
    let (_, out) = sh(&format!("{}\nlj_pids", pids_fn(tag)));
    out.split_whitespace().map(String::from).collect()
}

#[test]
fn tags_carry_the_run_and_the_node() {
    let t = tag("ab12", "e1", 3);
    assert_eq!(t, "lockjaw-ab12-e1-dm3");
    check_tag(&t, "ab12", "e1").unwrap();
    for bad in [
        "lockjaw-ff12-e1-dm3",
        "lockjaw-ab12-e2-dm3",
        "lockjaw-ab12-e1-dm",
        "lockjaw-ab12-e1-dm3;x",
        "lockjaw-ab12-e1-dmx",
    ] {
        assert!(check_tag(bad, "ab12", "e1").is_err(), "{bad}");
    }
    assert_eq!(seconds(Duration::from_millis(19_001)), 20);
    assert_eq!(seconds(Duration::from_millis(20_000)), 20);
    assert_eq!(seconds(Duration::ZERO), 1);
}

#[test]
fn a_switch_fires_after_its_time_and_a_disarmed_one_never() {
    let d = tempfile::tempdir().unwrap();
    let id = format!("unit{}", std::process::id());
    let (a, b) = (tag(&id, "n1", 1), tag(&id, "n1", 2));
    let mark = |p: &Path| format!("echo fired > {}", quote(&p.display().to_string()));
    let (fa, fb) = (d.path().join("a"), d.path().join("b"));
    let t0 = Instant::now();
    let (ok, out) = sh(&arm_script(&a, Duration::from_secs(1), &[mark(&fa)]));
    assert!(ok, "{out}");
    let (ok, out) = sh(&arm_script(&b, Duration::from_secs(1), &[mark(&fb)]));
    assert!(ok, "{out}");
    assert!(!tagged(&a).is_empty() && !tagged(&b).is_empty());
    // A second switch with a tag that runs is refused.
    let (ok, out) = sh(&arm_script(&a, Duration::from_secs(1), &[mark(&fb)]));
    assert!(!ok && out.contains("runs already"), "{out}");
    assert_eq!(sh(&disarm_script(&b)).1.trim(), "disarmed");
    assert!(tagged(&b).is_empty(), "nothing of b is left");
    while !fa.exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "a fired");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "not before its time"
    );
    // Past b's time by a second: it never fires.
    std::thread::sleep(Duration::from_secs(2).saturating_sub(t0.elapsed()));
    assert!(!fb.exists(), "a disarmed switch does not fire");
    // Fired: no process carries its tag, disarming finds it gone.
    assert!(tagged(&a).is_empty());
    assert_eq!(sh(&disarm_script(&a)).1.trim(), "gone");
}

#[test]
fn each_fault_is_taken_back_by_lockjaws_own_undo_script() {
    let stamp = ProcStamp {
        pid: 4242,
        start: 77,
        cgroup: "0::/x".into(),
    };
    let paused = RemoteEffect::AttachedPaused {
        node: "e1".into(),
        procs: vec![stamp.clone()],
    };
    let s = undo_script(&paused, None).unwrap();
    assert_eq!(s, script::signal(&[stamp], Signal::Cont));
    assert!(
        s.contains("kill -s CONT") && s.contains("lj_sig 4242 77 "),
        "{s}"
    );
    let s = undo_script(
        &RemoteEffect::Paused {
            tag: "lockjaw-ab12-etcd1".into(),
        },
        None,
    )
    .unwrap();
    assert!(
        s.contains("LOCKJAW_TAG=lockjaw-ab12-etcd1") && s.contains("kill -CONT"),
        "{s}"
    );
    assert!(undo_script(
        &RemoteEffect::Paused {
            tag: "x; rm -rf /".into()
        },
        None
    )
    .is_err());
    let rule = RemoteRule {
        chain: RemoteChain::Input,
        peer: "10.0.0.2".parse().unwrap(),
        comment: "lockjaw:ab12 partition-node e1".into(),
    };
    let s = undo_script(&RemoteEffect::Iptables(rule.clone()), None).unwrap();
    assert_eq!(s, crate::remote::rule_script(&rule, false));
    assert!(s.contains("iptables -w -D INPUT -s 10.0.0.2"), "{s}");
    let clock = RemoteEffect::Clock {
        file: "/d/lockjaw-ab12/h1/faketime".into(),
        previous: "+0".into(),
    };
    assert!(undo_script(&clock, None)
        .unwrap()
        .contains("printf '%s\\n' +0 > /d/lockjaw-ab12/h1/faketime"));
    let find = crate::remote::Find::Pidfile {
        pidfile: "/run/e1.pid".into(),
        exe: None,
    };
    let down = RemoteEffect::AttachedDown {
        node: "e1".into(),
        find: Box::new(find),
    };
    let e = undo_script(&down, None).unwrap_err();
    assert!(e.contains("no attach table"), "{e}");
    for no in [
        RemoteEffect::Processes {
            tag: "lockjaw-ab12-h1".into(),
        },
        RemoteEffect::DataDir {
            dir: "/d/lockjaw-ab12".into(),
        },
    ] {
        assert!(undo_script(&no, None).unwrap_err().contains("no fault"));
    }
}

#[test]
fn a_killed_servers_switch_starts_it_only_when_none_of_its_description_runs() {
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("e1.pid");
    let started = d.path().join("started");
    let a = AttachSpec {
        find: crate::remote::Find::Pidfile {
            pidfile: pidfile.display().to_string(),
            exe: None,
        },
        start: format!("echo started >> {}", quote(&started.display().to_string())),
        client: None,
        role: crate::remote::attach::AttachRole::Server,
        log: crate::remote::attach::LogSource::None,
        systemctl: "systemctl".into(),
        journalctl: "journalctl".into(),
        line: 1,
    };
    let down = RemoteEffect::AttachedDown {
        node: "e1".into(),
        find: Box::new(a.find.clone()),
    };
    let s = undo_script(&down, Some(&a)).unwrap();
    // This test's own shell runs: the pidfile names it, nothing starts.
    std::fs::write(&pidfile, format!("{}\n", std::process::id())).unwrap();
    let (ok, out) = sh(&s);
    assert!(ok, "{out}");
    assert!(!started.exists(), "it runs: not started");
    // The pidfile names no process: started once.
    std::fs::write(&pidfile, "").unwrap();
    let (ok, out) = sh(&s);
    assert!(ok, "{out}");
    assert_eq!(std::fs::read_to_string(&started).unwrap(), "started\n");
}
