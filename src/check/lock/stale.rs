//! Check 6 (information) and forgetting: stale holders and undecidable
//! overlaps, and the periodic sweep that keeps memory proportional to the
//! open grants and to the leases something may still prove, rather than
//! to the history.
//!
//! The sweep (at time `now`, every event before `now` handed out):
//! - an open grant whose holder invoked a release before `now` cannot
//!   conflict with any later acquire, so it is closed;
//! - a lease past its horizon (its upper bound, with no renew in flight
//!   that began before that bound, or the bound plus the reorder window)
//!   stays as it is while a later op of its owner can still prove more: a
//!   renew that succeeds at any later time proves its waiting overlaps
//!   (rules 1 and 2 of docs/histories.md, issue 29). It is *closed* (its
//!   waiting overlaps become information; later overlaps with its grants
//!   are judged at once) only when nothing later can prove more: no renew
//!   in flight, and its owner was killed, or a later grant of the owner on
//!   the same key takes every later renew (acquires that set the TTL);
//!   or when the leases kept so exceed the bound (`MAX_WAITING`), oldest
//!   first, which makes the figures they feed unknown;
//! - a lease no grant, overlap, renew or unsettled write refers to any
//!   more is forgotten.
//!
//! A waiting overlap whose later grant was invoked after the earlier
//! lease's upper bound is a stale holder (the earlier lease had certainly
//! ended, yet its holder had not begun to release); otherwise it is
//! "possibly stale": the history cannot tell.

use super::event::Name;
use super::lease::{Lease, Pending};
use super::report::{StaleOverlap, MAX_STALE_LISTED};
use super::service::Service;
use super::witness::{ms, secs};
use foldhash::HashMap;

/// How many overlaps and writes may wait, in all, on leases past their
/// horizon whose owner may still prove more; past it the oldest of those
/// leases are closed (and the figures they feed become unknown) until half
/// remain.
pub const MAX_WAITING: usize = 1_000_000;

impl Service {
    /// Sweep at `now` (see the module comment).
    pub fn sweep(&mut self, now: u64, window: u64) {
        self.peak_leases = self.peak_leases.max(self.leases.len());
        let mut past = Vec::new();
        for (&id, l) in self.leases.iter_mut() {
            l.inflight
                .retain(|&(_, inv)| inv.saturating_add(window) >= now);
            if !l.closed && l.beyond_horizon(now, window) && (!l.pending.is_empty() || l.grants > 0)
            {
                past.push(id);
            }
        }
        // Lease ids follow the order events were handed out: sorting makes
        // the report independent of hash order.
        past.sort_unstable();
        let (mut close, waiting): (Vec<_>, Vec<_>) =
            past.into_iter().partition(|&id| self.nothing_later(id));
        self.bound_waiting(&mut close, waiting);
        close.sort_unstable();
        for id in &close {
            let l = self.leases.get_mut(id).expect("lease exists");
            l.closed = true;
            let pending: Vec<Pending> = l.pending.drain(..).collect();
            let (best, upper) = (l.best.map(|b| b.end), l.upper);
            for q in pending {
                self.finalize(q, best, upper);
            }
        }
        self.forget(now, window);
    }

    /// Whether no later op of lease `id`'s owner can prove more about it:
    /// no renew of it is in flight, and its owner was killed or (where
    /// acquires set the TTL) a later grant of the owner on the same key
    /// takes every later renew.
    fn nothing_later(&self, id: u64) -> bool {
        let l = &self.leases[&id];
        if !l.inflight.is_empty() {
            return false;
        }
        if l.dead {
            return true;
        }
        let (Some(k), Some((_, _, done))) = (l.key, l.acquire) else {
            return false;
        };
        self.by_owner
            .get(&l.owner)
            .into_iter()
            .flatten()
            .filter_map(|x| self.leases.get(x))
            .any(|o| o.key == Some(k) && o.acquire.is_some_and(|a| a.2 > done))
    }

    /// Keep what waits on the leases in `waiting` (oldest first) within
    /// [`MAX_WAITING`]: close the oldest while more wait, counting each
    /// in `forced`.
    fn bound_waiting(&mut self, close: &mut Vec<u64>, waiting: Vec<u64>) {
        let units = |l: &Lease| 1 + l.pending.len() + l.writes.len();
        let mut total: usize = waiting.iter().map(|id| units(&self.leases[id])).sum();
        if total <= self.max_waiting {
            return;
        }
        for id in waiting {
            if total <= self.max_waiting / 2 {
                break;
            }
            total -= units(&self.leases[&id]);
            close.push(id);
            self.forced += 1;
        }
    }

    /// A `kill-holder` fault named `owner`: its leases can no longer be
    /// refreshed by anything it invokes later.
    pub(crate) fn holder_killed(&mut self, owner: &Name) {
        for id in self.by_owner.get(owner).into_iter().flatten() {
            if let Some(l) = self.leases.get_mut(id) {
                l.dead = true;
            }
        }
    }

    /// Close the grants whose holder began releasing before `now`, and
    /// forget the leases nothing refers to any more.
    fn forget(&mut self, now: u64, window: u64) {
        let mut min_live: HashMap<u32, u64> = HashMap::default();
        for l in self.leases.values() {
            if let (Some(k), Some((_, inv, _))) = (l.key, l.acquire) {
                let e = min_live.entry(k).or_insert(inv);
                *e = (*e).min(inv);
            }
        }
        for (k, ks) in self.keys.iter_mut() {
            let leases = &mut self.leases;
            ks.open.retain(|g| {
                let keep = g.hold_end.map_or(true, |h| h > now);
                if !keep {
                    if let Some(l) = leases.get_mut(&g.lease) {
                        l.grants = l.grants.saturating_sub(1);
                    }
                }
                keep
            });
            ks.ttl.gc(min_live.get(k).copied(), now, window);
        }
        let sets_ttl = self.p.acquire_sets_ttl;
        let mut gone = Vec::new();
        let unprotected = &mut self.unprotected;
        let zombie = &mut self.zombie;
        self.leases.retain(|&id, l| {
            // Writes before the proven end are judged now (bounds only
            // grow); one past it waits: a later renew of the owner can
            // still prove the lease held then, and it keeps the lease.
            let unsettled = super::unprotected::judge_settled(unprotected, l);
            if unsettled || !forgettable(l, now, sets_ttl) {
                return true;
            }
            super::unprotected::judge(unprotected, l);
            zombie.judge(l);
            gone.push((l.owner.clone(), id));
            false
        });
        for (owner, id) in gone {
            if let Some(v) = self.by_owner.get_mut(&owner) {
                v.retain(|&x| x != id);
                if v.is_empty() {
                    self.by_owner.remove(&owner);
                }
            }
        }
    }

    /// End of history: every waiting overlap becomes information.
    pub fn finish(&mut self) {
        let mut ids: Vec<u64> = self.leases.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let l = self.leases.get_mut(&id).expect("lease exists");
            let pending: Vec<Pending> = l.pending.drain(..).collect();
            let (best, upper) = (l.best.map(|b| b.end), l.upper);
            super::unprotected::judge(&mut self.unprotected, l);
            self.zombie.judge(l);
            for q in pending {
                self.finalize(q, best, upper);
            }
        }
    }

    pub(crate) fn finalize(&mut self, q: Pending, best: Option<u64>, upper: Option<u64>) {
        let stale = upper.is_some_and(|u| q.second.invoked_ns > u);
        if stale {
            self.stale.stale += 1;
        } else {
            self.stale.possibly_stale += 1;
        }
        if self.stale.list.len() >= MAX_STALE_LISTED {
            return;
        }
        let key = self
            .keys
            .get(&q.key)
            .map(|k| k.name.clone())
            .unwrap_or_default();
        let a = &q.first;
        let b = &q.second;
        let text = if stale {
            format!(
                "{}; its lease had certainly ended by {}; {} while {} had not begun releasing \
                 lock '{key}': a stale holder",
                a.acquired(),
                upper.map(secs).unwrap_or_default(),
                b.acquired(),
                a.owner
            )
        } else {
            format!(
                "{}; its lease was valid until at least {} and had ended by {}; {} (invoked at \
                 {}) while {} had not begun releasing lock '{key}': whether both leases were \
                 valid at once cannot be decided from the history",
                a.acquired(),
                best.map(secs).unwrap_or_else(|| "its acquire".into()),
                upper.map(secs).unwrap_or_else(|| "an unknown time".into()),
                b.acquired(),
                secs(b.invoked_ns),
                a.owner
            )
        };
        let mut o = StaleOverlap {
            kind: if stale { "stale" } else { "possibly-stale" }.to_string(),
            key,
            holder: (*q.first).clone(),
            next: (*q.second).clone(),
            lease_valid_until_ns: best,
            lease_over_by_ns: upper,
            holder_release_ns: None,
            held_past_lease_ms: None,
            overlap_ms: None,
            text,
        };
        match q.first_release {
            Some(rel) => fill_release(&mut o, rel),
            None => self
                .stale_wait
                .entry(Name::from(a.owner.as_str()))
                .or_default()
                .push(self.stale.list.len()),
        }
        self.stale.list.push(o);
    }

    /// The holder `owner` began releasing at `t`: complete its listed
    /// stale overlaps.
    pub(crate) fn stale_released(&mut self, owner: &str, t: u64) {
        if let Some(list) = self.stale_wait.remove(owner) {
            for n in list {
                fill_release(&mut self.stale.list[n], t);
            }
        }
    }
}

fn forgettable(l: &Lease, now: u64, sets_ttl: bool) -> bool {
    l.grants == 0
        && l.pending.is_empty()
        && l.inflight.is_empty()
        && (sets_ttl || l.best.map_or(true, |b| b.end <= now))
}

fn fill_release(o: &mut StaleOverlap, rel: u64) {
    o.holder_release_ns = Some(rel);
    o.held_past_lease_ms = o.lease_over_by_ns.filter(|&u| rel > u).map(|u| ms(rel - u));
    o.overlap_ms = Some(ms(rel.saturating_sub(o.next.completed_ns)));
    o.text.push_str(&format!(
        "; {} began releasing at {}",
        o.holder.owner,
        secs(rel)
    ));
    if let Some(h) = o.held_past_lease_ms {
        o.text
            .push_str(&format!(", {h} ms after its lease had certainly ended"));
    }
}
