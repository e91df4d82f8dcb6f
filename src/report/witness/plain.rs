//! Three plain sentences per witness, for a maintainer who has never run
//! lockjaw: what each client was granted, what happened next, and why that
//! breaks the lock's promise. Built from the anomaly the checker reported
//! (`info.anomaly`); clients are A, B, C as in the inline ops.

use super::lines::{letter, secs, value, who};
use crate::check::lock::{GrantRef, RequestRef, Witness, WitnessData};
use crate::check::minimal::WitnessHistory;

/// "Client A", or "client 'x'" for an owner the anomaly does not name.
fn name(w: &WitnessHistory, owner: &str) -> String {
    letter(w, owner).unwrap_or_else(|| format!("the client with owner id '{owner}'"))
}

fn token(fence: Option<u64>) -> String {
    fence.map_or("without a fencing token".into(), |f| {
        format!("with fencing token {f}")
    })
}

fn lease(g: &GrantRef) -> String {
    g.lease_ms
        .map(|l| format!(" and a lease of {l} ms"))
        .unwrap_or_default()
}

/// The sentences for `w`: three for every kind lockjaw names, a generic
/// three otherwise.
pub fn sentences(w: &WitnessHistory) -> Vec<String> {
    if w.info.kind == "non-linearizable" {
        return linear(w);
    }
    match serde_json::from_value::<Witness>(w.info.anomaly.clone()) {
        Ok(a) => lock(w, &a.data),
        Err(_) => generic(w),
    }
}

fn lock(w: &WitnessHistory, d: &WitnessData) -> Vec<String> {
    match d {
        WitnessData::SafetyViolation {
            key,
            first,
            second,
            lease_valid_until_ns,
            ..
        } => two_holders(w, key, first, second, *lease_valid_until_ns),
        WitnessData::MutexViolation { key, first, second } => {
            let (a, b) = (name(w, &first.owner), name(w, &second.owner));
            vec![
                format!(
                    "Client {a} acquired the lock '{key}' (a lock without expiry) at {}.",
                    secs(first.completed_ns)
                ),
                format!(
                    "Client {b} acquired the same lock at {} although {a} had not released it.",
                    secs(second.completed_ns)
                ),
                "So two clients held the lock at the same time: the lock service broke mutual exclusion.".into(),
            ]
        }
        WitnessData::FenceOrder { key, first, second } => {
            let (a, b) = (name(w, &first.owner), name(w, &second.owner));
            vec![
                format!(
                    "Client {a} was granted the lock '{key}' at {} {}.",
                    secs(first.completed_ns),
                    token(first.fence)
                ),
                format!(
                    "Client {b} asked for the lock after that, at {}, and was granted it {}, a token that is not larger.",
                    secs(second.invoked_ns),
                    token(second.fence)
                ),
                format!(
                    "Fencing tokens must grow with every grant: storage that keeps the highest token it has seen would refuse {b}'s writes while {b} holds the lock, or accept {a}'s after {a} lost it."
                ),
            ]
        }
        WitnessData::StaleWriteAccepted {
            key,
            request,
            seen,
            stale_grant,
            newer_grant,
            stale_lease_over_by_ns,
            ..
        } => stale(w, key, request, seen, stale_grant.as_ref(), newer_grant.as_ref(), *stale_lease_over_by_ns),
        WitnessData::LostUpdates {
            key,
            initial,
            final_value,
            final_read_op,
            acknowledged,
            indeterminate,
            lost,
            phantom,
        } => lost_updates(
            key,
            (*initial, *final_value),
            *final_read_op,
            (*acknowledged, *indeterminate),
            (*lost, *phantom),
        ),
        WitnessData::LostUpdatePair {
            key,
            rule,
            first,
            second,
            lost,
        } => lost_pair(w, key, rule, (first, second), *lost),
        WitnessData::DuplicateEffect {
            job,
            times,
            final_read_op,
            applies,
        } => duplicate(*job, *times, *final_read_op, applies),
        WitnessData::SetLost {
            key,
            final_read_op,
            lost,
            unexpected,
        } => {
            let mut missing = Vec::new();
            if !lost.is_empty() {
                missing.push(format!(
                    "lacks {} confirmed element(s) ({})",
                    lost.len(),
                    value(&serde_json::Value::Array(lost.clone()))
                ));
            }
            if !unexpected.is_empty() {
                missing.push(format!(
                    "holds {} element(s) no client added ({})",
                    unexpected.len(),
                    value(&serde_json::Value::Array(unexpected.clone()))
                ));
            }
            let third = if lost.is_empty() {
                "So elements appeared in the set that no client ever wrote.".to_string()
            } else {
                "So additions the storage had confirmed were lost: a client wrote a set computed from an older read, overwriting another client's addition.".to_string()
            };
            vec![
                format!("Clients added elements to the set '{key}' and the storage confirmed the additions."),
                format!("The final read (op {final_read_op}) {}.", missing.join(" and ")),
                third,
            ]
        }
        WitnessData::MutexNotLinearizable { key, .. } => vec![
            format!("The acquires and releases of the lock '{key}' in this witness came from clients using a lock without expiry."),
            "No order of them, each taking effect at one instant while it ran, is one a single lock could have produced.".into(),
            "So some client was granted the lock while another still held it, or a release freed a lock someone else held.".into(),
        ],
    }
}

/// Whether the history is a leader election (`campaign`/`resign`).
fn election(w: &WitnessHistory) -> bool {
    w.meta.params.get("workload").and_then(|v| v.as_str()) == Some("leader")
        || w.ops.iter().any(|o| o.f == "campaign")
}

fn two_holders(
    w: &WitnessHistory,
    key: &str,
    first: &GrantRef,
    second: &GrantRef,
    valid_until: u64,
) -> Vec<String> {
    let (a, b) = (name(w, &first.owner), name(w, &second.owner));
    if election(w) {
        return vec![
            format!(
                "Client {a} was elected leader of '{key}' at {} {}{}, so it led at least until {}.",
                secs(first.completed_ns),
                token(first.fence),
                lease(first),
                secs(valid_until)
            ),
            format!(
                "Client {b} was then elected leader of '{key}' too, at {} {}, while {a}'s term was still valid and before {a} stepped down.",
                secs(second.completed_ns),
                token(second.fence)
            ),
            "So two clients acted as leader at the same time (split brain): the election service broke its promise of one leader.".into(),
        ];
    }
    vec![
        format!(
            "Client {a} was granted the lock '{key}' at {} {}{}, so it held the lock at least until {}.",
            secs(first.completed_ns),
            token(first.fence),
            lease(first),
            secs(valid_until)
        ),
        format!(
            "Client {b} was then granted the same lock at {} {}, while {a}'s lease was still valid and before {a} released it.",
            secs(second.completed_ns),
            token(second.fence)
        ),
        "So two clients held the lock at the same time: the lock service broke mutual exclusion, and anything the lock protects could be changed by both.".into(),
    ]
}

fn lost_updates(
    key: &str,
    (initial, final_value): (i64, i64),
    final_read_op: u64,
    (acknowledged, indeterminate): (u64, u64),
    (lost, phantom): (i64, i64),
) -> Vec<String> {
    let unknown = if indeterminate > 0 {
        format!(" ({indeterminate} more had an unknown outcome)")
    } else {
        String::new()
    };
    let third = if lost > 0 {
        format!("So {lost} update(s) the storage had confirmed were lost: a client wrote a value computed from an older read, overwriting another client's increment.")
    } else {
        format!("So the counter moved {phantom} step(s) further than every write that may have happened explains: a write took effect that no client made.")
    };
    vec![
        format!("Clients incremented the counter '{key}', starting from {initial}, and the storage confirmed {acknowledged} increments{unknown}."),
        format!("The final read of '{key}' (op {final_read_op}), after every client stopped, returned {final_value}."),
        third,
    ]
}

fn duplicate(job: u64, times: u64, final_read_op: u64, applies: &[u64]) -> Vec<String> {
    vec![
        format!(
            "Job {job} was applied {} time(s) by clients holding the lock (ops {}).",
            applies.len(),
            ops(applies)
        ),
        format!("The final read (op {final_read_op}) shows job {job} taking effect {times} times."),
        "Each job must take effect once: the lock let more than one worker apply the same job."
            .into(),
    ]
}

fn lost_pair(
    w: &WitnessHistory,
    key: &str,
    rule: &str,
    (first, second): (&RequestRef, &RequestRef),
    lost: i64,
) -> Vec<String> {
    let (a, b) = (name(w, &first.owner), name(w, &second.owner));
    let wrote = |r: &RequestRef| {
        format!(
            "wrote {} to the counter '{key}' (op {}, {})",
            value(&r.value),
            r.op,
            token(r.fence)
        )
    };
    let third = if rule == "same-value" {
        "Each increment writes the value it read plus one, so both read the same value: one of the two confirmed increments was lost, as if it never happened.".to_string()
    } else {
        format!("{b} never read {a}'s value: its write overwrote it, and at least {lost} confirmed increment(s) were lost.")
    };
    vec![
        format!(
            "Client {a} {}, and the storage confirmed it at {}.",
            wrote(first),
            secs(first.completed_ns)
        ),
        format!(
            "Client {b} {}, begun at {}, and the storage confirmed it too.",
            wrote(second),
            secs(second.invoked_ns)
        ),
        third,
    ]
}

#[allow(clippy::too_many_arguments)]
fn stale(
    w: &WitnessHistory,
    key: &str,
    request: &RequestRef,
    seen: &RequestRef,
    stale_grant: Option<&GrantRef>,
    newer_grant: Option<&GrantRef>,
    over: Option<u64>,
) -> Vec<String> {
    let (a, b) = (name(w, &request.owner), name(w, &seen.owner));
    let old = request.fence.or(stale_grant.and_then(|g| g.fence));
    let new = seen.fence.or(newer_grant.and_then(|g| g.fence));
    let first = match over {
        Some(t) => format!(
            "Client {a} held the lock {} until its lease ran out at {}.",
            token(old),
            secs(t)
        ),
        None => format!("Client {a} was granted the lock {}.", token(old)),
    };
    let did = if seen.f == "write" {
        format!(
            "wrote {key}={} at {}",
            value(&seen.value),
            secs(seen.invoked_ns)
        )
    } else {
        format!("read {key} at {}", secs(seen.invoked_ns))
    };
    let second = match newer_grant {
        Some(g) => format!(
            "Client {b} then acquired the lock at {} {} and {did}.",
            secs(g.completed_ns),
            token(new)
        ),
        None => format!("Client {b} then {did} {}.", token(new)),
    };
    let what = if seen.f == "write" {
        format!("overwriting {b}'s newer write")
    } else {
        match new {
            Some(f) => format!("although it had already seen {b}'s newer token {f}"),
            None => format!("although it had already seen {b}'s newer token"),
        }
    };
    let third = format!(
        "{a} then wrote {key}={} {} at {} and the storage accepted it, {what}.",
        value(&request.value),
        token(old).replace("with fencing token", "with token"),
        secs(request.invoked_ns)
    );
    vec![first, second, third]
}

fn ops(ix: &[u64]) -> String {
    ix.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

fn linear(w: &WitnessHistory) -> Vec<String> {
    let keys: std::collections::BTreeSet<&str> =
        w.ops.iter().filter_map(|o| o.key.as_deref()).collect();
    let clients: std::collections::BTreeSet<String> = w.ops.iter().map(|o| who(w, o)).collect();
    let key = match keys.len() {
        0 => String::new(),
        1 => format!(" on key '{}'", keys.iter().next().unwrap_or(&"")),
        n => format!(" on {n} keys"),
    };
    let model = w.meta.model.clone().unwrap_or_else(|| "register".into());
    vec![
        format!(
            "These {} operations{key} by {} clients are what is left of the history after removing only reads; removing reads cannot make a correct history incorrect.",
            super::lines::pairs(w).len(),
            clients.len()
        ),
        format!("There is no order of them, each taking effect at one instant between its call and its reply, that one copy of a {model} could have produced."),
        "So the service returned a value that a single, up-to-date copy of the data would never have returned: it is not linearizable.".into(),
    ]
}

fn generic(w: &WitnessHistory) -> Vec<String> {
    let i = &w.info;
    let owners: Vec<String> = i.owners.iter().filter_map(|o| letter(w, o)).collect();
    vec![
        format!(
            "The checker found a {} anomaly: {}",
            i.kind,
            i.text.trim_end_matches('.')
        )
        .to_string()
            + ".",
        format!(
            "The {} ops below are all it needs{}.",
            i.witness_ops,
            if owners.is_empty() {
                String::new()
            } else {
                format!(", between clients {}", owners.join(", "))
            }
        ),
        format!("The ops that prove it are {}.", ops(&i.proof_ops)),
    ]
}
