//! Healing: every exit path of `lockjaw run` leaves nothing stopped,
//! running or proxied. Ctrl-C in the middle of a pause (lockjaw heals
//! itself), and SIGKILL at random points of a short run's life followed by
//! `lockjaw heal DIR`.
//! Processes are checked by the PIDs + start times the run recorded.
//! Ports: one 100-port block per run in 36100-36499 (a free base found
//! first, see run_util::free_base); Toxiproxy and storage on port 0.

use crate::run_util::*;
use lockjaw::process::proc_stat;
use lockjaw::toxiproxy::ToxiproxyApi;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};

fn history_has(dir: &Path, needle: &[&str]) -> bool {
    std::fs::read_to_string(dir.join("history.jsonl"))
        .map(|t| t.lines().any(|l| needle.iter().all(|n| l.contains(n))))
        .unwrap_or(false)
}

fn some_worker_stopped(dir: &Path) -> bool {
    recorded_processes(dir).iter().any(|(what, id)| {
        what.starts_with("worker")
            && proc_stat(id.pid).is_some_and(|s| s.start_time == id.start_time && s.state == 'T')
    })
}

#[test]
fn ctrl_c_in_the_middle_of_a_pause_leaves_nothing_behind() {
    let t = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut g = Guard::spawn(
        lockjaw()
            .args(["run", "--system", "redis", "--workload", "fenced-counter"])
            .args([
                "--nemesis",
                "pause-holder",
                "--time-limit",
                "120",
                "--ttl-ms",
                "1000",
            ])
            .args([
                "--hold-ms",
                "200",
                "--base-port",
                &free_base(36100).to_string(),
                "--seed",
                "5",
                "--no-progress",
            ])
            .arg("--out")
            .arg(&dir),
    );
    eventually("a holder to be paused", Duration::from_secs(60), || {
        history_has(&dir, &["\"nemesis\"", "\"start\"", "\"info\""]) && some_worker_stopped(&dir)
    });
    g.signal(libc::SIGINT);
    let code = g.wait(Duration::from_secs(60));
    assert_nothing_left(&dir);
    // An interrupted run is judged on what it recorded, never valid.
    assert_eq!(code, Some(2), "interrupted run's exit code");
    assert_eq!(json_file(&dir.join("run.json"))["outcome"], "interrupted");
    eprintln!("ctrl-c test: {:.1} s", t.elapsed().as_secs_f64());
}

#[test]
fn sigkill_at_random_points_then_heal_leaves_nothing_behind() {
    let t = Instant::now();
    let seed: u64 = std::env::var("LOCKJAW_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (LOCKJAW_TEST_SEED to repeat)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tox = rt.block_on(lockjaw::toxiproxy::spawn_loopback()).unwrap();
    let api = tox.client().unwrap();
    let rounds = [
        ("pause-holder", 36200),
        ("latency", 36300),
        ("partition-holder", 36400),
    ];
    for (nemesis, port) in rounds {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let mut g = Guard::spawn(
            lockjaw()
                .args(["run", "--system", "redis", "--workload", "fenced-counter"])
                .args([
                    "--nemesis",
                    nemesis,
                    "--time-limit",
                    "4",
                    "--ttl-ms",
                    "1000",
                ])
                .args(["--base-port", &free_base(port).to_string(), "--no-progress"])
                .args(["--toxiproxy", &tox.url()])
                .arg("--out")
                .arg(&dir),
        );
        // Anywhere in the run's life: set-up, faults, healing, the final
        // read, the check, teardown (a 4 s run ends after about 5 s).
        let after = Duration::from_millis(rng.gen_range(50..5200));
        std::thread::sleep(after);
        eprintln!("{nemesis}: SIGKILL after {after:?}");
        g.signal(libc::SIGKILL);
        let code = g.wait(Duration::from_secs(30));
        eprintln!("{nemesis}: exit {code:?} (None: killed)");
        let out = lockjaw().arg("heal").arg(&dir).output().unwrap();
        eprintln!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if dir.join("undo.jsonl").exists() {
            assert_eq!(out.status.code(), Some(0), "heal succeeds");
            assert_nothing_left(&dir);
        }
        let proxies = rt.block_on(api.proxies()).unwrap();
        assert!(
            proxies.is_empty(),
            "proxies left on Toxiproxy: {:?}",
            proxies.keys()
        );
        // Healing twice is harmless.
        if dir.join("undo.jsonl").exists() {
            let again = lockjaw().arg("heal").arg(&dir).output().unwrap();
            assert_eq!(again.status.code(), Some(0));
        }
        // What the killed run recorded can still be checked.
        if dir.join("history.jsonl").exists() {
            let c = lockjaw().arg("check").arg(&dir).output().unwrap();
            assert!(
                matches!(c.status.code(), Some(0..=2)),
                "lockjaw check reads the history: {}{}",
                String::from_utf8_lossy(&c.stdout),
                String::from_utf8_lossy(&c.stderr)
            );
        }
    }
    eprintln!("sigkill test: {:.1} s", t.elapsed().as_secs_f64());
}

#[test]
fn heal_removes_a_partial_last_history_line_so_check_reads_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("undo.jsonl"), "").unwrap();
    let meta = r#"{"type":"meta","checkers":["lock"],"workload":"lock","acquire_sets_ttl":true}"#;
    let op = r#"{"index":0,"time":5,"process":0,"type":"invoke","f":"acquire","key":"l"}"#;
    std::fs::write(
        dir.join("history.jsonl"),
        format!("{meta}\n{op}\n{{\"index\":1,\"time\":9,\"proc"),
    )
    .unwrap();
    let before = lockjaw().arg("check").arg(dir).output().unwrap();
    // Before heal, check reads the complete lines and warns of the cut one.
    let warned = String::from_utf8_lossy(&before.stderr);
    assert_eq!(before.status.code(), Some(0), "{warned}");
    assert!(
        warned.contains("history.jsonl:3: the last line is cut off"),
        "{warned}"
    );
    let out = lockjaw().arg("heal").arg(dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("removed a partial last line (25 bytes)"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("history.jsonl")).unwrap(),
        format!("{meta}\n{op}\n")
    );
    let after = lockjaw().arg("check").arg(dir).output().unwrap();
    assert_eq!(
        after.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&after.stderr)
    );
}

#[test]
fn heal_refuses_a_directory_without_an_undo_log() {
    let tmp = tempfile::tempdir().unwrap();
    let out = lockjaw().arg("heal").arg(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("undo.jsonl") && err.contains("hint"), "{err}");
}
