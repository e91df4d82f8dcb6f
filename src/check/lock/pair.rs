//! Pairs each completion with its process's pending invocation (in file
//! order, which per process is the order the worker recorded them) and
//! turns lines into [`Event`]s; rejects malformed histories with an error
//! naming the line, the op and the field.
//!
//! It reads ops through a borrowed view ([`OpRef`]), so the file reader can
//! hand it lines parsed without allocating, and names processes, owners,
//! functions and keys by shared or small ids (owners through a bounded
//! cache, so memory does not grow with the number of distinct owners).

use super::event::{Done, Event, FaultMark, Fun, Invoke, Keys, Name, Outcome};
use crate::history::pair::{Broken, Slots};
use crate::history::{HistoryError, Op, OpType, Process};
use foldhash::HashMap;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Who performed an op, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum ProcRef<'a> {
    Num(i64),
    Nemesis,
    Named(&'a str),
}

/// An `owner` field, borrowed: a string or an integer.
#[derive(Clone, Copy, Debug)]
pub enum OwnerRef<'a> {
    Str(&'a str),
    Num(i64),
}

/// One line of a history, borrowed (see [`crate::history::Op`]).
#[derive(Debug)]
pub struct OpRef<'a> {
    pub index: u64,
    pub time: u64,
    pub process: ProcRef<'a>,
    pub kind: OpType,
    pub f: &'a str,
    pub key: Option<&'a str>,
    pub value: Value,
    pub fence: Option<u64>,
    pub lease_ms: Option<u64>,
    pub owner: Option<OwnerRef<'a>>,
    pub seq: Option<u64>,
    /// The op's `error` is `held` (an acquire that found the lock held).
    pub held: bool,
}

impl<'a> OpRef<'a> {
    /// View an owned op (its value is moved out).
    pub fn of(op: &'a mut Op) -> OpRef<'a> {
        OpRef {
            index: op.index,
            time: op.time,
            process: match &op.process {
                Process::Num(n) => ProcRef::Num(*n),
                Process::Nemesis => ProcRef::Nemesis,
                Process::Named(s) => ProcRef::Named(s),
            },
            kind: op.kind,
            f: &op.f,
            key: op.key.as_deref(),
            value: std::mem::take(&mut op.value),
            fence: op.fence,
            lease_ms: op.lease_ms,
            owner: op.owner.as_deref().map(OwnerRef::Str),
            seq: op.seq,
            held: op.error.as_deref() == Some("held"),
        }
    }
}

/// A nemesis `start` invocation naming the holder it strikes (`owner` in
/// its value), or the acquirer it crashed after its request took the key
/// (`crashed_process`, `strike-command`), as a fault mark.
fn holder_fault(op: &OpRef) -> Option<FaultMark> {
    if op.f != "start" || op.kind != OpType::Invoke {
        return None;
    }
    let crashed = op.value.get("crashed_process").and_then(Value::as_i64);
    let owner = match crashed {
        Some(p) => p.to_string(),
        None => op.value.get("owner")?.as_str()?.to_string(),
    };
    let fault = op.value.get("fault").and_then(Value::as_str).unwrap_or("?");
    Some(FaultMark {
        time: op.time,
        fault: Arc::from(fault),
        owner: Arc::from(owner),
        id: op.value.get("id").and_then(Value::as_u64),
        crash_lease_ms: crashed.and_then(|_| op.value.get("lease_ms")?.as_u64()),
        crash_key: crashed.and_then(|_| op.value.get("key")?.as_str().map(Arc::from)),
    })
}

struct Pending {
    call: u64,
    time: u64,
    index: u64,
    line: u64,
    f: u32,
    fun: Option<Fun>,
    key: Option<u32>,
    owner: Option<Name>,
    fence: Option<u64>,
    value: Value,
}

/// Past this many cached owners the cache starts afresh.
const OWNER_CACHE: usize = 1 << 16;

/// Turns ops into events.
pub struct Pairer {
    file: String,
    /// Pending invocations by process id, and processes whose op ended in
    /// `info` (the history's pairing rules).
    slots: Slots<u32, Pending>,
    next_call: u64,
    pub keys: Keys,
    procs_num: HashMap<i64, u32>,
    procs_named: HashMap<Box<str>, u32>,
    /// Per process id: its name and its default owner.
    procs: Vec<(Name, Name)>,
    fnames: HashMap<Box<str>, u32>,
    fs: Vec<(Box<str>, Option<Fun>)>,
    owners: HashMap<Box<str>, Name>,
    owners_num: HashMap<i64, Name>,
    /// Ops outside the lock vocabulary, by `f`.
    pub ignored: BTreeMap<String, u64>,
    pub ops: u64,
    all_zero: bool,
}

impl Pairer {
    pub fn new(file: String) -> Pairer {
        Pairer {
            file,
            slots: Slots::default(),
            next_call: 0,
            keys: Keys::default(),
            procs_num: HashMap::default(),
            procs_named: HashMap::default(),
            procs: Vec::new(),
            fnames: HashMap::default(),
            fs: Vec::new(),
            owners: HashMap::default(),
            owners_num: HashMap::default(),
            ignored: BTreeMap::new(),
            ops: 0,
            all_zero: true,
        }
    }

    fn err(&self, line: u64, op: &OpRef, msg: String) -> HistoryError {
        let p = match op.process {
            ProcRef::Num(n) => n.to_string(),
            ProcRef::Nemesis => "nemesis".into(),
            ProcRef::Named(s) => s.to_string(),
        };
        HistoryError {
            file: self.file.clone(),
            line,
            msg: format!("op index {} (process {p}): {msg}", op.index),
        }
    }

    /// Invocations never completed.
    pub fn incomplete(&self) -> u64 {
        self.slots.pending_len() as u64
    }

    fn proc_id(&mut self, p: ProcRef) -> u32 {
        let next = self.procs.len() as u32;
        let (id, name) = match p {
            ProcRef::Num(n) => match self.procs_num.get(&n) {
                Some(&id) => return id,
                None => {
                    self.procs_num.insert(n, next);
                    (next, Process::Num(n))
                }
            },
            ProcRef::Named(s) => match self.procs_named.get(s) {
                Some(&id) => return id,
                None => {
                    self.procs_named.insert(s.into(), next);
                    (next, Process::Named(s.to_string()))
                }
            },
            ProcRef::Nemesis => unreachable!("nemesis ops are skipped"),
        };
        let owner = name.default_owner().unwrap_or_default();
        self.procs
            .push((Arc::from(name.to_string()), Arc::from(owner)));
        id
    }

    fn f_id(&mut self, f: &str) -> u32 {
        if let Some(&id) = self.fnames.get(f) {
            return id;
        }
        let id = self.fs.len() as u32;
        self.fnames.insert(f.into(), id);
        self.fs.push((f.into(), Fun::parse(f)));
        id
    }

    fn owner(&mut self, o: OwnerRef) -> Name {
        if self.owners.len() + self.owners_num.len() > OWNER_CACHE {
            self.owners.clear();
            self.owners_num.clear();
        }
        match o {
            OwnerRef::Str(s) => match self.owners.get(s) {
                Some(n) => n.clone(),
                None => {
                    let n: Name = Arc::from(s);
                    self.owners.insert(s.into(), n.clone());
                    n
                }
            },
            OwnerRef::Num(i) => self
                .owners_num
                .entry(i)
                .or_insert_with(|| Arc::from(i.to_string()))
                .clone(),
        }
    }

    /// Turn one op into zero or one event. `line` is 0 when unknown.
    pub fn push(&mut self, mut op: OpRef, line: u64) -> Result<Option<Event>, HistoryError> {
        // A file without `index` fields: number ops by position.
        if self.all_zero && op.index == 0 && self.ops > 0 {
            op.index = self.ops;
        } else if op.index != 0 {
            self.all_zero = false;
        }
        self.ops += 1;
        if matches!(op.process, ProcRef::Nemesis) {
            *self.ignored.entry("nemesis".into()).or_insert(0) += 1;
            return Ok(holder_fault(&op).map(Event::Fault));
        }
        let proc = self.proc_id(op.process);
        let f = self.f_id(op.f);
        if op.kind == OpType::Invoke {
            return self.invoke(op, proc, f, line);
        }
        let Ok((_, inv)) = self.slots.complete(&proc, line, op.kind) else {
            let msg = format!(
                "`{}` completion of `{}` without a pending invocation by this process \
                 (hint: every op is an invoke line followed by one ok, fail or info line of \
                 the same process)",
                kind_name(op.kind),
                op.f
            );
            return Err(self.err(line, &op, msg));
        };
        if inv.f != f {
            let msg = format!(
                "field `f` is `{}` but the pending invocation (op index {}, line {}) is `{}`",
                op.f, inv.index, inv.line, self.fs[inv.f as usize].0
            );
            return Err(self.err(line, &op, msg));
        }
        if op.time < inv.time {
            let msg = format!(
                "field `time` {} is before its invocation's time {} (op index {})",
                op.time, inv.time, inv.index
            );
            return Err(self.err(line, &op, msg));
        }
        let Some(fun) = inv.fun else {
            *self.ignored.entry(op.f.to_string()).or_insert(0) += 1;
            return Ok(None);
        };
        Ok(Some(Event::Done(self.merge(inv, op, proc, fun))))
    }

    fn invoke(
        &mut self,
        op: OpRef,
        proc: u32,
        f: u32,
        line: u64,
    ) -> Result<Option<Event>, HistoryError> {
        match self.slots.check_invoke(&proc) {
            Err(Broken::Pending(l)) => {
                let index = self.slots.pending(&proc).map_or(0, |p| p.index);
                let msg = format!(
                    "invoked `{}` while its invocation op index {index} (line {l}) is still \
                     pending (hint: a process that timed out ends its op with `info` and never \
                     invokes again; give the next op a new process)",
                    op.f
                );
                return Err(self.err(line, &op, msg));
            }
            Err(Broken::Crashed(l)) => {
                let msg = format!(
                    "invoked `{}` after its previous op ended in `info` at line {l} (hint: an \
                     info op may still take effect, so its process never invokes again; give \
                     the next op a new process)",
                    op.f
                );
                return Err(self.err(line, &op, msg));
            }
            _ => {}
        }
        let fun = self.fs[f as usize].1;
        let call = self.next_call;
        self.next_call += 1;
        let key = op.key.map(|k| self.keys.id(k));
        let owner = op.owner.map(|o| self.owner(o));
        let ev = fun.map(|fun| {
            Event::Inv(Invoke {
                call,
                time: op.time,
                fun,
                key: key.unwrap_or_else(|| self.keys.id("")),
                owner: owner
                    .clone()
                    .unwrap_or_else(|| self.procs[proc as usize].1.clone()),
                explicit_owner: owner.is_some(),
                fence: op.fence,
            })
        });
        if fun.is_none() {
            *self.ignored.entry(op.f.to_string()).or_insert(0) += 1;
        }
        self.slots.invoke(
            proc,
            line,
            Pending {
                call,
                time: op.time,
                index: op.index,
                line,
                f,
                fun,
                key,
                owner,
                fence: op.fence,
                value: op.value,
            },
        );
        Ok(ev)
    }

    fn merge(&mut self, inv: Pending, op: OpRef, proc: u32, fun: Fun) -> Done {
        let outcome = match op.kind {
            OpType::Ok => Outcome::Ok,
            OpType::Fail => Outcome::Fail,
            _ => Outcome::Info,
        };
        let key = match op.key {
            Some(k) => self.keys.id(k),
            None => inv.key.unwrap_or_else(|| self.keys.id("")),
        };
        let owner = match op.owner {
            Some(o) => self.owner(o),
            None => inv
                .owner
                .unwrap_or_else(|| self.procs[proc as usize].1.clone()),
        };
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
            process: self.procs[proc as usize].0.clone(),
            fence: op.fence.or(inv.fence),
            lease_ms: op.lease_ms,
            seq: op.seq,
            value,
            held: op.held,
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
        let mut op = Op::new(5, Process::Num(2), OpType::Ok, "acquire");
        let e = p.push(OpRef::of(&mut op), 7).unwrap_err().to_string();
        assert!(e.starts_with("h.jsonl:7: op index 0 (process 2)"), "{e}");
        assert!(e.contains("without a pending invocation"), "{e}");
    }

    #[test]
    fn a_process_that_ended_in_info_never_invokes_again() {
        let mut p = Pairer::new("h.jsonl".into());
        let mut i = Op::new(1, Process::Num(2), OpType::Invoke, "acquire");
        p.push(OpRef::of(&mut i), 2).unwrap();
        let mut c = Op::new(2, Process::Num(2), OpType::Info, "acquire");
        p.push(OpRef::of(&mut c), 3).unwrap();
        let mut again = Op::new(3, Process::Num(2), OpType::Invoke, "acquire");
        let e = p.push(OpRef::of(&mut again), 4).unwrap_err().to_string();
        assert!(e.starts_with("h.jsonl:4: "), "{e}");
        assert!(e.contains("ended in `info` at line 3"), "{e}");
    }

    #[test]
    fn merges_owner_fence_and_value() {
        let mut p = Pairer::new("h".into());
        let mut i = Op::new(1, Process::Num(2), OpType::Invoke, "write");
        i.value = 8.into();
        i.fence = Some(3);
        i.key = Some("c".into());
        let ev = p.push(OpRef::of(&mut i), 2).unwrap();
        assert!(matches!(ev, Some(Event::Inv(_))));
        let mut c = Op::new(4, Process::Num(2), OpType::Ok, "write");
        c.seq = Some(9);
        let Some(Event::Done(d)) = p.push(OpRef::of(&mut c), 3).unwrap() else {
            panic!("expected a completion")
        };
        assert_eq!(
            (d.fence, d.seq, d.value.as_i64()),
            (Some(3), Some(9), Some(8))
        );
        assert_eq!((&*d.owner, p.keys.name(d.key)), ("2", "c"));
        assert_eq!(&*d.process, "2");
    }

    #[test]
    fn a_lease_process_defaults_to_its_workers_owner() {
        let mut p = Pairer::new("h".into());
        let mut i = Op::new(1, Process::Named("3-lease".into()), OpType::Invoke, "renew");
        let Some(Event::Inv(inv)) = p.push(OpRef::of(&mut i), 1).unwrap() else {
            panic!("expected an invocation")
        };
        assert_eq!((&*inv.owner, inv.explicit_owner), ("3", false));
    }
}
