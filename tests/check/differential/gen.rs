//! Random histories from a simulated concurrent execution: up to six
//! processes invoke ops on one to three keys; each op takes effect at some
//! later step (its read sees the live state then; an op that cannot take
//! effect, such as a cas on the wrong value, ends in `fail`), then
//! completes. Some crash before or after taking effect and end in `info`
//! or never complete (their process is replaced by a fresh one). Some reads
//! lie, and most plans corrupt one op, so both verdicts are common.

use super::reference::{step, Kind, St};
use lockjaw::history::{Op, OpType, Process};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How an op ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Ok(u64),
    Fail(u64),
    /// Crashed: an `info` completion at this time.
    Info(u64),
    /// Crashed with no completion line at all.
    Never,
}

/// One generated op.
#[derive(Clone, Debug)]
pub struct GOp {
    pub process: i64,
    pub f: &'static str,
    pub key: Option<String>,
    pub arg: Value,
    /// What a read returned.
    pub out: Value,
    /// A read whose result was not observed (matches anything).
    pub unobserved: bool,
    /// The lock owner (always 0 for the plain mutex).
    pub owner: i64,
    pub call: u64,
    pub end: End,
    /// Positions of the invoke and completion lines in the history.
    seq: (usize, usize),
}

impl GOp {
    pub fn is_pending(&self) -> bool {
        matches!(self.end, End::Info(_) | End::Never)
    }
}

/// What to generate: the random choices drive the simulation.
#[derive(Clone, Debug)]
pub struct Plan {
    pub procs: usize,
    pub ops: usize,
    pub keys: usize,
    pub choices: Vec<(u8, u8, u8, u8)>,
    /// Corrupt op `.0 % len` in a way picked by `.1`.
    pub corrupt: Option<(usize, u8)>,
}

/// A new op for process `p` from choice bytes `b` and `c`.
fn new_op(kind: Kind, keys: usize, p: i64, b: u8, c: u8) -> GOp {
    let (v, w) = (c as i64 % 3, (c as i64 / 3) % 3);
    let (f, arg) = match (kind, b % 6) {
        (Kind::Register, 0..=2) | (Kind::Etcd, 0 | 1) => ("read", Value::Null),
        (Kind::Register | Kind::Etcd, 3..=4) => ("write", json!(v)),
        (Kind::Register, _) => ("write", json!(w)),
        (Kind::Etcd, _) => ("cas", json!([v, w])),
        (Kind::Kv, 0..=2) => ("get", Value::Null),
        (Kind::Kv, 3) => ("put", json!(format!("p{}", c % 2))),
        (Kind::Kv, _) => ("append", json!(format!("{v}."))),
        (Kind::Set, 0..=2) => ("read", Value::Null),
        (Kind::Set, _) => ("add", json!(c % 4)),
        (Kind::Mutex | Kind::OwnedMutex, 0..=2) => ("acquire", Value::Null),
        (Kind::Mutex | Kind::OwnedMutex, _) => ("release", Value::Null),
    };
    GOp {
        process: p,
        f,
        key: Some(format!("k{}", (b as usize / 16) % keys)),
        arg,
        out: Value::Null,
        unobserved: false,
        owner: if kind == Kind::OwnedMutex { p + 1 } else { 0 },
        call: 0,
        end: End::Never,
        seq: (0, usize::MAX),
    }
}

fn is_read(op: &GOp) -> bool {
    matches!(op.f, "read" | "get")
}

/// A plausible read result to lie with.
fn sample(kind: Kind, n: u8) -> Value {
    let pick = |vals: &[Value]| vals[n as usize % vals.len()].clone();
    match kind {
        Kind::Kv => pick(&[
            Value::Null,
            json!("p0"),
            json!("0."),
            json!("p11."),
            json!("1.0."),
        ]),
        Kind::Set => pick(&[json!([]), json!([0]), json!([1]), json!([0, 1]), json!([2])]),
        _ => pick(&[Value::Null, json!(0), json!(1), json!(2)]),
    }
}

/// The simulation.
struct Sim<'a> {
    kind: Kind,
    plan: &'a Plan,
    ops: Vec<GOp>,
    /// Per op: it took effect (`None`: not yet).
    took: Vec<Option<bool>>,
    state: BTreeMap<String, St>,
    time: u64,
    lines: usize,
}

impl Sim<'_> {
    /// Op `i` takes effect now (or fails to); a read may lie when `lie`.
    fn effect(&mut self, i: usize, lie: Option<u8>) {
        let op = &self.ops[i];
        let key = op.key.clone().unwrap_or_default();
        let cur = self
            .state
            .get(&key)
            .cloned()
            .unwrap_or_else(|| self.kind.initial());
        if is_read(op) {
            self.ops[i].out = lie.map_or_else(|| cur.as_value(), |n| sample(self.kind, n));
            self.took[i] = Some(true);
            return;
        }
        let next = step(&cur, op, None);
        self.took[i] = Some(next.is_some());
        if let Some(next) = next {
            self.state.insert(key, next);
        }
    }

    fn complete(&mut self, i: usize, unobserved: bool) {
        self.ops[i].end = if self.took[i] == Some(true) {
            End::Ok(self.time)
        } else {
            End::Fail(self.time)
        };
        self.ops[i].unobserved = unobserved && is_read(&self.ops[i]);
        self.ops[i].seq.1 = self.line();
    }

    fn line(&mut self) -> usize {
        self.lines += 1;
        self.lines - 1
    }
}

/// The history `plan` describes for model `kind`.
pub fn generate(kind: Kind, plan: &Plan) -> Vec<GOp> {
    let mut sim = Sim {
        kind,
        plan,
        ops: Vec::new(),
        took: Vec::new(),
        state: BTreeMap::new(),
        time: 0,
        lines: 0,
    };
    let mut slots: Vec<(i64, Option<usize>)> = (0..plan.procs as i64).map(|p| (p, None)).collect();
    let mut next_pid = plan.procs as i64;
    for &(a, b, c, d) in &plan.choices {
        // Now and then two events share a time.
        sim.time += (d % 16 != 0) as u64;
        let s = a as usize % plan.procs;
        match slots[s].1 {
            None if sim.ops.len() < sim.plan.ops => {
                let mut op = new_op(kind, plan.keys, slots[s].0, b, c);
                op.call = sim.time;
                op.seq.0 = sim.line();
                sim.ops.push(op);
                sim.took.push(None);
                slots[s].1 = Some(sim.ops.len() - 1);
            }
            None => {}
            Some(i) if c % 12 == 0 || (c % 12 == 1 && sim.took[i].is_some()) => {
                // Crash, before or after taking effect.
                if d % 2 == 0 {
                    sim.ops[i].end = End::Info(sim.time);
                    sim.ops[i].seq.1 = sim.line();
                }
                slots[s] = (next_pid, None);
                next_pid += 1;
            }
            Some(i) if sim.took[i].is_none() => sim.effect(i, (b % 7 == 0).then_some(c)),
            Some(i) => {
                sim.complete(i, kind == Kind::Etcd && d % 5 == 0);
                slots[s].1 = None;
            }
        }
    }
    for slot in &mut slots {
        if let Some(i) = slot.1.take() {
            sim.time += 1;
            if sim.took[i].is_none() {
                sim.effect(i, None);
            }
            sim.complete(i, false);
        }
    }
    let mut ops = sim.ops;
    if let (Some((v, how)), false) = (plan.corrupt, ops.is_empty()) {
        let n = ops.len();
        corrupt(kind, &mut ops[v % n], how);
    }
    ops
}

/// Change one op so the history likely stops being linearizable.
fn corrupt(kind: Kind, op: &mut GOp, how: u8) {
    match (how % 3, op.end) {
        (0, End::Ok(t)) if !is_read(op) => op.end = End::Fail(t),
        (0, End::Fail(t)) => op.end = End::Ok(t),
        (1, End::Ok(_)) if is_read(op) => op.out = sample(kind, how / 3),
        _ => match op.f {
            "write" | "add" => op.arg = json!((op.arg.as_i64().unwrap() + 1) % 3),
            "cas" => op.arg[0] = json!((op.arg[0].as_i64().unwrap() + 1) % 3),
            "put" => op.arg = json!("p9"),
            "append" => op.arg = json!("9."),
            "acquire" => op.f = "release",
            "release" => op.f = "acquire",
            _ => op.out = sample(kind, how / 3),
        },
    }
}

/// The history lines of `ops`, in the order they were generated.
pub fn to_history(ops: &[GOp]) -> Vec<Op> {
    let mut lines: Vec<(usize, Op)> = Vec::new();
    for g in ops {
        let mut inv = Op::new(g.call, Process::Num(g.process), OpType::Invoke, g.f);
        inv.key = g.key.clone();
        inv.value = g.arg.clone();
        if g.f == "acquire" || g.f == "release" {
            inv.owner = Some(g.owner.to_string());
        }
        let mut done = inv.clone();
        let (kind, time) = match g.end {
            End::Ok(t) => (OpType::Ok, t),
            End::Fail(t) => (OpType::Fail, t),
            End::Info(t) => (OpType::Info, t),
            End::Never => {
                lines.push((g.seq.0, inv));
                continue;
            }
        };
        done.kind = kind;
        done.time = time;
        if is_read(g) {
            done.value = g.out.clone();
            done.unobserved = g.unobserved && kind == OpType::Ok;
        }
        lines.push((g.seq.0, inv));
        lines.push((g.seq.1, done));
    }
    lines.sort_by_key(|(seq, _)| *seq);
    lines.into_iter().map(|(_, op)| op).collect()
}

/// The most ops in flight at once.
pub fn max_concurrency(ops: &[GOp]) -> usize {
    let mut ev: Vec<(usize, i64)> = Vec::new();
    for o in ops {
        ev.push((o.seq.0, 1));
        if o.seq.1 != usize::MAX {
            ev.push((o.seq.1, -1));
        }
    }
    ev.sort();
    let (mut now, mut max) = (0i64, 0i64);
    for (_, d) in ev {
        now += d;
        max = max.max(now);
    }
    max as usize
}
