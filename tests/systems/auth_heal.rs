//! A `failover` run on an attached Redis with Sentinel whose servers want
//! the ACL user (`--auth`), killed with SIGKILL while the fault holds the
//! replica's `CLIENT PAUSE WRITE`: `lockjaw heal` unpauses the replica as
//! the run's user, before the pause's own 5 s end. On a test bed's hosts
//! (`attach_util`); the probes run from this machine into the bed.
//! The password is in no file of the run, no output of heal, and no argv
//! or environment of any process while the run and heal go on, on this
//! machine or the bed's hosts (network namespaces of this machine, so one
//! `/proc` scan sees the processes lockjaw starts there over SSH).
//! The pause lasts about 40 ms in a run (until the killed primary's
//! replica sees its link down), so the test watches with a 10 ms probe.

use crate::attach_util::{BedCluster, Control};
use crate::auth_redis::{auth_file, paused, PASSWORD};
use crate::run_util::lockjaw;
use crate::secrets::{files_with, Scan};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long the fault's pause lasts by itself (nemesis::failover).
const PAUSE: Duration = Duration::from_secs(5);
/// How long a PUBLISH may go unanswered before the test takes its server
/// for paused. The run's pause lasts about 40 ms on an idle machine (from
/// the pause through the primary's kill until the replica sees its link
/// down), so a probe must tell in a fraction of that; a slow answer on a
/// busy machine costs an attempt (the check after the kill tells).
const PROBE: Duration = Duration::from_millis(10);

/// The address of the last `CLIENT PAUSE` in the undo log `undo` that is
/// not done yet (the entry is written before the pause).
fn pause_pending(undo: &str) -> Option<String> {
    let entries: Vec<serde_json::Value> = undo
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let done = |id: &serde_json::Value| entries.iter().any(|e| &e["done"] == id);
    let last = entries
        .iter()
        .rev()
        .find(|e| e["undo"]["kind"] == "redis-client-pause")?;
    if done(&last["id"]) {
        return None;
    }
    last["undo"]["addr"].as_str().map(str::to_string)
}

#[tokio::test]
#[ignore = "make test-long: Sentinel with ACL users on a bed, a failover run killed mid-pause and healed (~8 s)"]
async fn heal_unpauses_the_replica_of_a_killed_acl_failover_run() {
    let c = BedCluster::sentinel_with(Control::Pidfile, Some(PASSWORD)).await;
    let t = tempfile::tempdir().unwrap();
    let file = auth_file(t.path());
    let auth = lockjaw::auth::load(&file).unwrap();
    for attempt in 0..3 {
        let dir = t.path().join(format!("run{attempt}"));
        let scan = Scan::for_mark(PASSWORD);
        let mut child = lockjaw()
            .args(["run", "--system", "sentinel", "--hosts"])
            .arg(&c.hosts_file)
            .args(["--attach", "--nemesis", "failover", "--ttl-ms", "2000"])
            .args(["--time-limit", "40", "--no-progress", "--auth"])
            .arg(&file)
            .arg("--out")
            .arg(&dir)
            .stdout(std::fs::File::create(t.path().join("out.txt")).unwrap())
            .stderr(std::fs::File::create(t.path().join("err.txt")).unwrap())
            .spawn()
            .unwrap();
        // What the run said, for a failure's message.
        let said = || {
            let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
            read("out.txt") + &read("err.txt")
        };
        // The pause's entry is on disk before the pause; then the pause.
        // Each injection pauses its replica (r2, or r1 after a failover).
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut probe: Option<(String, redis::aio::MultiplexedConnection)> = None;
        let (replica, detected) = loop {
            assert!(
                Instant::now() < deadline,
                "no pause seen within 60 s: {}",
                said()
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended: {}",
                said()
            );
            let undo = std::fs::read_to_string(dir.join("undo.jsonl")).unwrap_or_default();
            let Some(addr) = pause_pending(&undo) else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            if probe.as_ref().map(|(a, _)| a) != Some(&addr) {
                let t = Duration::from_secs(1);
                match lockjaw::client::redis_query::open(&addr, &auth, t).await {
                    Ok(c) => probe = Some((addr.clone(), c)),
                    Err(_) => continue,
                }
            }
            let (_, c) = probe.as_mut().unwrap();
            let mut cmd = redis::cmd("PUBLISH");
            cmd.arg("lockjaw-test").arg("x");
            let publish = cmd.query_async::<i64>(c);
            match tokio::time::timeout(PROBE, publish).await {
                Err(_) => break (addr, Instant::now()),
                Ok(Ok(_)) => tokio::time::sleep(Duration::from_millis(2)).await,
                // Sentinel drops the clients of the replica it promotes.
                Ok(Err(_)) => probe = None,
            }
        };
        child.kill().unwrap();
        child.wait().unwrap();
        if !paused(&replica, &auth).await {
            // The fault unpaused it between the probe and the kill.
            let _ = lockjaw().arg("heal").arg(&dir).output();
            continue;
        }
        let undo = std::fs::read_to_string(dir.join("undo.jsonl")).unwrap();
        assert!(!undo.contains(PASSWORD), "{undo}");
        let heal = lockjaw()
            .arg("heal")
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Watch the replica while heal runs: when does it answer again?
        let answered = loop {
            if !paused(&replica, &auth).await {
                break detected.elapsed();
            }
            assert!(detected.elapsed() < PAUSE * 2, "still paused");
        };
        let out = heal.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("healed: CLIENT UNPAUSE on {replica}")),
            "{text}"
        );
        assert!(!text.contains(PASSWORD), "{text}");
        // Heal's doing, not the pause's end (at least 5 s after it began,
        // which was at most a probe before `detected`).
        assert!(
            answered < PAUSE - Duration::from_millis(500),
            "{answered:?}: {text}"
        );
        assert_eq!(out.status.code(), Some(0), "{text}");
        scan.assert_clean(&[]);
        let files = files_with(&dir, PASSWORD);
        assert!(files.is_empty(), "the password in {files:?}");
        c.all_answer().await.unwrap();
        c.down().await;
        return;
    }
    panic!("3 runs, and the fault unpaused each time before the kill");
}
