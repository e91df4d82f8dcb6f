//! The service checks: mutual exclusion under leases (check 2), fence order
//! (check 3, via `fence`) and locks without leases (check 7, real-time
//! part). Renews are in `renew`; stale holders (check 6) and forgetting
//! are in `stale`.
//!
//! Per lock key it keeps the open grants (from an ok acquire until the
//! holder invokes a release, or its lease is past any proof), the releases
//! that could still end a grant, and the acquires in flight. An ok acquire
//! B is checked against every open grant A of another owner that completed
//! before B was invoked and whose release was not invoked before B
//! completed: if A's lease is proven valid past B's completion it is a
//! violation; if not yet, the overlap waits on A's lease for a later renew
//! that proves it (see `lease`), and otherwise ends as information.

use super::credit::TtlLog;
use super::event::{Done, Fun, Invoke, Keys, Name, Outcome};
use super::fence::{self, FenceIndex, Top2};
use super::lease::{Evidence, Lease, LeaseId, Pending};
use super::params::LockParams;
use super::report::{CheckResult, StaleHolders, UnprotectedWrites};
use super::witness::{secs, GrantRef, Witness, WitnessData};
use foldhash::{HashMap, HashSet};
use std::sync::Arc;

/// A grant that may still conflict with a later acquire.
#[derive(Debug)]
pub(crate) struct Grant {
    pub lease: LeaseId,
    pub r: Arc<GrantRef>,
    /// Invocation time of the first release of this owner that could have
    /// taken effect after the grant.
    pub hold_end: Option<u64>,
}

#[derive(Clone, Debug)]
pub(crate) struct Release {
    call: u64,
    owner: Name,
    inv: u64,
    done: Option<u64>,
}

#[derive(Debug)]
struct InflightAcquire {
    call: u64,
    inv: u64,
    snapshot: Top2,
}

/// Per lock key.
#[derive(Debug, Default)]
pub(crate) struct KeyState {
    pub name: String,
    pub open: Vec<Grant>,
    releases: Vec<Release>,
    inflight: Vec<InflightAcquire>,
    top: Top2,
    pub ttl: TtlLog,
}

/// What an ok acquire found against one open grant.
enum Finding {
    Violation(Arc<GrantRef>, Evidence),
    Mutex(Arc<GrantRef>),
    Wait(LeaseId, Arc<GrantRef>),
    /// Against a closed lease (see `stale`): information at once.
    Closed(LeaseId, Arc<GrantRef>, Option<u64>),
}

/// Checks 2, 3, 6 and 7.
pub struct Service {
    pub(crate) p: LockParams,
    pub(crate) keys: HashMap<u32, KeyState>,
    pub(crate) leases: HashMap<LeaseId, Lease>,
    /// Leases by owner: one per owner when acquires do not set the TTL,
    /// one per grant (of that owner) when they do.
    pub(crate) by_owner: HashMap<Name, Vec<LeaseId>>,
    next_lease: LeaseId,
    pub safety: CheckResult,
    pub fence_order: CheckResult,
    pub mutex: CheckResult,
    pub stale: StaleHolders,
    /// Writes outside their lease (`unprotected`).
    pub unprotected: UnprotectedWrites,
    /// Zombie time (liveness): requests after a lease's certain end.
    pub(crate) zombie: super::zombie::Zombie,
    /// Listed stale overlaps still waiting for their holder's release.
    pub(crate) stale_wait: HashMap<Name, Vec<usize>>,
    reported: HashSet<(Name, u64)>,
    pub fences: FenceIndex,
    pub grants: u64,
    pub fenced_grants: u64,
    pub leaseless_grants: u64,
    /// Grants of session leases (`lease_ms: 0`), which no history bounds.
    pub session_grants: u64,
    /// The id of the empty key name (ops that name no key), once seen.
    keyless: Option<u32>,
    /// The most leases alive at a sweep.
    pub peak_leases: usize,
    /// How many overlaps and writes may wait on leases past their horizon
    /// (see `stale`); past it the oldest such leases are closed.
    pub(crate) max_waiting: usize,
    /// Leases closed by that bound while a later op of their owner could
    /// still have proven more: the figures they feed are unknown.
    pub(crate) forced: u64,
}

impl Service {
    pub fn new(p: LockParams) -> Service {
        Service {
            p,
            keys: HashMap::default(),
            leases: HashMap::default(),
            by_owner: HashMap::default(),
            next_lease: 0,
            safety: CheckResult::default(),
            fence_order: CheckResult::default(),
            mutex: CheckResult::default(),
            stale: StaleHolders::default(),
            unprotected: UnprotectedWrites::default(),
            zombie: Default::default(),
            stale_wait: HashMap::default(),
            reported: HashSet::default(),
            fences: FenceIndex::default(),
            grants: 0,
            fenced_grants: 0,
            leaseless_grants: 0,
            session_grants: 0,
            keyless: None,
            peak_leases: 0,
            max_waiting: super::stale::MAX_WAITING,
            forced: 0,
        }
    }

    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// The state of lock key `key`, created on first sight. A new key
    /// inherits the releases of ops that named no key (they may end holds
    /// on any key).
    pub(crate) fn ks(&mut self, key: u32, keys: &Keys) -> &mut KeyState {
        if !self.keys.contains_key(&key) {
            let name = keys.name(key).to_string();
            if name.is_empty() {
                self.keyless = Some(key);
            }
            let releases = self
                .keyless
                .and_then(|k| self.keys.get(&k))
                .map(|k| k.releases.clone())
                .unwrap_or_default();
            self.keys.insert(
                key,
                KeyState {
                    name,
                    releases,
                    ..KeyState::default()
                },
            );
        }
        self.keys.get_mut(&key).expect("just inserted")
    }

    /// The keys a release on `key` may end holds on: all of them for a
    /// release that names no key; else its key and the key-less one.
    fn release_targets(&self, key: u32) -> Vec<u32> {
        if self.keyless == Some(key) {
            self.keys.keys().copied().collect()
        } else {
            std::iter::once(key).chain(self.keyless).collect()
        }
    }

    pub fn on_invoke(&mut self, i: &Invoke, keys: &Keys) {
        match i.fun {
            Fun::Acquire => {
                let sets_ttl = self.p.acquire_sets_ttl;
                let ks = self.ks(i.key, keys);
                let snapshot = ks.top.clone();
                ks.inflight.push(InflightAcquire {
                    call: i.call,
                    inv: i.time,
                    snapshot,
                });
                if sets_ttl {
                    ks.ttl.invoked(i);
                }
            }
            Fun::Release => {
                self.ks(i.key, keys);
                self.release_invoked(i);
            }
            Fun::Renew => self.renew_invoked(i),
            Fun::Read | Fun::Write => {}
        }
    }

    pub fn on_done(&mut self, d: &Done, keys: &Keys) {
        match d.fun {
            Fun::Acquire => self.acquire_done(d, keys),
            Fun::Release => {
                self.ks(d.key, keys);
                for k in self.release_targets(d.key) {
                    let ks = self.keys.get_mut(&k).expect("key state exists");
                    if let Some(r) = ks.releases.iter_mut().find(|r| r.call == d.call) {
                        r.done = Some(d.time);
                    }
                    ks.gc_releases();
                }
            }
            Fun::Renew => self.renew_done(d, keys),
            Fun::Read | Fun::Write => {}
        }
    }

    fn acquire_done(&mut self, d: &Done, keys: &Keys) {
        let sets_ttl = self.p.acquire_sets_ttl;
        let ks = self.ks(d.key, keys);
        let snapshot = ks
            .inflight
            .iter()
            .position(|a| a.call == d.call)
            .map(|p| ks.inflight.swap_remove(p).snapshot);
        ks.gc_releases();
        let unblocked = if sets_ttl {
            ks.ttl.completed(d)
        } else {
            Vec::new()
        };
        if d.outcome == Outcome::Ok {
            self.grants += 1;
            self.session_grants += (d.lease_ms == Some(0)) as u64;
            self.fenced_grants += d.fence.is_some() as u64;
            let b = Arc::new(grant_ref(d));
            if let Some(s) = &snapshot {
                let name = &self.keys[&d.key].name;
                if let Some(w) = fence::check(name, s, &b, d.inv_time) {
                    self.fence_order.add(w);
                }
            }
            self.check_overlaps(d, &b);
            if let Some(ks) = self.keys.get_mut(&d.key) {
                ks.top.add(&b);
            }
            self.open_grant(d, b);
        }
        for r in unblocked {
            self.credit_ttl(&r);
        }
    }

    /// Check 2 (and 7 for grants without a lease) for the new grant `b`.
    fn check_overlaps(&mut self, d: &Done, b: &Arc<GrantRef>) {
        let Some(ks) = self.keys.get(&d.key) else {
            return;
        };
        let mut found = Vec::new();
        for g in &ks.open {
            if g.r.owner == b.owner
                || g.r.completed_ns >= d.inv_time
                || g.hold_end.is_some_and(|h| h <= d.time)
            {
                continue;
            }
            let Some(l) = self.leases.get(&g.lease) else {
                continue;
            };
            found.push(match l.best {
                _ if l.is_leaseless() => Finding::Mutex(g.r.clone()),
                Some(ev) if ev.end > d.time => Finding::Violation(g.r.clone(), ev),
                _ if l.closed => Finding::Closed(g.lease, g.r.clone(), g.hold_end),
                _ => Finding::Wait(g.lease, g.r.clone()),
            });
        }
        for f in found {
            match f {
                Finding::Violation(a, ev) => self.violation(&a, b, ev, d.key),
                Finding::Mutex(a) => self.mutex_violation(&a, b, d.key),
                Finding::Closed(id, a, first_release) => {
                    let l = &self.leases[&id];
                    let (best, upper) = (l.best.map(|b| b.end), l.upper);
                    let q = Pending {
                        t: d.time,
                        key: d.key,
                        first: a,
                        second: b.clone(),
                        first_release,
                    };
                    self.finalize(q, best, upper);
                }
                Finding::Wait(id, a) => {
                    if let Some(l) = self.leases.get_mut(&id) {
                        l.pending.push_back(Pending {
                            t: d.time,
                            key: d.key,
                            first: a,
                            second: b.clone(),
                            first_release: None,
                        });
                    }
                }
            }
        }
    }

    /// Make `b` an open grant on its key, with its lease.
    fn open_grant(&mut self, d: &Done, b: Arc<GrantRef>) {
        let p = self.p.clone();
        let id = if p.acquire_sets_ttl {
            let mut l = Lease::new(d.owner.clone(), Some(d.key));
            l.acquire = Some((d.call, d.inv_time, d.time));
            if let Some(ms) = d.lease_ms {
                l.set_lease_ms(&p, ms);
                l.prove(&p, d.inv_time, d.time, Some(ms), d.index);
            }
            let id = self.new_lease(l);
            self.by_owner.entry(d.owner.clone()).or_default().push(id);
            id
        } else {
            let id = self.owner_lease(&d.owner);
            if let Some(ms) = d.lease_ms {
                let l = self.leases.get_mut(&id).expect("owner lease exists");
                l.set_lease_ms(&p, ms);
                l.alive_at(&p, d.time, ms);
                self.settle(id);
            }
            id
        };
        let ks = self.keys.get_mut(&d.key).expect("key state exists");
        if !p.acquire_sets_ttl
            && ks
                .open
                .iter()
                .any(|g| *g.r.owner == *d.owner && g.hold_end.is_none())
        {
            return; // re-entrant: the same owner's hold goes on
        }
        let hold_end = ks
            .releases
            .iter()
            .filter(|r| r.owner == d.owner && r.done.map_or(true, |x| x > d.inv_time))
            .map(|r| r.inv)
            .min();
        self.fences.insert(&b, id);
        ks.open.push(Grant {
            lease: id,
            r: b,
            hold_end,
        });
        if let Some(l) = self.leases.get_mut(&id) {
            l.grants += 1;
            if l.is_leaseless() {
                self.leaseless_grants += 1;
            }
        }
    }

    fn release_invoked(&mut self, i: &Invoke) {
        let targets = self.release_targets(i.key);
        for k in &targets {
            let ks = self.keys.get_mut(k).expect("key state exists");
            ks.releases.push(Release {
                call: i.call,
                owner: i.owner.clone(),
                inv: i.time,
                done: None,
            });
            for g in ks.open.iter_mut().filter(|g| *g.r.owner == *i.owner) {
                g.hold_end = Some(g.hold_end.map_or(i.time, |h| h.min(i.time)));
            }
        }
        for id in self.by_owner.get(&i.owner).into_iter().flatten() {
            if let Some(l) = self.leases.get_mut(id) {
                for q in l.pending.iter_mut().filter(|q| targets.contains(&q.key)) {
                    q.first_release.get_or_insert(i.time);
                }
            }
        }
        self.stale_released(&i.owner, i.time);
    }

    /// The lease of `owner` when acquires do not set the TTL (created on
    /// first sight: a lease may be refreshed before any acquire uses it).
    pub(crate) fn owner_lease(&mut self, owner: &Name) -> LeaseId {
        if let Some(&id) = self.by_owner.get(owner).and_then(|v| v.first()) {
            return id;
        }
        let id = self.new_lease(Lease::new(owner.clone(), None));
        self.by_owner.entry(owner.clone()).or_default().push(id);
        id
    }

    fn new_lease(&mut self, l: Lease) -> LeaseId {
        let id = self.next_lease;
        self.next_lease += 1;
        self.leases.insert(id, l);
        id
    }

    /// Report the waiting overlaps that lease `id`'s bound now proves.
    pub(crate) fn settle(&mut self, id: LeaseId) {
        let Some(l) = self.leases.get_mut(&id) else {
            return;
        };
        for (q, ev) in l.resolve() {
            self.violation(&q.first, &q.second, ev, q.key);
        }
    }

    fn violation(&mut self, a: &GrantRef, b: &GrantRef, ev: Evidence, key: u32) {
        if !self
            .reported
            .insert((Name::from(a.owner.as_str()), b.acquire_op))
        {
            return;
        }
        let key = self
            .keys
            .get(&key)
            .map(|k| k.name.clone())
            .unwrap_or_default();
        let text = format!(
            "{}; its lease was certainly valid until {} (proven by op {}); {} (invoked at {}), \
             before {} began releasing it: two valid leases on lock '{key}' at once",
            a.acquired(),
            secs(ev.end),
            ev.op,
            b.acquired(),
            secs(b.invoked_ns),
            a.owner
        );
        self.safety.add(Witness {
            text,
            data: WitnessData::SafetyViolation {
                key,
                first: a.clone(),
                second: b.clone(),
                lease_valid_until_ns: ev.end,
                lease_evidence_op: ev.op,
            },
        });
    }

    fn mutex_violation(&mut self, a: &GrantRef, b: &GrantRef, key: u32) {
        if !self
            .reported
            .insert((Name::from(a.owner.as_str()), b.acquire_op))
        {
            return;
        }
        let key = self
            .keys
            .get(&key)
            .map(|k| k.name.clone())
            .unwrap_or_default();
        let text = format!(
            "{} with no lease; {} (invoked at {}), before {} began releasing it: lock '{key}' \
             held twice",
            a.acquired(),
            b.acquired(),
            secs(b.invoked_ns),
            a.owner
        );
        self.mutex.add(Witness {
            text,
            data: WitnessData::MutexViolation {
                key,
                first: a.clone(),
                second: b.clone(),
            },
        });
    }

    /// The grant that was given fence `f`, and when its lease had
    /// certainly ended, if the index still knows it.
    pub fn grant_for_fence(&self, f: u64) -> Option<(GrantRef, Option<u64>)> {
        let (g, lease) = self.fences.get(f)?;
        let upper = self.leases.get(lease).and_then(|l| l.upper);
        Some(((**g).clone(), upper))
    }
}

fn grant_ref(d: &Done) -> GrantRef {
    GrantRef {
        owner: d.owner.to_string(),
        process: d.process.to_string(),
        fence: d.fence,
        acquire_op: d.index,
        invoked_ns: d.inv_time,
        completed_ns: d.time,
        lease_ms: d.lease_ms,
    }
}

impl KeyState {
    /// Forget completed releases that no in-flight acquire could precede.
    fn gc_releases(&mut self) {
        let min_inv = self.inflight.iter().map(|a| a.inv).min();
        self.releases.retain(|r| match (r.done, min_inv) {
            (None, _) => true,
            (Some(d), Some(m)) => d > m,
            (Some(_), None) => false,
        });
    }
}
