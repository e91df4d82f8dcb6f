//! Liveness figures (information beside safety; never a verdict, never the
//! exit code):
//!
//! - *stuck lock*: an acquire that failed because the lock was held
//!   (`fail`, error `held`) invoked more than `lease × (1 + ρ) + ε` after
//!   the key's last holder ended (its release completed `ok` or `info`, a
//!   `lost` event, or its worker killed by `kill-holder`), with no grant of
//!   the key in between and no acquire of unknown outcome (`info`) of the
//!   key completed since (those are counted apart); ε is the workers' op
//!   timeout (meta `op_timeout_ms`), else the checker's ε;
//! - *zombie time* (`zombie`): how long a holder kept sending storage
//!   requests after its lease had certainly ended;
//! - *orphaned renewals*: successful renewals invoked after their owner's
//!   release completed `ok`, where the acquire sets the lease (Redis,
//!   Redlock); etcd leases and ZooKeeper sessions outlive a release.
//!
//! Each figure is a value, `unknown` or `not-applicable`, with the reason.
//! Events arrive in time order; memory holds one state per lock key and
//! one release per recently released owner (pruned as the failover
//! figures are).

use super::event::{Done, FaultMark, Fun, Keys, Name, Outcome};
use super::params::LockParams;
use super::report::MAX_WITNESSES;
use super::witness::{ms, secs};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};

/// Past this many released owners, forget releases older than a minute.
const OWNER_LIMIT: usize = 4096;
const MINUTE_NS: u64 = 60_000_000_000;

/// A figure: its value, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Figure<T> {
    Value(T),
    Unknown { reason: String },
    NotApplicable { reason: String },
}

/// The three liveness figures of a lock history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Liveness {
    pub stuck_lock: Figure<StuckLock>,
    pub zombie_time: Figure<ZombieTime>,
    pub orphaned_renewals: Figure<OrphanedRenewals>,
}

/// Acquires refused long after the holder was gone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StuckLock {
    /// Failed acquires (`held`) counted as stuck.
    pub count: u64,
    /// Holder ends followed by at least one of them.
    pub stretches: u64,
    /// The longest time from a holder's end to a stuck acquire (ms).
    pub longest_ms: f64,
    /// The ε used (ms), and where it came from (`op_timeout_ms`, or
    /// `epsilon_ms` when the history's meta lacks the op timeout).
    pub epsilon_ms: f64,
    pub epsilon_from: String,
    /// One per stretch, the first [`MAX_WITNESSES`].
    pub witnesses: Vec<StuckStretch>,
    /// Refused acquires that would count but came after an acquire of the
    /// key whose outcome is unknown (`info`) completed, with no grant since:
    /// that acquire may have taken the key (a timed-out `SET NX` applied
    /// late), so they are not counted as stuck.
    #[serde(default)]
    pub after_unknown_acquire: u64,
}

/// A holder's end and the stuck acquires after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StuckStretch {
    pub key: String,
    pub holder: String,
    /// `release-ok`, `release-info` (a `lost` event is a release) or `death`.
    pub after: String,
    /// The release's op index (none for a death).
    pub end_op: Option<u64>,
    pub end_ns: u64,
    pub lease_ms: u64,
    /// The stuck acquires: how many, the first and the last (op indexes).
    pub acquires: u64,
    pub first_acquire_op: u64,
    pub last_acquire_op: u64,
    pub last_acquire_invoked_ns: u64,
    /// From the end to the last stuck acquire's invocation (ms).
    pub gap_ms: f64,
    pub text: String,
}

/// Storage requests sent after the sender's lease had certainly ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ZombieTime {
    /// Sum over holders (ms).
    pub total_ms: f64,
    /// Holders with zombie time above 0.
    pub holders: u64,
    /// Leases judged: a certain end known and at least one request.
    pub judged: u64,
    /// The worst holders, most zombie time first (at most [`MAX_WITNESSES`]).
    pub worst: Vec<ZombieHolder>,
}

/// One holder's zombie time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ZombieHolder {
    pub owner: String,
    pub key: String,
    /// Its lease had certainly ended here (ns).
    pub lease_over_by_ns: u64,
    /// Its last storage request after that (op index, invocation).
    pub last_request_op: u64,
    pub last_request_ns: u64,
    pub zombie_ms: f64,
}

/// Renewals that succeeded after their owner's release.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrphanedRenewals {
    pub count: u64,
    /// The first [`MAX_WITNESSES`].
    pub witnesses: Vec<OrphanRenewal>,
}

/// One orphaned renewal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrphanRenewal {
    pub owner: String,
    pub key: String,
    pub renew_op: u64,
    pub renew_invoked_ns: u64,
    pub release_op: u64,
    pub release_completed_ns: u64,
    /// From the release's completion to the renewal's invocation (ms).
    pub after_release_ms: f64,
    pub text: String,
}

/// How a holder ended.
#[derive(Clone, Debug)]
struct End {
    t: u64,
    kind: &'static str,
    owner: Name,
    op: Option<u64>,
    lease_ms: Option<u64>,
}

/// Per lock key: its last holder, how it ended, the stretch in progress.
#[derive(Default)]
struct KeyLive {
    holder: Option<(Name, Option<u64>)>,
    end: Option<End>,
    stretch: Option<StuckStretch>,
    /// An acquire of unknown outcome completed since the last grant.
    unknown_acquire: bool,
}

/// Stuck locks and orphaned renewals, fed events in time order.
#[derive(Default)]
pub(crate) struct Tracker {
    keys: HashMap<u32, KeyLive>,
    /// Owner → its latest release `ok` (completion, op index).
    released: HashMap<Name, (u64, u64)>,
    stuck: StuckLock,
    orphans: OrphanedRenewals,
    /// Processes crashed by `strike-command` after their acquire took the
    /// key.
    crashed: Vec<Name>,
}

impl Tracker {
    /// A lock op completed (`now`: the newest time handed out).
    pub fn on_done(&mut self, p: &LockParams, d: &Done, keys: &Keys, now: u64) {
        match (d.fun, d.outcome) {
            (Fun::Acquire, Outcome::Ok) => {
                self.released.remove(&d.owner);
                let k = self.keys.entry(d.key).or_default();
                flush(&mut self.stuck, k);
                k.holder = Some((d.owner.clone(), d.lease_ms));
                k.end = None;
                k.unknown_acquire = false;
            }
            // A crashed acquirer's pending acquire: its outcome is known.
            (Fun::Acquire, Outcome::Info) if self.crashed.contains(&d.process) => {}
            (Fun::Acquire, Outcome::Info) => {
                self.keys.entry(d.key).or_default().unknown_acquire = true;
            }
            (Fun::Acquire, Outcome::Fail) if d.held => self.refused(p, d, keys),
            (Fun::Release, Outcome::Ok | Outcome::Info) => {
                let kind = match d.outcome {
                    Outcome::Ok => "release-ok",
                    _ => "release-info",
                };
                let all = keys.name(d.key).is_empty();
                for (&id, k) in self.keys.iter_mut() {
                    if id == d.key || all {
                        ended(&mut self.stuck, k, &d.owner, d.time, kind, Some(d.index));
                    }
                }
                if d.outcome == Outcome::Ok {
                    self.released.insert(d.owner.clone(), (d.time, d.index));
                    if self.released.len() > OWNER_LIMIT {
                        let horizon = now.saturating_sub(MINUTE_NS);
                        self.released.retain(|_, (t, _)| *t >= horizon);
                    }
                }
            }
            (Fun::Renew, Outcome::Ok) => self.renewed(d, keys),
            _ => {}
        }
    }

    /// A holder fault: `kill-holder` ends its holder's hold (a death); a
    /// `strike-command` crash ends the hold its process's pending acquire
    /// took (its request's reply said it took the key; the process never
    /// completes it `ok`).
    pub fn on_fault(&mut self, f: &FaultMark, keys: &Keys) {
        if let Some(lease) = f.crash_lease_ms {
            self.crashed.push(f.owner.clone());
            // The key the crashed acquire took, when the record names it.
            let only = f.crash_key.as_deref().map(|k| keys.get(k));
            let struck = |id: u32| only.map_or(true, |o| o == Some(id));
            for (_, k) in self.keys.iter_mut().filter(|(&id, _)| struck(id)) {
                flush(&mut self.stuck, k);
                k.holder = None;
                k.unknown_acquire = false;
                k.end = Some(End {
                    t: f.time,
                    kind: "death",
                    owner: f.owner.clone(),
                    op: None,
                    lease_ms: Some(lease),
                });
            }
            return;
        }
        if &*f.fault != "kill-holder" {
            return;
        }
        for k in self.keys.values_mut() {
            ended(&mut self.stuck, k, &f.owner, f.time, "death", None);
        }
    }

    fn refused(&mut self, p: &LockParams, d: &Done, keys: &Keys) {
        let eps = p.op_timeout_ns.unwrap_or(p.epsilon_ns);
        let Some(k) = self.keys.get_mut(&d.key) else {
            return;
        };
        let Some(end) = &k.end else {
            return;
        };
        let Some(lease) = end.lease_ms else {
            return;
        };
        if d.inv_time <= p.lease_upper_eps(end.t, lease, eps) {
            return;
        }
        if k.unknown_acquire {
            self.stuck.after_unknown_acquire += 1;
            return;
        }
        self.stuck.count += 1;
        let s = k.stretch.get_or_insert_with(|| StuckStretch {
            key: keys.name(d.key).to_string(),
            holder: end.owner.to_string(),
            after: end.kind.to_string(),
            end_op: end.op,
            end_ns: end.t,
            lease_ms: lease,
            acquires: 0,
            first_acquire_op: d.index,
            last_acquire_op: d.index,
            last_acquire_invoked_ns: d.inv_time,
            gap_ms: 0.0,
            text: String::new(),
        });
        s.acquires += 1;
        s.last_acquire_op = d.index;
        s.last_acquire_invoked_ns = d.inv_time;
        s.gap_ms = ms(d.inv_time - end.t);
    }

    fn renewed(&mut self, d: &Done, keys: &Keys) {
        let Some(&(rel, rel_op)) = self.released.get(&d.owner) else {
            return;
        };
        if d.inv_time <= rel {
            return;
        }
        self.orphans.count += 1;
        if self.orphans.witnesses.len() >= MAX_WITNESSES {
            return;
        }
        let key = keys.name(d.key).to_string();
        let after = ms(d.inv_time - rel);
        self.orphans.witnesses.push(OrphanRenewal {
            text: format!(
                "{} released lock '{key}' (op {rel_op}, completed ok at {}), yet its renewal \
                 op {} invoked {after} ms later at {} succeeded",
                d.owner,
                secs(rel),
                d.index,
                secs(d.inv_time)
            ),
            owner: d.owner.to_string(),
            key,
            renew_op: d.index,
            renew_invoked_ns: d.inv_time,
            release_op: rel_op,
            release_completed_ns: rel,
            after_release_ms: after,
        });
    }

    /// End of history: the figures as values (applicability is decided
    /// by [`assemble`]).
    fn finish(mut self, p: &LockParams) -> (StuckLock, OrphanedRenewals) {
        let mut ids: Vec<u32> = self.keys.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(k) = self.keys.get_mut(&id) {
                flush(&mut self.stuck, k);
            }
        }
        self.stuck.witnesses.sort_by_key(|s| s.end_ns);
        self.stuck.epsilon_ms = ms(p.op_timeout_ns.unwrap_or(p.epsilon_ns));
        self.stuck.epsilon_from = match p.op_timeout_ns {
            Some(_) => "op_timeout_ms",
            None => "epsilon_ms",
        }
        .into();
        (self.stuck, self.orphans)
    }
}

/// `owner` stopped holding key `k` at `t` (if it was the key's holder).
fn ended(
    stuck: &mut StuckLock,
    k: &mut KeyLive,
    owner: &Name,
    t: u64,
    kind: &'static str,
    op: Option<u64>,
) {
    let Some((holder, lease_ms)) = k.holder.clone() else {
        return;
    };
    if *holder != **owner || k.end.as_ref().is_some_and(|e| e.t >= t) {
        return;
    }
    flush(stuck, k);
    let owner = holder;
    k.end = Some(End {
        t,
        kind,
        owner,
        op,
        lease_ms,
    });
}

/// Close the key's stretch in progress.
fn flush(stuck: &mut StuckLock, k: &mut KeyLive) {
    let Some(mut s) = k.stretch.take() else {
        return;
    };
    stuck.stretches += 1;
    stuck.longest_ms = stuck.longest_ms.max(s.gap_ms);
    if stuck.witnesses.len() >= MAX_WITNESSES {
        return;
    }
    let end = match (s.end_op, s.after.strip_prefix("release-")) {
        (Some(op), Some(how)) => format!("its release ({how}, op {op})"),
        _ => "its death (kill-holder, or a crash after its acquire took the key)".into(),
    };
    s.text = format!(
        "{} held lock '{}' (lease {} ms) until {end} at {}; {} acquire(s) failed `held` after \
         more than lease + ε with no grant in between, ops {}..{}, the last {} ms after",
        s.holder,
        s.key,
        s.lease_ms,
        secs(s.end_ns),
        s.acquires,
        s.first_acquire_op,
        s.last_acquire_op,
        s.gap_ms
    );
    stuck.witnesses.push(s);
}

/// What the figures depend on besides the events.
pub(crate) struct Basis {
    pub grants: u64,
    pub leaseless_grants: u64,
    pub session_grants: u64,
    pub storage_requests: u64,
}

/// The figures, each with its applicability.
pub(crate) fn assemble(
    t: Tracker,
    zombie: super::zombie::Zombie,
    p: &LockParams,
    b: &Basis,
    keys: &Keys,
) -> Liveness {
    let (stuck, orphans) = t.finish(p);
    let leased = if b.grants == 0 {
        Some("the history has no grant")
    } else if b.grants == b.leaseless_grants {
        Some("the lock has no lease: a holder keeps it until it releases it")
    } else {
        None
    };
    let unknown = if !p.all_renewals_recorded {
        Some(
            "the client adapter reports only some of its library's background renewals, so a \
             lease may have lasted longer than the history shows",
        )
    } else if b.session_grants > 0 {
        Some(
            "session leases (lease_ms 0): the lock lives as long as its session, whose end the \
             history does not show",
        )
    } else {
        None
    };
    let no_storage = (b.storage_requests == 0).then_some("the history has no storage request");
    let orphans_na = if b.grants == 0 {
        Some("the history has no grant")
    } else if !p.acquire_sets_ttl {
        Some(
            "the acquire does not set the lease (an etcd lease or a ZooKeeper session), which \
             legitimately outlives a release",
        )
    } else {
        None
    };
    Liveness {
        stuck_lock: gate(leased, unknown, || stuck),
        zombie_time: gate(leased.or(no_storage), unknown, || zombie.finish(keys)),
        orphaned_renewals: gate(orphans_na, None, || orphans),
    }
}

/// Not applicable (first), unknown, or the value.
fn gate<T>(na: Option<&str>, unknown: Option<&str>, value: impl FnOnce() -> T) -> Figure<T> {
    match (na, unknown) {
        (Some(why), _) => Figure::NotApplicable { reason: why.into() },
        (None, Some(why)) => Figure::Unknown { reason: why.into() },
        (None, None) => Figure::Value(value()),
    }
}

impl Liveness {
    /// One line per figure, for summary.md and the report.
    pub fn lines(&self) -> Vec<String> {
        let stuck = match &self.stuck_lock {
            Figure::Value(v) => format!(
                "{} acquire(s) refused after the holder was gone{}, in {} stretch(es), longest \
                 {} ms ({})",
                v.count,
                match v.after_unknown_acquire {
                    0 => String::new(),
                    n => format!(
                        " (and {n} more after an acquire of unknown outcome, which may hold \
                         the key)"
                    ),
                },
                v.stretches,
                v.longest_ms,
                match v.epsilon_from.as_str() {
                    "op_timeout_ms" => format!("ε = the op timeout, {} ms", v.epsilon_ms),
                    _ => format!(
                        "ε = the checker's ε, {} ms: the history's meta has no op_timeout_ms",
                        v.epsilon_ms
                    ),
                }
            ),
            f => reason(f),
        };
        let zombie = match &self.zombie_time {
            Figure::Value(v) => format!(
                "{} ms in total over {} holder(s) ({} lease(s) judged)",
                v.total_ms, v.holders, v.judged
            ),
            f => reason(f),
        };
        let orphans = match &self.orphaned_renewals {
            Figure::Value(v) => {
                format!(
                    "{} renewal(s) succeeded after their owner's release",
                    v.count
                )
            }
            f => reason(f),
        };
        vec![
            format!("stuck lock: {stuck}"),
            format!("zombie time: {zombie}"),
            format!("orphaned renewals: {orphans}"),
        ]
    }

    /// The witnesses' sentences (stuck stretches, worst zombies, orphans).
    pub fn witness_lines(&self, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        if let Figure::Value(v) = &self.stuck_lock {
            out.extend(v.witnesses.iter().take(max).map(|w| w.text.clone()));
        }
        if let Figure::Value(v) = &self.zombie_time {
            out.extend(v.worst.iter().take(max).map(|z| {
                format!(
                    "{} kept sending storage requests to '{}' {} ms after its lease had \
                     certainly ended (by {}), last op {}",
                    z.owner,
                    z.key,
                    z.zombie_ms,
                    secs(z.lease_over_by_ns),
                    z.last_request_op
                )
            }));
        }
        if let Figure::Value(v) = &self.orphaned_renewals {
            out.extend(v.witnesses.iter().take(max).map(|w| w.text.clone()));
        }
        out
    }
}

fn reason<T>(f: &Figure<T>) -> String {
    match f {
        Figure::Value(_) => String::new(),
        Figure::Unknown { reason } => format!("unknown ({reason})"),
        Figure::NotApplicable { reason } => format!("not applicable ({reason})"),
    }
}

#[cfg(test)]
mod tests;
