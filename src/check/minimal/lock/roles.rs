//! The role of every line of a lock witness, in a maintainer's words:
//! "A's grant, fence 4", "B's write of 7 with fence 5, accepted". The
//! anomaly's owners are A, B, C, ... in the order it names them; other
//! ops are "process N's".

use super::target::Target;
use super::units::{is_grant_f, is_release_f, Units};
use crate::check::lock::WitnessData;
use crate::check::minimal::letter;
use crate::history::OpType;
use std::collections::{BTreeMap, HashMap};

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// Op index → role, for every line of the kept units.
pub fn roles(h: &Units, kept: &[bool], t: &Target) -> BTreeMap<u64, String> {
    let named: HashMap<&str, String> = t
        .owners
        .iter()
        .enumerate()
        .map(|(i, o)| (o.as_str(), letter(i)))
        .collect();
    let actors = actors(h, kept, &named);
    let notes = notes(t, &named);
    let mut out = BTreeMap::new();
    for u in (0..h.units.len()).filter(|&u| kept[u]) {
        let who = &actors[&u];
        for (k, &p) in h.units[u].ops.iter().enumerate() {
            let op = &h.ops[p];
            let mut role = if op.kind == OpType::Invoke && h.units[u].ops.len() > 1 {
                invoked(h, u, who)
            } else {
                completed(h, u, who, &named)
            };
            if k + 1 == h.units[u].ops.len() {
                if let Some(n) = notes.get(&op.index) {
                    role.push_str("; ");
                    role.push_str(n);
                }
            }
            out.insert(op.index, role);
        }
    }
    out
}

/// Who acts in each kept unit: the named owner (by letter) whose grant
/// the process holds or whom the op names, else the letter of a named
/// owner the same process is elsewhere, else "process N".
fn actors(h: &Units, kept: &[bool], named: &HashMap<&str, String>) -> HashMap<usize, String> {
    let mut out = HashMap::new();
    let mut holder: HashMap<usize, Option<String>> = HashMap::new();
    let mut order: Vec<usize> = (0..h.units.len()).filter(|&u| kept[u]).collect();
    order.sort_by_key(|&u| h.first(u));
    // A client that holds a named owner's grant somewhere in the witness
    // is that letter throughout (its other holds have other owner ids).
    let mut client: HashMap<usize, String> = HashMap::new();
    for &u in &order {
        if let Some(l) = h.owner(u).and_then(|o| named.get(o.as_str()).cloned()) {
            client.entry(h.units[u].proc).or_insert(l);
        }
    }
    for u in order {
        let p = h.units[u].proc;
        if h.is_nemesis(u) {
            out.insert(u, "the nemesis".to_string());
            continue;
        }
        let own = h.owner(u).and_then(|o| named.get(o.as_str()).cloned());
        if h.is_grant(u) {
            holder.insert(p, own.clone());
        }
        let held = holder.get(&p).cloned().flatten();
        let who = own
            .or(held)
            .or_else(|| client.get(&p).cloned())
            .unwrap_or_else(|| format!("process {}", h.procs[p]));
        if is_release_f(h.f(u)) {
            holder.insert(p, None);
        }
        out.insert(u, who);
    }
    out
}

fn invoked(h: &Units, u: usize, who: &str) -> String {
    let fence = h.head(u).fence.map(|f| format!(" with fence {f}"));
    format!("{who} invokes {}{}", h.f(u), fence.unwrap_or_default())
}

fn outcome(h: &Units, u: usize) -> &'static str {
    match h.outcome(u) {
        Some(OpType::Ok) => "accepted",
        Some(OpType::Fail) => "refused",
        Some(OpType::Info) => "outcome unknown",
        _ => "never completed",
    }
}

fn completed(h: &Units, u: usize, who: &str, named: &HashMap<&str, String>) -> String {
    let f = h.f(u);
    let fence = h
        .fence(u)
        .map(|f| format!(" with fence {f}"))
        .unwrap_or_default();
    let v = h.value(u);
    let ok = h.outcome(u) == Some(OpType::Ok);
    if h.is_nemesis(u) {
        let fault = v.get("fault").and_then(|x| x.as_str()).unwrap_or("fault");
        let on = v
            .get("owner")
            .and_then(|o| o.as_str())
            .and_then(|o| named.get(o));
        let on = on.map(|l| format!(" on {l}")).unwrap_or_default();
        return format!("the nemesis: {fault} {f}{on}");
    }
    if is_grant_f(f) {
        if !ok {
            return format!("{who}'s {f}, {}", outcome(h, u));
        }
        let fence = h
            .fence(u)
            .map(|f| format!(", fence {f}"))
            .unwrap_or_default();
        let lease = match h.done(u).and_then(|o| o.lease_ms) {
            Some(0) => ", session lease".to_string(),
            Some(ms) => format!(", lease {ms} ms"),
            None => String::new(),
        };
        return format!("{who}'s grant{fence}{lease}");
    }
    match f {
        "renew" if ok => format!("{who}'s renewal"),
        "lost-leadership" => format!("{who} learns it lost its leadership"),
        "lost" => format!("{who} is told its lock is lost"),
        "write" => format!("{who}'s write of {v}{fence}, {}", outcome(h, u)),
        "apply" => {
            let job = v.get("job").map(|j| j.to_string()).unwrap_or_default();
            format!("{who}'s apply of job {job}{fence}, {}", outcome(h, u))
        }
        "read" if ok => format!("{who}'s read of {}{fence}", short(v)),
        _ if ok => format!("{who}'s {f}"),
        _ => format!("{who}'s {f}{fence}, {}", outcome(h, u)),
    }
}

fn short(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Array(a) if a.len() > 8 => format!("{} elements", a.len()),
        other => other.to_string(),
    }
}

/// What the anomaly says about its proof ops, by op index.
fn notes(t: &Target, named: &HashMap<&str, String>) -> HashMap<u64, String> {
    let l = |o: &str| named.get(o).cloned().unwrap_or_else(|| o.to_string());
    let mut n = HashMap::new();
    match &t.data {
        WitnessData::SafetyViolation {
            first,
            second,
            lease_valid_until_ns,
            lease_evidence_op,
            ..
        } => {
            let a = l(&first.owner);
            let until = secs(*lease_valid_until_ns);
            n.insert(
                *lease_evidence_op,
                format!("proves {a}'s lease certainly valid until {until}"),
            );
            n.insert(
                second.acquire_op,
                format!("granted while {a}'s lease was valid"),
            );
        }
        WitnessData::MutexViolation { first, second, .. } => {
            let a = l(&first.owner);
            n.insert(
                second.acquire_op,
                format!("granted while {a} held the lock"),
            );
        }
        WitnessData::FenceOrder { first, second, .. } => {
            let f = first.fence.map(|f| f.to_string()).unwrap_or_default();
            n.insert(
                second.acquire_op,
                format!("fence not above {}'s fence {f}", l(&first.owner)),
            );
        }
        WitnessData::StaleWriteAccepted {
            request,
            seen,
            stale_grant,
            stale_lease_over_by_ns,
            ..
        } => {
            if let (Some(g), Some(end)) = (stale_grant, stale_lease_over_by_ns) {
                let who = l(&g.owner);
                n.insert(
                    g.acquire_op,
                    format!("{who}'s lease certainly over at {}", secs(*end)),
                );
            }
            let f = seen.fence.map(|f| f.to_string()).unwrap_or_default();
            n.insert(
                request.op,
                format!("stale: the storage had already seen fence {f}"),
            );
            n.insert(seen.op, format!("the request with the higher fence {f}"));
        }
        WitnessData::LostUpdates { final_read_op, .. }
        | WitnessData::SetLost { final_read_op, .. } => {
            n.insert(*final_read_op, "the final read".to_string());
        }
        WitnessData::LostUpdatePair {
            rule,
            first,
            second,
            lost,
            ..
        } => {
            let a = l(&first.owner);
            n.insert(first.op, "acknowledged first".to_string());
            let why = if rule == "same-value" {
                format!("the same value as {a}'s acknowledged write: one update lost")
            } else {
                format!("lower than {a}'s acknowledged write: at least {lost} update(s) lost")
            };
            n.insert(second.op, why);
        }
        WitnessData::DuplicateEffect {
            job,
            times,
            final_read_op,
            ..
        } => {
            n.insert(
                *final_read_op,
                format!("the final read: job {job} is in it {times} times"),
            );
        }
        WitnessData::MutexNotLinearizable { .. } => {}
    }
    n
}
