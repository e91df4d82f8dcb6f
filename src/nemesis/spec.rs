//! Nemesis files (`nemesis/*.toml`): which fault, which target, how long,
//! how often. [`load`] finds a file (a path, `./nemesis/<name>.toml`, or the
//! copy compiled into lockjaw), parses it and checks it against the fault's
//! entry in the registry ([`super::registry`]): known fault, allowed target,
//! the parameters it needs. Errors name the file, line and field.
//!
//! ```toml
//! name = "pause-holder"
//! fault = "pause-holder"
//! target = "holder"
//! interval_ms = 1000      # quiet time before each fault
//! duration_leases = 1.5   # fault length: 1.5 × the holder's lease (or duration_ms)
//! ```

pub use crate::cluster::redis::Fsync;
use crate::toml_file::{self as file, FileError, Range, Source};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The nemesis files compiled into lockjaw.
pub const BUILTIN: &[(&str, &str)] = &[
    ("none", include_str!("../../nemesis/none.toml")),
    (
        "pause-holder",
        include_str!("../../nemesis/pause-holder.toml"),
    ),
    (
        "kill-holder",
        include_str!("../../nemesis/kill-holder.toml"),
    ),
    (
        "partition-holder",
        include_str!("../../nemesis/partition-holder.toml"),
    ),
    (
        "partition-holder-blackhole",
        include_str!("../../nemesis/partition-holder-blackhole.toml"),
    ),
    ("latency", include_str!("../../nemesis/latency.toml")),
    (
        "delay-storage",
        include_str!("../../nemesis/delay-storage.toml"),
    ),
    ("pause-node", include_str!("../../nemesis/pause-node.toml")),
    ("kill-node", include_str!("../../nemesis/kill-node.toml")),
    (
        "kill-service",
        include_str!("../../nemesis/kill-service.toml"),
    ),
    (
        "restart-empty",
        include_str!("../../nemesis/restart-empty.toml"),
    ),
    (
        "restart-aof",
        include_str!("../../nemesis/restart-aof.toml"),
    ),
    (
        "restart-empty-delayed",
        include_str!("../../nemesis/restart-empty-delayed.toml"),
    ),
    (
        "partition-node",
        include_str!("../../nemesis/partition-node.toml"),
    ),
    (
        "delay-grant",
        include_str!("../../nemesis/delay-grant.toml"),
    ),
    (
        "delay-release",
        include_str!("../../nemesis/delay-release.toml"),
    ),
    ("renew-race", include_str!("../../nemesis/renew-race.toml")),
    (
        "drop-release",
        include_str!("../../nemesis/drop-release.toml"),
    ),
    (
        "drop-release-after",
        include_str!("../../nemesis/drop-release-after.toml"),
    ),
    ("clock-jump", include_str!("../../nemesis/clock-jump.toml")),
    (
        "clock-strobe",
        include_str!("../../nemesis/clock-strobe.toml"),
    ),
    (
        "client-clock-jump",
        include_str!("../../nemesis/client-clock-jump.toml"),
    ),
    (
        "client-clock-strobe",
        include_str!("../../nemesis/client-clock-strobe.toml"),
    ),
    ("failover", include_str!("../../nemesis/failover.toml")),
    (
        "failover-takeover",
        include_str!("../../nemesis/failover-takeover.toml"),
    ),
    (
        "failover-coordinated",
        include_str!("../../nemesis/failover-coordinated.toml"),
    ),
    ("mixed", include_str!("../../nemesis/mixed.toml")),
    ("together", include_str!("../../nemesis/together.toml")),
    ("k2-etcd", include_str!("../../nemesis/k2-etcd.toml")),
    (
        "strike-command",
        include_str!("../../nemesis/strike-command.toml"),
    ),
];

/// What a fault is aimed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// The worker holding the lock, inside its critical section.
    Holder,
    /// A worker blocked in acquire: its acquire sent, no answer yet
    /// ([`super::aim`]).
    Waiter,
    /// The worker whose lease renewal is in flight ([`super::aim`]).
    Renewer,
    /// The leader (etcd, ZooKeeper) or primary (Sentinel).
    Leader,
    /// The Redis primary (Sentinel).
    Primary,
    /// One node drawn at random.
    Random,
    /// A minority of the nodes.
    Minority,
    /// A majority of the nodes.
    Majority,
    /// Every worker's links to the lock service.
    AllClients,
    /// Every node.
    All,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Holder => "holder",
            Target::Waiter => "waiter",
            Target::Renewer => "renewer",
            Target::Leader => "leader",
            Target::Primary => "primary",
            Target::Random => "random",
            Target::Minority => "minority",
            Target::Majority => "majority",
            Target::AllClients => "all-clients",
            Target::All => "all",
        }
    }
}

/// A nemesis file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NemesisFile {
    name: String,
    fault: String,
    description: Option<String>,
    target: Option<Target>,
    interval_ms: Option<u64>,
    first_delay_ms: Option<u64>,
    duration_ms: Option<u64>,
    duration_leases: Option<f64>,
    latency_ms: Option<u64>,
    jitter_ms: Option<u64>,
    offset_ms: Option<i64>,
    faults: Option<Vec<String>>,
    order: Option<Order>,
    period_ms: Option<u64>,
    force_failover: Option<bool>,
    blackhole: Option<bool>,
    reset: Option<ResetAt>,
    restart: Option<Restart>,
    while_holding: Option<bool>,
    appendfsync: Option<Fsync>,
    max_injections: Option<u64>,
    strike_after_ms: Option<u64>,
    strike: Option<super::strike::StrikeSpec>,
    together: Option<super::together::TogetherSpec>,
}

/// How `mixed` picks the next fault from its list (`order = ...`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Drawn from the run's seeded rng.
    #[default]
    Random,
    /// The listed faults in order, starting over after the last
    /// (`lockjaw explore`'s deterministic schedules).
    Sequence,
}

/// How `kill-node` brings its nodes back (`restart = ...`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// On the data directory as the kill left it (for Redis: its AOF).
    #[default]
    Data,
    /// On an emptied data directory, as soon as the fault's length is over.
    Empty,
    /// On an emptied data directory, but not before ttl × (1 + ρ) + ε after
    /// the kill: every lease the node granted has certainly ended.
    EmptyDelayed,
}

impl Restart {
    pub fn name(self) -> &'static str {
        match self {
            Restart::Data => "data",
            Restart::Empty => "empty",
            Restart::EmptyDelayed => "empty-delayed",
        }
    }

    /// True when the node comes back without its data.
    pub fn is_empty(self) -> bool {
        self != Restart::Data
    }
}

/// Where `drop-release` resets the connection (`reset = ...`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResetAt {
    /// Before the release reaches the server: it is certainly not applied.
    #[default]
    BeforeForward,
    /// After the server got it, before its reply: it is applied.
    AfterForward,
}

impl ResetAt {
    pub fn name(self) -> &'static str {
        match self {
            ResetAt::BeforeForward => "before-forward",
            ResetAt::AfterForward => "after-forward",
        }
    }
}

/// A resolved nemesis: the schedule and the fault's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NemesisSpec {
    pub name: String,
    /// The fault's registry name (`pause-holder`, `latency`, ...).
    pub fault: String,
    pub description: String,
    pub target: Target,
    /// Quiet time before each fault.
    pub interval_ms: u64,
    /// Quiet time before the first fault (default: `interval_ms`).
    pub first_delay_ms: u64,
    /// Fault length in milliseconds, if given so.
    pub duration_ms: Option<u64>,
    /// Fault length as a multiple of the lease, if given so.
    pub duration_leases: Option<f64>,
    /// Latency faults: added delay and its jitter.
    pub latency_ms: u64,
    pub jitter_ms: u64,
    /// Clock faults: the offset to jump by.
    pub offset_ms: Option<i64>,
    /// `mixed`: the nemesis files to draw from.
    pub faults: Vec<String>,
    /// `mixed`: random draws (the default) or the listed order.
    #[serde(default)]
    pub order: Order,
    /// `clock-strobe`: how often the clock flips.
    #[serde(default)]
    pub period_ms: Option<u64>,
    /// `failover`: ask a sentinel for `SENTINEL FAILOVER` right after the
    /// kill (default true).
    #[serde(default)]
    pub force_failover: Option<bool>,
    /// `kill-node`: how the nodes come back (default: with their data).
    #[serde(default)]
    pub restart: Restart,
    /// `kill-node`: strike only while a worker holds the lock.
    #[serde(default)]
    pub while_holding: bool,
    /// `kill-node` on the Redis systems: the nodes' `appendfsync` policy.
    #[serde(default)]
    pub appendfsync: Option<Fsync>,
    /// `partition-holder`: a `timeout` toxic (no byte passes, no
    /// connection closes) on both directions instead of disabling the
    /// proxies (which closes the connections).
    #[serde(default)]
    pub blackhole: bool,
    /// `drop-release`: reset the connection before or after the release
    /// is forwarded.
    #[serde(default)]
    pub reset: ResetAt,
    /// Stop injecting after this many injections landed (applied without
    /// error, not cut short, inside a critical section for the holder
    /// faults); the run goes on quiet to its end. None: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_injections: Option<u64>,
    /// `pause-holder`, `kill-holder`: strike this long after `holding`.
    #[serde(default)]
    pub strike_after_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")] // strike-command
    pub strike: Option<super::strike::StrikeSpec>,
    /// `together`: its two nemesis files and the delay between them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together: Option<super::together::TogetherSpec>,
}

impl NemesisSpec {
    /// The fault's length for a lease of `lease`.
    pub fn duration(&self, lease: Duration) -> Duration {
        match (self.duration_ms, self.duration_leases) {
            (Some(ms), _) => Duration::from_millis(ms),
            // Saturating: `mul_f64` panics on overflow, and a lease comes
            // from a server or an adapter.
            (None, Some(k)) => Duration::try_from_secs_f64(lease.as_secs_f64() * k)
                .unwrap_or(Duration::from_secs(u64::from(u32::MAX))),
            (None, None) => Duration::ZERO,
        }
    }

    /// A spec for `fault` with every default (tests, programmatic use).
    pub fn of(fault: &str) -> Result<NemesisSpec, FileError> {
        let src = Source {
            name: format!("<{fault}>"),
            text: format!("name = \"{fault}\"\nfault = \"{fault}\"\n"),
        };
        from_source(&src)
    }
}

/// Lengths in ms: up to a day.
const MS: Range = Range::new(0.0, file::DAY_MS, " ms");
/// A fault's length in leases.
const LEASES: Range = Range::new(0.001, 1000.0, " leases");
/// A clock offset: up to a year either way.
const OFFSET_MS: Range = Range::new(-365.0 * file::DAY_MS, 365.0 * file::DAY_MS, " ms");
/// How many injections may land: at least one (zero would inject
/// nothing: that is `none`).
const INJECTIONS: Range = Range::new(1.0, 1_000_000.0, " injections");
/// How often a clock flips.
const PERIOD_MS: Range = Range::new(1.0, file::DAY_MS, " ms");

/// Every numeric field within its range, so no length, offset or period
/// can overflow a `Duration` or a clock later.
fn check_ranges(src: &Source, f: &NemesisFile) -> Result<(), FileError> {
    for (field, v) in [
        ("interval_ms", f.interval_ms),
        ("first_delay_ms", f.first_delay_ms),
        ("duration_ms", f.duration_ms),
        ("latency_ms", f.latency_ms),
        ("jitter_ms", f.jitter_ms),
        ("strike_after_ms", f.strike_after_ms),
    ] {
        src.in_range(field, v, &MS)?;
    }
    src.in_range("duration_leases", f.duration_leases, &LEASES)?;
    src.in_range("offset_ms", f.offset_ms, &OFFSET_MS)?;
    src.in_range("period_ms", f.period_ms, &PERIOD_MS)?;
    src.in_range("max_injections", f.max_injections, &INJECTIONS)?;
    if f.faults.as_ref().is_some_and(Vec::is_empty) {
        return Err(src.field(
            "faults",
            "lists no fault: the nemesis would inject nothing",
            Some("name the faults to draw from, or leave `faults` out to draw from every built-in one"),
        ));
    }
    Ok(())
}

/// Find, parse and check nemesis `name` (a name or a path).
pub fn load(name: &str) -> Result<NemesisSpec, FileError> {
    let (src, _) = file::find(name, "nemesis", BUILTIN)?;
    from_source(&src)
}

/// Parse and check a nemesis from its text.
pub fn from_source(src: &Source) -> Result<NemesisSpec, FileError> {
    let f: NemesisFile = file::parse(src)?;
    let Some(entry) = super::registry::find(&f.fault) else {
        let known: Vec<&str> = super::registry::FAULTS.iter().map(|e| e.name).collect();
        return Err(src.field(
            "fault",
            format!("unknown fault {:?}", f.fault),
            Some(&format!("use one of {}", known.join(", "))),
        ));
    };
    let target = f.target.unwrap_or(entry.targets[0]);
    if !entry.targets.contains(&target) {
        let allowed: Vec<&str> = entry.targets.iter().map(|t| t.name()).collect();
        return Err(src.field(
            "target",
            format!("{} cannot target {}", entry.name, target.name()),
            Some(&format!("use {}", allowed.join(" or "))),
        ));
    }
    if f.duration_ms.is_some() && f.duration_leases.is_some() {
        return Err(src.field(
            "duration_leases",
            "both duration_ms and duration_leases are set",
            Some("keep one of them"),
        ));
    }
    check_ranges(src, &f)?;
    let (duration_ms, duration_leases) = match (f.duration_ms, f.duration_leases) {
        (None, None) => (entry.default_duration_ms, entry.default_duration_leases),
        other => other,
    };
    let interval_ms = f.interval_ms.unwrap_or(1000);
    let spec = NemesisSpec {
        name: f.name,
        fault: entry.name.to_string(),
        description: f.description.unwrap_or_default(),
        target,
        interval_ms,
        first_delay_ms: f.first_delay_ms.unwrap_or(interval_ms),
        duration_ms,
        duration_leases,
        latency_ms: f.latency_ms.unwrap_or(0),
        jitter_ms: f.jitter_ms.unwrap_or(0),
        offset_ms: f.offset_ms,
        faults: f.faults.unwrap_or_default(),
        order: f.order.unwrap_or_default(),
        period_ms: f.period_ms,
        force_failover: f.force_failover,
        restart: f.restart.unwrap_or_default(),
        while_holding: f.while_holding.unwrap_or(false),
        appendfsync: f.appendfsync,
        blackhole: f.blackhole.unwrap_or(false),
        reset: f.reset.unwrap_or_default(),
        max_injections: f.max_injections,
        strike_after_ms: f.strike_after_ms.unwrap_or(0),
        strike: f.strike,
        together: f.together,
    };
    let holder: &[&str] = &["pause-holder", "kill-holder"];
    for (field, set, of) in [
        ("restart", f.restart.is_some(), &["kill-node"][..]),
        ("while_holding", f.while_holding.is_some(), &["kill-node"]),
        ("appendfsync", f.appendfsync.is_some(), &["kill-node"]),
        ("strike_after_ms", f.strike_after_ms.is_some(), holder),
    ] {
        if set && !of.contains(&entry.name) {
            let hint = format!("it is a parameter of {} only; remove it", of.join(" and "));
            let msg = format!("{} takes no `{field}`", entry.name);
            return Err(src.field(field, msg, Some(&hint)));
        }
    }
    if spec.blackhole && spec.fault != "partition-holder" {
        return Err(src.field(
            "blackhole",
            format!("{} has no blackhole mode", spec.fault),
            Some("drop it; it applies to partition-holder"),
        ));
    }
    if f.order.is_some() && spec.fault != "mixed" {
        return Err(src.field(
            "order",
            format!("{} takes no `order`", spec.fault),
            Some("it is a parameter of mixed only; remove it"),
        ));
    }
    if spec.together.is_some() && spec.fault != "together" {
        return Err(src.field(
            "together",
            format!("{} takes no `together` table", spec.fault),
            Some("it is the parameter of fault = \"together\" only; remove it"),
        ));
    }
    if f.reset.is_some() && spec.fault != "drop-release" {
        return Err(src.field(
            "reset",
            format!("{} takes no `reset`", spec.fault),
            Some("it is a parameter of drop-release only; remove it"),
        ));
    }
    (entry.check)(&spec).map_err(|(field, msg, hint)| src.field(field, msg, Some(hint)))?;
    Ok(spec)
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
