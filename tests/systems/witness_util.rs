//! Issue 30 assertions on the witness histories of a real invalid run
//! (`witness-<kind>.jsonl` in its run directory), added to the existing
//! runs that show the anomaly: the witness is short, re-checks to the same
//! anomaly with the same proof ops, and a lost-updates witness keeps its
//! two writes (issue 43) or, proven by the total, every write. They need the merged witness search (check::minimal's lock
//! search); until then `find` returns nothing and they fail naming it.

use crate::run_util::{lockjaw, Run};
use lockjaw::check::minimal::{self, WitnessHistory};
use lockjaw::history::jsonl::read_all;
use serde_json::Value;
use std::collections::BTreeSet;

/// The op indexes a lock witness's JSON names (grants, requests, final
/// reads, lease proofs, applies).
fn op_refs(v: &Value, out: &mut BTreeSet<u64>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    (
                        "op" | "acquire_op" | "final_read_op" | "lease_evidence_op",
                        Value::Number(n),
                    ) => {
                        out.extend(n.as_u64());
                    }
                    ("applies", Value::Array(a)) => out.extend(a.iter().filter_map(Value::as_u64)),
                    _ => op_refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| op_refs(x, out)),
        _ => {}
    }
}

/// The run wrote `witness-<kind>.jsonl`: at most 30 op lines, named in the
/// run's output, and `lockjaw check` on it alone finds `kind` with the
/// same proof ops as its `info.proof_ops`.
pub fn issue30_assert_witness(r: &Run, kind: &str) -> WitnessHistory {
    let p = r.dir.join(minimal::file_name(kind));
    assert!(
        p.is_file(),
        "issue 30: an invalid run writes {} (needs the merged witness search); stdout:\n{}",
        p.display(),
        r.stdout
    );
    let w = minimal::read(&p).unwrap();
    let i = &w.info;
    assert_eq!(i.kind, kind);
    assert!(
        w.ops.len() <= 30,
        "issue 30: {} has {} op lines (goal ≤ 30)",
        p.display(),
        w.ops.len()
    );
    assert_eq!(i.witness_ops as usize, w.ops.len());
    let (_, full) = r.history();
    assert_eq!(
        i.history_ops as usize,
        full.len(),
        "history_ops counts the run's op lines"
    );
    assert!(
        r.stdout.contains(&format!("witness: {}", p.display())),
        "issue 30: the run prints a line per witness:\n{}",
        r.stdout
    );
    let kept: BTreeSet<u64> = w.ops.iter().map(|o| o.index).collect();
    assert!(
        i.proof_ops.iter().all(|o| kept.contains(o)),
        "the proof ops {:?} are in the witness",
        i.proof_ops
    );
    // The witness alone, checked again: the same kind and proof ops.
    let out = lockjaw()
        .args(["check", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let again = v["lock"]["checks"][&i.check]["witnesses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let want: BTreeSet<u64> = i.proof_ops.iter().copied().collect();
    let same = again.iter().any(|a| {
        let mut refs = BTreeSet::new();
        op_refs(a, &mut refs);
        a["kind"] == kind && want.is_subset(&refs)
    });
    assert!(
        same,
        "issue 30: `lockjaw check {}` finds {kind} with proof ops {want:?}: {again:?}",
        p.display()
    );
    w
}

/// A lost-updates witness, if the run wrote one: proven by two writes
/// (issue 43), it keeps both and is at most 30 op lines; proven by the
/// total, it keeps every write to the key (invocations and completions)
/// and the final read.
pub fn issue30_assert_lost_updates_keep_every_write(r: &Run) {
    let p = r.dir.join(minimal::file_name("lost-updates"));
    if !p.is_file() {
        return;
    }
    let w = minimal::read(&p).unwrap();
    let kept: BTreeSet<u64> = w.ops.iter().map(|o| o.index).collect();
    if w.info.rule.as_deref() != Some("every-write") {
        let proof = &w.info.proof_ops;
        assert!(
            proof.len() == 2 && proof.iter().all(|i| kept.contains(i)),
            "issue 43: a lost update proven by two writes keeps both: {proof:?}"
        );
        assert!(
            w.ops.len() <= 30,
            "issue 43: a local lost-update witness is at most 30 op lines, got {}",
            w.ops.len()
        );
        return;
    }
    let key = w.info.anomaly["key"]
        .as_str()
        .unwrap_or("counter")
        .to_string();
    let (_, full) = read_all(&r.dir.join("history.jsonl")).unwrap();
    let writes: Vec<u64> = full
        .iter()
        .filter(|o| o.f == "write" && o.key.as_deref() == Some(key.as_str()))
        .map(|o| o.index)
        .collect();
    let missing: Vec<&u64> = writes.iter().filter(|i| !kept.contains(i)).collect();
    assert!(
        missing.is_empty(),
        "issue 30: the lost-updates witness keeps every write; missing {missing:?}"
    );
    let fr = w.info.anomaly["final_read_op"]
        .as_u64()
        .expect("the final read op");
    assert!(kept.contains(&fr), "the final read stays");
}
