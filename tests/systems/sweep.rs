//! `lockjaw sweep` end to end on real Redis (and etcd in the long sweep):
//! a 2 values × 2 runs sweep of pause-holder's length with the safety
//! bound checked strictly (no stale write is possible at 0.3 leases) and
//! liveness loosely (an injection lands at 2 leases); bad `--vary` inputs
//! (no servers); and, for make test-long, a real `--find-boundary` and the
//! issue's redis/etcd sweep. The runs pick their own port blocks (no
//! `--base-port`, `--jobs 2`).

use super::run_util::{json_file, lockjaw};
use serde_json::Value;
use std::path::Path;
use std::time::Instant;

/// `lockjaw sweep ARGS --out DIR --no-progress`: (exit code, stdout, stderr).
fn sweep(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let start = Instant::now();
    let out = lockjaw()
        .arg("sweep")
        .args(args)
        .args(["--out", &dir.display().to_string(), "--no-progress"])
        .output()
        .expect("lockjaw runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    eprintln!(
        "sweep {args:?}: exit {:?} in {:.1} s\n{stdout}",
        out.status.code(),
        start.elapsed().as_secs_f64()
    );
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// The rows of `system` in sweep.json, checked for consistency: every
/// kind's n is the landed injections of the row's runs (counted from their
/// nemesis.json), k ≤ n; each run's report exists.
fn rows(out: &Path, system: &str) -> Vec<Value> {
    let j = json_file(&out.join("sweep.json"));
    let sys = j["systems"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["system"] == system))
        .unwrap_or_else(|| panic!("{system} in sweep.json: {j}"))
        .clone();
    let rows = sys["rows"].as_array().cloned().unwrap_or_default();
    for r in &rows {
        let reports: Vec<&str> = r["reports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert_eq!(
            reports.len() as u64,
            r["tally"]["runs"].as_u64().unwrap(),
            "{r}"
        );
        let mut want = 0;
        for p in &reports {
            let report = out.join(p);
            assert!(report.is_file(), "{}", report.display());
            want += crate::run_util::landed_count(report.parent().unwrap());
        }
        assert_eq!(r["tally"]["landed"].as_u64(), Some(want), "{r}");
        for (kind, rate) in r["rates"].as_object().unwrap() {
            let (k, n) = (rate["k"].as_u64().unwrap(), rate["n"].as_u64().unwrap());
            assert_eq!(n, want, "{kind}: {r}");
            assert!(k <= n, "{kind}: {r}");
        }
    }
    rows
}

/// k of a kind in a row (0 when the kind was never seen: its rate is 0 of
/// the landed injections).
fn k_of(row: &Value, kind: &str) -> u64 {
    row["rates"][kind]["k"]
        .as_u64()
        .or_else(|| row["tally"]["per_kind"][kind]["k"].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_two_value_sweep_on_redis_keeps_the_safety_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep");
    let (code, stdout, stderr) = sweep(
        &out,
        &[
            "--system",
            "redis",
            "--nemesis",
            "pause-holder",
            "--vary",
            "duration_leases=0.3,2",
            "--runs",
            "2",
            "--jobs",
            "2",
            "--fencing",
            "off",
            "--time-limit",
            "4",
            "--ttl-ms",
            "1000",
            "--hold-ms",
            "200",
            "--seed",
            "17",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    for f in ["sweep.md", "sweep.html", "sweep.json"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let html = std::fs::read_to_string(out.join("sweep.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("1 lease"), "{html}");
    assert!(
        stdout.contains("| duration_leases (leases) | runs | landed injections |"),
        "{stdout}"
    );
    assert!(stdout.contains("sweep.html"), "{stdout}");
    let rows = rows(&out, "redis");
    let values: Vec<f64> = rows.iter().map(|r| r["value"].as_f64().unwrap()).collect();
    assert_eq!(values, [0.3, 2.0]);
    // Safety, strictly: a 300 ms pause plus a 200 ms hold ends inside the
    // 1000 ms lease, so no injection can cause a stale write (or anything).
    assert_eq!(k_of(&rows[0], "stale-writes"), 0, "{}", rows[0]);
    assert_eq!(k_of(&rows[0], "any"), 0, "{}", rows[0]);
    // Liveness, loosely: some 2-lease pause landed in a critical section.
    assert!(
        rows[1]["tally"]["landed"].as_u64().unwrap() >= 1,
        "{}",
        rows[1]
    );
    // Each value ran from its own nemesis file, named in the runs' command.
    let file = out.join("nemesis/pause-holder-duration_leases-2.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("duration_leases = 2.0"), "{text}");
    let run = out.join("runs/redis-duration_leases-2-1/run.json");
    let run = std::fs::read_to_string(&run).unwrap();
    assert!(run.contains("pause-holder-duration_leases-2.toml"), "{run}");
}

#[test]
fn a_bad_vary_exits_3_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    let base = [
        "--system",
        "redis",
        "--nemesis",
        "pause-holder",
        "--ttl-ms",
        "1000",
    ];
    for (extra, want) in [
        (&["--vary", "speed=1,2"][..], "unknown parameter `speed`"),
        (
            &["--vary", "offset_ms=100,200"],
            "pause-holder takes no offset_ms",
        ),
        (
            &["--vary", "duration_leases=0,1"],
            "--vary duration_leases: 0 is not positive",
        ),
        (&["--vary", "duration_leases=x"], "`x` is not a number"),
        (&["--vary", "hold_ms=100,600"], "--vary hold_ms=600"),
        (
            &["--vary", "duration_leases=1", "--find-boundary"],
            "needs a range",
        ),
        (
            &[
                "--vary",
                "duration_leases=1,2",
                "--find-boundary",
                "--anomaly",
                "oops",
            ],
            "--anomaly: unknown anomaly kind `oops`",
        ),
        (
            &["--vary", "duration_leases=1,2", "--anomaly", "any"],
            "applies to --find-boundary only",
        ),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(extra);
        let (code, _, stderr) = sweep(&out, &args);
        assert_eq!(code, 3, "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
        assert!(stderr.contains("hint"), "{extra:?}: {stderr}");
        assert!(
            !out.exists(),
            "{extra:?}: nothing is written before the checks pass"
        );
    }
}

#[test]
#[ignore = "a boundary search on Redis, a few minutes (make test-long)"]
fn find_boundary_brackets_the_redis_pause_edge() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("boundary");
    let (code, stdout, stderr) = sweep(
        &out,
        &[
            "--system",
            "redis",
            "--nemesis",
            "pause-holder",
            "--vary",
            "duration_leases=0.5,2",
            "--find-boundary",
            "--anomaly",
            "stale-writes",
            "--fencing",
            "off",
            "--ttl-ms",
            "1000",
            "--hold-ms",
            "100",
            "--time-limit",
            "5",
            "--max-runs-per-probe",
            "6",
            "--jobs",
            "2",
            "--seed",
            "5",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let j = json_file(&out.join("sweep.json"));
    let b = &j["systems"][0]["boundary"];
    let probes = b["probes"].as_array().unwrap();
    let spent: u64 = probes.iter().map(|p| p["runs"].as_u64().unwrap()).sum();
    assert_eq!(b["runs"].as_u64(), Some(spent), "{b}");
    assert!(stdout.contains(b["sentence"].as_str().unwrap()), "{stdout}");
    rows(&out, "redis");
    // The edge is near 1 - hold/ttl = 0.9 leases: the bracket (or the
    // undecided value's bracket) must straddle it loosely.
    let (lo, hi) = (
        b["found"]["lo"].as_f64().unwrap(),
        b["found"]["hi"].as_f64().unwrap(),
    );
    assert!(
        ["bracket", "undecided"].contains(&b["found"]["result"].as_str().unwrap()),
        "{b}"
    );
    assert!(lo <= 1.3 && hi >= 0.6, "{b}");
}

#[test]
#[ignore = "the issue's redis/etcd pause-holder sweep, about 15 minutes (make test-long)"]
fn the_pause_holder_sweep_on_redis_and_etcd() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("long");
    let (code, _, stderr) = sweep(
        &out,
        &[
            "--system",
            "redis,etcd",
            "--nemesis",
            "pause-holder",
            "--vary",
            "duration_leases=0.5,0.75,0.9,1.1,1.25,1.5,2",
            "--runs",
            "5",
            "--fencing",
            "off",
            "--time-limit",
            "10",
            "--ttl-ms",
            "2000",
            "--hold-ms",
            "200",
            "--jobs",
            "2",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    for system in ["redis", "etcd"] {
        let rows = rows(&out, system);
        assert_eq!(rows.len(), 7);
        // Safety, strictly: a 0.5-lease pause plus a 0.1-lease hold ends
        // inside the lease on both (etcd's keep-alives leave at least 2/3).
        assert_eq!(k_of(&rows[0], "stale-writes"), 0, "{system}: {}", rows[0]);
        // Liveness, loosely: at 2 leases most landed pauses write stale.
        let last = &rows[6]["rates"]["stale-writes"];
        assert!(last["k"].as_u64() > Some(0), "{system}: {last}");
    }
}
