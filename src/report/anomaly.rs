//! Anomalies and verdicts as `results.json` states them, read loosely so
//! the report follows the checkers' output without depending on their
//! struct names.
//!
//! Lock checks (`LockReport`): `valid`, `service`/`resource` (`valid`,
//! `applicable`), `checks.<name>` (`valid`, `applicable`, `count`,
//! `counts`, `note`, `witnesses[]` with `text`, `kind` and op indexes in
//! fields such as `acquire_op`, `op`, `final_read_op`), `stale_holders`
//! (`stale`, `possibly_stale`, `list[]` with `text`). Linearizability
//! (`LinResult`): `valid` and `violation` (`prefix[]`, `stuck[]`, each
//! with `index`, `complete_index`, `op`, `process`, `state_after`), found at
//! the top level or one level down (e.g. `results.linearizable`).

use crate::check::Validity;
use serde::Serialize;
use serde_json::Value;

/// One anomaly to highlight, with the ops that witness it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Anomaly {
    /// `service`, `resource`, `linearizability` or `information`.
    pub side: String,
    /// The check's key in results.json (e.g. `safety`, `stale_writes`).
    pub check: String,
    /// The witness kind (e.g. `safety-violation`), when given.
    pub kind: Option<String>,
    /// The sentence a person reads.
    pub text: String,
    /// History indexes of the witness ops (invocations or completions).
    pub ops: Vec<u64>,
}

/// One check's verdict and counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckRow {
    pub side: String,
    pub name: String,
    pub valid: Validity,
    pub applicable: bool,
    pub count: u64,
    /// Extra counters, non-zero ones only.
    pub counts: Vec<(String, i64)>,
    pub note: Option<String>,
    /// How many witnesses results.json lists (the count may be larger).
    pub witnesses: usize,
}

/// Which side of the verdict a lock check belongs to, and its title.
pub fn check_title(name: &str) -> (&'static str, String) {
    match name {
        "safety" => ("service", "mutual exclusion under leases".into()),
        "fence_order" => ("service", "fence order".into()),
        "mutex" => ("service", "locks without leases".into()),
        "stale_writes" => ("resource", "stale writes accepted".into()),
        "lost_updates" => ("resource", "lost updates".into()),
        "duplicate_effects" => ("resource", "duplicate effects (jobs)".into()),
        other => ("check", other.replace('_', " ")),
    }
}

/// A verdict field (`true`, `false`, `"unknown"`).
pub fn validity(v: Option<&Value>) -> Option<Validity> {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
}

const ORDER: [&str; 6] = [
    "safety",
    "fence_order",
    "mutex",
    "stale_writes",
    "lost_updates",
    "duplicate_effects",
];

fn ordered_checks(results: &Value) -> Vec<(&String, &Value)> {
    let Some(checks) = results.get("checks").and_then(Value::as_object) else {
        return vec![];
    };
    let mut v: Vec<_> = checks.iter().collect();
    v.sort_by_key(|(k, _)| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    v
}

/// Every lock check's row, in the order service checks, resource checks.
pub fn check_rows(results: &Value) -> Vec<CheckRow> {
    ordered_checks(results)
        .into_iter()
        .map(|(name, c)| {
            let (side, title) = check_title(name);
            let counts = c
                .get("counts")
                .and_then(Value::as_object)
                .map(|o| {
                    o.iter()
                        .filter_map(|(k, v)| v.as_i64().filter(|n| *n != 0).map(|n| (k.clone(), n)))
                        .collect()
                })
                .unwrap_or_default();
            CheckRow {
                side: side.to_string(),
                name: title,
                valid: validity(c.get("valid")).unwrap_or(Validity::Unknown),
                applicable: c.get("applicable").and_then(Value::as_bool).unwrap_or(true),
                count: c.get("count").and_then(Value::as_u64).unwrap_or(0),
                counts,
                note: c.get("note").and_then(Value::as_str).map(str::to_string),
                witnesses: c
                    .get("witnesses")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len),
            }
        })
        .collect()
}

/// Collect op indexes from a witness: integer fields named `op`, `index`,
/// `complete_index`, or ending in `_op`, at any depth.
pub fn op_indexes(v: &Value, out: &mut Vec<u64>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let named =
                    k == "op" || k == "index" || k == "complete_index" || k.ends_with("_op");
                match x.as_u64() {
                    Some(n) if named => out.push(n),
                    _ => op_indexes(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| op_indexes(x, out)),
        _ => {}
    }
}

fn sorted(mut ops: Vec<u64>) -> Vec<u64> {
    ops.sort_unstable();
    ops.dedup();
    ops
}

/// The linearizability violation (`prefix` + `stuck`), wherever it is.
pub fn violation(results: &Value) -> Option<&Value> {
    let is_v = |v: &Value| v.get("prefix").is_some() && v.get("stuck").is_some();
    if let Some(v) = results.get("violation").filter(|v| is_v(v)) {
        return Some(v);
    }
    results
        .as_object()?
        .values()
        .find_map(|o| o.get("violation").filter(|v| is_v(v)))
}

/// Every anomaly results.json lists, lock witnesses first, then the
/// linearizability counterexample, then stale holders (information).
pub fn anomalies(results: &Value) -> Vec<Anomaly> {
    let mut out = vec![];
    for (name, c) in ordered_checks(results) {
        let (side, _) = check_title(name);
        for w in c
            .get("witnesses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut ops = vec![];
            op_indexes(w, &mut ops);
            out.push(Anomaly {
                side: side.to_string(),
                check: name.clone(),
                kind: w.get("kind").and_then(Value::as_str).map(str::to_string),
                text: w
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("(no text)")
                    .to_string(),
                ops: sorted(ops),
            });
        }
    }
    if let Some(v) = violation(results) {
        out.push(linear_anomaly(v));
    }
    let list = results
        .pointer("/stale_holders/list")
        .and_then(Value::as_array);
    for s in list.into_iter().flatten() {
        let mut ops = vec![];
        op_indexes(s, &mut ops);
        out.push(Anomaly {
            side: "information".into(),
            check: "stale_holders".into(),
            kind: s.get("kind").and_then(Value::as_str).map(str::to_string),
            text: s
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("(no text)")
                .to_string(),
            ops: sorted(ops),
        });
    }
    out
}

/// The counterexample as one anomaly: the ops that could not follow the
/// longest linearizable prefix, and the prefix's last three steps.
fn linear_anomaly(v: &Value) -> Anomaly {
    let arr = |k: &str| {
        v.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (prefix, stuck) = (arr("prefix"), arr("stuck"));
    let mut ops = vec![];
    for s in stuck.iter().chain(prefix.iter().rev().take(3)) {
        op_indexes(s, &mut ops);
    }
    let first = stuck.first();
    let what = first
        .and_then(|s| s.get("op"))
        .and_then(Value::as_str)
        .unwrap_or("an op");
    let idx = first.and_then(|s| s.get("index")).and_then(Value::as_u64);
    let key = v
        .get("key")
        .and_then(Value::as_str)
        .map(|k| format!(" on key {k}"))
        .unwrap_or_default();
    let text = format!(
        "not linearizable{key}: after a linearizable prefix of {} op(s) (state {}), no op could \
         follow; first candidate: {what}{}",
        prefix.len(),
        v.get("state")
            .map(|s| s.as_str().map_or(s.to_string(), str::to_string))
            .unwrap_or_default(),
        idx.map(|i| format!(" (op {i})")).unwrap_or_default()
    );
    Anomaly {
        side: "linearizability".into(),
        check: "linearizable".into(),
        kind: Some("not-linearizable".into()),
        text,
        ops: sorted(ops),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn witnesses_give_their_op_indexes() {
        let r = json!({
            "valid": false,
            "checks": {
                "stale_writes": {"valid": false, "applicable": true, "count": 1, "witnesses": [
                    {"kind": "stale-write-accepted", "text": "L3 wrote",
                     "request": {"op": 41, "seq": 9}, "seen": {"op": 37},
                     "stale_grant": {"acquire_op": 3, "invoked_ns": 5}}]},
                "safety": {"valid": true, "applicable": true, "count": 0, "witnesses": []}
            },
            "stale_holders": {"stale": 1, "list": [{"kind": "stale", "text": "held",
                "holder": {"acquire_op": 3}, "next": {"acquire_op": 30}}]}
        });
        let a = anomalies(&r);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].ops, [3, 37, 41]);
        assert_eq!(a[0].side, "resource");
        assert_eq!(a[1].side, "information");
        let rows = check_rows(&r);
        assert_eq!(
            rows[0].name, "mutual exclusion under leases",
            "service checks first"
        );
        assert_eq!(rows[1].count, 1);
    }

    #[test]
    fn linearizability_counterexample_is_found_one_level_down() {
        let r = json!({"linearizable": {"valid": false, "violation": {
            "key": "r", "state": "3",
            "prefix": [{"op": "write 3", "index": 4, "complete_index": 6}],
            "stuck": [{"op": "read -> 1", "index": 8, "complete_index": 9}]}}});
        let a = anomalies(&r);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].ops, [4, 6, 8, 9]);
        assert!(a[0].text.contains("read -> 1 (op 8)"), "{}", a[0].text);
    }
}
