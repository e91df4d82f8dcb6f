//! An interrupted `lockjaw run` exits 1 if it found anomalies, else 2
//! (the run without anomalies is the Ctrl-C test in `run_heal`), and the
//! README and docs/running.md say so.

use crate::run_util::{assert_nothing_left, eventually, free_base, json_file, lockjaw, Guard};
use std::path::Path;
use std::time::{Duration, Instant};

/// Whether `lockjaw check` finds anomalies in the history recorded so far
/// (a copy: checking a run directory's history rewrites its results).
fn anomalies_so_far(dir: &Path, copy: &Path) -> bool {
    if std::fs::copy(dir.join("history.jsonl"), copy).is_err() {
        return false;
    }
    let out = lockjaw().arg("check").arg(copy).output().unwrap();
    out.status.code() == Some(1)
}

#[test]
fn sigterm_after_an_anomaly_exits_1_as_the_docs_say() {
    let rule = "exits 1 if it found anomalies, else 2";
    let docs = include_str!("../../docs/running.md").replace("**", "");
    assert!(docs.contains(rule), "docs/running.md states the rule");
    let readme = include_str!("../../README.md").replace('\n', " ");
    assert!(readme.contains(rule), "README.md states the rule");

    let t = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut g = Guard::spawn(
        lockjaw()
            .args(["run", "--system", "redis", "--workload", "fenced-counter"])
            .args(["--nemesis", "pause-holder", "--fencing", "off"])
            .args(["--time-limit", "120", "--ttl-ms", "600", "--hold-ms", "100"])
            .args(["--base-port", &free_base(37500).to_string()])
            .args(["--seed", "3", "--no-progress", "--out"])
            .arg(&dir),
    );
    // A paused holder's stale write lands (fencing off): the history so
    // far, cut last line and all, shows the anomaly.
    let copy = tmp.path().join("so-far.jsonl");
    eventually("an anomaly in the history", Duration::from_secs(60), || {
        anomalies_so_far(&dir, &copy)
    });
    g.signal(libc::SIGTERM);
    let code = g.wait(Duration::from_secs(60));
    assert_nothing_left(&dir);
    assert_eq!(code, Some(1), "an interrupted run that found anomalies");
    assert_eq!(json_file(&dir.join("run.json"))["outcome"], "interrupted");
    eprintln!("sigterm test: {:.1} s", t.elapsed().as_secs_f64());
}
