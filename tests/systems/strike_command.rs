//! `strike-command`, the Redis request matched by content in the worker's
//! proxy, end to end with a real library: redis-py-818 (`redis.lock.Lock`
//! of redis 2.10.6 acquires with `SETNX` then `PEXPIRE`; killed between
//! the two, its key never expires: a stuck lock), against redis 3.0.0
//! (one `SET NX PX`: the key expires, no stuck lock): the two sides of
//! bugs/redis-py-818.toml, `--client python-redis-py-pipeline@2.10.6` and
//! `python-redis-py@3.0.0` (pinned environments, built by make deps or on
//! first use). Ports: 42000..42100.

use crate::run_util::*;
use serde_json::Value;
use std::path::Path;

const WORKLOAD: &str = "name = \"lock-short\"\nkind = \"lock\"\nlock_key = \"lockjaw\"\n\
hold_ms = 50\nthink_ms = 10\nacquire_wait_ms = 500\nttl_ms = 1000\nop_timeout_ms = 500\n\
concurrency = 2\ntime_limit_s = 5\nrenew = false\n";

const NEMESIS: &str = "name = \"crash-after-acquire-command\"\nfault = \"strike-command\"\n\
target = \"all-clients\"\ninterval_ms = 300\n\
strike = { command = \"SETNX|SET\", action = \"crash-after\", window_ms = 3000 }\n";

/// `lockjaw run` with `client` (NAME@VERSION).
fn side(name: &str, tmp: &Path, client: &str) -> Run {
    let (w, n) = (tmp.join("w.toml"), tmp.join("n.toml"));
    std::fs::write(&w, WORKLOAD).unwrap();
    std::fs::write(&n, NEMESIS).unwrap();
    for attempt in 0..5 {
        let port = free_base(42000).to_string();
        let dir = tmp.join(format!("{name}-{attempt}"));
        let start = std::time::Instant::now();
        let out = lockjaw()
            .args(["run", "--system", "redis", "--client", client])
            .arg("--workload")
            .arg(&w)
            .arg("--nemesis")
            .arg(&n)
            .args([
                "--fencing",
                "off",
                "--base-port",
                &port,
                "--no-progress",
                "--out",
            ])
            .arg(&dir)
            .output()
            .expect("lockjaw runs");
        let r = Run {
            dir,
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
            wall: start.elapsed(),
        };
        eprintln!(
            "[{name}] exit {} in {:.1} s\n{}{}",
            r.code,
            r.wall.as_secs_f64(),
            r.stdout,
            r.stderr
        );
        let busy =
            r.stderr.contains("is in use") || r.stderr.contains("reserved by another lockjaw run");
        if !(r.code == 3 && busy) {
            return r;
        }
    }
    panic!("{name}: the ports in 42000..42100 stayed busy");
}

/// The landed crashes: each struck the acquire's first command, saw the
/// reply that took the key, and killed the worker.
fn crashes(r: &Run, command: &str) -> Vec<Value> {
    let landed: Vec<Value> = injections(r)
        .into_iter()
        .map(|i| i["detail"].clone())
        .filter(|d| d["landed_inside"] == true)
        .collect();
    for i in &landed {
        assert_eq!(i["struck"], command, "{i}");
        assert_eq!(
            (&i["took_key"], &i["killed"]),
            (&Value::Bool(true), &Value::Bool(true)),
            "{i}"
        );
    }
    landed
}

#[test]
fn redis_py_818_a_crash_between_setnx_and_pexpire_leaves_a_stuck_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let r = side("818-buggy", tmp.path(), "python-redis-py-pipeline@2.10.6");
    assert_eq!(
        r.run_json()["client_library"],
        "redis-py 2.10.6",
        "{}",
        r.stderr
    );
    assert!(!crashes(&r, "SETNX").is_empty(), "no crash landed");
    let stuck = &r.lock()["liveness"]["stuck_lock"];
    assert_eq!(stuck["status"], "value", "{stuck}");
    assert!(stuck["count"].as_u64().unwrap() >= 1, "{stuck}");
    assert_eq!(stuck["witnesses"][0]["after"], "death", "{stuck}");
    let r = side("818-fixed", tmp.path(), "python-redis-py@3.0.0");
    assert_eq!(
        r.run_json()["client_library"],
        "redis-py 3.0.0",
        "{}",
        r.stderr
    );
    assert!(!crashes(&r, "SET").is_empty(), "no crash landed");
    let stuck = &r.lock()["liveness"]["stuck_lock"];
    assert_eq!(
        (&stuck["status"], &stuck["count"]),
        (&Value::from("value"), &Value::from(0)),
        "{stuck}"
    );
}
