//! What each fault allows: for a fault on a system, with fencing on or off
//! and the library's promises (as its adapter declares them), which
//! anomaly kinds are allowed by the fault (never a finding), which are
//! findings, and which the rule does not decide (undecided: review).
//! docs/faults.md's table of expected verdicts is generated from it
//! ([`verdict_table`]).
//!
//! The rule is data of the fault registry: every [`super::registry::FaultEntry`]
//! names its [`Rule`], so adding a fault forces a decision. A rule says
//! "allowed" only where the fault itself explains the anomaly (a lease
//! that ended while its holder was stopped, a node that forgot a grant, a
//! server clock that expired a key early); what a correct library and a
//! correct service never show under the fault is a finding; what depends
//! on something the rule is not told (a promise not declared, which
//! request a strike held) is undecided, with why.
//!
//! The kinds are the bug catalogue's `expect` words: `two-holders`
//! (mutual exclusion under leases), `stale-write-accepted`,
//! `lost-updates`, `stuck-lock` (acquires refused more than a lease after
//! the holder's end: a lock held for at most its lease is never counted),
//! `orphaned-renewal` (a renewal that succeeded after its owner's
//! release).

use super::registry;
use super::spec::{NemesisSpec, Restart, Target};
pub use crate::client::adapter::Promises;
use crate::cluster::redis::Fsync;
use crate::service::{Keeps, System};

/// The rule's word on one anomaly kind under one fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowance {
    /// Expected of this fault here: never a finding (why).
    Allowed(String),
    /// Not expected: a finding.
    Finding,
    /// The rule does not decide (why): review.
    Undecided(String),
}

/// The anomaly kinds, as the bug catalogue names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    TwoHolders,
    StaleWriteAccepted,
    LostUpdates,
    StuckLock,
    OrphanedRenewal,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::TwoHolders,
        Kind::StaleWriteAccepted,
        Kind::LostUpdates,
        Kind::StuckLock,
        Kind::OrphanedRenewal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::TwoHolders => "two-holders",
            Kind::StaleWriteAccepted => "stale-write-accepted",
            Kind::LostUpdates => "lost-updates",
            Kind::StuckLock => "stuck-lock",
            Kind::OrphanedRenewal => "orphaned-renewal",
        }
    }

    pub fn named(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Damage to the protected storage (stale writes, lost updates).
    fn resource(self) -> bool {
        matches!(self, Kind::StaleWriteAccepted | Kind::LostUpdates)
    }
}

/// What a rule is asked about.
#[derive(Clone, Copy)]
pub struct AllowScope<'a> {
    pub spec: &'a NemesisSpec,
    pub system: System,
    /// Fencing on, and the system's grants carry a token to check.
    pub fencing: bool,
    pub promises: &'a Promises,
    pub kind: Kind,
}

/// A fault's rule (a field of its registry entry).
pub type Rule = fn(&AllowScope) -> Allowance;

/// The rule for anomaly `kind` (the catalogue's `expect` words:
/// `two-holders`, `stale-write-accepted`, `lost-updates`, `stuck-lock`,
/// `orphaned-renewal`) under nemesis file `spec` (a `together` file: its
/// two faults) on `system` (as `--system` names it).
pub fn allows(
    spec: &NemesisSpec,
    system: &str,
    fencing: bool,
    promises: &Promises,
    kind: &str,
) -> Allowance {
    let Some(kind) = Kind::named(kind) else {
        return Allowance::Undecided(format!("unknown anomaly kind {kind:?}"));
    };
    let Some(system) = System::named(system) else {
        return Allowance::Undecided(format!("unknown system {system:?}"));
    };
    let Some(e) = registry::find(&spec.fault) else {
        return Allowance::Undecided(format!("unknown fault {:?}", spec.fault));
    };
    let fencing = fencing && system.facts().fencing_token.is_yes();
    (e.allows)(&AllowScope {
        spec,
        system,
        fencing,
        promises,
        kind,
    })
}

/// The promises of lockjaw's own client for `system` (a fact of its
/// service registry entry; docs/adapters.md).
pub fn builtin_promises(system: System) -> Promises {
    system.facts().promises
}

/// How `c`'s system keeps a grant.
fn keeps(c: &AllowScope) -> Keeps {
    c.system.facts().keeps
}

fn allowed(why: &str) -> Allowance {
    Allowance::Allowed(why.to_string())
}

fn undecided(why: &str) -> Allowance {
    Allowance::Undecided(why.to_string())
}

/// Without fencing, a holder whose lease ended still writes: `why` says
/// how the lease ended. With fencing, the storage refuses its write.
fn unfenced_late_write(c: &AllowScope, why: &str) -> Allowance {
    if c.kind.resource() && !c.fencing {
        allowed(why)
    } else {
        Allowance::Finding
    }
}

/// `none`: nothing explains an anomaly.
pub fn nothing(_: &AllowScope) -> Allowance {
    Allowance::Finding
}

/// `cas`: no lock, no lease; a conditional write must refuse what is stale.
fn no_lock(c: &AllowScope) -> Option<Allowance> {
    (keeps(c) == Keeps::Nothing).then_some(Allowance::Finding)
}

/// `pause-holder`, `partition-holder`, `delay-storage`: the holder keeps
/// writing past the end of its lease (Kleppmann).
pub fn holder_past_lease(c: &AllowScope) -> Allowance {
    if let Some(a) = no_lock(c) {
        return a;
    }
    let fault = c.spec.fault.as_str();
    if keeps(c) == Keeps::Session {
        // The session keeps the lock unless the server saw the connection
        // close (a disabled proxy closes it; a blackhole does not).
        if fault == "partition-holder" && !c.spec.blackhole {
            return unfenced_late_write(c, "the closed connection ended the holder's session and its lock while it still writes; without fencing the storage takes its write");
        }
        return Allowance::Finding;
    }
    if fault == "delay-storage" {
        match c.promises.renews_itself {
            Some(true) => return Allowance::Finding,
            None if c.kind.resource() && !c.fencing => {
                return undecided("the library does not say whether it renews by itself: a library that does keeps its lease while the write is held");
            }
            _ => {}
        }
    }
    unfenced_late_write(
        c,
        "the holder's lease ended while it was stopped, cut off or its write held; without fencing the storage takes its late write (Kleppmann)",
    )
}

/// `kill-holder`: a dead holder writes nothing, and its lock frees when
/// its lease ends (the stuck-lock figure counts only refusals after that).
pub fn killed_holder(_: &AllowScope) -> Allowance {
    Allowance::Finding
}

/// `delay-grant`, `latency`: a grant arrives with part of its lease gone.
pub fn late_reply(c: &AllowScope) -> Allowance {
    if let Some(a) = no_lock(c) {
        return a;
    }
    if !c.system.facts().lease_starts_at_acquire {
        // etcd, ZooKeeper: the lease (session) lives on by keep-alives;
        // PostgreSQL, MariaDB: no lease.
        return Allowance::Finding;
    }
    let why =
        "the grant arrives with part of its lease gone and the library does not check what is left";
    match (c.kind, c.promises.validity_check) {
        (Kind::TwoHolders, Some(false)) => allowed(why),
        (Kind::TwoHolders, None) => undecided("the library does not say whether it checks the lease's remaining validity after a grant"),
        (k, v) if k.resource() && !c.fencing => match v {
            Some(false) => allowed(why),
            // Held past the whole lease: no validity was left to check,
            // so a library that checks must refuse this grant.
            Some(true) if held_past_lease(c.spec) => Allowance::Finding,
            Some(true) => undecided("the library checks the validity left after a grant, but the holder's critical section may still outlast it"),
            None => undecided("the library does not say whether it checks the lease's remaining validity after a grant"),
        },
        _ => Allowance::Finding,
    }
}

/// A `delay-grant` that holds the reply a whole lease or more: the grant
/// arrives with nothing of its lease left.
fn held_past_lease(spec: &NemesisSpec) -> bool {
    spec.fault == "delay-grant" && spec.duration_leases.is_some_and(|l| l >= 1.0)
}

/// `delay-release`, `drop-release`: a correct client survives a late or
/// lost release (the late one must not free another's lock).
pub fn release_struck(_: &AllowScope) -> Allowance {
    Allowance::Finding
}

/// `renew-race`: the held renewal times out; a holder that writes on
/// (fail-open, no lease guard) writes past its lease.
pub fn renewal_held(c: &AllowScope) -> Allowance {
    if let Some(a) = no_lock(c) {
        return a;
    }
    unfenced_late_write(c, "the held renewal timed out; a holder that writes on without a lease guard writes past its lease")
}

/// `strike-command`: by its action.
pub fn strike(c: &AllowScope) -> Allowance {
    use super::strike::StrikeAction;
    let action = c.spec.strike.as_ref().map(|s| s.action).unwrap_or_default();
    match action {
        // A crash right after a reply: as a killed holder.
        StrikeAction::CrashAfter => Allowance::Finding,
        _ if c.kind.resource() && !c.fencing => undecided("what a held or reset request does to the holder's lease depends on which request it is (a held renewal lets the holder write past its lease)"),
        _ => Allowance::Finding,
    }
}

/// `client-clock-jump`, `client-clock-strobe`: only the holder's wall
/// clock moves; a library that times its lease by the monotonic clock
/// keeps it.
pub fn client_clock(_: &AllowScope) -> Allowance {
    Allowance::Finding
}

/// Grants are keys in server memory, expired by the server's clock
/// (single Redis, Redlock, Sentinel, Redis Cluster).
fn keys_in_memory(c: &AllowScope) -> bool {
    matches!(
        keeps(c),
        Keeps::KeyOnOneNode | Keeps::KeyOnMajority | Keeps::KeyOnPrimary
    )
}

/// A lost grant explains all four: a second holder inside the lease,
/// fences that repeat (so fencing does not save the storage), and the
/// old owner's renewal of a key its lost release left.
fn grant_lost(c: &AllowScope, why: &str) -> Allowance {
    match c.kind {
        Kind::StuckLock => Allowance::Finding,
        _ => allowed(why),
    }
}

/// The fault loses an acknowledged grant (a write the node replied to
/// before it was durable or replicated), as `kill-node` and
/// `kill-service` may on the Redis systems.
fn kill_loses(c: &AllowScope) -> Option<&'static str> {
    if !keys_in_memory(c) {
        return None;
    }
    let replicated = keeps(c) == Keeps::KeyOnPrimary;
    match (c.spec.restart, c.spec.appendfsync) {
        (Restart::Empty, _) => Some("the node came back without its data and forgot the grant (Redlock assumes nodes that keep their keys)"),
        (Restart::EmptyDelayed, _) => None,
        (Restart::Data, _) if replicated => Some("a replica promoted after the kill may not have the last grant (asynchronous replication)"),
        (Restart::Data, Some(Fsync::Always)) => None,
        (Restart::Data, _) => Some("Redis may reply before its append-only file has the write (appendfsync everysec), so a SIGKILL can lose an acknowledged grant"),
    }
}

/// `pause-node`, `kill-node`, `kill-service`, `partition-node`.
pub fn node(c: &AllowScope) -> Allowance {
    if let Some(a) = no_lock(c) {
        return a;
    }
    let fault = c.spec.fault.as_str();
    let replicated = keeps(c) == Keeps::KeyOnPrimary;
    let lost = match fault {
        "kill-node" | "kill-service" => kill_loses(c),
        "pause-node" | "partition-node" if replicated => Some("the replica promoted meanwhile may not have the last grant (asynchronous replication), and fences repeat"),
        _ => None,
    };
    if let Some(why) = lost {
        return grant_lost(c, why);
    }
    match c.kind {
        Kind::StuckLock if keeps(c) == Keeps::QuorumLease => undecided("a server fault can keep a lease or session past its ttl (etcd extends leases on a leader change; a ZooKeeper session survives while its client reconnects)"),
        k if k.resource() && !c.fencing && fault == "kill-service" => allowed("the holder's renewals fail while the service is down; a holder that writes on without a lease guard writes past its lease"),
        k if k.resource() && !c.fencing => undecided("the holder's requests (renewals) may fail while servers are down or cut off; a holder that writes on without a lease guard writes past its lease"),
        _ => Allowance::Finding,
    }
}

/// `failover`, `failover-takeover`: a replica that missed a grant is
/// promoted on purpose.
pub fn replica_promoted(c: &AllowScope) -> Allowance {
    grant_lost(c, "lockjaw promoted a replica that had not applied a fresh grant (asynchronous replication): the grant and its fence are lost")
}

/// `failover-coordinated`: the replica takes over only once caught up.
pub fn caught_up(_: &AllowScope) -> Allowance {
    Allowance::Finding
}

/// `clock-jump`, `clock-strobe`: the servers' wall clocks move.
pub fn server_clock(c: &AllowScope) -> Allowance {
    let back = c.spec.fault == "clock-jump" && c.spec.offset_ms.is_some_and(|o| o < 0);
    let decides = match keeps(c) {
        Keeps::KeyOnOneNode => true,
        Keeps::KeyOnMajority => matches!(c.spec.target, Target::Majority | Target::All),
        // Sentinel, Redis Cluster: the primary serving the lock decides;
        // a majority or a random node may not include it.
        _ => matches!(
            c.spec.target,
            Target::Leader | Target::Primary | Target::All
        ),
    };
    let why = if back {
        "the node's clock moved back keeps the key past its lease"
    } else {
        "the node's clock moved forward expires the key early: a second client is granted the lock inside the holder's lease"
    };
    match c.kind {
        _ if !keys_in_memory(c) => Allowance::Finding,
        Kind::StuckLock if back && decides => allowed(why),
        Kind::TwoHolders if !back && decides => allowed(why),
        // Fences survive a clock jump: only an unfenced storage suffers.
        k if k.resource() && !back && decides => unfenced_late_write(c, why),
        _ if !decides && keeps(c) == Keeps::KeyOnMajority => Allowance::Finding,
        _ if !decides => undecided("the clocks moved may not include the primary serving the lock"),
        _ => Allowance::Finding,
    }
}

/// `mixed`: judged by the fault it drew (each injection names it).
pub fn drawn(_: &AllowScope) -> Allowance {
    undecided("a mixed nemesis is judged by the fault each injection drew")
}

/// `together`: allowed if either fault alone allows the kind, a finding
/// if both say finding, else undecided.
pub fn pair(c: &AllowScope) -> Allowance {
    let Ok(parts) = super::together::parts(c.spec) else {
        return undecided("its two nemesis files do not load");
    };
    let one = |s: &NemesisSpec| match registry::find(&s.fault) {
        Some(e) => (e.allows)(&AllowScope { spec: s, ..*c }),
        None => undecided("unknown fault"),
    };
    combine(
        &one(&parts[0]),
        &one(&parts[1]),
        [&parts[0].name, &parts[1].name],
    )
}

/// The pair's word from its two faults' words.
pub fn combine(a: &Allowance, b: &Allowance, names: [&str; 2]) -> Allowance {
    match (a, b) {
        (Allowance::Allowed(w), _) => Allowance::Allowed(format!("{}: {w}", names[0])),
        (_, Allowance::Allowed(w)) => Allowance::Allowed(format!("{}: {w}", names[1])),
        (Allowance::Finding, Allowance::Finding) => Allowance::Finding,
        (Allowance::Undecided(w), _) => Allowance::Undecided(format!("{}: {w}", names[0])),
        (_, Allowance::Undecided(w)) => Allowance::Undecided(format!("{}: {w}", names[1])),
    }
}

#[path = "allows_table.rs"]
mod table;
pub use table::{promises_table, verdict_table};

#[cfg(test)]
#[path = "allows_tests.rs"]
mod tests;
