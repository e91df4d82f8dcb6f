//! The jobs workload end to end (issue 16, item 5): Redis without fencing
//! under pause-holder. Without idempotency keys a woken holder applies the
//! job the next holder already applied: duplicate executions and duplicate
//! effects. With keys the job still runs twice, but the storage ignores the
//! repeat: duplicate executions, no duplicate effect. Both `#[ignore]`d
//! (make test-long); the counting itself is unit-tested in
//! `check::lock::jobs`. Ports: 49500–49599 (a free base found first).

use crate::run_util::*;
use lockjaw::history::OpType;
use serde_json::Value;

/// Redis, `workload`, pause-holder, fencing off, 10 s.
fn jobs(name: &str, workload: &str) -> (tempfile::TempDir, Run, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        name,
        tmp.path(),
        49500,
        &[
            "--system",
            "redis",
            "--workload",
            workload,
            "--nemesis",
            "pause-holder",
            "--fencing",
            "off",
            "--time-limit",
            "10",
            "--seed",
            "16",
        ],
    );
    let check = r.lock()["checks"]["duplicate_effects"].clone();
    assert_eq!(check["applicable"], true, "{}", r.stdout);
    (tmp, r, check)
}

/// Duplicate executions straight from the history: ok applies per job id.
fn executions_in_history(r: &Run) -> u64 {
    let (_, ops) = r.history();
    let mut seen = std::collections::HashMap::new();
    for o in ops
        .iter()
        .filter(|o| o.f == "apply" && o.kind == OpType::Ok)
    {
        *seen.entry(o.value["job"].as_u64().unwrap()).or_insert(0u64) += 1;
    }
    seen.values().map(|n| n - 1).sum()
}

#[test]
#[ignore = "a 10 s run (make test-long)"]
fn without_idempotency_keys_a_paused_holder_applies_a_job_twice() {
    let (_tmp, r, check) = jobs("jobs", "jobs");
    let dup_exec = check["counts"]["duplicate_executions"].as_u64().unwrap();
    assert!(dup_exec > 0, "{check}");
    assert_eq!(dup_exec, executions_in_history(&r));
    assert_eq!(check["valid"], false, "{check}");
    assert!(check["count"].as_u64().unwrap() > 0, "duplicate effects");
    assert_eq!(r.lock()["resource"]["valid"], false);
    assert_eq!(r.code, 1);
    assert_nothing_left(&r.dir);
}

#[test]
#[ignore = "a 10 s run (make test-long)"]
fn with_idempotency_keys_the_repeat_runs_but_has_no_effect() {
    let (_tmp, r, check) = jobs("jobs-idempotent", "jobs-idempotent");
    let dup_exec = check["counts"]["duplicate_executions"].as_u64().unwrap();
    assert!(dup_exec > 0, "{check}");
    assert_eq!(dup_exec, executions_in_history(&r));
    assert!(
        check["counts"]["ignored_by_idempotency_key"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        (check["valid"].clone(), check["count"].as_u64()),
        (Value::Bool(true), Some(0)),
        "{check}"
    );
    let finals = r.run_json()["final_value"].clone();
    let ids: Vec<u64> = finals
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "every job once in {finals}");
    assert_nothing_left(&r.dir);
}
