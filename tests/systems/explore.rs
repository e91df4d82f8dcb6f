//! `lockjaw explore` end to end (issue 41) on redis-py-818's two releases
//! (bugs/redis-py-818.toml): the buggy one (redis 2.10.6: `SETNX` then
//! `PEXPIRE`, a crash between them leaves a key that never expires) shows
//! a stuck lock without being told the row's fault; the fixed one (3.0.0:
//! one `SET NX PX`) shows no finding, and its explore, SIGKILLed in the
//! middle of its search, resumes without repeating a finished run and
//! leaves nothing behind. Ports: none fixed (explore's runs reserve their
//! own blocks).

use crate::run_util::*;
use lockjaw::explore::state::{Stage, State};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The flags every explore here takes: short leases and runs, two
/// workers (the row's), a fixed seed.
const FLAGS: [&str; 12] = [
    "--system",
    "redis",
    "--ttl-ms",
    "500",
    "--concurrency",
    "2",
    "--learn-secs",
    "3",
    "--points-per-run",
    "4",
    "--seed",
    "41",
];

/// Fail (never skip) when redis-py cannot be imported.
fn need_redis_py() {
    let ok = Command::new("/usr/bin/python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "/usr/bin/python3 cannot import redis: run scripts/install-deps.sh (make deps) first"
    );
}

fn explore_cmd(client: &str, budget: &str, out: &Path) -> Command {
    need_redis_py();
    let mut c = lockjaw();
    c.arg("explore")
        .args(FLAGS)
        .args(["--client", client, "--budget", budget, "--out"])
        .arg(out);
    c
}

/// Run a command to its end; its exit code, stdout and stderr printed.
fn finish(mut c: Command, what: &str) -> i32 {
    let t = Instant::now();
    let out = c.output().expect("lockjaw starts");
    eprintln!(
        "[{what}] exit {:?} in {:.1} s\n{}{}",
        out.status.code(),
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.code().unwrap_or(-1)
}

/// explore.json's findings.
fn findings(out: &Path) -> Vec<Value> {
    let v = json_file(&out.join("explore.json"));
    v["findings"].as_array().cloned().unwrap_or_default()
}

/// Every run directory the explore made: nothing left running, stopped
/// or pending in its undo log.
fn nothing_left(s: &State) {
    for r in &s.runs {
        if r.dir.join("undo.jsonl").exists() {
            assert_nothing_left(&r.dir);
        }
    }
}

#[test]
fn explore_finds_redis_py_818s_stuck_lock_without_being_told_its_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("explore");
    // No second opinion: lockjaw's own client never sends `SETNX`, so its
    // run would only wait out its matcher (the drive tests cover it).
    let mut c = explore_cmd("python-redis-py-pipeline@2.10.6", "30s", &out);
    c.arg("--no-second-opinion");
    let code = finish(c, "818 buggy");
    assert_eq!(code, 1, "a finding");
    let found = findings(&out);
    let stuck: Vec<&Value> = found.iter().filter(|f| f["kind"] == "stuck-lock").collect();
    assert!(!stuck.is_empty(), "{found:?}");
    let f = stuck[0];
    assert_eq!(f["confirmed"], true, "{f}");
    assert!(
        f["hits"].as_u64().unwrap() >= 2,
        "in the search and alone: {f}"
    );
    // Its row is one `lockjaw bugs run` accepts, with the buggy side only.
    let row = PathBuf::from(f["row"].as_str().unwrap());
    let bug = lockjaw::bugs::catalogue::load_file(&row).unwrap();
    assert_eq!(
        bug.buggy.as_deref(),
        Some("python-redis-py-pipeline@2.10.6")
    );
    assert_eq!(bug.fixed, None);
    assert_eq!(bug.expect.name(), "stuck-lock");
    let s = State::load(&out).unwrap().unwrap();
    // Nothing of the row's own fault file was given: the explore's plan
    // made the point from what the learn runs saw.
    let point = s
        .point(f["point"].as_str().unwrap())
        .expect("a planned point");
    assert_ne!(
        point.id, "crash-after-acquire-command",
        "not the row's own file"
    );
    let file = out
        .join("points")
        .join(lockjaw::explore::search::point_file_name(&point.id));
    assert_eq!(std::fs::read_to_string(file).unwrap(), point.nemesis);
    nothing_left(&s);
}

/// Poll `out/state.json` until a search run is going (its history
/// started); the finished runs (the learn runs) by number.
fn wait_mid_search(g: &mut Guard, out: &Path, limit: Duration) -> BTreeMap<usize, PathBuf> {
    let t = Instant::now();
    loop {
        let child = g.0.as_mut().expect("running");
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("the explore ended ({st}) before it was killed mid-search:\n{err}");
        }
        if let Ok(Some(s)) = State::load(out) {
            let going = s.runs.iter().any(|r| {
                r.stage == Stage::Search && !r.finished() && r.dir.join("history.jsonl").exists()
            });
            if going {
                return s
                    .runs
                    .iter()
                    .filter(|r| r.finished())
                    .map(|r| (r.n, r.dir.clone()))
                    .collect();
            }
        }
        assert!(t.elapsed() < limit, "no search run going within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn explore_of_the_fixed_release_killed_mid_search_resumes_and_finds_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("explore");
    let mut g = Guard::spawn(&mut explore_cmd("python-redis-py@3.0.0", "25s", &out));
    let before = wait_mid_search(&mut g, &out, Duration::from_secs(120));
    g.signal(libc::SIGKILL);
    g.wait(Duration::from_secs(30));
    let cut: Vec<(usize, PathBuf)> = State::load(&out)
        .unwrap()
        .unwrap()
        .runs
        .iter()
        .filter(|r| !r.finished())
        .map(|r| (r.n, r.dir.clone()))
        .collect();
    assert!(!cut.is_empty());
    let mut resume = lockjaw();
    resume.arg("explore").arg(&out);
    let code = finish(resume, "818 fixed, resumed");
    assert!(code == 0 || code == 2, "no finding: exit {code}");
    assert_eq!(findings(&out), Vec::<Value>::new());
    let s = State::load(&out).unwrap().unwrap();
    // A finished run kept its directory and was not run again; the cut
    // one was healed and run again in a new directory.
    for (n, dir) in &before {
        let r = &s.runs[n - 1];
        assert_eq!((&r.dir, r.attempt), (dir, 0), "run {n}");
    }
    for (n, d) in &cut {
        if d.join("undo.jsonl").exists() {
            assert_nothing_left(d);
        }
        let r = &s.runs[n - 1];
        assert!(
            r.attempt >= 1 && &r.dir != d,
            "run {n}: {}",
            r.dir.display()
        );
    }
    assert!(s.runs.iter().all(|r| r.finished()));
    nothing_left(&s);
}
