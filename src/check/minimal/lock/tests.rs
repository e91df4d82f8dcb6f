//! The lock witnesses on committed histories: one per anomaly kind, each
//! written, read back and re-checked to the same anomaly (same kind, proof
//! ops and owners), with nothing the full history lacks, ops under their
//! original indexes, and 1-minimal by brute force (or marked not minimal
//! when the budget ran out).

use super::*;
use crate::check::lock::WitnessData;
use crate::check::minimal::{read, write, DEFAULT_BUDGET};
use crate::history::OpType;
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
    verify_kinds(path, budget, |_| true)
}

/// [`verify`] for the kinds `want` accepts.
fn verify_kinds(
    path: &Path,
    budget: u64,
    want: impl Fn(&str) -> bool + Copy,
) -> HashMap<String, WitnessHistory> {
    let opts = WitnessOptions {
        budget,
        ..WitnessOptions::default()
    };
    let ws = find_kinds(path, &opts, want).unwrap();
    let full = full_check(path);
    let mut targets = target::targets(&full);
    targets.retain(|t| want(t.kind));
    assert!(!targets.is_empty(), "{}: no anomaly", path.display());
    assert_eq!(ws.len(), targets.len(), "one witness per kind");
    let src = import::open(path, None).unwrap();
    let mut ops: Vec<Op> = src.map(|r| r.unwrap().1).collect();
    number(&mut ops);
    let by_index: HashMap<u64, &Op> = ops.iter().map(|o| (o.index, o)).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut out = HashMap::new();
    for (w, t) in ws.into_iter().zip(&targets) {
        assert_eq!(
            (w.info.kind.as_str(), &w.info.proof_ops),
            (t.kind, &t.proof)
        );
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
        assert!(
            target::accepts(&again, t, &sigs, MAX_LISTED),
            "{}",
            w.info.kind
        );
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
    let meta = w.meta.clone();
    let ctx = Ctx {
        h: &h,
        meta: &meta,
        lopts: &LockOptions {
            max_witnesses: Some(MAX_LISTED),
            ..LockOptions::default()
        },
        full: target::sigs(full),
        run: String::new(),
        checked: Default::default(),
        over: Default::default(),
    };
    assert!(ctx.accepts(t, &kept));
    for g in search::groups(&h) {
        let Some(cand) = search::without(&h, &fixed, &kept, &g) else {
            continue;
        };
        let lines: Vec<u64> = g.iter().map(|&u| h.head(u).index).collect();
        assert!(!ctx.accepts(t, &cand), "{}: {lines:?} could go", t.kind);
    }
}

use crate::check::lock::LockReport;

/// Measure the search on the histories named in `LOCKJAW_WITNESS` (comma
/// separated): `cargo test --profile ci --lib measure_witnesses --
/// --ignored --nocapture`; with `LOCKJAW_WITNESS_OUT=DIR` the witnesses
/// are written under DIR/<the history's folder name>/.
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
            if i.witness_ops <= 40 {
                for o in &w.ops {
                    println!("   {:>6} {}", o.index, i.roles[&o.index]);
                }
            }
            if let Ok(dir) = std::env::var("LOCKJAW_WITNESS_OUT") {
                let name = Path::new(p).parent().and_then(|d| d.file_name()).unwrap();
                let d = Path::new(&dir).join(name);
                std::fs::create_dir_all(&d).unwrap();
                println!("   wrote {}", write(&d, w).unwrap().display());
            }
        }
        println!("{p}: total {:.3} s", t0.elapsed().as_secs_f64());
    }
}

/// The lines of `w` whose `f` is `f`.
fn count_f(w: &WitnessHistory, f: &str) -> usize {
    w.ops.iter().filter(|o| o.f == f).count()
}

#[test]
fn every_hand_written_lock_anomaly_has_a_minimal_witness() {
    let mut kinds = HashSet::new();
    for name in [
        "safety-violation",
        "session-lease-violation",
        "violation-proven-by-later-renew",
        "mutex-violation",
        "mutex-foreign-release",
        "fence-order",
        "stale-write-accepted",
        "lost-update-unfenced",
        "phantom-write",
        "set-lost",
    ] {
        let ws = verify(&example(&format!("lock/{name}.jsonl")), 1000);
        for w in ws.values() {
            assert!(w.info.minimal, "{name}: {}", w.info.kind);
            assert!(w.info.run.ends_with(".jsonl"), "{}", w.info.run);
        }
        kinds.extend(ws.into_keys());
    }
    for k in [
        "safety-violation",
        "mutex-violation",
        "mutex-not-linearizable",
        "fence-order",
        "stale-write-accepted",
        "lost-updates",
        "set-lost",
    ] {
        assert!(kinds.contains(k), "no {k} witness: {kinds:?}");
    }
}

#[test]
fn a_lost_update_without_a_local_proof_keeps_every_write_and_the_final_read() {
    let path = example("lock/lost-update-final-read.jsonl");
    let ws = verify(&path, 1000);
    let w = &ws["lost-updates"];
    assert_eq!(w.info.rule.as_deref(), Some("every-write"));
    let src = import::open(&path, None).unwrap();
    let writes = src
        .map(|r| r.unwrap().1)
        .filter(|o| o.f == "write" && o.key.as_deref() == Some("counter"))
        .count();
    assert_eq!(count_f(w, "write"), writes);
    let last = w.ops.last().unwrap();
    assert_eq!((last.f.as_str(), last.index), ("read", w.info.proof_ops[0]));
    assert!(w.info.roles[&last.index].ends_with("the final read"));
}

#[test]
fn a_lost_update_of_two_writes_of_one_value_keeps_their_holds_only() {
    let ws = verify(&example("lock/stale-write-accepted.jsonl"), 1000);
    let w = &ws["lost-updates"];
    assert_eq!(w.info.rule.as_deref(), Some("same-value"));
    assert_eq!(w.info.proof_ops, vec![9, 13]);
    assert_eq!(w.info.owners, vec!["b".to_string(), "a".to_string()]);
    // B's hold and A's hold (grant, read, write, release); not the final
    // read, which the total would need.
    let kept: Vec<u64> = w.ops.iter().map(|o| o.index).collect();
    assert_eq!(kept, (0..16).collect::<Vec<u64>>());
    assert!(
        w.info.roles[&13].contains("the same value as A's"),
        "{:?}",
        w.info.roles
    );
    assert_eq!(w.info.anomaly["kind"], "lost-update-pair");
}

/// The lost update of the real 20 s counter run below: two writes and
/// their holds, not its every write.
#[test]
fn a_real_counter_run_gives_a_lost_update_in_thirty_lines() {
    let path = example("witness/redis-counter-pause-holder.jsonl.gz");
    let ws = verify_kinds(&path, DEFAULT_BUDGET, |k| k == "lost-updates");
    let w = &ws["lost-updates"];
    let rule = w.info.rule.as_deref().unwrap_or_default();
    assert!(rule == "same-value" || rule == "overwritten", "{rule}");
    assert!(
        w.info.history_ops > 7000 && w.ops.len() <= 30 && w.info.minimal,
        "{} of {} lines",
        w.ops.len(),
        w.info.history_ops
    );
}

#[test]
fn a_stale_write_witness_names_its_owners_a_and_b() {
    let ws = verify(&example("lock/stale-write-accepted.jsonl"), 1000);
    let w = &ws["stale-write-accepted"];
    assert_eq!(w.info.owners.len(), 2);
    let r = &w.info.roles;
    assert!(r[&1].starts_with("A's grant, fence 33"), "{r:?}");
    assert!(r[&1].contains("A's lease certainly over at"), "{r:?}");
    assert!(r[&5].starts_with("B's grant, fence 34"), "{r:?}");
    assert!(
        r[&13].starts_with("A's write of 1 with fence 33, accepted"),
        "{r:?}"
    );
    assert_eq!(w.info.anomaly["kind"], "stale-write-accepted");
}

/// A real 10 s Redis jobs run (3,882 ops; `lockjaw run --system redis
/// --workload jobs --nemesis pause-holder --fencing off --time-limit 10
/// --seed 16`):
/// a stale write in at most 30 lines, and a duplicate effect that keeps
/// every apply of its job and the final read.
#[test]
fn a_real_jobs_run_gives_a_short_stale_write_and_a_duplicate_effect() {
    let path = example("witness/redis-jobs-pause-holder.jsonl.gz");
    let ws = verify(&path, DEFAULT_BUDGET);
    let stale = &ws["stale-write-accepted"];
    assert!(stale.info.history_ops > 1000);
    assert!(stale.ops.len() <= 30, "{} lines", stale.ops.len());
    assert!(stale.info.minimal);
    let dup = &ws["duplicate-effect"];
    assert_eq!(dup.info.rule.as_deref(), Some("every-write"));
    let WitnessData::DuplicateEffect { job, applies, .. } =
        serde_json::from_value(dup.info.anomaly.clone()).unwrap()
    else {
        panic!("{:?}", dup.info.anomaly)
    };
    for a in applies {
        assert!(dup.ops.iter().any(|o| o.index == a));
    }
    let of_job = |o: &&Op| o.f == "apply" && o.value.get("job") == Some(&job.into());
    assert!(dup.ops.iter().filter(of_job).count() >= 4);
}

/// A real Redis election under clock-jump: two leaders at once (split
/// brain, a campaign plays acquire; `lockjaw run --system redis --workload
/// leader --nemesis clock-jump --time-limit 12 --ttl-ms 2000 --hold-ms 400
/// --seed 7`, 1,894 ops).
#[test]
fn a_real_election_run_gives_a_split_brain_witness() {
    let path = example("witness/redis-leader-clock-jump.jsonl.gz");
    let ws = verify(&path, DEFAULT_BUDGET);
    let w = &ws["safety-violation"];
    assert!(w.info.minimal);
    let campaigns = w.ops.iter().filter(|o| o.f == "campaign").count();
    assert!(campaigns >= 4, "both elections, invoked and granted");
    assert!(w.ops.len() < w.info.history_ops as usize / 10);
}

/// The stale write of a real 20 s fenced-counter run (7,620 ops; `lockjaw
/// run --system redis --nemesis pause-holder --fencing off --time-limit 20
/// --seed 30`) alone.
#[test]
fn a_real_counter_run_gives_a_stale_write_in_thirty_lines() {
    let path = example("witness/redis-counter-pause-holder.jsonl.gz");
    let ws = verify_kinds(&path, DEFAULT_BUDGET, |k| k == "stale-write-accepted");
    let w = &ws["stale-write-accepted"];
    assert!(w.info.history_ops > 7000 && w.ops.len() <= 30 && w.info.minimal);
}

#[test]
fn a_spent_budget_is_marked_and_the_witness_still_rechecks() {
    // Its duplicate-effect witness takes dozens of oracle calls.
    let path = example("witness/redis-jobs-pause-holder.jsonl.gz");
    for budget in [1, 2] {
        let ws = verify_kinds(&path, budget, |k| k == "duplicate-effect");
        let w = &ws["duplicate-effect"];
        assert!(!w.info.minimal && w.info.oracle_calls <= budget);
    }
}

#[test]
fn valid_and_non_lock_histories_have_no_lock_witness() {
    let opts = WitnessOptions::default();
    assert!(find(&example("lock/two-keys.jsonl"), &opts)
        .unwrap()
        .is_empty());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.jsonl");
    let lines = [
        r#"{"type":"meta","checkers":["linearizable"],"model":"register","init":0}"#,
        r#"{"index":0,"time":1,"process":1,"type":"invoke","f":"write","value":1}"#,
        r#"{"index":1,"time":2,"process":1,"type":"ok","f":"write","value":1}"#,
    ];
    std::fs::write(&p, lines.join("\n")).unwrap();
    assert!(find(&p, &opts).unwrap().is_empty());
}

/// Op `i` (at time `i`) of process `p` on key `k`.
fn op(i: u64, p: i64, kind: OpType, f: &str) -> Op {
    Op {
        index: i,
        key: Some("k".into()),
        ..Op::new(i, crate::history::Process::Num(p), kind, f)
    }
}

#[test]
fn a_read_keeps_the_write_it_read_and_a_fence_keeps_its_grant() {
    let mut ops = vec![
        op(0, 1, OpType::Invoke, "acquire"),
        op(1, 1, OpType::Ok, "acquire"),
        op(2, 1, OpType::Invoke, "write"),
        op(3, 1, OpType::Ok, "write"),
        op(4, 2, OpType::Invoke, "read"),
        op(5, 2, OpType::Ok, "read"),
    ];
    ops[1].fence = Some(7);
    ops[2].fence = Some(7);
    ops[2].value = 5.into();
    ops[5].value = 5.into();
    let h = Units::new(ops);
    assert_eq!(h.units.len(), 3);
    let mut kept = vec![false, false, true];
    h.close(&mut kept);
    assert_eq!(kept, [true, true, true]);
    let mut procs = vec![false, true];
    h.close_procs(&mut procs);
    assert_eq!(procs, [true, true]);
}

/// Issue 43, item 3: the release that ends a kept grant's hold stays when
/// another process of the same owner made it (a worker's replacement
/// after an `info`), as docs/reports.md says.
#[test]
fn a_kept_grant_keeps_its_release_made_by_another_process() {
    let op = |i: u64, p: i64, kind: OpType, f: &str| Op {
        owner: Some("a".into()),
        ..op(i, p, kind, f)
    };
    let ops = vec![
        op(0, 1, OpType::Invoke, "acquire"),
        op(1, 1, OpType::Ok, "acquire"),
        op(2, 1, OpType::Invoke, "write"),
        op(3, 1, OpType::Info, "write"),
        // Process 1 is gone; its replacement 11 releases a's lock.
        op(4, 11, OpType::Invoke, "release"),
        op(5, 11, OpType::Ok, "release"),
        // A release of another owner is no end of a's hold.
        Op {
            owner: Some("b".into()),
            ..op(6, 12, OpType::Invoke, "release")
        },
    ];
    let h = Units::new(ops);
    assert_eq!(h.units.len(), 4);
    let mut kept = vec![true, false, false, false];
    h.close(&mut kept);
    assert_eq!(kept, [true, false, true, false]);
}

/// Without the repaired core (from the whole history, by process first)
/// the search reaches a witness of the same size that also passes.
#[test]
fn the_search_from_the_whole_history_agrees_with_the_repaired_core() {
    for name in ["stale-write-accepted", "set-lost", "fence-order"] {
        let path = example(&format!("lock/{name}.jsonl"));
        let full = full_check(&path);
        let src = import::open(&path, None).unwrap();
        let meta = src.meta.clone().unwrap();
        let h = Units::new(src.map(|r| r.unwrap().1).collect());
        let lopts = LockOptions {
            max_witnesses: Some(MAX_LISTED),
            ..LockOptions::default()
        };
        let ctx = Ctx {
            h: &h,
            meta: &meta,
            lopts: &lopts,
            full: target::sigs(&full),
            run: String::new(),
            checked: Default::default(),
            over: Default::default(),
        };
        for t in target::targets(&full) {
            let fixed = fixed::fixed(&h, &t);
            let mut oracle = |kept: &[bool]| ctx.accepts(&t, kept);
            let slow = search::search(&h, &fixed, None, 1000, &mut oracle);
            let w = ctx.witness(&t, 1000);
            assert!(slow.minimal && ctx.accepts(&t, &slow.kept), "{name}");
            let n = h.lines(&slow.kept).len();
            assert_eq!(n, w.ops.len(), "{name}: {}", t.kind);
        }
    }
}
