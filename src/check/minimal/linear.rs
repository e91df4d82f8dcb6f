//! Witnesses of non-linearizable histories: the failing key's ops, with
//! only reads dropped (by ddmin, the checker as the oracle).
//!
//! Why this is sound: the checker decides each key on its own (one key's
//! ops are linearizable or not whatever the other keys hold), so the
//! failing key alone fails. Within it, only reads go: a read changes no
//! state, so removing it from any legal order of the full key leaves a
//! legal order of the rest; if the rest has none, the full key had none.
//! Writes, CAS and pending (`info`) ops stay: removing one changes the
//! states the others see and can make a linearizable history look
//! non-linearizable. Failed ops and pending reads are dropped up front:
//! the checker ignores them, so they cannot change a verdict.

use super::{ddmin, WitnessHistory, WitnessInfo, WitnessOptions};
use crate::check::linear::evidence::Violation;
use crate::check::linear::{check_ops, LinOptions, LinResult};
use crate::check::models::keyed::Keyed;
use crate::check::models::{with_model, Encode, ModelVisitor};
use crate::check::results::{checkers_for, Checker};
use crate::check::Validity;
use crate::history::import;
use crate::history::pair::{Pair, Pairer};
use crate::history::{HistoryError, Meta, Op, OpType};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// The anomaly kind of a linearizability witness.
pub const KIND: &str = "non-linearizable";

/// What the search may do with one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// A write, CAS or any other state-changing op, completed or pending:
    /// it stays.
    Fixed,
    /// A completed read: ddmin may drop it.
    Read,
    /// A failed op or a pending read: the checker ignores it.
    Ignored,
}

/// One operation of the history: where its lines are in the op list.
#[derive(Clone, Debug)]
struct Operation {
    invoke: usize,
    complete: Option<usize>,
    /// Its partition (the checker's key; `None` checked as one state).
    key: Option<String>,
    class: Class,
}

/// The linearizability witness of the history at `path`, if its
/// linearizability check (the checkers `opts.check` and its meta record
/// name) judges it not linearizable.
pub fn find(path: &Path, opts: &WitnessOptions) -> Result<Vec<WitnessHistory>, HistoryError> {
    let started = Instant::now();
    let mut src = import::open(path, opts.check.format)?;
    if !checkers_for(src.meta.as_ref(), &opts.check).contains(&Checker::Linearizable) {
        return Ok(Vec::new());
    }
    let meta = src.meta.clone();
    let mut ops = src
        .by_ref()
        .map(|r| r.map(|(_, op)| op))
        .collect::<Result<Vec<Op>, _>>()?;
    number_if_needed(&mut ops);
    let name = path.display().to_string();
    let lin = LinOptions {
        format: None,
        ..opts.check.lin.clone()
    };
    let full = check_ops(&name, meta.clone(), ops.clone(), &lin)?;
    let Some(violation) = full
        .violation
        .as_ref()
        .filter(|_| full.valid == Validity::False)
    else {
        return Ok(Vec::new());
    };
    let search = Search::new(&name, meta, &full, &lin, &ops)?;
    let Some(found) = search.run(&ops, violation.key.as_deref(), opts.budget)? else {
        return Ok(Vec::new());
    };
    // The failing key alone: the same evidence as in the full history.
    let text = found
        .first
        .violation
        .as_ref()
        .map(|v| {
            v.to_text("")
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default();
    Ok(vec![search.witness(
        &ops,
        found,
        text,
        opts.budget,
        started,
    )])
}

/// Ops whose `index` is not unique (a hand-written file without indexes)
/// are numbered by their position, so roles and proofs can name them.
fn number_if_needed(ops: &mut [Op]) {
    let mut seen = HashSet::new();
    if !ops.iter().all(|o| seen.insert(o.index)) {
        for (i, o) in ops.iter_mut().enumerate() {
            o.index = i as u64;
        }
    }
}

/// A candidate's check may take this many times the failing key's first
/// check, and at least [`CALL_TIME_MIN`] (and at most `--timeout`).
const CALL_TIME_FACTOR: u32 = 10;
const CALL_TIME_MIN: Duration = Duration::from_secs(1);

/// The search's fixed parts: how candidates are checked.
struct Search<'a> {
    name: &'a str,
    /// The witness's meta record (without its `witness` object).
    meta: Meta,
    lin: LinOptions,
    classes: Vec<Operation>,
}

/// What ddmin ended with.
struct Found {
    kept: Vec<Operation>,
    result: LinResult,
    /// The failing key's ops alone: their result.
    first: LinResult,
    calls: u64,
    /// Op lines the checks read, the failing key's own check included.
    lines: u64,
    minimal: bool,
}

/// `cand` is `kept` with exactly one unit removed.
fn one_less(cand: &[bool], kept: &[bool]) -> bool {
    let mut removed = 0;
    for (&c, &k) in cand.iter().zip(kept) {
        match (c, k) {
            (true, false) => return false,
            (false, true) => removed += 1,
            _ => {}
        }
    }
    removed == 1
}

impl<'a> Search<'a> {
    fn new(
        name: &'a str,
        meta: Option<Meta>,
        full: &LinResult,
        lin: &LinOptions,
        ops: &[Op],
    ) -> Result<Search<'a>, HistoryError> {
        // The witness names the model and initial value it was judged
        // with, so checking its file alone judges it the same way.
        let mut meta = meta.unwrap_or_default();
        meta.model = Some(full.model.clone());
        meta.init = Some(full.init.clone());
        meta.checkers = vec![Checker::Linearizable.name().to_string()];
        meta.params.remove("witness");
        let lin = LinOptions {
            model: Some(full.model.clone()),
            init: Some(full.init.clone()),
            ..lin.clone()
        };
        let classify = Classify {
            file: name,
            ops,
            one_state: lin.one_state,
        };
        let classes =
            with_model(&full.model, Some(&full.init), classify).map_err(|msg| HistoryError {
                file: name.to_string(),
                line: 0,
                msg,
            })??;
        Ok(Search {
            name,
            meta,
            lin,
            classes,
        })
    }

    /// The ops of `kept`, in history order.
    fn ops_of(ops: &[Op], kept: &[&Operation]) -> Vec<Op> {
        let mut at: Vec<usize> = kept
            .iter()
            .flat_map(|o| std::iter::once(o.invoke).chain(o.complete))
            .collect();
        at.sort_unstable();
        at.into_iter().map(|i| ops[i].clone()).collect()
    }

    /// Check a candidate: its result when it is not linearizable.
    /// Check a candidate: its result when it is not linearizable, else
    /// its verdict (an error counts as unknown).
    fn judge(&self, ops: Vec<Op>, lin: &LinOptions) -> Result<LinResult, Validity> {
        match check_ops(self.name, Some(self.meta.clone()), ops, lin) {
            Ok(r) if r.valid == Validity::False => Ok(r),
            Ok(r) => Err(r.valid),
            Err(_) => Err(Validity::Unknown),
        }
    }

    /// The ops of the key `key` (the one the full check reports; with
    /// several failing keys its parallel search may meet another one on
    /// another check), their result alone, and how long that check took.
    /// `None` if they do not fail alone (which the checker's per-key
    /// verdicts rule out).
    fn failing_key(
        &self,
        ops: &[Op],
        key: Option<&str>,
    ) -> Option<(Vec<&Operation>, LinResult, Duration, u64)> {
        let units: Vec<&Operation> = self
            .classes
            .iter()
            .filter(|o| o.key.as_deref() == key && o.class != Class::Ignored)
            .collect();
        let t = Instant::now();
        let lines = Self::ops_of(ops, &units);
        let n = lines.len() as u64;
        let r = self.judge(lines, &self.lin).ok()?;
        Some((units, r, t.elapsed(), n))
    }

    /// ddmin over the reads of the failing key `key` (see
    /// [`Self::failing_key`], whose check counts as the first oracle call,
    /// made even with a budget of 0); ddmin gets the rest of the budget.
    fn run(
        &self,
        ops: &[Op],
        key: Option<&str>,
        budget: u64,
    ) -> Result<Option<Found>, HistoryError> {
        let Some((units, base, took, mut lines)) = self.failing_key(ops, key) else {
            tracing::warn!(
                file = self.name,
                key,
                "the failing key's ops alone were not judged non-linearizable; no witness"
            );
            return Ok(None);
        };
        // A candidate with fewer reads can take far longer to prove
        // linearizable (reads prune the search): each check gets a
        // deadline, and one that runs out counts as not reproduced.
        let limit = (took * CALL_TIME_FACTOR).max(CALL_TIME_MIN);
        let lin = LinOptions {
            timeout: Some(self.lin.timeout.map_or(limit, |u| u.min(limit))),
            ..self.lin.clone()
        };
        let fixed: Vec<bool> = units.iter().map(|o| o.class == Class::Fixed).collect();
        let mut last = base.clone();
        let mut undecided: Vec<Vec<bool>> = Vec::new();
        let (kept, s) = ddmin(&fixed, budget.saturating_sub(1), |cand| {
            let chosen: Vec<&Operation> = units
                .iter()
                .zip(cand)
                .filter_map(|(o, &k)| k.then_some(*o))
                .collect();
            let cops = Self::ops_of(ops, &chosen);
            lines += cops.len() as u64;
            match self.judge(cops, &lin) {
                Ok(r) => {
                    last = r;
                    true
                }
                Err(Validity::Unknown) => {
                    undecided.push(cand.to_vec());
                    false
                }
                Err(_) => false,
            }
        });
        // Minimal means each remaining read's removal was judged
        // linearizable, not merely undecided in time.
        let doubtful = undecided.iter().any(|u| one_less(u, &kept));
        let kept = units
            .iter()
            .zip(&kept)
            .filter(|(_, k)| **k)
            .map(|(o, _)| (*o).clone())
            .collect();
        Ok(Some(Found {
            kept,
            result: last,
            first: base,
            calls: s.calls + 1,
            lines,
            minimal: !s.exhausted && !doubtful,
        }))
    }

    fn witness(
        &self,
        ops: &[Op],
        found: Found,
        text: String,
        budget: u64,
        started: Instant,
    ) -> WitnessHistory {
        let refs: Vec<&Operation> = found.kept.iter().collect();
        let wops = Self::ops_of(ops, &refs);
        let violation = found.result.violation.as_ref();
        let stuck: BTreeSet<u64> = violation
            .map(|v| v.stuck.iter().map(|c| c.op.index).collect())
            .unwrap_or_default();
        let mut roles = BTreeMap::new();
        let mut proof = Vec::new();
        let mut owners = BTreeSet::new();
        for o in &found.kept {
            let inv = &ops[o.invoke];
            let done = o.complete.map(|i| &ops[i]);
            let named = stuck.contains(&inv.index);
            let what = role(inv, done, o.class == Class::Read, named);
            owners.insert(inv.process.to_string());
            match done {
                Some(d) => {
                    roles.insert(d.index, format!("{what}: {}", ending(d.kind)));
                }
                None => {
                    roles.insert(inv.index, format!("{what}, never completed"));
                    if named {
                        proof.push(inv.index);
                    }
                    continue;
                }
            }
            roles.insert(inv.index, what);
            if named {
                proof.extend([inv.index].into_iter().chain(done.map(|d| d.index)));
            }
        }
        proof.sort_unstable();
        let run = self
            .meta
            .params
            .get("run_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| file_name(self.name));
        WitnessHistory {
            meta: self.meta.clone(),
            info: WitnessInfo {
                run,
                kind: KIND.into(),
                check: Checker::Linearizable.name().into(),
                text,
                owners: owners.into_iter().collect(),
                proof_ops: proof,
                minimal: found.minimal,
                budget,
                oracle_calls: found.calls,
                checked_lines: found.lines,
                capped: false,
                history_ops: ops.len() as u64,
                witness_ops: wops.len() as u64,
                seconds: started.elapsed().as_secs_f64(),
                rule: None,
                roles,
                anomaly: violation
                    .map(file_lines)
                    .and_then(|v| serde_json::to_value(v).ok())
                    .unwrap_or(Value::Null),
            },
            ops: wops,
        }
    }
}

/// The evidence with the lines of the witness file: its ops were checked
/// without the meta record, which the file has as line 1.
fn file_lines(v: &Violation) -> Violation {
    let mut v = v.clone();
    let views = v
        .prefix
        .iter_mut()
        .map(|p| &mut p.op)
        .chain(v.stuck.iter_mut().map(|c| &mut c.op));
    for o in views {
        o.line += 1;
        o.complete_line = o.complete_line.map(|l| l + 1);
    }
    v
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// How an op's completion line ends it.
fn ending(kind: OpType) -> &'static str {
    match kind {
        OpType::Ok | OpType::Invoke => "ok",
        OpType::Fail => "failed",
        OpType::Info => "outcome unknown (info)",
    }
}

/// An op's role, e.g. "process 3's write of 4", "process 1's read of 2
/// (could not follow)" for an op the evidence says cannot be linearized
/// next.
fn role(invoke: &Op, done: Option<&Op>, read: bool, stuck: bool) -> String {
    let p = &invoke.process;
    let f = &invoke.f;
    let what = match (read, done) {
        (true, Some(d)) if d.unobserved => format!("process {p}'s {f} (value not observed)"),
        (true, Some(d)) => format!("process {p}'s {f} of {}", show(&d.value)),
        _ => {
            let v = match (&invoke.value, done) {
                (Value::Null, Some(d)) => &d.value,
                (v, _) => v,
            };
            match v.as_array().map(Vec::as_slice) {
                Some([a, b]) if f == "cas" => {
                    format!("process {p}'s cas from {} to {}", show(a), show(b))
                }
                _ if v.is_null() => format!("process {p}'s {f}"),
                _ => format!("process {p}'s {f} of {}", show(v)),
            }
        }
    };
    if stuck {
        format!("{what} (could not follow)")
    } else {
        what
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "absent".into(),
        other => other.to_string(),
    }
}

/// Classifies a history's operations with the model the check used.
struct Classify<'a> {
    file: &'a str,
    ops: &'a [Op],
    one_state: bool,
}

impl ModelVisitor for Classify<'_> {
    type Out = Result<Vec<Operation>, HistoryError>;

    fn visit<M: Encode>(self, model: M) -> Self::Out {
        if self.one_state {
            classify(self.file, Keyed::new(model), self.ops)
        } else {
            classify(self.file, model, self.ops)
        }
    }
}

/// Pair `ops` (by position) and classify each operation as the checker's
/// preparation sees it.
fn classify<M: Encode>(
    file: &str,
    mut model: M,
    ops: &[Op],
) -> Result<Vec<Operation>, HistoryError> {
    let mut pairer = Pairer::new(file);
    let mut out = Vec::new();
    let mut add = |p: Pair| -> Result<(), HistoryError> {
        let pending = p.is_pending();
        let class = if p.is_fail() {
            Class::Ignored
        } else {
            let ok = if pending { None } else { p.complete.as_ref() };
            let (input, _) = model.encode(&p.invoke, ok).map_err(|msg| HistoryError {
                file: file.to_string(),
                line: 0,
                msg,
            })?;
            match (model.read_only(&input), pending) {
                (true, true) => Class::Ignored,
                (true, false) => Class::Read,
                (false, _) => Class::Fixed,
            }
        };
        out.push(Operation {
            invoke: p.invoke_line as usize,
            complete: p.complete.as_ref().map(|_| p.complete_line as usize),
            key: model.partition_key(&p.invoke),
            class,
        });
        Ok(())
    };
    for (i, op) in ops.iter().enumerate() {
        if let Some(p) = pairer.push(i as u64, op.clone())? {
            add(p)?;
        }
    }
    for p in pairer.finish() {
        add(p)?;
    }
    out.sort_by_key(|o| o.invoke);
    Ok(out)
}

#[cfg(test)]
mod tests;
