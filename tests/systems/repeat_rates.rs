//! Repeated runs as measurements, on a real single Redis: `compare --runs
//! 2` and `run --runs 2` tally each landed injection as a trial and give
//! rates per anomaly kind with their Wilson intervals. The tallies are
//! checked against what each run directory says on its own (nemesis.json's
//! injections, results.json's counts), not against themselves.
//!
//! Ports: the runs go two at a time without `--base-port`, so each takes a
//! free block of its own in 10000-16999 (the block 50000-50399 is this
//! file's should a test need fixed ports).

use crate::run_util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn stale_writes(run: &Path) -> u64 {
    json_file(&run.join("results.json"))["lock"]["checks"]["stale_writes"]["count"]
        .as_u64()
        .unwrap()
}

/// The tally's rate of `kind` is consistent: n is the landed injections,
/// k at most n, the interval holds k/n.
fn check_rate(tally: &Value, kind: &str) -> (u64, u64) {
    let r = &tally["per_kind"][kind];
    let (k, n) = (r["k"].as_u64().unwrap(), r["n"].as_u64().unwrap());
    let (lo, hi) = (r["lo"].as_f64().unwrap(), r["hi"].as_f64().unwrap());
    assert_eq!(n, tally["landed"].as_u64().unwrap(), "{tally}");
    assert!(k <= n, "{tally}");
    let p = k as f64 / n as f64;
    assert!(lo <= p && p <= hi && 0.0 <= lo && hi <= 1.0, "{tally}");
    (k, n)
}

/// The tally covers the two runs and agrees with each one's own account:
/// (landed injections, stale writes) summed over the runs.
fn matches_its_runs(tally: &Value, runs: &[PathBuf]) -> (u64, u64) {
    assert_eq!(tally["runs"], 2, "{tally}");
    assert_eq!(runs.len(), 2, "{runs:?}");
    let landed: u64 = runs.iter().map(|r| landed_count(r)).sum();
    assert_eq!(tally["landed"].as_u64().unwrap(), landed, "{tally}");
    let stale: u64 = runs.iter().map(|r| stale_writes(r)).sum();
    let counted = tally["anomalies"]["stale-writes"].as_u64().unwrap_or(0);
    assert_eq!(counted, stale, "{tally}");
    (landed, stale)
}

fn dirs(root: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    v.sort();
    v
}

/// Two runs at once, holders paused for 1.5 leases of 1 s, no fencing.
const PAUSED_TWICE: [&str; 10] = [
    "--nemesis",
    "pause-holder",
    "--fencing",
    "off",
    "--runs",
    "2",
    "--jobs",
    "2",
    "--ttl-ms",
    "1000",
];

/// `compare --runs 2`: the cell's tally is the sum of its runs' own
/// accounts, and the paused holders' stale writes (fencing off) are
/// attributed to the pauses.
#[test]
fn compare_runs_tally_the_landed_injections_of_every_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cmp");
    let res = lockjaw()
        .args(["compare", "--systems", "redis"])
        .args(PAUSED_TWICE)
        .args(["--time-limit", "3", "--seed", "17", "--out"])
        .arg(&out)
        .args(["--", "--hold-ms", "200"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert_eq!(
        res.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let cells = json_file(&out.join("compare.json"));
    let tally = &cells[0]["tally"];
    let (landed, _) = matches_its_runs(tally, &dirs(&out.join("cells"), "redis-"));
    // A holder paused for 1.5 leases wakes after another worker took the
    // lock and writes without a fence: the pause is the trial that shows it.
    assert!(landed >= 1, "no pause landed in 2 × 3 s: {tally}");
    let (k, _) = check_rate(tally, "stale-writes");
    assert!(k >= 1, "{tally}");
    // The terminal's narrow view: the verdict names the stale writes, the
    // rate counts the landed pauses; compare.md has every column.
    assert!(
        stdout.contains("stale accepted") && stdout.contains(&format!("/{landed} = ")),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(
        md.contains("faults landed") && md.contains("stale writes"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert!(html.contains("anomalies per landed fault"), "compare.html");
}

/// `run --runs 2 --out DIR`: the tally printed and written to
/// DIR/tally.json covers both run directories.
#[test]
fn run_runs_writes_the_tally_of_its_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let res = lockjaw()
        .args(["run", "--system", "redis"])
        .args(PAUSED_TWICE)
        .args([
            "--time-limit",
            "2.5",
            "--hold-ms",
            "200",
            "--seed",
            "5",
            "--no-progress",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(
        matches!(res.status.code(), Some(0 | 1)),
        "{stdout}{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let tally = json_file(&out.join("tally.json"));
    let (_, stale) = matches_its_runs(&tally, &dirs(&out, "run-"));
    if stale > 0 {
        check_rate(&tally, "stale-writes");
    }
    assert!(
        stdout.contains("injections landed over 2 run(s)"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("tally.md")).unwrap();
    assert!(md.contains("Wilson"), "{md}");
}
