//! Linearizability witnesses on a small register history and on the
//! reference corpus (Knossos EDN, Porcupine logs): each re-checks from its
//! file as not linearizable, holds only the failing key, lost only reads,
//! and is 1-minimal over reads unless its budget ran out.

use super::*;
use crate::check::linear::{check_file, LinOptions};
use crate::check::minimal::DEFAULT_BUDGET;
use crate::check::results::{check_history, CheckOptions};
use crate::history::init_flag;
use serde_json::json;
use std::path::PathBuf;

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(rel)
}

fn opts(model: &str, init: Option<&str>, budget: u64) -> WitnessOptions {
    let mut o = WitnessOptions {
        budget,
        ..WitnessOptions::default()
    };
    o.check.lin = LinOptions {
        model: Some(model.into()),
        init: init_flag(init).unwrap(),
        ..LinOptions::default()
    };
    o
}

/// A register history: key `x` is fine; on `y` the read of 1 at 60 comes
/// after write 2 completed (30), which began after write 1 ended (10).
fn register_history(dir: &Path) -> PathBuf {
    let meta = json!({"type": "meta", "version": 1, "model": "cas-register", "init": 0,
        "checkers": ["linearizable"], "run_id": "r-test"});
    // (process, f, key, value, invoke time, completion time, completion type)
    let ops: &[(i64, &str, &str, Value, u64, u64, &str)] = &[
        (0, "write", "x", json!(5), 0, 5, "ok"),
        (1, "write", "y", json!(1), 1, 10, "ok"),
        (0, "read", "x", json!(5), 6, 8, "ok"),
        (2, "write", "y", json!(2), 20, 30, "ok"),
        (3, "read", "y", json!(2), 22, 28, "ok"),
        (4, "read", "y", json!(2), 40, 50, "ok"),
        (5, "write", "y", json!(3), 45, 100, "info"),
        (3, "read", "y", json!(1), 60, 70, "ok"),
        (4, "read", "y", json!(2), 80, 90, "ok"),
        (6, "read", "y", json!(9), 81, 91, "fail"),
    ];
    let mut lines = vec![meta];
    for &(p, f, k, ref v, t0, t1, end) in ops {
        let inv_v = if f == "read" { Value::Null } else { v.clone() };
        lines.push(
            json!({"time": t0, "process": p, "type": "invoke", "f": f, "key": k, "value": inv_v}),
        );
        lines.push(json!({"time": t1, "process": p, "type": end, "f": f, "key": k, "value": v}));
    }
    // Real-time order in the file, and indexes as lockjaw writes them.
    let mut body: Vec<Value> = lines.split_off(1);
    body.sort_by_key(|l| l["time"].as_u64());
    for (i, l) in body.iter_mut().enumerate() {
        l["index"] = json!(i);
    }
    lines.extend(body);
    let p = dir.join("history.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p
}

/// Every op line of `path` (any format), in order.
fn all_ops(path: &Path) -> Vec<Op> {
    let mut ops: Vec<Op> = import::open(path, None)
        .unwrap()
        .map(|r| r.unwrap().1)
        .collect();
    number_if_needed(&mut ops);
    ops
}

/// The witness's pairs: (invoke, completion) by process line order.
fn pairs(ops: &[Op]) -> Vec<(Op, Option<Op>)> {
    let mut p = Pairer::new("t");
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(x) = p.push(i as u64, op.clone()).unwrap() {
            out.push((x.invoke, x.complete));
        }
    }
    out.extend(p.finish().into_iter().map(|x| (x.invoke, x.complete)));
    out
}

fn is_read(f: &str) -> bool {
    matches!(f, "read" | "get")
}

/// Everything a linearizability witness must be; returns it.
fn assert_witness(path: &Path, o: &WitnessOptions) -> WitnessHistory {
    let full = check_file(path, &o.check.lin).unwrap();
    assert_eq!(full.valid, Validity::False, "{}", path.display());
    let ws = find(path, o).unwrap();
    assert_eq!(ws.len(), 1, "{}", path.display());
    let w = ws.into_iter().next().unwrap();
    // One failing key (with several, the one the check met first).
    let key = w.ops[0].key.clone();
    if let (Some(k), false) = (&key, o.check.lin.one_state) {
        assert!(
            w.info.text.contains(&format!("for key {k:?}")),
            "{}",
            w.info.text
        );
    }
    assert_eq!(
        (w.info.kind.as_str(), w.info.check.as_str()),
        (KIND, "linearizable")
    );
    assert!(w.info.oracle_calls <= o.budget.max(1), "{:?}", w.info);
    // Re-checked from its file alone (no options), it is not linearizable.
    let dir = tempfile::tempdir().unwrap();
    let file = super::super::write(dir.path(), &w).unwrap();
    let again = check_history(&file, &CheckOptions::default()).unwrap();
    assert_eq!(again.valid, Validity::False, "{}", file.display());
    assert_eq!(again.checkers, [Checker::Linearizable]);
    assert!(again.errors.is_empty(), "{:?}", again.errors);
    assert_eq!(super::super::read(&file).unwrap().info, w.info);
    // The evidence's lines are the witness file's.
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for c in w.info.anomaly["stuck"].as_array().unwrap() {
        let line: Value =
            serde_json::from_str(lines[c["line"].as_u64().unwrap() as usize - 1]).unwrap();
        assert_eq!(line["index"], c["index"], "{c}");
    }
    // Its ops are the full history's, unchanged, of the failing key only.
    let ops = all_ops(path);
    for op in &w.ops {
        assert!(ops.contains(op), "not in the history: {op:?}");
        if !o.check.lin.one_state {
            assert_eq!(op.key, key, "{op:?}");
        }
    }
    assert_eq!(w.info.witness_ops as usize, w.ops.len());
    // Only reads were dropped: every completed or pending non-read op of
    // the key is still there (failed ops, which the checker ignores, may go).
    for (inv, done) in pairs(&ops) {
        let failed = done.as_ref().is_some_and(|d| d.kind == OpType::Fail);
        let keyed = o.check.lin.one_state || inv.key == key;
        if keyed && !is_read(&inv.f) && !failed && !inv.process.is_nemesis() {
            assert!(w.ops.contains(&inv), "dropped a non-read: {inv:?}");
        }
    }
    // Every kept line has a role.
    for op in &w.ops {
        assert!(w.info.roles.contains_key(&op.index), "no role: {op:?}");
    }
    if w.info.minimal {
        assert_one_minimal(&w);
    }
    w
}

/// Removing any one remaining read makes the witness linearizable.
fn assert_one_minimal(w: &WitnessHistory) {
    let lin = LinOptions::default();
    for (inv, done) in pairs(&w.ops) {
        if !is_read(&inv.f) {
            continue;
        }
        let rest: Vec<Op> = w
            .ops
            .iter()
            .filter(|o| **o != inv && Some(*o) != done.as_ref())
            .cloned()
            .collect();
        let r = check_ops("t", Some(w.meta.clone()), rest, &lin).unwrap();
        assert_ne!(
            r.valid,
            Validity::False,
            "read {} could still go",
            inv.index
        );
    }
}

#[test]
fn a_register_witness_keeps_the_writes_and_the_one_stale_read() {
    let d = tempfile::tempdir().unwrap();
    let p = register_history(d.path());
    let w = assert_witness(&p, &WitnessOptions::default());
    assert!(w.info.minimal);
    // The writes of 1 and 2, the read of 1, the pending write of 3 (in
    // completion order).
    let kept: Vec<(String, Value)> = pairs(&w.ops)
        .into_iter()
        .map(|(i, c)| {
            (
                i.f.clone(),
                if is_read(&i.f) {
                    c.unwrap().value
                } else {
                    i.value
                },
            )
        })
        .collect();
    assert_eq!(
        kept,
        [
            ("write".into(), json!(1)),
            ("write".into(), json!(2)),
            ("read".into(), json!(1)),
            ("write".into(), json!(3)),
        ]
    );
    assert_eq!(w.info.run, "r-test");
    assert_eq!(w.info.owners, ["1", "2", "3", "5"]);
    let roles: Vec<&str> = w.info.roles.values().map(String::as_str).collect();
    assert!(roles.contains(&"process 2's write of 2"), "{roles:?}");
    assert!(
        roles.contains(&"process 5's write of 3: outcome unknown (info)"),
        "{roles:?}"
    );
    assert!(
        roles.contains(&"process 3's read of 1 (could not follow)"),
        "{roles:?}"
    );
    let read_1 = w.ops.iter().rev().find(|o| o.f == "read").unwrap().index;
    assert!(w.info.proof_ops.contains(&read_1), "{:?}", w.info.proof_ops);
    assert!(
        w.info.text.contains("not linearizable for key \"y\""),
        "{}",
        w.info.text
    );
}

#[test]
fn a_valid_history_or_a_lock_history_has_no_linearizability_witness() {
    let p = corpus("porcupine/kv/c01-ok.txt");
    assert!(find(&p, &opts("kv", Some("\"\""), 100)).unwrap().is_empty());
    let lock = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/lock/safety-violation.jsonl");
    assert!(find(&lock, &WitnessOptions::default()).unwrap().is_empty());
}

#[test]
fn knossos_witnesses_recheck_and_are_minimal() {
    for f in [
        "rethink-fail-smaller.edn",
        "bad-analysis.edn",
        "cas-failure.edn",
    ] {
        let p = corpus(&format!("knossos/cas-register/bad/{f}"));
        let w = assert_witness(&p, &opts("cas-register", Some("0"), DEFAULT_BUDGET));
        assert!(w.info.minimal, "{f}: {:?}", w.info);
        assert!(w.ops.len() < all_ops(&p).len(), "{f}");
    }
}

#[test]
fn porcupine_witnesses_keep_the_failing_key_only() {
    let p = corpus("porcupine/etcd/etcd_000.log");
    let w = assert_witness(&p, &WitnessOptions::default());
    assert!(w.info.minimal);
    // Per key, and as one state (which keeps every key).
    let p = corpus("porcupine/kv/c10-bad.txt");
    let w = assert_witness(&p, &WitnessOptions::default());
    let keys: BTreeSet<_> = all_ops(&p).into_iter().filter_map(|o| o.key).collect();
    assert!(keys.len() > 1 && w.ops.iter().all(|o| o.key == w.ops[0].key));
    let mut one = WitnessOptions::default();
    one.check.lin.one_state = true;
    assert_witness(&p, &one);
}

#[test]
fn a_spent_budget_gives_a_witness_marked_not_minimal() {
    let p = corpus("porcupine/etcd/etcd_000.log");
    for budget in [0, 1, 3] {
        let w = assert_witness(&p, &opts("cas-register", None, budget));
        assert!(!w.info.minimal, "budget {budget}: {:?}", w.info);
        assert_eq!(w.info.oracle_calls, budget.max(1));
    }
}

#[test]
fn ops_without_indexes_are_numbered_by_position() {
    let mut ops = vec![Op::new(0, crate::history::Process::Num(1), OpType::Invoke, "read"); 3];
    number_if_needed(&mut ops);
    assert_eq!(ops.iter().map(|o| o.index).collect::<Vec<_>>(), [0, 1, 2]);
    ops[1].index = 7;
    number_if_needed(&mut ops);
    assert_eq!(ops[1].index, 7, "unique indexes stay");
}

#[test]
fn an_undecided_single_removal_is_recognized() {
    let kept = [true, true, false, true];
    assert!(one_less(&[true, false, false, true], &kept));
    assert!(
        !one_less(&[false, false, false, true], &kept),
        "two removed"
    );
    assert!(!one_less(&kept, &kept), "none removed");
    assert!(!one_less(&[true, false, true, true], &kept), "one added");
}
