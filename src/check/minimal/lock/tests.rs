//! The lock witnesses on committed histories: one per anomaly kind, each
//! written, read back and re-checked to the same anomaly (same kind, proof
//! ops and owners), with nothing the full history lacks, ops under their
//! original indexes, and 1-minimal by brute force (or marked not minimal
//! when the budget ran out).

use super::*;
use crate::check::minimal::{read, write};
use std::collections::HashMap;
use std::path::PathBuf;

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples")
        .join(rel)
}

fn full_check(path: &Path) -> crate::check::lock::LockReport {
    let o = LockOptions {
        max_witnesses: Some(MAX_LISTED),
        ..LockOptions::default()
    };
    check_file(path, &o).unwrap()
}

/// The witnesses of `path` with `budget`, each verified; by kind.
fn verify(path: &Path, budget: u64) -> HashMap<String, WitnessHistory> {
    let opts = WitnessOptions {
        budget,
        ..WitnessOptions::default()
    };
    let ws = find(path, &opts).unwrap();
    let full = full_check(path);
    let targets = target::targets(&full);
    assert_eq!(ws.len(), targets.len(), "one witness per kind");
    let src = import::open(path, None).unwrap();
    let mut ops: Vec<Op> = src.map(|r| r.unwrap().1).collect();
    number(&mut ops);
    let by_index: HashMap<u64, &Op> = ops.iter().map(|o| (o.index, o)).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut out = HashMap::new();
    for (w, t) in ws.into_iter().zip(&targets) {
        assert_eq!((w.info.kind.as_str(), &w.info.proof_ops), (t.kind, &t.proof));
        for op in &w.ops {
            assert_eq!(Some(&op), by_index.get(&op.index), "original op");
        }
        assert_eq!(w.info.witness_ops as usize, w.ops.len());
        assert_eq!(w.info.history_ops as usize, ops.len());
        assert!(w.info.oracle_calls <= w.info.budget);
        assert!(w.ops.iter().all(|o| w.info.roles.contains_key(&o.index)));
        let file = write(dir.path(), &w).unwrap();
        let back = read(&file).unwrap();
        assert_eq!(back.info, w.info);
        // The witness file alone shows the same anomaly, nothing new.
        let again = full_check(&file);
        let sigs = target::sigs(&full);
        assert!(target::accepts(&again, t, &sigs, MAX_LISTED), "{}", w.info.kind);
        assert_eq!(target::matching(&again, t), Some(w.info.anomaly.clone()));
        if w.info.minimal {
            assert_one_minimal(&ops, &w, t, &full);
        }
        out.insert(w.info.kind.clone(), w);
    }
    out
}

/// Removing any one remaining non-fixed process or unit (with the units
/// that depend on it kept, a unit it needs cannot go) loses the anomaly.
fn assert_one_minimal(ops: &[Op], w: &WitnessHistory, t: &Target, full: &LockReport) {
    let h = Units::new(ops.to_vec());
    let idx: HashSet<u64> = w.ops.iter().map(|o| o.index).collect();
    let kept: Vec<bool> = (0..h.units.len())
        .map(|u| idx.contains(&h.head(u).index))
        .collect();
    let fixed = fixed::fixed(&h, t);
    let meta = read_meta(ops, w);
    let ctx = Ctx {
        h: &h,
        meta: &meta,
        lopts: &LockOptions {
            max_witnesses: Some(MAX_LISTED),
            ..LockOptions::default()
        },
        full: target::sigs(full),
        run: String::new(),
    };
    assert!(ctx.accepts(t, &kept));
    let groups = (0..h.procs.len())
        .map(|p| h.proc_units[p].clone())
        .chain((0..h.units.len()).map(|u| vec![u]));
    for g in groups {
        if !g.iter().any(|&u| kept[u]) || g.iter().any(|&u| fixed[u] && kept[u]) {
            continue;
        }
        let mut cand = kept.clone();
        g.iter().for_each(|&u| cand[u] = false);
        h.close(&mut cand);
        if g.iter().any(|&u| cand[u]) {
            continue;
        }
        let lines: Vec<u64> = g.iter().map(|&u| h.head(u).index).collect();
        assert!(!ctx.accepts(t, &cand), "{}: {lines:?} could go", t.kind);
    }
}

fn read_meta(_ops: &[Op], w: &WitnessHistory) -> Meta {
    w.meta.clone()
}

use crate::check::lock::LockReport;

/// Measure the search on the histories named in `LOCKJAW_WITNESS` (comma
/// separated): `cargo test --profile ci --lib measure_witnesses --
/// --ignored --nocapture`.
#[test]
#[ignore = "a measurement: give histories in LOCKJAW_WITNESS"]
fn measure_witnesses() {
    let paths = std::env::var("LOCKJAW_WITNESS").unwrap_or_default();
    for p in paths.split(',').filter(|p| !p.is_empty()) {
        let t0 = Instant::now();
        let ws = find(Path::new(p), &WitnessOptions::default()).unwrap();
        for w in &ws {
            let i = &w.info;
            println!(
                "{p}: {} {} ops -> {} ops, {:.3} s, {} calls, minimal {}",
                i.kind, i.history_ops, i.witness_ops, i.seconds, i.oracle_calls, i.minimal
            );
            for o in &w.ops {
                println!("   {:>6} {}", o.index, i.roles[&o.index]);
            }
        }
        println!("{p}: total {:.3} s", t0.elapsed().as_secs_f64());
    }
}
