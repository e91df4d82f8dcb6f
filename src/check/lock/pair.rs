//! Pairs each completion with its process's pending invocation (in file
//! order, which per process is the order the worker recorded them) and
//! turns lines into [`Event`]s; rejects malformed histories with an error
//! naming the line, the op and the field.

use super::event::{Done, Event, Fun, Invoke, Keys, Outcome};
use crate::history::{HistoryError, Op, OpType, Process};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

struct Pending {
    call: u64,
    time: u64,
    index: u64,
    line: u64,
    f: String,
    fun: Option<Fun>,
    key: Option<String>,
    owner: Option<String>,
    fence: Option<u64>,
    value: Value,
}

/// Turns ops into events.
pub struct Pairer {
    file: String,
    pending: HashMap<Process, Pending>,
    next_call: u64,
    pub keys: Keys,
    /// Ops outside the lock vocabulary, by `f`.
    pub ignored: BTreeMap<String, u64>,
    pub ops: u64,
}

impl Pairer {
    pub fn new(file: String) -> Pairer {
        Pairer {
            file,
            pending: HashMap::new(),
            next_call: 0,
            keys: Keys::default(),
            ignored: BTreeMap::new(),
            ops: 0,
        }
    }

    fn err(&self, line: u64, op: &Op, msg: String) -> HistoryError {
        HistoryError {
            file: self.file.clone(),
            line,
            msg: format!("op index {} (process {}): {msg}", op.index, op.process),
        }
    }

    /// Invocations never completed.
    pub fn incomplete(&self) -> u64 {
        self.pending.len() as u64
    }

    /// Turn one op into zero or one event. `line` is 0 when unknown.
    pub fn push(&mut self, mut op: Op, line: u64) -> Result<Option<Event>, HistoryError> {
        // A file without `index` fields: number ops by position.
        if op.index == 0 && self.ops > 0 {
            op.index = self.ops;
        }
        self.ops += 1;
        if op.process.is_nemesis() {
            *self.ignored.entry("nemesis".into()).or_insert(0) += 1;
            return Ok(None);
        }
        if op.kind == OpType::Invoke {
            return self.invoke(op, line);
        }
        let Some(inv) = self.pending.remove(&op.process) else {
            return Err(self.err(
                line,
                &op,
                format!(
                    "`{}` completion of `{}` without a pending invocation by this process \
                     (hint: every op is an invoke line followed by one ok, fail or info line of \
                     the same process)",
                    kind_name(op.kind),
                    op.f
                ),
            ));
        };
        if inv.f != op.f {
            return Err(self.err(
                line,
                &op,
                format!(
                    "field `f` is `{}` but the pending invocation (op index {}, line {}) is `{}`",
                    op.f, inv.index, inv.line, inv.f
                ),
            ));
        }
        if op.time < inv.time {
            return Err(self.err(
                line,
                &op,
                format!(
                    "field `time` {} is before its invocation's time {} (op index {})",
                    op.time, inv.time, inv.index
                ),
            ));
        }
        let Some(fun) = inv.fun else {
            *self.ignored.entry(op.f.clone()).or_insert(0) += 1;
            return Ok(None);
        };
        Ok(Some(Event::Done(Box::new(self.merge(inv, op, fun)))))
    }

    fn invoke(&mut self, op: Op, line: u64) -> Result<Option<Event>, HistoryError> {
        if let Some(p) = self.pending.get(&op.process) {
            return Err(self.err(
                line,
                &op,
                format!(
                    "invoked `{}` while its invocation op index {} (line {}) is still pending \
                     (hint: a process that timed out ends its op with `info` and never invokes \
                     again; give the next op a new process)",
                    op.f, p.index, p.line
                ),
            ));
        }
        let fun = Fun::parse(&op.f);
        let call = self.next_call;
        self.next_call += 1;
        let ev = fun.map(|fun| {
            let key = self.keys.id(op.key.as_deref().unwrap_or(""));
            Event::Inv(Invoke {
                call,
                time: op.time,
                fun,
                key,
                owner: op.owner_or_default().unwrap_or_default(),
                explicit_owner: op.owner.is_some(),
                fence: op.fence,
            })
        });
        if fun.is_none() {
            *self.ignored.entry(op.f.clone()).or_insert(0) += 1;
        }
        self.pending.insert(
            op.process.clone(),
            Pending {
                call,
                time: op.time,
                index: op.index,
                line,
                f: op.f,
                fun,
                key: op.key,
                owner: op.owner,
                fence: op.fence,
                value: op.value,
            },
        );
        Ok(ev)
    }

    fn merge(&mut self, inv: Pending, op: Op, fun: Fun) -> Done {
        let outcome = match op.kind {
            OpType::Ok => Outcome::Ok,
            OpType::Fail => Outcome::Fail,
            _ => Outcome::Info,
        };
        let key_name = op.key.as_deref().or(inv.key.as_deref()).unwrap_or("");
        let key = self.keys.id(key_name);
        let owner = op
            .owner
            .clone()
            .or(inv.owner)
            .or_else(|| op.process.default_owner())
            .unwrap_or_default();
        let value = match fun {
            Fun::Write if op.value.is_null() => inv.value,
            _ => op.value,
        };
        Done {
            call: inv.call,
            inv_time: inv.time,
            time: op.time,
            index: op.index,
            outcome,
            fun,
            key,
            owner,
            process: op.process,
            fence: op.fence.or(inv.fence),
            lease_ms: op.lease_ms,
            seq: op.seq,
            value,
        }
    }
}

fn kind_name(k: OpType) -> &'static str {
    match k {
        OpType::Invoke => "invoke",
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info => "info",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_without_invocation_is_an_error_naming_the_line() {
        let mut p = Pairer::new("h.jsonl".into());
        let op = Op::new(5, Process::Num(2), OpType::Ok, "acquire");
        let e = p.push(op, 7).unwrap_err().to_string();
        assert!(e.starts_with("h.jsonl:7: op index 0 (process 2)"), "{e}");
        assert!(e.contains("without a pending invocation"), "{e}");
    }

    #[test]
    fn merges_owner_fence_and_value() {
        let mut p = Pairer::new("h".into());
        let mut i = Op::new(1, Process::Num(2), OpType::Invoke, "write");
        i.value = 8.into();
        i.fence = Some(3);
        i.key = Some("c".into());
        assert!(matches!(p.push(i, 2).unwrap(), Some(Event::Inv(_))));
        let mut c = Op::new(4, Process::Num(2), OpType::Ok, "write");
        c.seq = Some(9);
        let Some(Event::Done(d)) = p.push(c, 3).unwrap() else {
            panic!("expected a completion")
        };
        assert_eq!(
            (d.fence, d.seq, d.value.as_i64()),
            (Some(3), Some(9), Some(8))
        );
        assert_eq!((d.owner.as_str(), p.keys.name(d.key)), ("2", "c"));
    }
}
