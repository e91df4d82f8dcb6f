//! The wire as the lease source of a library that renews by itself.
//!
//! With `renewals = "all"` in its adapter's `hello_ok`, lockjaw sends no
//! renewals of its own; the library's reach the server unseen by the
//! history but for the adapter's `renewed` events. In a run whose wire is
//! tapped (`--tap-wire`, the explore's runs) on a system whose lock links
//! are framed and whose key lives on one node at a time (single Redis,
//! Sentinel, Redis Cluster: [`applies`]), the lease is extended only by the
//! renewals seen on the wire: a request on the worker's lock link that
//! carries its current owner token, sent during its hold outside
//! lockjaw's own requests, with a successful reply
//! ([`renewal_check::timed_renewals`]).
//!
//! How: the workers record the adapter's events as `renewed` ops (which
//! no checker credits: [`renewal_check::REPORTED`]); after the run, once
//! the tap is closed and before the check, [`settle`] appends one `renew`
//! op pair per wire renewal under `"<p>-wire"` (`p` the grant's process),
//! over the interval the proxy had the request and the reply, with the
//! lease its paired event reported (else the run's ttl), and writes
//! `renewals.json`: the source, and the cross-check of the two sides
//! (events the wire did not show, wire renewals no event reported). The
//! checkers read the history as ever; the appended ops are late, which the
//! lock checker's second pass puts in order.
//!
//! When the wire cannot be the source (the tap dropped records, a lock link
//! was not framed, the tap's file does not read), the events are: each
//! `renewed` pair is appended as a `renew` pair under `"<proc>-renew"`,
//! and `renewals.json` says why. A run killed before the append has no
//! extension at all: its leases end earlier than the service's, which can
//! hide a second holder but never make one up.

use super::controller::RunConfig;
use super::renewal_check::{self, RenewalCheck, Span, Spans, REPORTED};
use crate::history::{Op, OpType, Process};
use crate::service::{Keeps, Wire};
use crate::toxiproxy::tap::{self, link_of, WireRecord};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// The file [`settle`] writes in the run directory.
pub const FILE: &str = "renewals.json";

/// What extended the leases of a run where the library renews by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The renewals on the wire.
    Wire,
    /// The adapter's `renewed` events.
    Events,
}

/// The outcome of [`lease_ops`]: the source, why not the wire (when not),
/// the cross-check, and the ops to append.
#[derive(Clone, Debug, Serialize)]
pub struct Settled {
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub check: RenewalCheck,
    #[serde(skip)]
    pub ops: Vec<Op>,
}

impl Settled {
    /// Renewals appended to the history (each an invoke and an ok).
    pub fn appended(&self) -> u64 {
        (self.ops.len() / 2) as u64
    }

    /// One line for the run's summary.
    pub fn line(&self, library: &str) -> String {
        let c = &self.check;
        let mut s = match self.source {
            Source::Wire => format!(
                "{}its {} renewal(s) on the wire (the adapter reported {})",
                extended_by(library),
                c.wire,
                c.events
            ),
            Source::Events => format!(
                "{}the adapter's {} `renewed` event(s){}",
                extended_by(library),
                c.events,
                self.why
                    .as_deref()
                    .map(|w| format!(", not the wire: {w}"))
                    .unwrap_or_default()
            ),
        };
        if self.source == Source::Wire && c.disagrees() {
            s.push_str(&format!(
                "\nwarning: the adapter and the wire disagree: {} event(s) with no renewal on the \
                 wire, {} wire renewal(s) no event reported (see {FILE})",
                c.events_unseen.len(),
                c.wire_unreported.len()
            ));
        }
        s
    }
}

/// The start of the summary's line on a library that renews by itself,
/// up to what extended its leases.
pub fn extended_by(library: &str) -> String {
    format!(
        "{library} renews its own leases (renewals = \"all\"): lockjaw sent no renewals; \
         the lease is extended by "
    )
}

/// Whether the wire is the lease source of this run: the wire is tapped,
/// the library renews every lease by itself, the lock links are framed
/// (RESP) and one node holds the key at a time (not Redlock's majority,
/// whose one node's renewal is no renewal of the lock).
pub fn applies(cfg: &RunConfig) -> bool {
    let f = cfg.system.facts();
    cfg.tap_wire
        && cfg.workload.kind.uses_lock()
        && cfg
            .adapter
            .as_ref()
            .is_some_and(super::phases::library_renews)
        && f.wire == Wire::Resp
        && matches!(f.keeps, Keeps::KeyOnOneNode | Keeps::KeyOnPrimary)
}

/// Why the wire cannot be the source: its file is not whole (`broken`),
/// or a lock link the tap could not frame.
fn unusable(wire: &[WireRecord], broken: Option<String>) -> Option<String> {
    if broken.is_some() {
        return broken;
    }
    wire.iter()
        .find(|r| r.proto == "opaque" && link_of(&r.proxy).is_some_and(|(_, n)| n != "storage"))
        .map(|r| format!("link {} is not framed ({})", r.proxy, r.name))
}

/// The renew ops that extend the leases, from the wire (or, when `wire`
/// is `Err`, not whole (`broken`: why) or unframed, from the adapter's
/// events), and the cross-check.
/// `slot_of` maps a worker process number to its slot; `ttl_ms` is the
/// lease of a wire renewal no event reported.
pub fn lease_ops(
    wire: Result<&[WireRecord], String>,
    broken: Option<String>,
    ops: &[Op],
    slot_of: impl Fn(i64) -> Option<usize>,
    ttl_ms: u64,
) -> Settled {
    let spans = renewal_check::collect(ops, slot_of);
    let why = match &wire {
        Ok(w) => unusable(w, broken),
        Err(e) => Some(e.clone()),
    };
    match (wire, why) {
        (Ok(w), None) => from_wire(w, &spans, ttl_ms),
        (_, why) => Settled {
            source: Source::Events,
            why,
            check: RenewalCheck {
                events: spans.events.len() as u64,
                ..RenewalCheck::default()
            },
            ops: from_events(ops),
        },
    }
}

fn from_wire(wire: &[WireRecord], spans: &Spans, ttl_ms: u64) -> Settled {
    let holds = spans.hold_spans();
    let seen = renewal_check::timed_renewals(wire, &holds, &spans.own);
    let moments: Vec<(usize, u64)> = seen.iter().map(|w| (w.slot, w.sent_ns)).collect();
    // Only events that began during a hold compare with the wire's side.
    let events: Vec<(Span, Option<u64>)> = spans
        .events
        .iter()
        .filter(|(e, _)| holds.iter().any(|h| h.holds(e.slot, e.from_ns)))
        .copied()
        .collect();
    let event_spans: Vec<Span> = events.iter().map(|e| e.0).collect();
    let (check, paired) = renewal_check::pair(&moments, &event_spans);
    let mut out = Vec::new();
    // Each process's ops in order, never two in flight: a renewal that
    // overlaps the last of its process goes under the next name.
    let mut busy: HashMap<String, u64> = HashMap::new();
    for (w, e) in seen.iter().zip(&paired) {
        let Some(h) = spans.holds.iter().find(|h| {
            h.span.slot == w.slot && h.span.from_ns <= w.sent_ns && w.sent_ns <= h.span.to_ns
        }) else {
            continue;
        };
        let lease = e.and_then(|i| events[i].1).unwrap_or(ttl_ms);
        let base = format!("{}-wire", h.process);
        let mut name = base.clone();
        let mut n = 0;
        while busy.get(&name).is_some_and(|&t| t > w.sent_ns) {
            n += 1;
            name = format!("{base}.{n}");
        }
        busy.insert(name.clone(), w.done_ns);
        let op = |t: u64, kind: OpType| {
            let mut o = Op::new(t, Process::Named(name.clone()), kind, "renew");
            o.key = h.key.clone();
            o.owner = h.owner.clone();
            o
        };
        out.push(op(w.sent_ns, OpType::Invoke));
        let mut ok = op(w.done_ns, OpType::Ok);
        ok.lease_ms = Some(lease);
        out.push(ok);
    }
    Settled {
        source: Source::Wire,
        why: None,
        check,
        ops: out,
    }
}

/// Each of the adapter's `renewed` pairs as a `renew` pair of its own
/// process (`"<proc>-renew"`).
fn from_events(ops: &[Op]) -> Vec<Op> {
    let mut open: HashMap<&Process, &Op> = HashMap::new();
    let mut out = Vec::new();
    for o in ops.iter().filter(|o| o.f == REPORTED) {
        if o.kind == OpType::Invoke {
            open.insert(&o.process, o);
            continue;
        }
        let Some(inv) = open.remove(&o.process) else {
            continue;
        };
        if o.kind != OpType::Ok {
            continue;
        }
        let p = Process::Named(format!("{}-renew", o.process));
        for x in [inv, o] {
            let mut c = x.clone();
            c.f = "renew".into();
            c.process = p.clone();
            out.push(c);
        }
    }
    out
}

/// After the run (the tap closed, the history written with `written` ops):
/// append the renewals that extend the leases and write [`FILE`]. `None`
/// when the library does not renew by itself or the wire is not tapped.
pub fn settle(
    cfg: &RunConfig,
    dir: &Path,
    history: &Path,
    written: u64,
    broken: Option<String>,
) -> Result<Option<Settled>, String> {
    if !applies(cfg) {
        return Ok(None);
    }
    let (_, ops) = crate::history::jsonl::read_all(history)
        .map_err(|e| format!("{}: {e}", history.display()))?;
    let wire = tap::read(&dir.join(tap::FILE));
    let workers = cfg.workload.concurrency;
    let slot = |p: i64| super::wire_tap::slot_of(&Process::Num(p), workers);
    let mut s = lease_ops(
        wire.as_deref().map_err(Clone::clone),
        broken,
        &ops,
        slot,
        cfg.workload.ttl_ms,
    );
    append(history, written, &mut s.ops)?;
    let mut v = serde_json::to_value(&s).map_err(|e| e.to_string())?;
    v["appended"] = s.appended().into();
    let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    let path = dir.join(FILE);
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(s))
}

/// Append `ops` to the history, numbered on from `written`.
fn append(history: &Path, written: u64, ops: &mut [Op]) -> Result<(), String> {
    if ops.is_empty() {
        return Ok(());
    }
    let err = |e: std::io::Error| format!("{}: cannot append: {e}", history.display());
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(history)
        .map_err(err)?;
    let mut out = std::io::BufWriter::new(f);
    for (i, op) in ops.iter_mut().enumerate() {
        op.index = written + i as u64;
        serde_json::to_writer(&mut out, op).map_err(|e| err(e.into()))?;
        out.write_all(b"\n").map_err(err)?;
    }
    out.flush().map_err(err)
}

#[cfg(test)]
#[path = "wire_lease_tests.rs"]
mod tests;
