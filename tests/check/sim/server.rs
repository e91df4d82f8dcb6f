//! The simulated servers behind [`super`]: a lease lock service (Redis
//! style, where an acquire sets the key's TTL, or etcd style, where keys
//! hang on a lease refreshed by keep-alives) and a fenced counter/set
//! storage, each with optional injected bugs, and the ground truth of what
//! really happened on them.

use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Bugs to inject, each as a probability per opportunity.
#[derive(Clone, Debug, Default)]
pub struct Bugs {
    /// Grant a held lock anyway (forgetting the holder, as after a clock
    /// jump or a failover).
    pub double_grant: f64,
    /// Hand out the last fence again instead of a greater one.
    pub fence_regress: f64,
    /// A fenced storage accepts a request with a stale fence.
    pub accept_stale: f64,
    /// The storage acknowledges a write without applying it.
    pub drop_write: f64,
}

/// What really happened, by call id (the simulator maps calls to op indexes).
#[derive(Clone, Debug, Default)]
pub struct ServerTruth {
    /// (earlier grant's owner, later grant's call): the later grant was made
    /// while the earlier owner's grant was still valid on the server.
    pub double_grants: Vec<(String, u64)>,
    /// Grants whose fence was not above every fence granted before.
    pub fence_regressions: Vec<u64>,
    /// Fenced writes accepted after a higher fence was seen (by call).
    pub stale_writes: Vec<u64>,
    pub stale_reads: u64,
    pub dropped_writes: u64,
    /// Every call named above.
    pub calls: HashSet<u64>,
}

impl ServerTruth {
    fn double_grant(&mut self, owner: &str, call: u64) {
        self.double_grants.push((owner.to_string(), call));
        self.calls.insert(call);
    }

    fn regression(&mut self, call: u64) {
        self.fence_regressions.push(call);
        self.calls.insert(call);
    }
}

struct Live {
    owner: String,
    expires: u64,
    released: bool,
}

#[derive(Default)]
struct LockKey {
    holder: Option<(String, u64)>,
    fence: u64,
    max_granted: u64,
    /// Highest fence granted to each owner.
    by_owner: HashMap<String, u64>,
    live: Vec<Live>,
}

/// The lock service.
pub struct LockServer {
    pub sets_ttl: bool,
    pub lease_ns: u64,
    keys: HashMap<usize, LockKey>,
    /// etcd style: lease expiry by owner.
    leases: HashMap<String, u64>,
}

/// A lock reply: ok, and the fence granted.
pub type Reply = (bool, Option<u64>);

impl LockServer {
    pub fn new(sets_ttl: bool, lease_ns: u64) -> LockServer {
        LockServer {
            sets_ttl,
            lease_ns,
            keys: HashMap::new(),
            leases: HashMap::new(),
        }
    }

    fn alive(sets_ttl: bool, leases: &HashMap<String, u64>, l: &Live, now: u64) -> bool {
        !l.released
            && if sets_ttl {
                l.expires > now
            } else {
                leases.get(&l.owner).is_some_and(|&e| e > now)
            }
    }

    /// etcd style: whether `owner`'s lease is alive (without refreshing it).
    pub fn lease_alive(&self, owner: &str, now: u64) -> bool {
        self.leases.get(owner).is_some_and(|&e| e > now)
    }

    /// etcd style: grant a new lease or keep one alive.
    pub fn keep_alive(&mut self, owner: &str, now: u64, create: bool) -> bool {
        let alive = self.leases.get(owner).is_some_and(|&e| e > now);
        if alive || create {
            self.leases.insert(owner.to_string(), now + self.lease_ns);
        }
        alive || create
    }

    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        key: usize,
        owner: &str,
        call: u64,
        now: u64,
        bugs: &Bugs,
        roll: &mut dyn FnMut() -> f64,
        truth: &mut ServerTruth,
    ) -> Reply {
        if !self.sets_ttl && !self.leases.get(owner).is_some_and(|&e| e > now) {
            return (false, None);
        }
        let (sets_ttl, leases) = (self.sets_ttl, &self.leases);
        let k = self.keys.entry(key).or_default();
        k.live.retain(|l| Self::alive(sets_ttl, leases, l, now));
        let holder_valid = k
            .holder
            .as_ref()
            .is_some_and(|(o, _)| k.live.iter().any(|l| &l.owner == o));
        let mine = k.holder.as_ref().is_some_and(|(o, _)| o == owner);
        if holder_valid && mine && !sets_ttl {
            // Re-entrant: still a grant made while any other valid grant
            // (left over from an earlier bug) exists.
            for l in k.live.iter().filter(|l| l.owner != owner) {
                truth.double_grant(&l.owner, call);
            }
            let fence = k.holder.as_ref().map(|h| h.1);
            let f = fence.unwrap_or(0);
            if k.by_owner.iter().any(|(o, &g)| o != owner && g >= f) {
                truth.regression(call);
            }
            return (true, fence);
        }
        if holder_valid && roll() >= bugs.double_grant {
            return (false, None);
        }
        let fence = if k.fence > 0 && roll() < bugs.fence_regress {
            k.fence
        } else {
            k.fence + 1
        };
        k.fence = k.fence.max(fence);
        if fence <= k.max_granted {
            truth.regression(call);
        }
        k.max_granted = k.max_granted.max(fence);
        let mine = k.by_owner.entry(owner.to_string()).or_insert(0);
        *mine = (*mine).max(fence);
        for l in k.live.iter().filter(|l| l.owner != owner) {
            truth.double_grant(&l.owner, call);
        }
        k.holder = Some((owner.to_string(), fence));
        k.live.push(Live {
            owner: owner.to_string(),
            expires: now + self.lease_ns,
            released: false,
        });
        (true, Some(fence))
    }

    /// Redis style renew (check-and-PEXPIRE).
    pub fn renew(&mut self, key: usize, owner: &str, now: u64) -> bool {
        let Some(k) = self.keys.get_mut(&key) else {
            return false;
        };
        if k.holder.as_ref().map_or(true, |(o, _)| o != owner) {
            return false;
        }
        match k.live.iter_mut().rev().find(|l| l.owner == owner) {
            Some(l) if !l.released && l.expires > now => {
                l.expires = now + self.lease_ns;
                true
            }
            _ => false,
        }
    }

    pub fn release(&mut self, key: usize, owner: &str, now: u64) -> bool {
        let Some(k) = self.keys.get_mut(&key) else {
            return false;
        };
        for l in k.live.iter_mut().filter(|l| l.owner == owner) {
            l.released = true;
        }
        let valid = k.holder.as_ref().is_some_and(|(o, _)| o == owner)
            && (!self.sets_ttl || k.live.iter().any(|l| l.owner == owner && l.expires > now));
        if valid {
            k.holder = None;
        }
        valid
    }
}

/// One storage reply: accepted, seq, value read.
pub type StoreReply = (bool, u64, Value);

/// The protected storage.
pub struct Storage {
    pub fencing: bool,
    seq: u64,
    values: HashMap<usize, Value>,
    max_fence: HashMap<usize, u64>,
    initial: Value,
}

impl Storage {
    pub fn new(fencing: bool, initial: Value) -> Storage {
        Storage {
            fencing,
            seq: 0,
            values: HashMap::new(),
            max_fence: HashMap::new(),
            initial,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &mut self,
        key: usize,
        write: Option<Value>,
        fence: Option<u64>,
        call: u64,
        bugs: &Bugs,
        roll: &mut dyn FnMut() -> f64,
        truth: &mut ServerTruth,
    ) -> StoreReply {
        self.seq += 1;
        let max = self.max_fence.get(&key).copied();
        let stale = matches!((fence, max), (Some(f), Some(m)) if f < m);
        if stale && self.fencing && roll() >= bugs.accept_stale {
            return (false, self.seq, Value::Null);
        }
        if let Some(f) = fence {
            self.max_fence.insert(key, max.map_or(f, |m| m.max(f)));
        }
        if stale {
            match write {
                Some(_) => {
                    truth.stale_writes.push(call);
                    truth.calls.insert(call);
                }
                None => truth.stale_reads += 1,
            }
        }
        match write {
            Some(v) => {
                if roll() < bugs.drop_write {
                    truth.dropped_writes += 1;
                } else {
                    self.values.insert(key, v);
                }
                (true, self.seq, Value::Null)
            }
            None => {
                let v = self
                    .values
                    .get(&key)
                    .cloned()
                    .unwrap_or(self.initial.clone());
                (true, self.seq, v)
            }
        }
    }
}
