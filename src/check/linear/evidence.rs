//! Evidence of a linearizability violation, built from the search's longest
//! linearizable prefix, and its rendering as text a person can follow.

use super::prepare::{OpInfo, Partition};
use super::search::{SearchOp, PENDING};
use crate::check::models::Model;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One operation as the evidence shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpView {
    /// The op and its result, e.g. `read → 3`.
    pub op: String,
    pub process: String,
    /// `index` of the invoke (and of the completion) in the history.
    pub index: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_index: Option<u64>,
    /// Line of the invoke (and of the completion) in the file.
    pub line: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_line: Option<u64>,
    /// Real-time interval: invoked at, completed at (`None`: never, pending).
    pub invoked: u64,
    pub completed: Option<u64>,
}

/// One step of the longest linearizable prefix.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PrefixStep {
    #[serde(flatten)]
    pub op: OpView,
    /// The model state after this op.
    pub state_after: String,
}

/// An op that could be linearized next in real-time order, but was not.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Candidate {
    #[serde(flatten)]
    pub op: OpView,
    /// The model accepts it right after the prefix (it then fails later).
    pub legal_after_prefix: bool,
    /// It completed first among the unlinearized ops, so it had to be
    /// linearized before anything invoked after it completed.
    pub completed_first: bool,
}

/// Why a partition is not linearizable.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Violation {
    /// The key (partition) whose ops cannot be linearized; `None` for ops
    /// without a key or when checked as one state.
    pub key: Option<String>,
    /// Ops in this partition that had to be linearized (completed ones).
    pub completed_ops: usize,
    pub initial_state: String,
    /// The longest linearizable prefix found, with the state after each op.
    pub prefix: Vec<PrefixStep>,
    /// The state after the prefix.
    pub state: String,
    /// The ops that could come next; none of them leads to a linearization.
    pub stuck: Vec<Candidate>,
}

fn view<M: Model>(model: &M, op: &SearchOp<M::Input, M::Output>, info: &OpInfo) -> OpView {
    OpView {
        op: model.show_op(&op.input, &op.output),
        process: info.process.to_string(),
        index: info.index,
        complete_index: info.complete_index,
        line: info.line,
        complete_line: info.complete_line,
        invoked: op.call,
        completed: (op.ret != PENDING).then_some(op.ret),
    }
}

/// Build the evidence for `part` from the search's best prefix.
pub fn build<M: Model>(
    model: &M,
    part: &Partition<M::Input, M::Output>,
    init: &M::State,
    best: &[u32],
) -> Violation {
    let mut state = init.clone();
    let mut prefix = Vec::with_capacity(best.len());
    let mut done = vec![false; part.ops.len()];
    for &i in best {
        let op = &part.ops[i as usize];
        // The search accepted this step, so it is legal here.
        if let Some(s) = model.step(&state, &op.input, &op.output) {
            state = s;
        }
        done[i as usize] = true;
        prefix.push(PrefixStep {
            op: view(model, op, &part.info[i as usize]),
            state_after: model.show_state(&state),
        });
    }
    // The first completion among unlinearized completed ops bounds what
    // can come next: only ops invoked by then.
    let first = (0..part.ops.len())
        .filter(|&i| !done[i] && part.ops[i].ret != PENDING)
        .min_by_key(|&i| (part.ops[i].ret, i));
    let mut stuck = Vec::new();
    if let Some(f) = first {
        let bound = part.ops[f].ret;
        let mut cands: Vec<usize> = (0..part.ops.len())
            .filter(|&i| !done[i] && part.ops[i].call <= bound)
            .collect();
        cands.sort_by_key(|&i| (i != f, part.ops[i].call, i));
        for i in cands {
            let op = &part.ops[i];
            stuck.push(Candidate {
                op: view(model, op, &part.info[i]),
                legal_after_prefix: model.step(&state, &op.input, &op.output).is_some(),
                completed_first: i == f,
            });
        }
    }
    Violation {
        key: part.key.clone(),
        completed_ops: part.ops.iter().filter(|o| o.ret != PENDING).count(),
        initial_state: model.show_state(init),
        prefix,
        state: model.show_state(&state),
        stuck,
    }
}

fn interval(v: &OpView) -> String {
    match v.completed {
        Some(c) => format!("[{} .. {}]", v.invoked, c),
        None => format!("[{} .. never completed]", v.invoked),
    }
}

fn op_line(v: &OpView) -> String {
    format!(
        "process {:<4} {:<34} {} line {}",
        v.process,
        v.op,
        interval(v),
        v.line
    )
}

/// How many prefix steps the text shows (the JSON has them all).
const SHOWN_PREFIX: usize = 12;

impl Violation {
    /// The evidence as indented lines a person can follow.
    pub fn to_text(&self, time_unit: &str) -> String {
        let mut s = String::new();
        let key = self
            .key
            .as_deref()
            .map_or(String::new(), |k| format!(" for key {k:?}"));
        let _ =
            writeln!(
            s,
            "  not linearizable{key}: the longest linearizable prefix has {} of {} completed ops",
            self.prefix.iter().filter(|p| p.op.completed.is_some()).count(),
            self.completed_ops
        );
        let _ = writeln!(s, "  initial state: {}", self.initial_state);
        let skip = self.prefix.len().saturating_sub(SHOWN_PREFIX);
        if skip > 0 {
            let _ = writeln!(s, "    ... {skip} earlier ops (all of them in --json)");
        }
        for p in &self.prefix[skip..] {
            let _ = writeln!(s, "    {}  => {}", op_line(&p.op), p.state_after);
        }
        let _ = writeln!(s, "  state after the prefix: {}", self.state);
        let _ = writeln!(
            s,
            "  no op can be linearized next (intervals in {time_unit}):"
        );
        for c in &self.stuck {
            let why = match (c.completed_first, c.legal_after_prefix) {
                (true, false) => "completed first; impossible in this state",
                (true, true) => {
                    "completed first; possible here, but every order through it fails later"
                }
                (false, false) => "impossible in this state",
                (false, true) => "possible here, but every order through it fails later",
            };
            let _ = writeln!(s, "    {}  <- {why}", op_line(&c.op));
        }
        s
    }
}
