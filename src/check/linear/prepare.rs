//! From a stream of lockjaw ops to per-partition search inputs.
//!
//! Pairs invokes with completions (enforcing the history rules), drops
//! failed ops (they did not happen) and pending read-only ops (they
//! constrain nothing), encodes the rest with the model, and groups them by
//! the model's partition key, completed ops first, each group in call order.

use super::search::{SearchOp, PENDING};
use crate::check::models::{Encode, Model};
use crate::history::pair::{Pair, Pairer};
use crate::history::{HistoryError, Op, Process};
use std::collections::HashMap;

/// Where an op came from, for evidence.
#[derive(Clone, Debug)]
pub struct OpInfo {
    pub process: Process,
    pub index: u64,
    pub complete_index: Option<u64>,
    pub line: u64,
    pub complete_line: Option<u64>,
}

/// The ops of one independent object.
pub struct Partition<I, O> {
    pub key: Option<String>,
    pub ops: Vec<SearchOp<I, O>>,
    pub info: Vec<OpInfo>,
}

/// A partition and the initial state of its object.
pub type PartWithInit<M> = (
    Partition<<M as Model>::Input, <M as Model>::Output>,
    <M as Model>::State,
);

/// Everything the search needs, and counts for the verdict line.
pub struct Prepared<M: Encode> {
    pub model: M,
    pub parts: Vec<PartWithInit<M>>,
    /// Client operations in the history (invokes).
    pub ops: usize,
    pub failed: usize,
    pub pending: usize,
    pub dropped_pending_reads: usize,
}

struct Builder<M: Encode> {
    file: String,
    model: M,
    parts: HashMap<Option<String>, Partition<M::Input, M::Output>>,
    ops: usize,
    failed: usize,
    pending: usize,
    dropped: usize,
}

impl<M: Encode> Builder<M> {
    fn add(&mut self, p: Pair) -> Result<(), HistoryError> {
        self.ops += 1;
        if p.is_fail() {
            self.failed += 1;
            return Ok(());
        }
        let pending = p.is_pending();
        self.pending += pending as usize;
        let ok = if pending { None } else { p.complete.as_ref() };
        let (input, output) = self
            .model
            .encode(&p.invoke, ok)
            .map_err(|msg| HistoryError {
                file: self.file.clone(),
                line: p.last_line(),
                msg,
            })?;
        if pending && self.model.read_only(&input) {
            self.dropped += 1;
            return Ok(());
        }
        let key = self.model.partition_key(&p.invoke);
        let part = self.parts.entry(key.clone()).or_insert_with(|| Partition {
            key,
            ops: Vec::new(),
            info: Vec::new(),
        });
        let ret = match (&p.complete, pending) {
            (Some(c), false) => c.time,
            _ => PENDING,
        };
        part.ops.push(SearchOp {
            call: p.invoke.time,
            ret,
            input,
            output,
        });
        part.info.push(OpInfo {
            process: p.invoke.process.clone(),
            index: p.invoke.index,
            complete_index: p.complete.as_ref().map(|c| c.index),
            line: p.invoke_line,
            complete_line: p.complete.as_ref().map(|_| p.complete_line),
        });
        Ok(())
    }
}

/// Sort a partition: completed ops first, each group by call time.
fn order<I, O>(part: &mut Partition<I, O>) {
    let mut idx: Vec<usize> = (0..part.ops.len()).collect();
    idx.sort_by_key(|&i| (part.ops[i].ret == PENDING, part.ops[i].call, i));
    let mut ops: Vec<Option<SearchOp<I, O>>> = std::mem::take(&mut part.ops)
        .into_iter()
        .map(Some)
        .collect();
    let mut info: Vec<Option<OpInfo>> = std::mem::take(&mut part.info)
        .into_iter()
        .map(Some)
        .collect();
    part.ops = idx
        .iter()
        .map(|&i| ops[i].take().expect("each index once"))
        .collect();
    part.info = idx
        .iter()
        .map(|&i| info[i].take().expect("each index once"))
        .collect();
}

/// Read `ops` (with their lines) from `file` and prepare them for `model`.
pub fn prepare<M: Encode>(
    file: &str,
    model: M,
    ops: impl Iterator<Item = Result<(u64, Op), HistoryError>>,
) -> Result<Prepared<M>, HistoryError> {
    let mut pairer = Pairer::new(file);
    let mut b = Builder {
        file: file.to_string(),
        model,
        parts: HashMap::new(),
        ops: 0,
        failed: 0,
        pending: 0,
        dropped: 0,
    };
    for item in ops {
        let (line, op) = item?;
        if let Some(pair) = pairer.push(line, op)? {
            b.add(pair)?;
        }
    }
    for pair in pairer.finish() {
        b.add(pair)?;
    }
    let mut model = b.model;
    let mut parts: Vec<_> = b.parts.into_values().collect();
    parts.sort_by(|a, b| a.key.cmp(&b.key));
    let mut out = Vec::with_capacity(parts.len());
    for mut part in parts {
        order(&mut part);
        let init = model
            .init_state(part.key.as_deref())
            .map_err(|msg| HistoryError {
                file: file.to_string(),
                line: 0,
                msg: format!("initial value: {msg} (hint: set --init or the meta record's `init`)"),
            })?;
        out.push((part, init));
    }
    Ok(Prepared {
        model,
        parts: out,
        ops: b.ops,
        failed: b.failed,
        pending: b.pending,
        dropped_pending_reads: b.dropped,
    })
}
