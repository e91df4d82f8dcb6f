//! Comparisons: the tables from cells (filled, N/A, failed; snapshots in
//! `snapshots/`), the matrix driver with a fake runner, and a real 2×1
//! `lockjaw compare`.

use crate::report_common::{
    attrs, chromium_dom, console_errors, lockjaw, run_report, without_scripts, Sim,
};
use lockjaw::report::compare::{self, Cell, CellOutcome, CellRun, CellSpec};
use lockjaw::report::RunSummary;
use lockjaw::runner::compare::run_matrix;

#[test]
fn compare_renders_a_filled_cell_and_an_na_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = Sim {
        fencing: true,
        ..Sim::default()
    };
    let run = sim.write(&tmp.path().join("cells/redis"));
    assert_eq!(
        run_report(&run).status.code(),
        Some(0),
        "fencing on: the stale write bounced"
    );
    let out = tmp.path().join("cmp");
    let res = lockjaw()
        .args([
            "compare",
            "--systems",
            "redis,redlock",
            "--nemesis",
            "pause-holder",
            "--fencing",
            "on",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--from-runs")
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(
        res.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    // The saved run lies outside the comparison: its link is absolute.
    let tmp_path = tmp.path().display().to_string();
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    insta::assert_snapshot!("from_runs_compare_md", md.replace(&tmp_path, "[tmp]"));
    let printed = String::from_utf8_lossy(&res.stdout).replace(&tmp_path, "[tmp]");
    insta::assert_snapshot!("from_runs_terminal", printed);
    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert_eq!(
        attrs(&html, "tr data-system", "data-system"),
        ["redis", "redlock"]
    );
    assert!(html.contains("N/A: Redlock has no fencing token"));

    // The same table from the library, with a cell that failed to run.
    let cells = vec![
        Cell {
            spec: CellSpec {
                client: "builtin".into(),
                system: "redis".into(),
                workload: "fenced-counter".into(),
                nemesis: "pause-holder".into(),
                fencing: Some(true),
                concurrency: None,
            },
            outcome: CellOutcome::Runs {
                runs: vec![CellRun {
                    summary: RunSummary::from_dir(&run).unwrap(),
                    report: "r/report.html".into(),
                }],
            },
        },
        Cell {
            spec: CellSpec {
                client: "builtin".into(),
                system: "etcd".into(),
                workload: "fenced-counter".into(),
                nemesis: "pause-holder".into(),
                fencing: Some(true),
                concurrency: None,
            },
            outcome: CellOutcome::Failed {
                error: "cluster did not start".into(),
            },
        },
    ];
    insta::assert_snapshot!("a_failed_cell_md", compare::compare_md("t", &cells));
}

/// The matrix driver: N/A cells are skipped, each other cell runs K times
/// into its own directory, and a failing run marks its cell failed.
#[test]
fn run_matrix_fills_cells_from_their_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    let spec = |system: &str, fencing| CellSpec {
        client: "builtin".into(),
        system: system.into(),
        workload: "fenced-counter".into(),
        nemesis: "pause-holder".into(),
        fencing,
        concurrency: None,
    };
    let mut cells = vec![
        Cell {
            spec: spec("redis", Some(false)),
            outcome: CellOutcome::Runs { runs: vec![] },
        },
        Cell {
            spec: spec("redlock", Some(true)),
            outcome: CellOutcome::NotApplicable {
                reason: "no fence".into(),
            },
        },
        Cell {
            spec: spec("etcd", Some(true)),
            outcome: CellOutcome::Runs { runs: vec![] },
        },
    ];
    let calls = std::sync::Mutex::new(vec![]);
    run_matrix(&mut cells, 2, 1, out, |s, k, dir| {
        calls.lock().unwrap().push(format!("{}-{k}", s.system));
        if s.system == "etcd" {
            return Err("cluster did not start".into());
        }
        Sim {
            seed: 40 + u64::from(k),
            ..Sim::default()
        }
        .write(dir);
        Ok(())
    });
    assert_eq!(
        calls.into_inner().unwrap(),
        ["redis-0", "redis-1", "etcd-0"]
    );
    match &cells[0].outcome {
        CellOutcome::Runs { runs } => {
            assert_eq!(runs.len(), 2);
            assert_eq!(
                runs[1].report,
                "cells/redis-fenced-counter-pause-holder-unfenced-1/report.html"
            );
            assert_eq!(runs[0].summary.stale_writes_accepted, Some(1));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&cells[2].outcome, CellOutcome::Failed { error } if error == "run 1: cluster did not start")
    );
    insta::assert_snapshot!(compare::compare_md("t", &cells));
}

/// With `jobs` 2 two runs are in flight at once (each waits, up to 10 s,
/// for a second one to start), and a failing cell still reports the error
/// of its first run.
#[test]
fn run_matrix_runs_jobs_at_once() {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    let spec = |system: &str| CellSpec {
        client: "builtin".into(),
        system: system.into(),
        workload: "fenced-counter".into(),
        nemesis: "pause-holder".into(),
        fencing: Some(false),
        concurrency: None,
    };
    let mut cells: Vec<Cell> = ["redis", "etcd"]
        .iter()
        .map(|s| Cell {
            spec: spec(s),
            outcome: CellOutcome::Runs { runs: vec![] },
        })
        .collect();
    let flight = (Mutex::new((0usize, 0usize)), Condvar::new());
    run_matrix(&mut cells, 2, 2, out, |s, k, dir| {
        let (m, cv) = &flight;
        let mut g = m.lock().unwrap();
        g.0 += 1;
        g.1 = g.1.max(g.0);
        cv.notify_all();
        let (mut g, _) = cv
            .wait_timeout_while(g, Duration::from_secs(10), |g| g.1 < 2)
            .unwrap();
        g.0 -= 1;
        drop(g);
        if s.system == "etcd" {
            return Err(format!("broken {k}"));
        }
        Sim {
            seed: 40 + u64::from(k),
            ..Sim::default()
        }
        .write(dir);
        Ok(())
    });
    assert_eq!(
        flight.0.lock().unwrap().1,
        2,
        "two runs were in flight at once"
    );
    assert!(matches!(&cells[0].outcome, CellOutcome::Runs { runs } if runs.len() == 2));
    assert!(
        matches!(&cells[1].outcome, CellOutcome::Failed { error } if error == "run 1: broken 0"),
        "{:?}",
        cells[1].outcome
    );
}

/// `lockjaw compare` on a 2×1 matrix with a short real run: the redis cell
/// (a real local Redis, pause-holder, fencing on) is filled and links its
/// report, which loads in headless Chromium with one lane per worker; the
/// redlock cell is N/A with its reason; both tables written.
#[test]
fn compare_runs_a_2x1_matrix_with_short_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut last = String::new();
    for attempt in 0..3u16 {
        let out = tmp.path().join(format!("cmp-{attempt}"));
        let port = (38000 + 30 * attempt).to_string();
        let res = lockjaw()
            .args([
                "compare",
                "--systems",
                "redis,redlock",
                "--nemesis",
                "pause-holder",
            ])
            .args([
                "--fencing",
                "on",
                "--time-limit",
                "3",
                "--ttl-ms",
                "1000",
                "--seed",
                "5",
            ])
            .arg("--out")
            .arg(&out)
            .args(["--", "--base-port", &port, "--no-progress"])
            .output()
            .unwrap();
        last = String::from_utf8_lossy(&res.stderr).to_string();
        if res.status.code() == Some(3)
            && (last.contains("is in use") || last.contains("reserved by another lockjaw run"))
        {
            continue; // a shared machine: move the ports and retry
        }
        assert_eq!(res.status.code(), Some(0), "{last}");
        let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
        let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
        let redis = md.lines().find(|l| l.starts_with("| redis |")).unwrap();
        let redlock = md.lines().find(|l| l.starts_with("| redlock |")).unwrap();
        assert!(
            redis.contains("| on | 1 (") && redis.contains("/report.html)"),
            "{redis}"
        );
        assert!(
            redis.contains("| valid |"),
            "fencing on: service and resource valid: {redis}"
        );
        assert!(
            redlock.contains("N/A: Redlock has no fencing token"),
            "{redlock}"
        );
        let link = redis
            .split("](")
            .nth(1)
            .unwrap()
            .trim_end_matches([')', ' ', '|']);
        let page = out.join(link);
        assert!(page.is_file(), "the cell's report exists: {link}");
        // The page a real run wrote loads in headless Chromium, its script
        // runs without errors, and it draws one lane per worker.
        let run: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(page.parent().unwrap().join("run.json")).unwrap(),
        )
        .unwrap();
        let workers = run["workload"]["concurrency"].as_u64().unwrap();
        let dom = chromium_dom(&page, "");
        let errors = console_errors(&dom.log);
        assert!(errors.is_empty(), "console errors: {errors:?}");
        let drawn = without_scripts(&dom.html);
        assert!(drawn.contains(r#"data-rendered="1""#), "the timeline drew");
        let lanes = attrs(&drawn, r#"data-kind="worker""#, "data-lane");
        assert_eq!(
            lanes.len() as u64,
            workers,
            "one lane per worker: {lanes:?}"
        );
        assert_eq!(
            attrs(&html, "tr data-system", "data-system"),
            ["redis", "redlock"]
        );
        return;
    }
    panic!("ports around 38000 stayed busy: {last}");
}

/// `--contention` cells: updates per second and retries per update from
/// the history, and the "At a glance" table with one row per system.
#[test]
fn contention_cells_show_updates_per_second_and_retries_at_a_glance() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = Sim {
        fencing: true,
        ..Sim::default()
    };
    let run = sim.write(&tmp.path().join("cells/redis"));
    assert_eq!(run_report(&run).status.code(), Some(0));
    let summary = RunSummary::from_dir(&run).unwrap();
    assert!(summary.updates > 0, "the simulated run wrote");
    let spec = |nemesis: &str, concurrency| CellSpec {
        client: "builtin".into(),
        system: "redis".into(),
        workload: "fenced-counter".into(),
        nemesis: nemesis.into(),
        fencing: Some(true),
        concurrency,
    };
    let filled = |s: CellSpec| Cell {
        spec: s,
        outcome: CellOutcome::Runs {
            runs: vec![CellRun {
                summary: summary.clone(),
                report: "r/report.html".into(),
            }],
        },
    };
    let without = compare::compare_md("t", &[filled(spec("pause-holder", None))]);
    assert!(!without.contains("At a glance"), "{without}");
    let cells = vec![
        filled(spec("pause-holder", None)),
        filled(spec("none", Some(5))),
    ];
    insta::assert_snapshot!("contention_md", compare::compare_md("t", &cells));
    let out = std::path::Path::new("histories/compare-x");
    insta::assert_snapshot!(
        "contention_terminal",
        compare::compare_terminal("t", &cells, out)
    );
    let html = compare::compare_html("t", &cells);
    assert!(html.contains(r#"<table class="t" id="glance">"#), "{html}");
}
