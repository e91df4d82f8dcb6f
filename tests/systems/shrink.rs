//! `lockjaw shrink` end to end on real Redlock runs: a short clock-jump
//! run shrunk with one run per step (make test), and the `make demo` run
//! shrunk in full (make test-long). What is checked is read from the
//! files shrink and its runs wrote, not from shrink's own summary line.
//!
//! Ports: every run takes a free block of its own (no `--base-port`).

use crate::run_util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `lockjaw shrink DIR ARGS`: (exit code, stdout).
/// Redlock with 3 workers, 500 ms leases, a 3 s run under clock-jump
/// without fencing (two valid leases at once): the run shrink starts
/// from, in `dir`.
pub fn redlock_two_holders(name: &str, dir: &Path) -> Run {
    run(
        name,
        dir,
        &[
            "--system",
            "redlock",
            "--workload",
            "fenced-counter",
            "--nemesis",
            "clock-jump",
            "--fencing",
            "off",
            "--time-limit",
            "3",
            "--concurrency",
            "3",
            "--ttl-ms",
            "500",
            "--seed",
            "1",
        ],
    )
}

fn shrink(dir: &Path, args: &[&str]) -> (i32, String) {
    let start = Instant::now();
    let out = lockjaw()
        .arg("shrink")
        .arg(dir)
        .args(args)
        .output()
        .expect("lockjaw runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let code = out.status.code().unwrap_or(-1);
    eprintln!(
        "[shrink] exit {code} in {:.1} s\n{stdout}{}",
        start.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr)
    );
    (code, stdout)
}

/// A flag's value in a command line.
fn flag(command: &str, name: &str) -> Option<f64> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let i = words.iter().position(|w| *w == name)?;
    words.get(i + 1)?.parse().ok()
}

/// Every step's counts meet its rule, every run of it is an ordinary run
/// directory that ran the step's command; returns the state.
fn check_steps(dir: &Path) -> Value {
    let state = json_file(&dir.join("shrink/state.json"));
    let steps = state["steps"].as_array().expect("steps");
    assert!(!steps.is_empty(), "{state}");
    for s in steps {
        let runs = s["runs"].as_array().unwrap();
        let n = runs.len() as u64;
        let k = runs
            .iter()
            .filter(|r| r["outcome"]["result"] == "reproduced")
            .count() as u64;
        let kept = s["kept"].as_bool().unwrap();
        let rule = if s["role"]["role"] == "confirm" {
            2 * k >= n
        } else {
            3 * k >= 2 * n
        };
        assert_eq!(kept, rule, "step {s}");
        for r in runs {
            let rd = PathBuf::from(r["dir"].as_str().unwrap());
            assert!(rd.starts_with(dir.join("shrink/runs")), "{}", rd.display());
            for f in ["run.json", "history.jsonl", "results.json", "summary.md"] {
                assert!(rd.join(f).is_file(), "{}/{f}", rd.display());
            }
            let run = json_file(&rd.join("run.json"));
            let cmd: Vec<&str> = run["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert_eq!(
                cmd.join(" "),
                s["command"].as_str().unwrap(),
                "{}",
                rd.display()
            );
            assert_eq!(run["seed"], r["seed"], "{}", rd.display());
        }
    }
    state
}

/// The final command of a confirmed shrink: confirmed, no more workers or
/// seconds than the original, named by shrink.md.
fn check_final(dir: &Path, state: &Value, workers: f64, time: f64) -> String {
    let last = state["steps"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"]["role"], "confirm", "{last}");
    assert_eq!(last["kept"], true, "{last}");
    let command = last["command"].as_str().unwrap().to_string();
    let w = flag(&command, "--concurrency").unwrap_or(workers);
    let t = flag(&command, "--time-limit").unwrap_or(time);
    assert!(w <= workers && t <= time, "{command}");
    let md = std::fs::read_to_string(dir.join("shrink/shrink.md")).unwrap();
    assert!(md.contains(&format!("```sh\n{command}\n```")), "{md}");
    command
}

/// Redlock with 3 workers, 500 ms leases, a 3 s run: clock-jump gives two
/// valid leases at once. Shrunk with one run per step and a 14 s budget;
/// run again, it resumes from its state instead of starting over.
#[test]
fn a_redlock_clock_jump_run_shrinks_to_a_command_its_runs_confirm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("orig");
    let r = redlock_two_holders("shrink-redlock", &dir);
    assert_eq!(r.code, 1, "the original run finds two holders");
    let args = ["--runs", "1", "--confirm", "1", "--budget", "14s"];
    let (code, out) = shrink(&dir, &args);
    assert!([0, 1, 2].contains(&code), "exit {code}: {out}");
    let state = check_steps(&dir);
    assert!(dir.join("shrink/shrink.md").is_file());
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        summary.contains("(shrink/shrink.md)"),
        "the report links it"
    );
    if code == 0 {
        let command = check_final(&dir, &state, 3.0, 3.0);
        assert!(out.contains(&command), "{out}");
        assert!(
            out.contains("reproduces in 1 of 1 run [21 %, 100 %]"),
            "{out}"
        );
    }
    // Again: it resumes (a finished shrink takes no new step).
    let before = state["steps"].as_array().unwrap().len();
    let (again, out) = shrink(&dir, &args);
    assert!(
        out.contains(&format!(
            "resuming the shrink of {}: {before} steps done",
            dir.display()
        )),
        "{out}"
    );
    let state = check_steps(&dir);
    let after = state["steps"].as_array().unwrap();
    if code != 2 {
        assert_eq!((again, after.len()), (code, before), "nothing left to do");
    } else {
        assert!(after.len() >= before);
    }
}

/// `max_injections = 1`: one pause lands and the run goes on quiet to its
/// end; without it the same 2.5 s run pauses a holder again and again.
#[test]
fn max_injections_stops_the_nemesis_after_that_many_landed() {
    let tmp = tempfile::tempdir().unwrap();
    let nemesis = tmp.path().join("once.toml");
    std::fs::write(
        &nemesis,
        "name = \"once\"\nfault = \"pause-holder\"\ninterval_ms = 100\nduration_ms = 300\nmax_injections = 1\n",
    )
    .unwrap();
    let dir = tmp.path().join("run");
    let r = run(
        "max-injections",
        &dir,
        &[
            "--system",
            "redis",
            "--workload",
            "lock",
            "--nemesis",
            nemesis.to_str().unwrap(),
            "--time-limit",
            "2.5",
            "--concurrency",
            "2",
            "--ttl-ms",
            "500",
            "--hold-ms",
            "100",
            "--think-ms",
            "0",
            "--seed",
            "1",
        ],
    );
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    let n = r.nemesis();
    assert_eq!(n["max_injections"], 1, "{n}");
    assert_eq!(r.run_json()["nemesis"]["max_injections"], 1);
    assert_eq!(landed_count(&dir), 1, "{n}");
    let inj = injections(&r);
    let landed = |i: &Value| {
        i["error"].is_null()
            && i["detail"]["landed_inside"] != false
            && i["detail"]["cut_short"] != true
    };
    assert!(
        landed(inj.last().unwrap()),
        "the last injection is the one that landed: {n}"
    );
    assert!(
        r.run_json()["duration_s"].as_f64().unwrap() >= 2.5,
        "the run went on to its end"
    );
}

/// Bad input exits 3 with what is wrong and a hint, before anything runs.
#[test]
fn shrink_refuses_what_is_not_a_run_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _) = shrink(&tmp.path().join("nowhere"), &[]);
    assert_eq!(code, 3);
    let out = lockjaw().arg("shrink").arg(tmp.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        err.contains("not a run directory") && err.contains("hint"),
        "{err}"
    );
    std::fs::create_dir(tmp.path().join("run-1")).unwrap();
    let out = lockjaw().arg("shrink").arg(tmp.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("directory of runs") && err.contains("run-1"),
        "{err}"
    );
    let out = lockjaw()
        .args(["shrink", "x", "--budget", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}

/// The `make demo` Redlock clock-jump run (5 workers, 20 s), shrunk with
/// the defaults: ≤ 3 workers, a shorter run, confirmed at 5 of 10 or more.
#[test]
#[ignore = "make test-long: a full shrink of the demo's Redlock clock-jump run (minutes)"]
fn the_demo_redlock_clock_jump_run_shrinks_to_three_workers_or_fewer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let r = run(
        "shrink-demo",
        &dir,
        &[
            "--system",
            "redlock",
            "--workload",
            "fenced-counter",
            "--nemesis",
            "clock-jump",
            "--fencing",
            "off",
            "--time-limit",
            "20",
            "--seed",
            "1",
        ],
    );
    assert_eq!(r.code, 1, "the demo run finds two holders");
    let (code, out) = shrink(&dir, &[]);
    assert_eq!(code, 0, "{out}");
    let state = check_steps(&dir);
    let command = check_final(&dir, &state, 3.0, 20.0);
    assert!(flag(&command, "--time-limit").unwrap() < 20.0, "{command}");
    assert!(flag(&command, "--concurrency").unwrap() <= 3.0, "{command}");
    let last = state["steps"].as_array().unwrap().last().unwrap();
    assert!(last["runs"].as_array().unwrap().len() == 10, "{last}");
}
