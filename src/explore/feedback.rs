//! Feedback from the wire: whether a landed injection changed what the
//! client sent next (Mallory's idea, CCS 2023: move up what made the
//! system do something new). A search run taps the wire as the learn runs
//! do; for each landed injection, the requests the struck worker (its
//! target's `slot`; every worker for a fault without one) sent on its lock
//! links from the injection's start to its stop plus one lease are held
//! against what the learn runs showed:
//!
//! - a request kind never learned, or learned but never in that phase
//!   (`new request EVALSHA 1a2b3c4d in release`, `DEL in hold, never
//!   learned there`); a kind learned only between cycles (`idle`: a
//!   connection's set-up, `CLIENT SETNAME`) is not judged by its phase: a
//!   worker restarted after a crash sends it when its first op opens the
//!   connection;
//! - a transition never learned: request B right after request A on one
//!   connection (`SET twice in a row`: a retry; `DEL then DEL`), or B as
//!   a new connection's first request (a reconnect that went straight to
//!   B). Transitions are taken per connection, not per worker: a worker
//!   restarted after a crash opens a new connection and starts it as it
//!   did in the learn runs, which is no change.
//!
//! A renewal that stopped (no renewal where the learn runs show one) is
//! not looked for: the learn runs are too short to say when a library
//! would have renewed, and a wrong "changed" would only reorder, but an
//! unsound rule is not worth its noise.
//!
//! Requests are labelled as the learn runs label them: the command (or
//! ZooKeeper op), and for `EVAL`/`EVALSHA` the script's SHA1 (its first 8
//! characters, as [`super::learn::RequestKind::label`]). Keep-alives are
//! no request.

use super::finding::PointOutcome;
use super::learn::{short_label as label, Learned, LinkKind, Phase, Phases};
use crate::report::{RunDir, Timeline};
use crate::toxiproxy::tap::{self, Dir, WireRecord};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// The label of a new connection's start in a transition.
pub const START: &str = "^";

/// At most this many reasons are kept per point.
pub const MAX_REASONS: usize = 4;

/// Per point: what its landed injections changed in what the client sent
/// (empty: nothing).
pub type Changes = BTreeMap<String, Vec<String>>;

/// A request as the feedback reads it: (worker slot, moment, label).
type Sent = (usize, u64, String);

/// A lock link's requests (not keep-alives), per connection, in order:
/// (proxy, connection) → its requests.
fn per_connection(wire: &[WireRecord]) -> BTreeMap<(&str, u64), Vec<Sent>> {
    let mut out: BTreeMap<(&str, u64), Vec<Sent>> = BTreeMap::new();
    for r in wire {
        if r.dir != Dir::Request || r.keepalive || r.proto == "opaque" {
            continue;
        }
        let Some((slot, node)) = tap::link_of(&r.proxy) else {
            continue;
        };
        if node == "storage" {
            continue;
        }
        out.entry((r.proxy.as_str(), r.conn)).or_default().push((
            slot,
            r.t_ns,
            label(&r.name, r.sha1.as_deref()),
        ));
    }
    for v in out.values_mut() {
        v.sort_by_key(|x| x.1);
    }
    out
}

/// Every transition on the lock links of a tapped run: (the request
/// before, or [`START`] for a connection's first; the request).
pub fn bigrams(wire: &[WireRecord]) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for reqs in per_connection(wire).into_values() {
        let mut prev = START.to_string();
        for (_, _, l) in reqs {
            out.insert((prev, l.clone()));
            prev = l;
        }
    }
    out
}

/// What the learn runs showed, as the feedback compares with it.
pub struct Baseline {
    /// A lock link's request label → the phases it was sent in.
    kinds: HashMap<String, BTreeSet<Phase>>,
    /// `None`: not learned (an older state): no transition is judged.
    bigrams: Option<BTreeSet<(String, String)>>,
}

impl Baseline {
    pub fn of(l: &Learned) -> Baseline {
        let kinds = l
            .kinds
            .iter()
            .filter(|k| k.link == LinkKind::Lock)
            .map(|k| (label(&k.command, k.sha1.as_deref()), k.phases.clone()))
            .collect();
        Baseline {
            kinds,
            bigrams: l.bigrams.clone(),
        }
    }
}

/// One landed injection: its point, the worker it struck (its target's
/// `slot`, else the `slot` its stop reported, as a strike does; `None`:
/// no one worker), and the span its worker's requests are read in (ns, run
/// clock, both ends inclusive).
#[derive(Clone, Debug, PartialEq)]
pub struct Struck {
    pub point: String,
    pub slot: Option<usize>,
    pub from_ns: u64,
    pub to_ns: u64,
}

/// The landed injections of a run's nemesis.json, each read from its
/// start to its stop plus one lease (to the run's end when it has no
/// stop). Landed as the report counts it: no error, not cut short, not
/// outside a critical section when the fault says so. An injection's
/// point is its target's `point`, else the nemesis file's `name` (a run
/// of one point).
pub fn struck(nemesis: &Value, lease_ns: u64) -> Vec<Struck> {
    let name = nemesis.get("name").and_then(Value::as_str);
    let list = nemesis.get("injections").and_then(Value::as_array);
    let mut out = vec![];
    for v in list.into_iter().flatten() {
        let error = v.get("error").is_some_and(|e| !e.is_null());
        if !crate::nemesis::schedule::landed(&v["detail"], error) {
            continue;
        }
        let target = v.get("target");
        let at = |k: &str| target.and_then(|t| t.get(k));
        let mixed = at("mixed").is_some();
        let Some(point) = at("point")
            .and_then(Value::as_str)
            .or(name.filter(|_| !mixed))
        else {
            continue;
        };
        let n = |k: &str| v.get(k).and_then(Value::as_u64);
        let from_ns = n("start_ns").or(n("started_ns")).unwrap_or(0);
        let to_ns = n("stop_ns").map_or(u64::MAX, |s| s.max(from_ns).saturating_add(lease_ns));
        out.push(Struck {
            point: point.to_string(),
            slot: at("slot")
                .or_else(|| v.pointer("/detail/slot"))
                .and_then(Value::as_u64)
                .and_then(|s| usize::try_from(s).ok()),
            from_ns,
            to_ns,
        });
    }
    out
}

/// Per point with a landed injection: what its injections changed in
/// what the struck worker sent (empty: nothing), at most
/// [`MAX_REASONS`], in order of first seen. `phase_at(slot, t)` is the
/// worker's phase at a moment (the run's history).
pub fn changes(
    wire: &[WireRecord],
    struck: &[Struck],
    phase_at: &dyn Fn(usize, u64) -> Phase,
    base: &Baseline,
) -> Changes {
    let conns = per_connection(wire);
    let mut out = Changes::new();
    for s in struck {
        let reasons = out.entry(s.point.clone()).or_default();
        let mut say = |why: String| {
            if reasons.len() < MAX_REASONS && !reasons.contains(&why) {
                reasons.push(why);
            }
        };
        for reqs in conns.values() {
            for (i, (slot, t, l)) in reqs.iter().enumerate() {
                if s.slot.is_some_and(|w| w != *slot) || *t < s.from_ns || *t > s.to_ns {
                    continue;
                }
                let phase = phase_at(*slot, *t);
                match base.kinds.get(l) {
                    None => say(format!("new request {l} in {}", phase.name())),
                    // Learned only between cycles (a connection's set-up):
                    // a restarted worker sends it again in whatever phase
                    // its first op opens, which is no new behaviour.
                    Some(ph) if !ph.contains(&phase) && !ph.iter().all(|p| *p == Phase::Idle) => {
                        say(format!("{l} in {}, never learned there", phase.name()))
                    }
                    Some(_) => {}
                }
                let Some(learned) = &base.bigrams else {
                    continue;
                };
                let prev = if i == 0 {
                    START
                } else {
                    reqs[i - 1].2.as_str()
                };
                if learned.contains(&(prev.to_string(), l.clone())) {
                    continue;
                }
                say(if prev == START {
                    format!("{l} first on a new connection")
                } else if prev == l {
                    format!("{l} twice in a row")
                } else {
                    format!("{prev} then {l}")
                });
            }
        }
    }
    out
}

/// What a finished, tapped search run's landed injections changed, per
/// point (see [`changes`]); an error when the run has no wire record.
pub fn of_run(dir: &Path, learned: &Learned) -> Result<Changes, String> {
    let rd = RunDir::open(dir).map_err(|e| e.to_string())?;
    let wire = tap::read(&dir.join(tap::FILE))?;
    let conc = crate::report::summary::concurrency(&rd);
    let mut t = Timeline::read(&rd.history_path(), conc).map_err(|e| e.to_string())?;
    close_open_ops(&mut t);
    let phases = Phases::of(&t);
    let lease_ms = rd
        .run
        .ttl_ms
        .or_else(|| rd.run.workload.as_ref()?.ttl_ms)
        .unwrap_or(learned.lease_ms);
    let struck = struck(&rd.nemesis, lease_ms.saturating_mul(1_000_000));
    let at = |slot: usize, t: u64| phases.at(slot, t);
    Ok(changes(&wire, &struck, &at, &Baseline::of(learned)))
}

/// A crash leaves its worker's op open (no completion): its interval runs
/// to the run's end, and every later request of the restarted worker
/// would read as sent in that op's phase (`SETNX in release`). For the
/// feedback an op left open ends where the next op of its worker's lane
/// starts (the run's end when none does).
pub fn close_open_ops(t: &mut Timeline) {
    let mut open: HashMap<u32, Vec<usize>> = HashMap::new();
    for i in 0..t.intervals.len() {
        let (lane, start) = (t.intervals[i].lane, t.intervals[i].start);
        if let Some(waiting) = open.get_mut(&lane) {
            for j in waiting.drain(..) {
                t.intervals[j].end = Some(start.max(t.intervals[j].start));
            }
        }
        if t.intervals[i].end.is_none() {
            open.entry(lane).or_default().push(i);
        }
    }
}

/// Put a run's changes on its outcomes: a point with a landed injection
/// the feedback read gets `changed` (empty: nothing changed).
pub fn annotate(outcomes: &mut [PointOutcome], changes: &Changes) {
    for o in outcomes.iter_mut().filter(|o| o.landed > 0) {
        if let Some(c) = changes.get(&o.point) {
            o.changed = Some(c.clone());
        }
    }
}

#[cfg(test)]
#[path = "feedback_tests.rs"]
mod tests;
