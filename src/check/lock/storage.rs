//! Check 4, stale writes accepted: the storage accepted a request with
//! fence f after, in its own order, it had seen a request with a fence
//! above f. Requests without a fence are ignored.
//!
//! Storage order is `seq` where both requests have one, real-time
//! precedence otherwise (the higher request completed before the accepted
//! one was invoked). Requests complete out of `seq` order, so per key they
//! wait in a buffer keyed by `seq` and are taken out in order once no
//! unknown request can have a lower `seq`: every request still running (or
//! yet to begin) was invoked after the oldest running request M began, and
//! so got a `seq` above that of every request that completed before M. A
//! request running longer than the reorder window stops holding the buffer
//! back; if it then completes with a `seq` already passed, its own check is
//! skipped (counted as `unordered`), which can only miss an anomaly.

use super::event::{Done, Invoke, Outcome};
use super::witness::RequestRef;
use foldhash::HashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// A stale request the storage accepted.
#[derive(Debug)]
pub struct Finding {
    pub key: u32,
    pub request: Arc<RequestRef>,
    pub seen: Arc<RequestRef>,
    /// `seq` or `real-time`.
    pub order: &'static str,
}

struct Running {
    inv: u64,
    snapshot: Option<Arc<RequestRef>>,
}

struct Entry {
    r: Arc<RequestRef>,
    accepted: bool,
    flagged: bool,
}

#[derive(Default)]
struct KeyStore {
    running: HashMap<u64, Running>,
    /// (invocation, call) of running requests that still hold the buffer.
    holding: BTreeSet<(u64, u64)>,
    /// Highest fence among accepted requests completed so far.
    rt_max: Option<Arc<RequestRef>>,
    buffer: BTreeMap<u64, Entry>,
    /// (completion, seq) of completed requests, in completion order.
    arrivals: VecDeque<(u64, u64)>,
    safe_seq: Option<u64>,
    last_out: Option<u64>,
    /// Highest fence the storage has seen, in `seq` order so far.
    seen_max: Option<Arc<RequestRef>>,
}

/// Check 4 over every storage key.
#[derive(Default)]
pub struct StaleWrites {
    keys: HashMap<u32, KeyStore>,
    pub fenced: u64,
    pub requests: u64,
    pub unordered: u64,
    pub peak_buffer: usize,
}

fn higher(a: &Option<Arc<RequestRef>>, f: u64) -> bool {
    a.as_ref().and_then(|r| r.fence).is_some_and(|g| g > f)
}

fn raise(slot: &mut Option<Arc<RequestRef>>, r: &Arc<RequestRef>) {
    let f = r.fence.unwrap_or(0);
    if slot.as_ref().and_then(|x| x.fence).map_or(true, |g| f > g) {
        *slot = Some(r.clone());
    }
}

impl StaleWrites {
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Requests without a fence neither count nor hold the buffer.
    pub fn on_invoke(&mut self, i: &Invoke) {
        if i.fence.is_none() {
            return;
        }
        let ks = self.keys.entry(i.key).or_default();
        ks.running.insert(
            i.call,
            Running {
                inv: i.time,
                snapshot: ks.rt_max.clone(),
            },
        );
        ks.holding.insert((i.time, i.call));
    }

    pub fn on_done(&mut self, d: &Done, now: u64, window: u64, out: &mut Vec<Finding>) {
        self.requests += 1;
        let ks = self.keys.entry(d.key).or_default();
        let run = ks.running.remove(&d.call);
        if let Some(r) = &run {
            ks.holding.remove(&(r.inv, d.call));
        }
        let Some(f) = d.fence else {
            ks.drain(d.key, now, window, out);
            return;
        };
        self.fenced += 1;
        let r = Arc::new(RequestRef::of(d, &d.owner));
        let accepted = d.outcome == Outcome::Ok;
        let mut flagged = false;
        if accepted {
            let snap = run.and_then(|r| r.snapshot);
            if let Some(snap) = snap.filter(|s| s.fence.is_some_and(|g| g > f)) {
                out.push(Finding {
                    key: d.key,
                    request: r.clone(),
                    seen: snap,
                    order: "real-time",
                });
                flagged = true;
            }
            raise(&mut ks.rt_max, &r);
        }
        if let Some(s) = d.seq {
            ks.arrivals.push_back((d.time, s));
            if ks.last_out.is_some_and(|l| s <= l) {
                self.unordered += 1;
                raise(&mut ks.seen_max, &r);
            } else {
                ks.buffer.insert(
                    s,
                    Entry {
                        r,
                        accepted,
                        flagged,
                    },
                );
                self.peak_buffer = self.peak_buffer.max(ks.buffer.len());
            }
        }
        ks.drain(d.key, now, window, out);
    }

    /// Let time pass: running requests older than the window stop holding.
    pub fn sweep(&mut self, now: u64, window: u64, out: &mut Vec<Finding>) {
        for (k, ks) in self.keys.iter_mut() {
            ks.drain(*k, now, window, out);
        }
    }

    /// End of history: take everything out in `seq` order.
    pub fn finish(&mut self, out: &mut Vec<Finding>) {
        for (k, ks) in self.keys.iter_mut() {
            ks.holding.clear();
            ks.drain(*k, u64::MAX, 0, out);
        }
    }
}

impl KeyStore {
    fn drain(&mut self, key: u32, now: u64, window: u64, out: &mut Vec<Finding>) {
        while let Some(&(inv, call)) = self.holding.first() {
            if inv.saturating_add(window) < now {
                self.holding.remove(&(inv, call));
            } else {
                break;
            }
        }
        let m = self.holding.first().map_or(u64::MAX, |&(inv, _)| inv);
        while let Some(&(done, s)) = self.arrivals.front() {
            if done >= m {
                break;
            }
            self.arrivals.pop_front();
            self.safe_seq = Some(self.safe_seq.map_or(s, |x| x.max(s)));
        }
        let Some(safe) = self.safe_seq else { return };
        while let Some(e) = self.buffer.first_entry() {
            if *e.key() > safe {
                break;
            }
            let (s, e) = e.remove_entry();
            let f = e.r.fence.unwrap_or(0);
            if e.accepted && !e.flagged && higher(&self.seen_max, f) {
                out.push(Finding {
                    key,
                    request: e.r.clone(),
                    seen: self.seen_max.clone().expect("higher fence seen"),
                    order: "seq",
                });
            }
            raise(&mut self.seen_max, &e.r);
            self.last_out = Some(s);
        }
    }
}
