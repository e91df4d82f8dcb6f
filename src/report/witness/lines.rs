//! A witness's ops, one line per operation (its invocation and completion
//! together): time, who, the op in a compact form, and its role; and the
//! names the report gives the clients (`info.owners[0]` is A, then B, C).

use crate::check::minimal::WitnessHistory;
use crate::history::{Op, OpType};
use std::fmt::Write as _;

/// The report's name of owner `owner`: A, B, C, ... by its place in
/// `info.owners`; `None` for an owner the anomaly does not name.
pub fn letter(w: &WitnessHistory, owner: &str) -> Option<String> {
    let i = w.info.owners.iter().position(|o| o == owner)?;
    Some(crate::check::minimal::letter(i))
}

/// Who did `op`, as the report says it: the owner's letter, else the
/// client by its owner id or process.
pub fn who(w: &WitnessHistory, op: &Op) -> String {
    let owner = op.owner_or_default();
    if let Some(l) = owner.as_deref().and_then(|o| letter(w, o)) {
        return l;
    }
    // A storage op carries no owner: its process's grants name it.
    if let Some(l) = w.ops.iter().find_map(|o| {
        (o.process == op.process)
            .then(|| o.owner.as_deref().and_then(|x| letter(w, x)))
            .flatten()
    }) {
        return l;
    }
    format!("p{}", op.process)
}

/// One operation: its invocation (if kept) and its completion (if any).
pub struct Pair<'a> {
    pub invoke: Option<&'a Op>,
    pub done: Option<&'a Op>,
}

impl Pair<'_> {
    /// The op that stands for the pair: the invocation, else the
    /// completion.
    pub fn first(&self) -> &Op {
        self.invoke.or(self.done).expect("a pair has an op")
    }
}

/// The ops of `w` paired by process, in the order of their invocations.
pub fn pairs(w: &WitnessHistory) -> Vec<Pair<'_>> {
    let mut out: Vec<Pair> = Vec::new();
    for op in &w.ops {
        if op.kind == OpType::Invoke {
            out.push(Pair {
                invoke: Some(op),
                done: None,
            });
            continue;
        }
        let open = out.iter_mut().rev().find(|p| {
            p.done.is_none()
                && p.invoke
                    .is_some_and(|i| i.process == op.process && i.f == op.f)
        });
        match open {
            Some(p) => p.done = Some(op),
            None => out.push(Pair {
                invoke: None,
                done: Some(op),
            }),
        }
    }
    out
}

/// A value in one short line (long arrays abbreviated).
pub fn value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Array(a) if a.len() > 8 => format!("[{} elements]", a.len()),
        other => other.to_string(),
    }
}

fn kind_word(k: OpType) -> &'static str {
    match k {
        OpType::Invoke => "invoke",
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info => "info (unknown outcome)",
    }
}

/// Whether `f` is asked of the lock service (not the storage).
pub fn is_lock_op(f: &str) -> bool {
    !matches!(f, "read" | "write" | "apply")
}

/// "acquire lock → ok, fence 33, lease 1000 ms"
pub fn compact(p: &Pair) -> String {
    let op = p.first();
    let mut s = op.f.clone();
    if let Some(k) = &op.key {
        let _ = write!(s, " {k}");
    }
    let inv = p.invoke.unwrap_or(op);
    if matches!(op.f.as_str(), "write" | "apply" | "cas" | "add") && !inv.value.is_null() {
        let _ = write!(s, "={}", value(&inv.value));
    }
    // A lock op's fence is what the service grants: shown with the reply.
    let lock_op = is_lock_op(&op.f);
    if let Some(f) = inv.fence.filter(|_| p.invoke.is_some() && !lock_op) {
        let _ = write!(s, " fence {f}");
    }
    let Some(d) = p.done else {
        s.push_str(" → no reply");
        return s;
    };
    let _ = write!(s, " → {}", kind_word(d.kind));
    let mut extra: Vec<String> = Vec::new();
    if matches!(d.f.as_str(), "read" | "acquire" | "campaign") && !d.value.is_null() {
        extra.push(value(&d.value));
    }
    if let Some(f) = d
        .fence
        .filter(|f| lock_op || Some(*f) != inv.fence || p.invoke.is_none())
    {
        extra.push(format!("fence {f}"));
    }
    if let Some(l) = d.lease_ms {
        extra.push(format!("lease {l} ms"));
    }
    if let Some(q) = d.seq {
        extra.push(format!("seq {q}"));
    }
    if let Some(e) = &d.error {
        extra.push(e.clone());
    }
    if !extra.is_empty() {
        let _ = write!(s, ", {}", extra.join(", "));
    }
    s
}

/// The role of a pair: its completion's, else its invocation's.
pub fn role<'a>(w: &'a WitnessHistory, p: &Pair) -> Option<&'a str> {
    [p.done, p.invoke]
        .into_iter()
        .flatten()
        .find_map(|o| w.info.roles.get(&o.index))
        .map(String::as_str)
}

/// Seconds with milliseconds, e.g. `1.520 s`.
pub fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// The witness inline: one line per operation, columns aligned.
pub fn block(w: &WitnessHistory) -> String {
    let rows: Vec<[String; 5]> = pairs(w)
        .iter()
        .map(|p| {
            let op = p.first();
            let idx = match (p.invoke, p.done) {
                (Some(i), Some(d)) => format!("#{}-{}", i.index, d.index),
                _ => format!("#{}", op.index),
            };
            [
                secs(op.time),
                idx,
                who(w, op),
                compact(p),
                role(w, p).unwrap_or("").to_string(),
            ]
        })
        .collect();
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..4).map(width).collect();
    let mut o = String::new();
    for r in &rows {
        let mut line = String::new();
        for (c, w) in widths.iter().enumerate() {
            let pad = w - r[c].chars().count();
            let _ = write!(line, "{}{}  ", r[c], " ".repeat(pad));
        }
        if !r[4].is_empty() {
            let _ = write!(line, "# {}", r[4]);
        }
        let _ = writeln!(o, "{}", line.trim_end());
    }
    o
}
