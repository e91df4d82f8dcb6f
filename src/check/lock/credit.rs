//! Which grant a renew refreshed, when acquires set the TTL (Redis
//! `SET NX PX`, Redlock).
//!
//! There a successful renew (check-and-`PEXPIRE`) proves the key held the
//! owner's token when the server ran it, but not since which `SET`: if the
//! key lapsed and the same owner set it again, a grant made in the gap was
//! legitimate. So a renew of owner O on key K credits O's latest grant A
//! that completed before the renew began, and only when no other acquire of
//! O on K (ok, `info` or still running) could have taken effect between A's
//! invocation and the renew's completion. An acquire whose owner is not yet
//! known (its invocation did not name it) holds the renew back until it
//! completes and names its owner.

use super::event::{Done, Invoke, Name, Outcome};

/// A successful renew waiting to be credited.
#[derive(Clone, Debug)]
pub struct Renew {
    pub owner: Name,
    pub key: u32,
    pub inv: u64,
    pub done: u64,
    pub lease_ms: Option<u64>,
    pub index: u64,
    waiting: Vec<u64>,
}

impl Renew {
    pub fn from_done(d: &Done, key: u32) -> Renew {
        Renew {
            owner: d.owner.clone(),
            key,
            inv: d.inv_time,
            done: d.time,
            lease_ms: d.lease_ms,
            index: d.index,
            waiting: Vec::new(),
        }
    }
}

#[derive(Debug)]
struct AcqRec {
    call: u64,
    /// Known once the invocation names it or the completion arrives.
    owner: Option<Name>,
    inv: u64,
    /// Completion of an ok acquire; `None` while running or after `info`
    /// (it may take effect at any later time).
    end: Option<u64>,
    done: bool,
}

/// Per lock key: its acquires (failed ones forgotten) and held-back renews.
#[derive(Debug, Default)]
pub struct TtlLog {
    acqs: Vec<AcqRec>,
    blocked: Vec<Renew>,
}

impl TtlLog {
    pub fn invoked(&mut self, i: &Invoke) {
        self.acqs.push(AcqRec {
            call: i.call,
            owner: i.explicit_owner.then(|| i.owner.clone()),
            inv: i.time,
            end: None,
            done: false,
        });
    }

    /// An acquire on this key completed; returns the renews it unblocked.
    pub fn completed(&mut self, d: &Done) -> Vec<Renew> {
        if let Some(pos) = self.acqs.iter().position(|a| a.call == d.call) {
            if d.outcome == Outcome::Fail {
                self.acqs.swap_remove(pos);
            } else {
                let a = &mut self.acqs[pos];
                a.owner = Some(d.owner.clone());
                a.done = true;
                a.end = (d.outcome == Outcome::Ok).then_some(d.time);
            }
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.blocked.len() {
            self.blocked[i].waiting.retain(|&c| c != d.call);
            if self.blocked[i].waiting.is_empty() {
                out.push(self.blocked.swap_remove(i));
            } else {
                i += 1;
            }
        }
        out
    }

    /// Pass `r` through, or hold it back while acquires of unknown owner
    /// that began before it completed are still running.
    pub fn block_or_pass(&mut self, mut r: Renew) -> Option<Renew> {
        r.waiting = self
            .acqs
            .iter()
            .filter(|a| !a.done && a.owner.is_none() && a.inv < r.done)
            .map(|a| a.call)
            .collect();
        if r.waiting.is_empty() {
            Some(r)
        } else {
            self.blocked.push(r);
            None
        }
    }

    /// Whether another acquire of `owner` (not `call`) could have set the
    /// key between `acq_inv` and `renew_done`.
    pub fn ambiguous(&self, owner: &str, call: u64, acq_inv: u64, renew_done: u64) -> bool {
        self.acqs.iter().any(|a| {
            a.call != call
                && a.owner.as_deref() == Some(owner)
                && a.inv < renew_done
                && a.end.map_or(true, |e| e > acq_inv)
        })
    }

    /// Forget ok acquires that ended before every live grant on the key
    /// began (`min_live`), and renews held back longer than `window`.
    pub fn gc(&mut self, min_live: Option<u64>, now: u64, window: u64) {
        self.acqs.retain(|a| match (a.done, a.end) {
            (true, Some(e)) => min_live.is_some_and(|m| e > m),
            _ => true,
        });
        self.blocked
            .retain(|r| r.done.saturating_add(window) >= now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::lock::event::Fun;

    fn inv(call: u64, time: u64, owner: Option<&str>) -> Invoke {
        Invoke {
            call,
            time,
            fun: Fun::Acquire,
            key: 0,
            owner: owner.unwrap_or("9").into(),
            explicit_owner: owner.is_some(),
            fence: None,
        }
    }

    fn done(call: u64, t: u64, owner: &str, outcome: Outcome) -> Done {
        Done {
            call,
            inv_time: 0,
            time: t,
            index: call,
            outcome,
            fun: Fun::Acquire,
            key: 0,
            owner: owner.into(),
            process: "1".into(),
            fence: None,
            lease_ms: None,
            seq: None,
            value: serde_json::Value::Null,
            held: false,
        }
    }

    #[test]
    fn a_later_acquire_of_the_same_owner_makes_renews_ambiguous() {
        let mut log = TtlLog::default();
        log.invoked(&inv(1, 10, Some("a")));
        log.completed(&done(1, 20, "a", Outcome::Ok));
        assert!(!log.ambiguous("a", 1, 10, 100));
        log.invoked(&inv(2, 50, Some("a")));
        assert!(log.ambiguous("a", 1, 10, 100));
        log.completed(&done(2, 60, "a", Outcome::Fail));
        assert!(!log.ambiguous("a", 1, 10, 100));
    }

    #[test]
    fn renews_wait_for_acquires_of_unknown_owner() {
        let mut log = TtlLog::default();
        log.invoked(&inv(5, 10, None));
        let r = Renew {
            owner: "a".into(),
            key: 0,
            inv: 15,
            done: 30,
            lease_ms: None,
            index: 7,
            waiting: vec![],
        };
        assert!(log.block_or_pass(r).is_none());
        let out = log.completed(&done(5, 40, "b", Outcome::Ok));
        assert_eq!(out.len(), 1);
        assert!(!log.ambiguous("a", 99, 0, 30));
    }
}
