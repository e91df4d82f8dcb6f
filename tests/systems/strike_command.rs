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

/// `lockjaw run` with `client` (NAME@VERSION), which names `library` in
/// run.json.
fn side(name: &str, tmp: &Path, client: &str, library: &str) -> Run {
    let (w, n) = (tmp.join("w.toml"), tmp.join("n.toml"));
    std::fs::write(&w, WORKLOAD).unwrap();
    std::fs::write(&n, NEMESIS).unwrap();
    let (w, n) = (w.display().to_string(), n.display().to_string());
    let args = [
        "--system",
        "redis",
        "--client",
        client,
        "--workload",
        &w,
        "--nemesis",
        &n,
        "--fencing",
        "off",
    ];
    let r = run_local(name, tmp, 42000, &args);
    assert_eq!(r.run_json()["client_library"], library, "{}", r.stderr);
    r
}

/// The landed crashes: each struck the acquire's first command, saw the
/// reply that took the key, and killed the worker.
fn crashes(r: &Run, command: &str) -> Vec<Value> {
    let landed: Vec<Value> = landed_inside(r)
        .into_iter()
        .map(|i| i["detail"].clone())
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
    let r = side(
        "818-buggy",
        tmp.path(),
        "python-redis-py-pipeline@2.10.6",
        "redis-py 2.10.6",
    );
    assert!(!crashes(&r, "SETNX").is_empty(), "no crash landed");
    let stuck = &r.lock()["liveness"]["stuck_lock"];
    assert_eq!(stuck["status"], "value", "{stuck}");
    assert!(stuck["count"].as_u64().unwrap() >= 1, "{stuck}");
    assert_eq!(stuck["witnesses"][0]["after"], "death", "{stuck}");
    let r = side(
        "818-fixed",
        tmp.path(),
        "python-redis-py@3.0.0",
        "redis-py 3.0.0",
    );
    assert!(!crashes(&r, "SET").is_empty(), "no crash landed");
    let stuck = &r.lock()["liveness"]["stuck_lock"];
    assert_eq!(
        (&stuck["status"], &stuck["count"]),
        (&Value::from("value"), &Value::from(0)),
        "{stuck}"
    );
}
