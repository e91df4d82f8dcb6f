//! Lock holds (and leader terms) on the timeline: from an acquire's (a
//! won campaign's) completion to its holder's release (resign, lost
//! leadership) invocation, with the nominal lease end (the latest
//! refresh's invocation + `lease_ms`; a drawing aid, not the checker's
//! certain bound).

use super::timeline::{Outcome, Timeline};
use crate::check::lock::LockFun;
use std::collections::HashMap;

/// A lock hold: from the acquire's completion to the release's invocation.
#[derive(Clone, Debug)]
pub struct Hold {
    pub lane: u32,
    pub process: u32,
    pub key: Option<u32>,
    pub owner: Option<String>,
    pub fence: Option<u64>,
    pub lease_ms: Option<u64>,
    pub acquire_invoked: u64,
    pub start: u64,
    /// When the holder began releasing; `None` = never (killed, or the run
    /// ended, or a later acquire replaced it).
    pub end: Option<u64>,
    /// Nominal lease end: the latest refresh's invocation + `lease_ms`.
    pub lease_end: Option<u64>,
    pub acquire_op: u64,
    pub release_op: Option<u64>,
}

/// Lock holds, matched per (lane, key): a worker holds at most one grant
/// per lock key, even across its renumbered processes.
pub fn holds(t: &Timeline) -> Vec<Hold> {
    let mut out: Vec<Hold> = vec![];
    let mut open: HashMap<(u32, Option<u32>), usize> = HashMap::new();
    for iv in &t.intervals {
        let slot = (iv.lane, iv.key);
        // Election ops play their lock roles (campaign = acquire, ...).
        match LockFun::parse(t.f(iv)) {
            Some(LockFun::Acquire) if iv.outcome == Outcome::Ok => {
                open.remove(&slot);
                let lease_end = iv.lease_ms.map(|l| iv.start + l * 1_000_000);
                open.insert(slot, out.len());
                out.push(Hold {
                    lane: iv.lane,
                    process: iv.process,
                    key: iv.key,
                    owner: iv.owner.clone(),
                    fence: iv.fence,
                    lease_ms: iv.lease_ms,
                    acquire_invoked: iv.start,
                    start: iv.end.unwrap_or(iv.start),
                    end: None,
                    lease_end,
                    acquire_op: iv.complete_index.unwrap_or(iv.invoke_index),
                    release_op: None,
                });
            }
            Some(LockFun::Renew) if iv.outcome == Outcome::Ok => {
                let h = open.get(&slot).or_else(|| {
                    // Renewals may not name the key: any open hold in the lane.
                    open.iter()
                        .find(|((l, _), _)| *l == iv.lane)
                        .map(|(_, h)| h)
                });
                if let Some(&h) = h {
                    let h = &mut out[h];
                    if let Some(l) = iv.lease_ms.or(h.lease_ms) {
                        let e = iv.start + l * 1_000_000;
                        h.lease_end = Some(h.lease_end.map_or(e, |x| x.max(e)));
                    }
                }
            }
            Some(LockFun::Release) => {
                // By owner when the release names one (a grant outlives a
                // renumbering), else the lane's hold on this key.
                let by_owner = iv.owner.as_ref().and_then(|o| {
                    open.iter()
                        .find(|(_, &h)| out[h].owner.as_ref() == Some(o))
                        .map(|(k, _)| *k)
                });
                if let Some(h) = open.remove(&by_owner.unwrap_or(slot)) {
                    out[h].end = Some(iv.start);
                    out[h].release_op = Some(iv.invoke_index);
                }
            }
            _ => {}
        }
    }
    out
}
