//! Zombie time (a liveness figure, see `liveness`): how long a holder kept
//! sending storage requests (reads and writes carrying its owner) after
//! its lease had certainly ended.
//!
//! The certain end is the lease's upper bound (`lease`: the latest
//! completion of an op proving it + `lease_ms × (1 + ρ) + ε`, every
//! refresh counted, as the stale-holder rule uses it). A request is
//! attributed to the lease of the grant whose fence it carries, else as
//! unprotected writes are (`unprotected`: by its owner); each
//! lease keeps only its latest request, and is judged when the checker
//! forgets it or the history ends, once no later refresh can move its end.
//! A request that comes after its lease was forgotten still counts against
//! that lease's end, kept per owner (pruned past [`OWNER_LIMIT`] owners to
//! ends older than a minute).

use super::event::{Done, Keys, Name};
use super::lease::Lease;
use super::liveness::{ZombieHolder, ZombieTime};
use super::report::MAX_WITNESSES;
use super::service::Service;
use super::witness::ms;
use foldhash::HashMap;

const OWNER_LIMIT: usize = 4096;
const MINUTE_NS: u64 = 60_000_000_000;

/// The latest storage request attributed to a lease.
#[derive(Clone, Copy, Debug)]
pub struct LastRequest {
    pub inv: u64,
    pub op: u64,
    /// Its storage key (id).
    pub key: u32,
}

/// A judged lease: its certain end and its latest request.
#[derive(Clone, Debug)]
struct Ended {
    upper: u64,
    last: Option<LastRequest>,
}

/// A holder with zombie time, names resolved at the end.
#[derive(Debug)]
struct Worst {
    owner: Name,
    upper: u64,
    last: LastRequest,
}

/// The zombie-time tally.
#[derive(Default, Debug)]
pub struct Zombie {
    ended: HashMap<Name, Ended>,
    total_ns: u64,
    judged: u64,
    holders: u64,
    worst: Vec<Worst>,
}

impl Zombie {
    /// Lease `l` is judged (forgotten, or the history ended).
    pub(crate) fn judge(&mut self, l: &Lease) {
        let Some(upper) = l.upper.filter(|_| l.lease_ms != Some(0)) else {
            return;
        };
        let e = Ended {
            upper,
            last: l.last_request,
        };
        if let Some(old) = self.ended.insert(l.owner.clone(), e) {
            self.fold(&l.owner, old);
        }
    }

    /// A request of `owner` whose lease was already judged.
    pub(crate) fn late_request(&mut self, owner: &Name, r: LastRequest, now: u64) {
        let Some(e) = self.ended.get_mut(owner) else {
            return;
        };
        if e.last.map_or(true, |l| r.inv > l.inv) {
            e.last = Some(r);
        }
        if self.ended.len() > OWNER_LIMIT {
            let horizon = now.saturating_sub(MINUTE_NS);
            let old: Vec<Name> = self
                .ended
                .iter()
                .filter(|(_, e)| e.upper < horizon)
                .map(|(o, _)| o.clone())
                .collect();
            for o in old {
                if let Some(e) = self.ended.remove(&o) {
                    self.fold(&o, e);
                }
            }
        }
    }

    fn fold(&mut self, owner: &Name, e: Ended) {
        let Some(last) = e.last else {
            return;
        };
        self.judged += 1;
        if last.inv <= e.upper {
            return;
        }
        self.holders += 1;
        self.total_ns += last.inv - e.upper;
        self.worst.push(Worst {
            owner: owner.clone(),
            upper: e.upper,
            last,
        });
        if self.worst.len() > 2 * MAX_WITNESSES {
            self.keep_worst();
        }
    }

    fn keep_worst(&mut self) {
        self.worst
            .sort_by_key(|w| (std::cmp::Reverse(w.last.inv - w.upper), w.last.op));
        self.worst.truncate(MAX_WITNESSES);
    }

    /// End of history (after every lease was judged): the figure.
    pub(crate) fn finish(mut self, keys: &Keys) -> ZombieTime {
        let mut owners: Vec<Name> = self.ended.keys().cloned().collect();
        owners.sort_unstable();
        for o in owners {
            if let Some(e) = self.ended.remove(&o) {
                self.fold(&o, e);
            }
        }
        self.keep_worst();
        ZombieTime {
            total_ms: ms(self.total_ns),
            holders: self.holders,
            judged: self.judged,
            worst: self
                .worst
                .into_iter()
                .map(|w| ZombieHolder {
                    owner: w.owner.to_string(),
                    key: keys.name(w.last.key).to_string(),
                    lease_over_by_ns: w.upper,
                    last_request_op: w.last.op,
                    last_request_ns: w.last.inv,
                    zombie_ms: ms(w.last.inv - w.upper),
                })
                .collect(),
        }
    }
}

impl Service {
    /// A storage request completed (any outcome): note it on its lease,
    /// found by its fence (the grant that issued it) or else by its owner.
    pub(crate) fn request_done(&mut self, d: &Done, now: u64) {
        let r = LastRequest {
            inv: d.inv_time,
            op: d.index,
            key: d.key,
        };
        let by_fence = d.fence.and_then(|f| self.fences.get(f));
        let id = match by_fence {
            Some((_, id)) => Some(*id),
            None => self.request_lease(&d.owner, d.inv_time),
        };
        match id.and_then(|id| self.leases.get_mut(&id)) {
            Some(l) => {
                if l.last_request.map_or(true, |l| r.inv > l.inv) {
                    l.last_request = Some(r);
                }
            }
            None => {
                let owner = match by_fence {
                    Some((g, _)) => Name::from(g.owner.as_str()),
                    None => d.owner.clone(),
                };
                self.zombie.late_request(&owner, r, now);
            }
        }
    }
}
