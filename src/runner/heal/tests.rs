//! The undo executor against real effects: clock files confined to the
//! run directory, processes paused and started, an embedded Toxiproxy
//! that died with lockjaw.

use super::executor;
use crate::process;
use crate::undo::{RunDir, Scope, Trust, Undo, UndoLog, UNDO_FILE};
use std::time::Duration;

#[tokio::test]
async fn a_clock_file_outside_the_run_directory_is_not_written() {
    let t = tempfile::tempdir().unwrap();
    let (run, outside) = (t.path().join("run"), t.path().join("victim"));
    std::fs::create_dir_all(run.join("faketime")).unwrap();
    std::fs::write(&outside, "keep\n").unwrap();
    std::os::unix::fs::symlink(&outside, run.join("faketime/link.offset")).unwrap();
    let log = UndoLog::open(&run.join(UNDO_FILE), executor()).unwrap();
    let mut ids = Vec::new();
    for file in [
        outside.clone(),
        run.join("../victim"),
        run.join("faketime/link.offset"),
    ] {
        let previous = "+0".to_string();
        ids.push(log.push(Undo::Clock { file, previous }).unwrap());
    }
    let good = run.join("faketime/n1.offset");
    std::fs::write(&good, "+4.000s\n").unwrap();
    let previous = "+0".to_string();
    log.push(Undo::Clock {
        file: good.clone(),
        previous,
    })
    .unwrap();
    let bad_offset = "-F\n@2000-01-01".to_string();
    let g2 = good.clone();
    log.push(Undo::Clock {
        file: g2,
        previous: bad_offset,
    })
    .unwrap();
    let errors = log.drain().await;
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(
        errors.iter().all(|e| e.msg.ends_with("skipped")),
        "{errors:?}"
    );
    assert!(
        errors[3].to_string().contains("undo.jsonl:1)"),
        "{errors:?}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
    assert_eq!(std::fs::read_to_string(&good).unwrap(), "+0\n");
    assert_eq!(log.pending().len(), 4);
}

#[tokio::test]
async fn a_paused_process_is_continued_and_a_started_one_stopped() {
    let d = tempfile::tempdir().unwrap();
    let log = UndoLog::open(&d.path().join(UNDO_FILE), executor()).unwrap();
    let child = process::spawn(&process::Spec::new("sleep").arg("30")).unwrap();
    let id = child.id();
    log.push(Undo::Process {
        what: "sleep".into(),
        proc: id,
    })
    .unwrap();
    let paused = log
        .push(Undo::Paused {
            what: "sleep".into(),
            proc: id,
        })
        .unwrap();
    child.pause().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !id.is_stopped() {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    log.undo(paused).await.unwrap();
    assert!(!id.is_stopped());
    log.set_grace(Duration::from_millis(200));
    assert!(log.drain().await.is_empty());
    child.try_wait();
    assert!(!id.is_alive());
    assert!(log.pending().is_empty());
}

#[tokio::test]
async fn an_unreachable_embedded_toxiproxy_counts_as_healed() {
    // Port 1 on loopback refuses connections.
    let u = Undo::Toxic {
        url: "http://127.0.0.1:1".into(),
        proxy: "lockjaw-ab12-w0-p".into(),
        toxic: "t".into(),
        embedded: true,
    };
    let d = tempfile::tempdir().unwrap();
    let scope = Scope {
        dir: std::sync::Arc::new(RunDir::open(d.path()).unwrap()),
        run_id: Some("ab12".into()),
    };
    let heal = executor();
    heal.heal(&u, &scope, Trust::Prove, Duration::ZERO)
        .await
        .unwrap();
    let external = Undo::Toxic {
        url: "http://127.0.0.1:1".into(),
        proxy: "lockjaw-ab12-w0-p".into(),
        toxic: "t".into(),
        embedded: false,
    };
    assert!(heal
        .heal(&external, &scope, Trust::Prove, Duration::ZERO)
        .await
        .is_err());
}

/// `heal RUN_DIR` of a run whose own log is drained heals the runs
/// beneath it (a killed `lockjaw shrink`'s step run): the step run's
/// process is stopped and its cgroup group removed, and each run says
/// what was healed. Before, heal said "nothing to heal" and left both.
#[test]
fn heal_of_a_run_heals_the_step_runs_beneath_it() {
    use crate::process::Cgroup;
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join(UNDO_FILE), "").unwrap();
    let step = run.join("shrink/runs/step-1/run-1");
    std::fs::create_dir_all(&step).unwrap();
    let owner = process::Owner::of_dir(&step).unwrap();
    let group = format!("lockjaw/unit-heal-below-{}", std::process::id());
    let gdir = Cgroup::create_group(&group, owner.tag()).unwrap();
    let mut spec = process::Spec::new("sleep").arg("30");
    spec.cgroup = gdir.as_ref().map(|g| g.join("worker-0.0"));
    let child = process::spawn(&spec).unwrap();
    {
        let log = UndoLog::open(&step.join(UNDO_FILE), executor()).unwrap();
        log.push(Undo::Cgroup {
            group: group.clone(),
        })
        .unwrap();
        log.push(Undo::Process {
            what: "worker 0".into(),
            proc: child.id(),
        })
        .unwrap();
    }
    let out = super::heal_dir(&run, false, false).unwrap();
    child.try_wait();
    let said = format!("{:?} {:?}", out.lines, out.problems);
    assert!(
        out.lines
            .contains(&format!("{}: nothing to heal", run.display())),
        "{said}"
    );
    assert!(
        out.lines.contains(&format!(
            "{}: 1 run(s) beneath, 1 with something to heal",
            run.display()
        )),
        "{said}"
    );
    match &gdir {
        Some(g) => {
            assert!(out.problems.is_empty(), "{said}");
            let healed = format!("{}: healed 2 effects", step.display());
            assert!(out.lines.contains(&healed), "{said}");
            assert!(!child.id().is_alive(), "the step run's process is left");
            assert!(!g.exists(), "{} is left", g.display());
        }
        // No cgroup v2: nothing proves the process is the run's (as
        // root), so it is named and left; it is still looked at.
        None => {
            assert!(said.contains(&format!("pid {}", child.id().pid)), "{said}");
            child.kill().unwrap();
        }
    }
    assert!(
        crate::undo::read_pending(&step.join(UNDO_FILE))
            .unwrap()
            .is_empty()
            || gdir.is_none()
    );
}
