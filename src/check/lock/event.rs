//! Events the checks consume, and the reorder buffer that hands them out in
//! time order.
//!
//! A history file is not sorted by time: a paused worker's lines reach the
//! recorder late. Each line becomes one event (an invocation, or a
//! completion merged with its invocation); the [`Reorder`] buffer holds
//! events until the newest time seen is more than `window` past them, so an
//! op that lags by at most `window` is still handed out in order. Ties are
//! broken invocations first (a completion and an invocation at the same
//! nanosecond are concurrent, never ordered), then by arrival.
//!
//! Most lines arrive in order: those go to a queue (O(1)); only lines
//! older than the newest queued one go to a heap, which therefore stays as
//! small as the out-of-order part of the window.

use foldhash::HashMap;
use serde_json::Value;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// A shared name (an owner, a process).
pub type Name = std::sync::Arc<str>;

/// The lock and storage functions the checks understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fun {
    Acquire,
    Renew,
    Release,
    Read,
    Write,
}

impl Fun {
    /// `campaign` and `resign` (leader election) play acquire and release;
    /// `lost-leadership` (a leader learning its term ended) ends the hold
    /// as a release does: from then on it no longer believes it leads;
    /// `lost` (a client adapter's library saying the lock is gone) too.
    pub fn parse(f: &str) -> Option<Fun> {
        Some(match f {
            "acquire" | "campaign" => Fun::Acquire,
            "renew" => Fun::Renew,
            "release" | "resign" | "lost-leadership" | "lost" => Fun::Release,
            "read" => Fun::Read,
            // The jobs workload's apply is a protected write too.
            "write" | "apply" => Fun::Write,
            _ => return None,
        })
    }

    pub fn is_storage(self) -> bool {
        matches!(self, Fun::Read | Fun::Write)
    }
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Fail,
    Info,
}

/// An invocation.
#[derive(Clone, Debug)]
pub struct Invoke {
    /// Pairs this invocation with its completion.
    pub call: u64,
    pub time: u64,
    pub fun: Fun,
    pub key: u32,
    /// `owner` as the invocation gives it, else the process default.
    pub owner: Name,
    /// Whether the invocation named its owner explicitly.
    pub explicit_owner: bool,
    pub fence: Option<u64>,
}

/// A completion merged with its invocation.
#[derive(Clone, Debug)]
pub struct Done {
    pub call: u64,
    pub inv_time: u64,
    pub time: u64,
    pub index: u64,
    pub outcome: Outcome,
    pub fun: Fun,
    pub key: u32,
    /// The completion's owner, else the invocation's, else the process's.
    pub owner: Name,
    pub process: Name,
    pub fence: Option<u64>,
    pub lease_ms: Option<u64>,
    pub seq: Option<u64>,
    /// A read's result, or a write's written value.
    pub value: Value,
    /// A `fail` whose error is `held` (an acquire that found the lock held).
    pub held: bool,
}

/// A nemesis fault aimed at a holder: the `start` invocation of a fault
/// whose value names the holder's `owner` (for the failover figures).
#[derive(Clone, Debug)]
pub struct FaultMark {
    pub time: u64,
    pub fault: Name,
    pub owner: Name,
    pub id: Option<u64>,
    /// `strike-command` `crash-after`: the crashed acquirer's lease (its
    /// requested ttl); `owner` is then its process.
    pub crash_lease_ms: Option<u64>,
    /// The lock key the crashed acquire took (the start record's `key`);
    /// `None` in histories from before it was recorded: every key then.
    pub crash_key: Option<Name>,
}

#[derive(Clone, Debug)]
pub enum Event {
    Inv(Invoke),
    Done(Done),
    Fault(FaultMark),
}

impl Event {
    pub fn time(&self) -> u64 {
        match self {
            Event::Inv(i) => i.time,
            Event::Done(d) => d.time,
            Event::Fault(f) => f.time,
        }
    }

    fn class(&self) -> u8 {
        match self {
            Event::Inv(_) | Event::Fault(_) => 0,
            Event::Done(_) => 1,
        }
    }
}

/// Names of keys as small integers (lock keys and storage keys alike).
#[derive(Default, Debug)]
pub struct Keys {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Keys {
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    /// The id of `name`, when a op has named it.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Names given ids from `from` on.
    pub fn since(&self, from: usize) -> Vec<String> {
        self.names[from.min(self.names.len())..].to_vec()
    }

    /// Learn names in id order (a mirror of another `Keys`).
    pub fn extend(&mut self, names: Vec<String>) {
        for n in names {
            self.id(&n);
        }
    }
}

struct Entry {
    key: (u64, u8, u64),
    ev: Event,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key)
    }
}

/// A bounded-lateness reorder buffer keyed by time.
pub struct Reorder {
    /// Events that arrived in order.
    queue: VecDeque<Entry>,
    /// Events that arrived after a later one.
    heap: BinaryHeap<Reverse<Entry>>,
    window: u64,
    max_seen: u64,
    arrival: u64,
    last_out: Option<(u64, u8, u64)>,
    /// Events that arrived after later ones had already been handed out.
    pub late: u64,
    /// The largest lag of an event behind the newest time seen before it.
    pub max_lateness: u64,
    /// The most events held at once.
    pub peak: usize,
}

impl Reorder {
    pub fn new(window_ns: u64) -> Reorder {
        Reorder {
            queue: VecDeque::new(),
            heap: BinaryHeap::new(),
            window: window_ns,
            max_seen: 0,
            arrival: 0,
            last_out: None,
            late: 0,
            max_lateness: 0,
            peak: 0,
        }
    }

    /// Add an event. Returns false (and drops it) if it is too late to be
    /// put in order.
    pub fn push(&mut self, ev: Event) -> bool {
        let t = ev.time();
        self.max_lateness = self.max_lateness.max(self.max_seen.saturating_sub(t));
        self.max_seen = self.max_seen.max(t);
        self.arrival += 1;
        let key = (t, ev.class(), self.arrival);
        if self.last_out.is_some_and(|l| key < l) {
            self.late += 1;
            return false;
        }
        if self.queue.back().map_or(true, |b| b.key <= key) {
            self.queue.push_back(Entry { key, ev });
        } else {
            self.heap.push(Reverse(Entry { key, ev }));
        }
        self.peak = self.peak.max(self.queue.len() + self.heap.len());
        true
    }

    /// The key of the next event out, and whether it is in the heap.
    fn next_key(&self) -> Option<((u64, u8, u64), bool)> {
        match (self.queue.front(), self.heap.peek()) {
            (None, None) => None,
            (Some(q), None) => Some((q.key, false)),
            (None, Some(h)) => Some((h.0.key, true)),
            (Some(q), Some(h)) if h.0.key < q.key => Some((h.0.key, true)),
            (Some(q), Some(_)) => Some((q.key, false)),
        }
    }

    /// The next event whose order can no longer change.
    pub fn pop_ready(&mut self) -> Option<Event> {
        let (key, _) = self.next_key()?;
        if key.0.saturating_add(self.window) < self.max_seen {
            self.pop_any()
        } else {
            None
        }
    }

    /// The next event regardless of the window (at the end of input).
    pub fn pop_any(&mut self) -> Option<Event> {
        let (_, from_heap) = self.next_key()?;
        let e = if from_heap {
            self.heap.pop()?.0
        } else {
            self.queue.pop_front()?
        };
        self.last_out = Some(e.key);
        Some(e.ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(time: u64) -> Event {
        Event::Inv(Invoke {
            call: 0,
            time,
            fun: Fun::Acquire,
            key: 0,
            owner: "".into(),
            explicit_owner: false,
            fence: None,
        })
    }

    #[test]
    fn hands_out_in_time_order_within_the_window() {
        let mut r = Reorder::new(10);
        let mut out = vec![];
        for t in [5, 3, 20, 12, 40, 31, 60] {
            assert!(r.push(inv(t)));
            while let Some(e) = r.pop_ready() {
                out.push(e.time());
            }
        }
        while let Some(e) = r.pop_any() {
            out.push(e.time());
        }
        assert_eq!(out, vec![3, 5, 12, 20, 31, 40, 60]);
        assert_eq!(r.max_lateness, 9);
        assert_eq!(r.late, 0);
    }

    #[test]
    fn an_event_later_than_the_window_is_refused() {
        let mut r = Reorder::new(10);
        assert!(r.push(inv(5)));
        assert!(r.push(inv(100)));
        assert_eq!(r.pop_ready().map(|e| e.time()), Some(5));
        assert!(!r.push(inv(4)));
        assert_eq!(r.late, 1);
        assert_eq!(r.max_lateness, 96);
    }
}
