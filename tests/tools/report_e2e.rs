//! Reports end to end: a generated run directory → `lockjaw report` →
//! report.html loaded in headless Chromium (no script errors, one timeline
//! lane per worker, the witness ops highlighted); summary.md of the
//! committed example reproduced; a bad directory refused with exit 3;
//! compare tables (in `report_compare/`).

use crate::report_common::{
    attr, attrs, chromium_dom, console_errors, lockjaw, run_report, without_scripts, Sim,
};
use lockjaw::report::RunSummary;
use std::path::{Path, PathBuf};

#[test]
fn report_html_loads_in_chromium_with_one_lane_per_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Sim::default().write(&tmp.path().join("run"));
    let out = run_report(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the run has a stale write, so exit 1: {stderr}"
    );
    assert!(dir.join("summary.md").is_file());
    let page = dir.join("report.html");
    let text = std::fs::read_to_string(&page).unwrap();
    for external in ["<link", "src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(
            !text.contains(external),
            "no external resources ({external})"
        );
    }

    let mut dom = chromium_dom(&page, "#anom-0");
    assert!(
        console_errors(&dom.log).is_empty(),
        "console errors: {:?}",
        console_errors(&dom.log)
    );
    dom.html = without_scripts(&dom.html);
    assert!(
        dom.html.contains(r#"<pre id="lj-errors" hidden=""></pre>"#),
        "script errors caught in the page"
    );
    assert!(
        dom.html.contains(r#"data-rendered="1""#),
        "the timeline script ran to the end"
    );

    // One label and one drawn lane per worker; renumbered and lease
    // processes share their worker's lane.
    let workers = attrs(&dom.html, r#"data-kind="worker""#, "data-lane");
    assert_eq!(workers, ["w0", "w1", "w2"]);
    let procs = attrs(&dom.html, r#"data-kind="worker""#, "data-processes");
    assert!(
        procs[1].split(' ').any(|p| p == "4"),
        "process 4 (worker 1 after an info) in lane w1: {procs:?}"
    );
    assert!(
        procs[2].split(' ').any(|p| p == "2-lease"),
        "2-lease in lane w2: {procs:?}"
    );
    let drawn = attrs(&dom.html, "g data-lane", "data-lane");
    assert_eq!(drawn, ["nemesis", "w0", "w1", "w2", "x-final"]);

    // The first anomaly (from the URL fragment) is focused: its witness ops
    // are drawn highlighted and listed with their indexes.
    let summary = RunSummary::from_dir(&dir).unwrap();
    let want: Vec<String> = summary.anomalies[0]
        .ops
        .iter()
        .map(u64::to_string)
        .collect();
    let highlighted: Vec<&str> = dom
        .html
        .split('<')
        .filter(|t| {
            t.starts_with("rect ")
                && attr(t, "class").is_some_and(|c| c.split(' ').any(|c| c == "hl"))
        })
        .flat_map(|t| [attr(t, "data-op"), attr(t, "data-done")])
        .flatten()
        .collect();
    for op in &want {
        let listed =
            dom.html.contains(&format!(">#{op}")) || dom.html.contains(&format!("→ #{op}"));
        assert!(listed, "witness op #{op} listed in the details");
    }
    assert!(
        want.iter().any(|w| highlighted.contains(&w.as_str())),
        "a witness op is highlighted: want {want:?}, highlighted {highlighted:?}"
    );
}

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/redis-fenced-counter-pause-holder")
}

/// `lockjaw report` on the committed example (a real 5 s run: redis,
/// pause-holder, fencing off) gives the summary.md of the snapshot (and of
/// the example directory: keep both when the snapshot changes).
#[test]
fn report_on_committed_example_reproduces_its_summary() {
    let ex = example_dir();
    let tmp = tempfile::tempdir().unwrap();
    for f in ["history.jsonl", "run.json", "results.json", "nemesis.json"] {
        std::fs::copy(ex.join(f), tmp.path().join(f)).unwrap();
    }
    let out = lockjaw().arg("report").arg(tmp.path()).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = std::fs::read_to_string(tmp.path().join("summary.md")).unwrap();
    insta::assert_snapshot!(got);
    let example = std::fs::read_to_string(ex.join("summary.md")).unwrap();
    assert!(
        got == example,
        "histories/examples/redis-fenced-counter-pause-holder/summary.md is not what `lockjaw report` writes (hint: copy the accepted snapshot's text there)"
    );
}

#[test]
fn report_on_a_bad_directory_exits_3_naming_the_missing_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_report(tmp.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3));
    assert!(err.contains("history.jsonl: missing"), "{err}");
    std::fs::write(tmp.path().join("history.jsonl"), "").unwrap();
    std::fs::write(tmp.path().join("run.json"), "{}").unwrap();
    let err = String::from_utf8_lossy(&run_report(tmp.path()).stderr).to_string();
    assert!(
        err.contains("results.json: missing") && err.contains("hint:"),
        "{err}"
    );
    // results.json from before the typed format: exit 3, and the hint
    // names the command that rewrites it.
    std::fs::write(
        tmp.path().join("results.json"),
        r#"{"valid": true, "checks": {}}"#,
    )
    .unwrap();
    let out = run_report(tmp.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("run `lockjaw check"), "{err}");
    let out = run_report(&tmp.path().join("nope"));
    assert_eq!(out.status.code(), Some(3));
}

/// 100,000 ops: the page stays a few megabytes, loads without script
/// errors, and draws the full view as density bins (bounded DOM). Prints
/// the size and generation time (`--nocapture`; figures in the README);
/// `LOCKJAW_KEEP_100K=DIR` keeps the run directory.
#[test]
fn report_of_100k_ops_loads_and_stays_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("LOCKJAW_KEEP_100K").map(PathBuf::from);
    let base = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let sim = Sim {
        workers: 8,
        // LOCKJAW_SCALE_STEPS=100000 makes it a 1,000,000-op history.
        steps: std::env::var("LOCKJAW_SCALE_STEPS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10_000),
        pauses: vec![1000, 5000, 9000],
        kills: vec![3000],
        infos: vec![200, 7000],
        ..Sim::default()
    };
    let dir = sim.write(&base.join("run"));
    let lines = std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(lines >= 100_000, "{lines} lines");
    let t = std::time::Instant::now();
    let out = run_report(&dir);
    let gen = t.elapsed();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = dir.join("report.html");
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(
        size < 64 * lines as u64,
        "report.html is {size} bytes for {lines} lines"
    );
    let t = std::time::Instant::now();
    let dom = chromium_dom(&page, "#selftest");
    let load = t.elapsed();
    assert!(
        console_errors(&dom.log).is_empty(),
        "{:?}",
        console_errors(&dom.log)
    );
    let html = without_scripts(&dom.html);
    assert!(
        html.contains(r#"data-rendered="1""#)
            && html.contains(r#"<pre id="lj-errors" hidden=""></pre>"#)
    );
    // The self-test drove every control: zoom, pan, wheel, drag, each
    // anomaly, an op link, a details row, an op, the overview, fit all.
    let steps = attr(
        &html[html.find("<section id=\"timeline\"").unwrap()..],
        "data-selftest",
    )
    .unwrap_or("");
    // Every anomaly results.json lists (the checker's; at least the 7 the
    // simulation injected: 3 stale writes, their lost updates, the holders).
    let anomalies = RunSummary::from_dir(&dir).unwrap().anomalies.len();
    assert!(anomalies >= 7, "{anomalies} anomalies");
    let anomalies = format!("anomalies:{anomalies}");
    for step in [
        "in",
        "wheel",
        "drag",
        anomalies.as_str(),
        "oplink",
        "detail-row",
        "op-rect",
        "fit",
    ] {
        assert!(
            steps.split(' ').any(|s| s == step),
            "self-test step {step} missing: {steps}"
        );
    }
    let rects = html.matches("<rect").count();
    assert!(html.contains(r#"class="agg"#), "the full view aggregates");
    assert!(rects < 20_000, "{rects} rects drawn for the full view");
    let summary = RunSummary::from_dir(&dir).unwrap();
    assert_eq!(summary.reacquire_after_kill_ms.len(), 1);
    assert!(
        summary.reacquire_after_kill_ms[0] >= 2000.0,
        "{:?}",
        summary.reacquire_after_kill_ms
    );
    println!(
        "100k-op report: {lines} history lines, report.html {:.2} MiB, generated in {:.2} s (lockjaw report, this build), \
         Chromium load+dump {:.1} s, {rects} rects in the full view",
        size as f64 / (1 << 20) as f64,
        gen.as_secs_f64(),
        load.as_secs_f64()
    );
}

/// A register run whose results.json is a linearizability result: the page
/// shows the counterexample (prefix with states, the op that could not
/// follow) linked to the timeline, and loads without script errors.
#[test]
fn register_report_shows_the_linearizability_counterexample() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ms = 1_000_000u64;
    let lines = [
        r#"{"type":"meta","checkers":["linearizable"],"model":"cas-register","workload":"register","concurrency":2}"#.to_string(),
        format!(r#"{{"index":0,"time":{},"process":0,"type":"invoke","f":"write","key":"r","value":1}}"#, ms),
        format!(r#"{{"index":1,"time":{},"process":0,"type":"ok","f":"write","key":"r","value":1}}"#, 2 * ms),
        format!(r#"{{"index":2,"time":{},"process":1,"type":"invoke","f":"read","key":"r"}}"#, 3 * ms),
        format!(r#"{{"index":3,"time":{},"process":1,"type":"ok","f":"read","key":"r","value":2}}"#, 4 * ms),
    ];
    std::fs::write(dir.join("history.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.join("run.json"),
        r#"{"system":"etcd","workload":{"name":"register"},"nemesis":{"name":"none"},"seed":3}"#,
    )
    .unwrap();
    let results =
        lockjaw::check::check_history(&dir.join("history.jsonl"), &Default::default()).unwrap();
    assert_eq!(results.checkers, [lockjaw::check::Checker::Linearizable]);
    let results = serde_json::to_value(&results).unwrap();
    std::fs::write(dir.join("results.json"), results.to_string()).unwrap();
    assert_eq!(run_report(dir).status.code(), Some(1));
    let s = RunSummary::from_dir(dir).unwrap();
    assert_eq!(s.linearizable, Some(lockjaw::check::Validity::False));
    assert_eq!(s.anomalies.len(), 1);
    assert_eq!(s.anomalies[0].ops, [0, 1, 2, 3]);
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("linearizable: invalid") && md.contains("read → 2 (op 2)"),
        "{md}"
    );

    let mut dom = chromium_dom(&dir.join("report.html"), "#anom-0");
    assert!(
        console_errors(&dom.log).is_empty(),
        "{:?}",
        console_errors(&dom.log)
    );
    dom.html = without_scripts(&dom.html);
    assert!(
        dom.html.contains(r#"<pre id="lj-errors" hidden=""></pre>"#)
            && dom.html.contains(r#"data-rendered="1""#)
    );
    assert!(
        dom.html.contains("Linearizability counterexample")
            && dom.html.contains("not legal in this state")
    );
    assert_eq!(
        attrs(&dom.html, r#"data-kind="worker""#, "data-lane"),
        ["w0", "w1"]
    );
}

/// results.json from the lock checker keeps the first 10 witnesses per
/// check; the page lists every one (found again from the history), while
/// summary.md and the counts stay those of results.json.
#[test]
fn report_lists_witnesses_beyond_the_results_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = Sim {
        steps: 40,
        pauses: (0..12).map(|i| 2 + 3 * i).collect(),
        infos: vec![],
        ..Sim::default()
    };
    let dir = sim.write(tmp.path());
    let opts = lockjaw::check::lock::LockOptions::default();
    let checked = lockjaw::check::lock::check_file(&dir.join("history.jsonl"), &opts).unwrap();
    assert_eq!(checked.checks.stale_writes.count, 12);
    assert_eq!(
        checked.checks.stale_writes.witnesses.len(),
        lockjaw::check::lock::MAX_WITNESSES
    );
    let mut results =
        lockjaw::check::check_history(&dir.join("history.jsonl"), &Default::default()).unwrap();
    results.lock = Some(checked);
    std::fs::write(dir.join("results.json"), results.to_json_pretty()).unwrap();

    assert_eq!(run_report(&dir).status.code(), Some(1));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let listed = html.matches("[resource · stale_writes]").count();
    assert_eq!(listed, 12, "every stale write is listed on the page");
    assert!(html.contains("found again from the history"));
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("stale writes accepted: 12 found, the first 3 listed"),
        "{md}"
    );
    let s = RunSummary::from_dir(&dir).unwrap();
    assert_eq!(
        (s.stale_writes_accepted, s.lost_updates),
        (Some(12), Some(12))
    );
}
