//! docs/faults.md's tables of expected verdicts, generated from the
//! allows-rule ([`super::allows`]) as `combination::table` generates the
//! support table; a test keeps the page in step.

use super::{allows, builtin_promises, Allowance, Kind, Promises};
use crate::nemesis::scope::{ClientChoice, Placement, Scope, ToxiproxyChoice};
use crate::nemesis::{registry, spec};
use crate::service::{systems, System};
use std::collections::BTreeMap;

/// A verdict's word in a cell.
fn word(a: &Allowance) -> &'static str {
    match a {
        Allowance::Allowed(_) => "allowed",
        Allowance::Finding => "finding",
        Allowance::Undecided(_) => "review",
    }
}

/// The systems a nemesis file applies to (lockjaw's cluster, fenced-counter).
fn applies(spec: &spec::NemesisSpec) -> Vec<System> {
    systems()
        .iter()
        .copied()
        .filter(|&system| {
            registry::supports(&Scope {
                system,
                client: ClientChoice::Builtin,
                workload: crate::workload::Kind::FencedCounter,
                nemesis: spec.clone(),
                placement: Placement::Local,
                toxiproxy: ToxiproxyChoice::Embedded,
            })
            .is_ok()
        })
        .collect()
}

/// One cell: the word if every system agrees, else each word with its
/// systems, the most common one last as "elsewhere".
fn cell(words: &[(System, &'static str)]) -> String {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (s, w) in words {
        groups.entry(w).or_default().push(s.name());
    }
    if groups.len() <= 1 {
        return groups.keys().next().map_or("—", |w| w).to_string();
    }
    let most = groups
        .iter()
        .max_by_key(|(w, v)| (v.len(), std::cmp::Reverse(**w)))
        .map(|(w, _)| *w)
        .unwrap_or_default();
    let mut parts: Vec<String> = groups
        .iter()
        .filter(|(w, _)| **w != most)
        .map(|(w, v)| format!("{w} on {}", v.join(", ")))
        .collect();
    parts.push(format!("{most} elsewhere"));
    parts.join("; ")
}

fn header(first: &[&str]) -> String {
    let mut out = String::from("|");
    for h in first {
        out.push_str(&format!(" {h} |"));
    }
    for k in Kind::ALL {
        out.push_str(&format!(" {} |", k.name()));
    }
    out.push_str("\n|");
    out.push_str(&"---|".repeat(first.len() + Kind::ALL.len()));
    out.push('\n');
    out
}

/// One row per built-in nemesis file (but `mixed`, judged by what it
/// draws) and fencing setting, one column per anomaly kind; lockjaw's own
/// clients' promises ([`builtin_promises`]), the systems where the file
/// applies (fencing on: those whose grants carry a fence).
pub fn verdict_table() -> String {
    let mut out = header(&["nemesis", "fencing"]);
    for (name, _) in spec::BUILTIN.iter().filter(|(n, _)| *n != "mixed") {
        let spec = spec::load(name).expect("every built-in nemesis file loads");
        let on = applies(&spec);
        for fencing in [false, true] {
            let here: Vec<System> = on
                .iter()
                .copied()
                .filter(|s| !fencing || s.facts().fencing_token.is_yes())
                .collect();
            let mode = if fencing { "on" } else { "off" };
            out.push_str(&format!("| `{name}` | {mode} |"));
            for k in Kind::ALL {
                let words: Vec<(System, &str)> = here
                    .iter()
                    .map(|&s| {
                        let p = builtin_promises(s);
                        (s, word(&allows(&spec, s.name(), fencing, &p, k.name())))
                    })
                    .collect();
                out.push_str(&format!(" {} |", cell(&words)));
            }
            out.push('\n');
        }
    }
    out
}

/// The promises of a library that declares one promise as given.
type Declare = fn(Option<bool>) -> Promises;

/// The rows a library's promises change: single Redis, fencing off.
pub fn promises_table() -> String {
    let mut out = header(&["nemesis", "promise"]);
    let says = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "not declared",
    };
    let validity: Declare = |v| Promises {
        validity_check: v,
        ..Promises::default()
    };
    // (nemesis, its reply held this many leases when not the default,
    // the promise, the promises declaring it)
    let rows: [(&str, Option<f64>, &str, Declare); 3] = [
        ("delay-grant", None, "validity_check", validity),
        ("delay-grant", Some(1.5), "validity_check", validity),
        ("delay-storage", None, "renews_itself", |v| Promises {
            renews_itself: v,
            ..Promises::default()
        }),
    ];
    for (name, held, field, promise) in rows {
        let mut spec = spec::load(name).expect("a built-in nemesis file");
        let mut label = format!("`{name}`");
        if let Some(l) = held {
            spec.duration_leases = Some(l);
            label.push_str(&format!(" held {l} leases"));
        }
        for v in [Some(true), Some(false), None] {
            out.push_str(&format!("| {label} | `{field}` {} |", says(v)));
            for k in Kind::ALL {
                let a = allows(&spec, "redis", false, &promise(v), k.name());
                out.push_str(&format!(" {} |", word(&a)));
            }
            out.push('\n');
        }
    }
    out
}
