//! Teardown leaves nothing behind: a test that panics, a test binary that
//! is SIGKILLed (parent-death signal), a failed start, `cluster up/down`.

use super::util;
use lockjaw::cluster::{state, ClusterSpec};
use lockjaw::process::ProcId;
use lockjaw::service::System;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const HELPER: &str = "clusters::cleanup::helper_starts_a_cluster_then_dies";

/// Not a test on its own: run by the tests below in a child process (with
/// LOCKJAW_TEST_HELPER set) to start a cluster and then panic or hang.
#[test]
#[ignore = "helper, run in a child process by the cleanup tests"]
fn helper_starts_a_cluster_then_dies() {
    let Ok(mode) = std::env::var("LOCKJAW_TEST_HELPER") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("LOCKJAW_TEST_DIR").unwrap());
    let system = match std::env::var("LOCKJAW_TEST_SYSTEM").as_deref() {
        Ok("etcd") => System::Etcd,
        Ok("zookeeper") => System::Zookeeper,
        _ => System::Redlock,
    };
    let mut spec = ClusterSpec::new(system.servers(), &dir);
    if system == System::Redlock {
        spec.nodes = Some(2);
    }
    spec.base_port = Some(std::env::var("LOCKJAW_TEST_PORT").unwrap().parse().unwrap());
    let c = util::start_blocking(spec).unwrap();
    std::fs::write(dir.join("ready"), "").unwrap();
    if mode == "hang" {
        std::thread::sleep(Duration::from_secs(600));
    }
    let _keep = c;
    panic!("the helper panics while its cluster runs");
}

fn run_helper(mode: &str, dir: &Path) -> std::process::Child {
    run_helper_on("redlock", mode, dir)
}

fn run_helper_on(system: &str, mode: &str, dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            HELPER,
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LOCKJAW_TEST_HELPER", mode)
        .env("LOCKJAW_TEST_SYSTEM", system)
        .env("LOCKJAW_TEST_DIR", dir)
        .env("LOCKJAW_TEST_PORT", util::private_base().to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn recorded(dir: &Path) -> Vec<ProcId> {
    let st = state::read(dir).unwrap();
    st.nodes.iter().filter_map(|n| n.proc).collect()
}

fn assert_all_gone(ids: &[ProcId]) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while ids.iter().any(|p| p.is_alive()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = ids.iter().filter(|p| p.is_alive()).collect();
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn a_panicking_test_leaves_no_server_running() {
    let dir = util::temp_dir("panic");
    let mut child = run_helper("panic", &dir);
    let status = child.wait().unwrap();
    assert!(!status.success(), "the helper was meant to panic");
    assert!(
        dir.join("ready").exists(),
        "the helper never started its cluster"
    );
    let ids = recorded(&dir);
    assert_eq!(ids.len(), 2);
    assert_all_gone(&ids);
}

#[test]
fn a_sigkilled_lockjaw_takes_its_servers_along() {
    for system in ["redlock", "etcd", "zookeeper"] {
        let dir = util::temp_dir(&format!("sigkill-{system}"));
        let mut child = run_helper_on(system, "hang", &dir);
        let deadline = Instant::now() + Duration::from_secs(90);
        while !dir.join("ready").exists() {
            assert!(
                Instant::now() < deadline,
                "{system}: helper never became ready"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let ids = recorded(&dir);
        assert!(
            !ids.is_empty() && ids.iter().all(|p| p.is_alive()),
            "{system}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_all_gone(&ids);
        // Its cgroups outlive it (nothing ran the helper's teardown):
        // `cluster down` removes them, leaves first.
        let group = state::read(&dir).unwrap().group;
        state::stop_all(&dir).unwrap();
        if let Some(root) = lockjaw::process::Cgroup::root() {
            let g = root.join(group.expect("the state names the cgroup group"));
            assert!(!g.exists(), "{system}: {} is left", g.display());
        }
    }
}

/// `cluster up` starts detached servers (no parent-death signal): a
/// SIGTERM while it waits for them to be healthy stops what it started.
#[test]
fn cluster_up_stops_what_it_started_when_terminated_during_start_up() {
    let exe = env!("CARGO_BIN_EXE_lockjaw");
    let mut interrupted = 0;
    for attempt in 0..3 {
        let dir = util::temp_dir(&format!("up-term-{attempt}"));
        let mut up = Command::new(exe)
            .args(["cluster", "up", "--system", "zookeeper", "--base-port"])
            .arg(util::private_base().to_string())
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // As soon as the state file lists a started node.
        let deadline = Instant::now() + Duration::from_secs(60);
        while state::read(&dir).map_or(true, |s| s.nodes.iter().all(|n| n.proc.is_none())) {
            assert!(Instant::now() < deadline, "no node started");
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: a plain signal to our own child, not yet reaped.
        unsafe { libc::kill(up.id() as i32, libc::SIGTERM) };
        let status = up.wait().unwrap();
        let ids = recorded(&dir);
        if status.success() {
            // Healthy before the signal landed: not this test's case.
            let _ = Command::new(exe)
                .args(["cluster", "down", "--dir"])
                .arg(&dir)
                .output();
            assert_all_gone(&ids);
            continue;
        }
        let mut err = String::new();
        std::io::Read::read_to_string(&mut up.stderr.take().unwrap(), &mut err).unwrap();
        assert!(err.contains("interrupted during start-up"), "{err}");
        assert_all_gone(&ids);
        interrupted += 1;
        break;
    }
    assert_eq!(interrupted, 1, "ZooKeeper was never caught starting");
}

#[test]
fn a_failed_start_stops_what_it_started_and_names_the_node_and_log() {
    let dir = util::temp_dir("failed");
    let mut spec = ClusterSpec::new(System::Zookeeper.servers(), &dir);
    spec.base_port = Some(util::private_base());
    spec.health_timeout = Duration::from_millis(1);
    let err = util::start_blocking(spec).unwrap_err().to_string();
    assert!(err.contains("zk1") && err.contains("zk1.log"), "{err}");
    let ids = recorded(&dir);
    assert_eq!(ids.len(), 3);
    assert!(
        ids.iter().all(|p| !p.is_alive()),
        "left running after a failed start"
    );
}

#[test]
fn cli_cluster_up_status_down() {
    let exe = env!("CARGO_BIN_EXE_lockjaw");
    let dir = util::temp_dir("cli");
    let base = util::private_base().to_string();
    let d = dir.to_str().unwrap();
    let up = Command::new(exe)
        .args([
            "cluster",
            "up",
            "--system",
            "redlock",
            "--nodes",
            "2",
            "--base-port",
            &base,
            "--dir",
            d,
        ])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let out = String::from_utf8_lossy(&up.stdout);
    assert!(out.contains(&format!("127.0.0.1:{base}")), "{out}");
    let ids = recorded(&dir);
    assert!(
        ids.iter().all(|p| p.is_alive()),
        "cluster up left its servers running"
    );
    // A second cluster on the same ports is refused clearly.
    let d2 = util::temp_dir("cli2");
    let clash = Command::new(exe)
        .args([
            "cluster",
            "up",
            "--system",
            "redis",
            "--base-port",
            &base,
            "--dir",
            d2.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(clash.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&clash.stderr).contains("--base-port"));
    // --faketime on a system that ignores libfaketime is a usage error.
    let ft = Command::new(exe)
        .args([
            "cluster",
            "up",
            "--system",
            "etcd",
            "--faketime",
            "--dir",
            d2.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(ft.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&ft.stderr).contains("--faketime"));
    let st = Command::new(exe)
        .args(["cluster", "status", "--dir", d])
        .output()
        .unwrap();
    assert!(st.status.success());
    assert!(String::from_utf8_lossy(&st.stdout).contains("2 of 2 nodes running"));
    let down = Command::new(exe)
        .args(["cluster", "down", "--dir", d])
        .output()
        .unwrap();
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert_all_gone(&ids);
    let st = Command::new(exe)
        .args(["cluster", "status", "--dir", d])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(3), "status of a stopped cluster");
}

/// `cluster up` SIGKILLed in its first milliseconds (before, during and
/// after its first spawns), then `cluster down --dir`: down succeeds and
/// nothing is left, neither a server listening on the cluster's ports
/// (also one spawned but not yet recorded) nor its cgroup directory.
/// Ports: 37100-37199 (a free 10-port base found first).
#[test]
fn cluster_up_killed_in_its_first_moments_then_down_leaves_nothing() {
    use crate::run_util::{free_base, listening};
    let exe = env!("CARGO_BIN_EXE_lockjaw");
    let mut caught = 0;
    let moments = [0u64, 3, 6, 9, 12, 15, 20, 25, 30, 40, 55, 75];
    for (i, ms) in moments.into_iter().enumerate() {
        let base = free_base(37100);
        // Not made beforehand, as a user would name it.
        let dir = util::temp_dir(&format!("up-kill-{i}")).join("c");
        let mut up = Command::new(exe)
            .args(["cluster", "up", "--system", "redlock", "--base-port"])
            .arg(base.to_string())
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        up.kill().unwrap();
        up.wait().unwrap();
        let down = Command::new(exe)
            .args(["cluster", "down", "--dir"])
            .arg(&dir)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&down.stdout),
            String::from_utf8_lossy(&down.stderr)
        );
        eprintln!("killed after {ms} ms; down: {said}");
        assert_eq!(down.status.code(), Some(0), "after {ms} ms: {said}");
        // A killed server may take a moment to close its socket.
        let deadline = Instant::now() + Duration::from_secs(10);
        while (base..base + 5).any(listening) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left: Vec<u16> = (base..base + 5).filter(|p| listening(*p)).collect();
        assert!(
            left.is_empty(),
            "after {ms} ms: still listening on {left:?}"
        );
        if let Some(root) = lockjaw::process::Cgroup::root() {
            let cg = root.join(format!("lockjaw/redlock-{base}"));
            assert!(!cg.exists(), "after {ms} ms: {} is left", cg.display());
        }
        caught += usize::from(said.contains("stopped redlock"));
    }
    eprintln!(
        "{caught} of {} kills left a server for down to stop",
        moments.len()
    );
}
