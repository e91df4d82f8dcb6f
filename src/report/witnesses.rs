//! Every anomaly's witness for the page: results.json keeps the first few
//! witnesses of each lock check (the counts cover all); when a check found
//! more, the report re-runs the lock checks on the history keeping up to
//! [`ALL_WITNESSES`] per check, so the timeline can highlight each one.
//! Verdicts and counts always stay those of results.json.

use super::rundir::RunDir;
use crate::check::lock::{check_file, LockOptions, MAX_WITNESSES};
use crate::history::Meta;
use serde_json::Value;

/// At most this many witnesses per check on the page.
pub const ALL_WITNESSES: usize = 1000;

fn lists_all(results: &Value) -> bool {
    let Some(checks) = results.get("checks").and_then(Value::as_object) else {
        return true;
    };
    checks.values().all(|c| {
        let count = c.get("count").and_then(Value::as_u64).unwrap_or(0);
        let listed = c
            .get("witnesses")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        // A check lists fewer witnesses than its count when one witness
        // covers several (lost updates) or when it hit the cap.
        listed < MAX_WITNESSES || count as usize <= listed
    })
}

/// results.json (as [`RunDir::results_view`] gives it) with each lock check's witnesses completed from the
/// history, and a note saying so; `None` when nothing is missing, the
/// history is not a lock history, or re-checking disagrees with results.json
/// (then the page shows what results.json lists).
pub fn complete(rd: &RunDir, meta: Option<&Meta>) -> Option<(Value, String)> {
    let mut results = rd.results_view();
    if lists_all(&results) || !meta.is_some_and(|m| m.checkers.iter().any(|c| c == "lock")) {
        return None;
    }
    let opts = LockOptions {
        max_witnesses: Some(ALL_WITNESSES),
        ..LockOptions::default()
    };
    let again = serde_json::to_value(check_file(&rd.history_path(), &opts).ok()?).ok()?;
    let checks = results.get_mut("checks")?.as_object_mut()?;
    for (name, c) in checks.iter_mut() {
        let fresh = again.pointer(&format!("/checks/{name}"))?;
        if fresh.get("count") != c.get("count") {
            return None;
        }
        c["witnesses"] = fresh.get("witnesses")?.clone();
    }
    let note = format!(
        "results.json lists the first witnesses of each check; this page lists up to {ALL_WITNESSES} per \
         check, found again from the history by `lockjaw report` (same counts)"
    );
    Some((results, note))
}
