//! A witness as a Mermaid sequence diagram (GitHub draws ```` ```mermaid ````
//! blocks in issues): the clients A, B, ... and the lock service and the
//! storage (or the register, for a linearizability witness) as
//! participants, one request arrow and one reply arrow per operation, and
//! each op's role as a note.

use super::lines::{compact, pairs, role, secs, who, Pair};
use crate::check::minimal::WitnessHistory;
use crate::history::{Op, OpType};
use std::fmt::Write as _;

/// Text Mermaid shows as written: no statement separators, no entity
/// codes, no markup, one line.
fn text(s: &str) -> String {
    s.replace('#', "no. ")
        .replace(';', ",")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
        .replace(['\n', '\r'], " ")
}

/// A participant id: letters and digits only.
fn id(s: &str) -> String {
    let clean: String = s.chars().filter(char::is_ascii_alphanumeric).collect();
    if clean.is_empty() {
        "P".into()
    } else {
        clean
    }
}

/// The participant an op goes to.
fn target(w: &WitnessHistory, op: &Op) -> &'static str {
    if !w.meta.checkers.iter().any(|c| c == "lock") {
        "R"
    } else if !super::lines::is_lock_op(&op.f) {
        "S"
    } else {
        "L"
    }
}

/// The request text: the pair's compact form up to its reply.
fn request(p: &Pair) -> String {
    let c = compact(p);
    c.split(" → ").next().unwrap_or(&c).to_string()
}

fn reply(p: &Pair) -> String {
    let c = compact(p);
    c.split_once(" → ")
        .map_or(c.clone(), |(_, r)| r.to_string())
}

/// The diagram, without the fences.
pub fn diagram(w: &WitnessHistory) -> String {
    let ps = pairs(w);
    let mut clients: Vec<String> = ps.iter().map(|p| who(w, p.first())).collect();
    // Letters (the named owners) first, in order; then the others.
    clients.sort_by_key(|c| (c.starts_with('p'), c.len(), c.clone()));
    clients.dedup();
    let mut o = String::from("sequenceDiagram\n");
    for c in &clients {
        let label = match w
            .info
            .owners
            .iter()
            .find(|x| super::lines::letter(w, x).as_deref() == Some(c))
        {
            Some(owner) => format!("{c} (owner {owner})"),
            None => format!("process {}", c.trim_start_matches('p')),
        };
        let _ = writeln!(o, "    participant {} as {}", id(c), text(&label));
    }
    let targets: Vec<&str> = ["L", "S", "R"]
        .into_iter()
        .filter(|t| ps.iter().any(|p| target(w, p.first()) == *t))
        .collect();
    for t in targets {
        let label = match t {
            "L" => "lock service".to_string(),
            "S" => "storage".to_string(),
            _ => w.meta.model.clone().unwrap_or_else(|| "register".into()),
        };
        let _ = writeln!(o, "    participant {t} as {}", text(&label));
    }
    for p in &ps {
        let op = p.first();
        let c = id(&who(w, op));
        let t = target(w, op);
        if p.invoke.is_some() {
            let _ = writeln!(o, "    {c}->>{t}: {} {}", secs(op.time), text(&request(p)));
        }
        match p.done {
            Some(d) => {
                let arrow = match d.kind {
                    OpType::Ok | OpType::Invoke => "-->>",
                    OpType::Fail => "--x",
                    OpType::Info => "--)",
                };
                let _ = writeln!(o, "    {t}{arrow}{c}: {} {}", secs(d.time), text(&reply(p)));
            }
            None => {
                let _ = writeln!(o, "    Note right of {c}: no reply");
            }
        }
        if let Some(r) = role(w, p) {
            let _ = writeln!(o, "    Note over {c}: {}", text(r));
        }
    }
    o
}
