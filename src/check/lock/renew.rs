//! Renews (check 1's refreshes): which lease a successful renew proves
//! valid for longer. When acquires do not set the TTL the owner's lease is
//! refreshed by any ok renew of that owner; when they do, a renew is
//! credited to one grant under the rules in `credit`.

use super::credit::Renew;
use super::event::{Done, Invoke, Keys, Outcome};
use super::service::Service;

impl Service {
    pub(crate) fn renew_invoked(&mut self, i: &Invoke) {
        if !self.p.acquire_sets_ttl {
            let id = self.owner_lease(&i.owner);
            if let Some(l) = self.leases.get_mut(&id) {
                l.inflight.push((i.call, i.time));
            }
            return;
        }
        for id in self.by_owner.get(&i.owner).into_iter().flatten() {
            if let Some(l) = self.leases.get_mut(id) {
                l.inflight.push((i.call, i.time));
            }
        }
    }

    pub(crate) fn renew_done(&mut self, d: &Done, keys: &Keys) {
        for id in self.by_owner.get(&d.owner).into_iter().flatten() {
            if let Some(l) = self.leases.get_mut(id) {
                l.inflight.retain(|&(c, _)| c != d.call);
            }
        }
        if d.outcome != Outcome::Ok {
            return;
        }
        if !self.p.acquire_sets_ttl {
            let id = self.owner_lease(&d.owner);
            let p = self.p.clone();
            if let Some(l) = self.leases.get_mut(&id) {
                l.prove(&p, d.inv_time, d.time, d.lease_ms, d.index);
            }
            self.settle(id);
            return;
        }
        // A renew that names no key refreshes every key of its owner.
        let mut targets: Vec<u32> = if keys.name(d.key).is_empty() {
            let leases = &self.leases;
            self.by_owner
                .get(&d.owner)
                .into_iter()
                .flatten()
                .filter_map(|id| leases.get(id).and_then(|l| l.key))
                .collect()
        } else {
            vec![d.key]
        };
        targets.sort_unstable();
        targets.dedup();
        for k in targets {
            let ks = self.ks(k, keys);
            if let Some(r) = ks.ttl.block_or_pass(Renew::from_done(d, k)) {
                self.credit_ttl(&r);
            }
        }
    }

    /// Credit a renew to the per-grant lease it certainly refreshed.
    pub(crate) fn credit_ttl(&mut self, r: &Renew) {
        let Some(ks) = self.keys.get(&r.key) else {
            return;
        };
        let leases = &self.leases;
        let latest = self
            .by_owner
            .get(&r.owner)
            .into_iter()
            .flatten()
            .filter_map(|id| leases.get(id).map(|l| (*id, l)))
            .filter(|(_, l)| l.key == Some(r.key))
            .filter_map(|(id, l)| l.acquire.map(|a| (id, a)))
            .filter(|(_, (_, _, done))| *done <= r.inv)
            .max_by_key(|(_, (_, _, done))| *done);
        let Some((id, (call, acq_inv, _))) = latest else {
            return;
        };
        if ks.ttl.ambiguous(&r.owner, call, acq_inv, r.done) {
            return;
        }
        let p = self.p.clone();
        if let Some(l) = self.leases.get_mut(&id) {
            l.prove(&p, r.inv, r.done, r.lease_ms, r.index);
        }
        self.settle(id);
    }
}
