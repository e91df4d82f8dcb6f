//! The renewals of a library that renews on its own, seen twice: on the
//! wire (a tapped run's `wire.jsonl`, [`crate::toxiproxy::tap`]) and in
//! the adapter's `renewed` events (recorded as `renew` ops under
//! `"<p>-adapter"`). [`cross_check`] pairs them and reports each side's
//! unpaired ones: an event with no renewal on the wire inside its interval
//! (the adapter reported a renewal the library did not send, or did not
//! send successfully), and a wire renewal no event reports (the library
//! renewed and the adapter did not say so). Both sides are taken inside
//! the worker's holds only (a renewal begun as the release was invoked is
//! on neither). Pure: the caller reads the tap and the history.
//!
//! A wire renewal is a request on one of the worker's lock links (not the
//! storage link) that carries the worker's current token, got a successful
//! reply (`ok`, or a positive integer), and was sent while the worker held
//! the lock (after its grant, before its release was invoked) and outside
//! lockjaw's own requests under `"<p>-lease"` (its probes).

use crate::history::{Op, OpType, Process};
use crate::toxiproxy::tap::{link_of, Dir, WireRecord};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How far the wire's moment and an event's interval may disagree: both
/// are on the host's monotonic clock, read in different processes.
pub const SLACK_NS: u64 = 1_000_000;

/// A stretch of one worker's time (run-clock ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub slot: usize,
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Span {
    /// Whether `t` on worker `slot` falls inside it.
    pub fn holds(&self, slot: usize, t: u64) -> bool {
        self.slot == slot && self.from_ns <= t && t <= self.to_ns
    }
}

/// What [`cross_check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewalCheck {
    /// Successful renewals on the wire.
    pub wire: u64,
    /// The adapter's `renewed` events that began during a hold (the others
    /// have no wire side to compare with).
    pub events: u64,
    /// Events with no wire renewal inside their interval.
    pub events_unseen: Vec<Span>,
    /// Wire renewals (slot, request's moment) no event covers.
    pub wire_unreported: Vec<(usize, u64)>,
}

impl RenewalCheck {
    /// True when the two sides disagree.
    pub fn disagrees(&self) -> bool {
        !self.events_unseen.is_empty() || !self.wire_unreported.is_empty()
    }
}

/// Whether a tapped reply says the request succeeded.
fn succeeded(reply: Option<&str>) -> bool {
    match reply {
        Some("ok") => true,
        Some(r) => r
            .strip_prefix("int:")
            .and_then(|n| n.parse::<i64>().ok())
            .is_some_and(|n| n > 0),
        None => false,
    }
}

/// A successful renewal on the wire: the worker's slot, and the moments
/// the proxy had its request and its reply whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WireRenewal {
    pub slot: usize,
    pub sent_ns: u64,
    pub done_ns: u64,
}

/// The successful renewals on the wire: (slot, request's moment).
pub fn wire_renewals(wire: &[WireRecord], holds: &[Span], own: &[Span]) -> Vec<(usize, u64)> {
    timed_renewals(wire, holds, own)
        .into_iter()
        .map(|w| (w.slot, w.sent_ns))
        .collect()
}

/// The successful renewals on the wire, with their replies' moments, in
/// (slot, moment) order.
pub fn timed_renewals(wire: &[WireRecord], holds: &[Span], own: &[Span]) -> Vec<WireRenewal> {
    let mut sent: HashMap<(&str, u64, u64), u64> = HashMap::new();
    let mut out = Vec::new();
    for r in wire {
        let Some((slot, node)) = link_of(&r.proxy) else {
            continue;
        };
        if node == "storage" || r.keepalive {
            continue;
        }
        match r.dir {
            Dir::Request if r.token => {
                sent.insert((&r.proxy, r.conn, r.seq), r.t_ns);
            }
            Dir::Request => {}
            Dir::Reply => {
                let Some(t) = sent.remove(&(r.proxy.as_str(), r.conn, r.seq)) else {
                    continue;
                };
                let held = holds.iter().any(|h| h.holds(slot, t));
                let lockjaws = own.iter().any(|o| o.holds(slot, t));
                if succeeded(r.reply.as_deref()) && held && !lockjaws {
                    out.push(WireRenewal {
                        slot,
                        sent_ns: t,
                        done_ns: r.t_ns.max(t),
                    });
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// Pair the adapter's events with the wire's renewals (each wire renewal
/// pairs with at most one event, the first whose interval holds it).
pub fn cross_check(
    wire: &[WireRecord],
    events: &[Span],
    holds: &[Span],
    own: &[Span],
) -> RenewalCheck {
    let seen = wire_renewals(wire, holds, own);
    let inside = held_events(events, holds);
    pair(&seen, &inside).0
}

/// The events that began during a hold of their worker: the wire's side
/// counts only renewals sent then, so only these can be compared (a
/// renewal the library began as the release was invoked is neither).
pub fn held_events(events: &[Span], holds: &[Span]) -> Vec<Span> {
    events
        .iter()
        .filter(|e| holds.iter().any(|h| h.holds(e.slot, e.from_ns)))
        .copied()
        .collect()
}

/// [`cross_check`] on renewals already read: the check, and for each wire
/// renewal the index of the event it paired with.
pub fn pair(seen: &[(usize, u64)], events: &[Span]) -> (RenewalCheck, Vec<Option<usize>>) {
    let mut used: Vec<Option<usize>> = vec![None; seen.len()];
    let mut c = RenewalCheck {
        wire: seen.len() as u64,
        events: events.len() as u64,
        ..RenewalCheck::default()
    };
    for (ei, e) in events.iter().enumerate() {
        let from = e.from_ns.saturating_sub(SLACK_NS);
        let to = e.to_ns + SLACK_NS;
        let hit = seen.iter().enumerate().position(|(i, &(slot, t))| {
            used[i].is_none() && slot == e.slot && from <= t && t <= to
        });
        match hit {
            Some(i) => used[i] = Some(ei),
            None => c.events_unseen.push(*e),
        }
    }
    c.wire_unreported = seen
        .iter()
        .zip(&used)
        .filter(|(_, u)| u.is_none())
        .map(|(s, _)| *s)
        .collect();
    (c, used)
}

/// The function of the adapter's `renewed` events when the wire is the
/// lease source: recorded, and read by the cross-check, but no renewal
/// the checkers credit ([`crate::runner::wire_lease`]).
pub const REPORTED: &str = "renewed";

/// An adapter's event that reports a renewal: an ok `renew` (the events
/// are the lease source) or `renewed` (the wire is) op.
fn reports_renewal(o: &Op) -> bool {
    o.kind == OpType::Ok && (o.f == "renew" || o.f == REPORTED)
}

/// A grant's hold: its worker and span, its process, owner and key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub span: Span,
    pub process: i64,
    pub owner: Option<String>,
    pub key: Option<String>,
}

/// What a history says about renewals: the adapter's events (each with the
/// lease it reported), the holds, and lockjaw's own lease requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spans {
    pub events: Vec<(Span, Option<u64>)>,
    pub holds: Vec<Hold>,
    pub own: Vec<Span>,
}

impl Spans {
    pub fn event_spans(&self) -> Vec<Span> {
        self.events.iter().map(|e| e.0).collect()
    }

    pub fn hold_spans(&self) -> Vec<Span> {
        self.holds.iter().map(|h| h.span).collect()
    }
}

/// The three kinds of span from a history: the adapter's renewal events
/// (ok `renew` or `renewed` ops under `"<p>-adapter"`), the holds (a
/// grant's ok to its release's invocation, the library's `lost` event, the
/// first op of another process of the same worker slot (the holder was
/// killed and its successor runs), or the history's end), and
/// lockjaw's own lease requests (`"<p>-lease"`). `slot_of` maps a worker's
/// process number to its slot (the runner knows each incarnation's
/// numbers).
pub fn spans(ops: &[Op], slot_of: impl Fn(i64) -> Option<usize>) -> [Vec<Span>; 3] {
    let s = collect(ops, slot_of);
    [s.event_spans(), s.hold_spans(), s.own]
}

/// [`spans`], with each event's lease and each hold's grant.
pub fn collect(ops: &[Op], slot_of: impl Fn(i64) -> Option<usize>) -> Spans {
    let named_slot = |p: &Process, suffix: &str| match p {
        Process::Named(n) => n
            .strip_suffix(suffix)
            .and_then(|x| x.parse::<i64>().ok())
            .and_then(&slot_of),
        _ => None,
    };
    let end = ops.iter().map(|o| o.time).max().unwrap_or(0);
    let mut out = Spans::default();
    // Each named process has one request in flight at a time.
    let mut open: HashMap<&Process, u64> = HashMap::new();
    let mut granted: HashMap<i64, &Op> = HashMap::new();
    let hold = |p: i64, g: &Op, to_ns: u64| {
        slot_of(p).map(|slot| Hold {
            span: Span {
                slot,
                from_ns: g.time,
                to_ns,
            },
            process: p,
            owner: g.owner.clone(),
            key: g.key.clone(),
        })
    };
    for o in ops {
        for own in [false, true] {
            let suffix = if own { "-lease" } else { "-adapter" };
            let Some(slot) = named_slot(&o.process, suffix) else {
                continue;
            };
            if o.kind == OpType::Invoke {
                open.insert(&o.process, o.time);
                continue;
            }
            let Some(from) = open.remove(&o.process) else {
                continue;
            };
            let span = Span {
                slot,
                from_ns: from,
                to_ns: o.time,
            };
            // Every request of lockjaw's counts; of the events, the renewals.
            if own {
                out.own.push(span);
            } else if reports_renewal(o) {
                out.events.push((span, o.lease_ms));
            }
        }
        // The library gave the lock up (`lost`): the hold ends.
        if o.f == crate::client::adapter::LOST && o.kind == OpType::Invoke {
            let gone: Vec<i64> = granted
                .iter()
                .filter(|(_, g)| g.owner.is_some() && g.owner == o.owner)
                .map(|(p, _)| *p)
                .collect();
            for p in gone {
                if let Some(h) = granted.remove(&p).and_then(|g| hold(p, g, o.time)) {
                    out.holds.push(h);
                }
            }
        }
        if let Process::Num(p) = o.process {
            // Another process of the same worker slot: the one that held
            // was killed (its successor runs now), so its hold ended.
            let slot = slot_of(p);
            let dead: Vec<i64> = granted
                .keys()
                .filter(|&&q| q != p && slot.is_some() && slot_of(q) == slot)
                .copied()
                .collect();
            for q in dead {
                if let Some(h) = granted.remove(&q).and_then(|g| hold(q, g, o.time)) {
                    out.holds.push(h);
                }
            }
            match (o.f.as_str(), o.kind) {
                ("acquire", OpType::Ok) => {
                    granted.insert(p, o);
                }
                ("release", OpType::Invoke) => {
                    if let Some(h) = granted.remove(&p).and_then(|g| hold(p, g, o.time)) {
                        out.holds.push(h);
                    }
                }
                _ => {}
            }
        }
    }
    let mut left: Vec<_> = granted.into_iter().collect();
    left.sort_by_key(|(p, g)| (g.time, *p));
    out.holds
        .extend(left.into_iter().filter_map(|(p, g)| hold(p, g, end)));
    out
}

#[cfg(test)]
#[path = "renewal_check_tests.rs"]
pub(crate) mod tests;
