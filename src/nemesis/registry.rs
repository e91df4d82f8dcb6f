//! The fault registry: one [`FaultEntry`] per fault name, saying which
//! targets it takes, its default length, how its parameters are checked,
//! where it applies (asking the system's facts, the placement and the
//! workload of a [`Scope`]) and how to build it. Adding a fault = one
//! file implementing [`super::Nemesis`] plus one entry here (and a
//! `nemesis/<name>.toml`).
//!
//! `crate::combination::applies` asks [`supports`]; [`host_ready`] is the
//! separate runtime check of what the host must have. The support table in
//! `docs/faults.md` is generated from both registries
//! (`crate::combination::table`); a test keeps it in step.

use super::cluster_failover::{ClusterFailover, How};
use super::scope::{Placement, Scope, ToxiproxyChoice};
use super::spec::{NemesisSpec, Target};
use super::{
    allows, client_clock, clock, failover, holder, mixed, moment, network, node, outage, partition,
    strike, together, Nemesis,
};
use crate::service::System;
use crate::workload::Kind;

/// A parameter check's complaint: (field, message, hint).
pub type ParamError = (&'static str, String, &'static str);

/// One fault lockjaw knows.
pub struct FaultEntry {
    pub name: &'static str,
    /// One line for `--help` and `docs/faults.md`.
    pub summary: &'static str,
    /// Allowed targets; the first is the default.
    pub targets: &'static [Target],
    pub default_duration_ms: Option<u64>,
    pub default_duration_leases: Option<f64>,
    /// Checks the fault's parameters.
    pub check: fn(&NemesisSpec) -> Result<(), ParamError>,
    /// `Err(reason)` where the fault does not apply.
    pub support: fn(&Scope) -> Result<(), String>,
    pub build: fn(&NemesisSpec) -> Box<dyn Nemesis>,
    /// Which anomaly kinds the fault allows (`super::allows`).
    pub allows: allows::Rule,
    /// Whether it changes the servers' state (a process stopped, killed
    /// or restarted, a clock moved, a role or a network rule changed):
    /// no later run shares their cluster ([`changes_servers`]). `mixed`
    /// and `together` say no here: the faults they draw from decide.
    pub changes_servers: bool,
}

/// Every fault, in the order `docs/faults.md` lists them.
pub static FAULTS: &[FaultEntry] = &[
    FaultEntry {
        name: "none",
        summary: "no faults (the baseline)",
        targets: &[Target::All],
        default_duration_ms: None,
        default_duration_leases: None,
        check: no_params,
        support: anywhere,
        build: |_| Box::new(super::NoFault),
        allows: allows::nothing,
        changes_servers: false,
    },
    FaultEntry {
        name: "pause-holder",
        summary: "SIGSTOP the lock holder between its grant and its protected write, for longer than its lease; then SIGCONT",
        targets: WORKER_TARGETS,
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_holder,
        build: |_| Box::new(holder::PauseHolder),
        allows: allows::holder_past_lease,
        changes_servers: false,
    },
    FaultEntry {
        name: "kill-holder",
        summary: "SIGKILL the lock holder inside its critical section; respawn the worker after the fault's duration",
        targets: WORKER_TARGETS,
        default_duration_ms: Some(0),
        default_duration_leases: None,
        check: no_params,
        support: needs_holder,
        build: |_| Box::new(holder::KillHolder),
        allows: allows::killed_holder,
        changes_servers: false,
    },
    FaultEntry {
        name: "partition-holder",
        summary: "cut the holder off from every lock-service node (its proxies disabled), for longer than its lease",
        targets: &[Target::Holder],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_lock_links,
        build: |_| Box::new(network::PartitionHolder),
        allows: allows::holder_past_lease,
        changes_servers: false,
    },
    FaultEntry {
        name: "latency",
        summary: "latency ± jitter on every worker's links to the lock service",
        targets: &[Target::AllClients],
        default_duration_ms: Some(3000),
        default_duration_leases: None,
        check: needs_latency,
        support: needs_lock,
        build: |_| Box::new(network::Latency),
        allows: allows::late_reply,
        changes_servers: false,
    },
    FaultEntry {
        name: "delay-storage",
        summary: "hold the holder's protected write in its storage proxy for longer than its lease (the delayed packet)",
        targets: &[Target::Holder],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_storage,
        build: |_| Box::<network::DelayStorage>::default(),
        allows: allows::holder_past_lease,
        changes_servers: false,
    },
    FaultEntry {
        name: "delay-grant",
        summary: "hold the reply to the next acquire after a release in the client's proxy for half a lease (one-shot toxic): the grant arrives with half its lease gone",
        targets: &[Target::AllClients],
        default_duration_ms: None,
        default_duration_leases: Some(0.5),
        check: no_params,
        support: timed_by_protocol,
        build: |_| Box::new(moment::Timed::delay_grant()),
        allows: allows::late_reply,
        changes_servers: false,
    },
    FaultEntry {
        name: "delay-release",
        summary: "hold the next release in the client's proxy until another client was granted the lock (at most 3 leases), then deliver it",
        targets: &[Target::AllClients],
        default_duration_ms: None,
        default_duration_leases: Some(3.0),
        check: no_params,
        support: timed_by_protocol,
        build: |_| Box::new(moment::Timed::delay_release()),
        allows: allows::release_struck,
        changes_servers: false,
    },
    FaultEntry {
        name: "renew-race",
        summary: "hold the next lease renewal in the client's proxy until the lease expired and another client was granted the lock (at most 3 leases), then deliver it",
        targets: &[Target::AllClients],
        default_duration_ms: None,
        default_duration_leases: Some(3.0),
        check: no_params,
        support: timed_by_protocol,
        build: |_| Box::new(moment::Timed::renew_race()),
        allows: allows::renewal_held,
        changes_servers: false,
    },
    FaultEntry {
        name: "drop-release",
        summary: "reset the connection carrying the next release, before it is forwarded (`reset = \"before-forward\"`) or after, before the reply (`\"after-forward\"`)",
        targets: &[Target::AllClients],
        default_duration_ms: Some(0),
        default_duration_leases: None,
        check: no_params,
        support: timed_by_protocol,
        build: |s| Box::new(moment::Timed::drop_release(s.reset)),
        allows: allows::release_struck,
        changes_servers: false,
    },
    FaultEntry {
        name: "strike-command",
        summary: "match a worker's next Redis request (by command or script) or ZooKeeper request (by operation) in its proxy (`strike` table), then hold it, reset its connection before or after forwarding it, or kill the client right after its reply",
        targets: &[
            Target::AllClients,
            Target::Holder,
            Target::Waiter,
            Target::Renewer,
        ],
        default_duration_ms: None,
        default_duration_leases: Some(3.0),
        check: strike_params,
        support: matched_by_content,
        build: |s| Box::new(strike::Strike::new(s.strike.clone().unwrap_or_default())),
        allows: allows::strike,
        changes_servers: false,
    },
    FaultEntry {
        name: "pause-node",
        summary: "SIGSTOP lock-service nodes (leader/primary, random, minority, majority, all) for 1.5 leases, then SIGCONT",
        targets: NODE_TARGETS,
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: local_only,
        build: |_| Box::new(node::PauseNode),
        allows: allows::node,
        changes_servers: true,
    },
    FaultEntry {
        name: "kill-node",
        summary: "SIGKILL lock-service nodes (leader/primary, random, minority, majority, all); restart them 2 s later with their data, or without it (`restart = \"empty\"`, `\"empty-delayed\"`)",
        targets: NODE_TARGETS,
        default_duration_ms: Some(2000),
        default_duration_leases: None,
        check: no_params,
        support: kill_node_support,
        build: |_| Box::new(node::KillNode),
        allows: allows::node,
        changes_servers: true,
    },
    FaultEntry {
        name: "kill-service",
        summary: "SIGKILL the whole lock service while a client holds the lock (every node; a majority where the nodes form a quorum); restart it with its data 2 leases later",
        targets: &[Target::All],
        default_duration_ms: None,
        default_duration_leases: Some(2.0),
        check: no_params,
        support: local_only,
        build: |_| Box::new(outage::KillService),
        allows: allows::node,
        changes_servers: true,
    },
    FaultEntry {
        name: "partition-node",
        summary: "cut one server (leader/primary or random) off from its peers with iptables rules on its cgroup, for 2 leases",
        targets: &[Target::Leader, Target::Primary, Target::Random],
        default_duration_ms: None,
        default_duration_leases: Some(2.0),
        check: no_params,
        support: has_peers,
        build: |_| Box::new(partition::PartitionNode),
        allows: allows::node,
        changes_servers: true,
    },
    FaultEntry {
        name: "clock-jump",
        summary: "jump the wall clock of Redis nodes (default a majority) forward by 2 leases while a client holds the lock (libfaketime)",
        targets: CLOCK_TARGETS,
        default_duration_ms: None,
        default_duration_leases: Some(1.0),
        check: no_params,
        support: fakes_time,
        build: |_| Box::new(clock::ClockJump),
        allows: allows::server_clock,
        changes_servers: true,
    },
    FaultEntry {
        name: "clock-strobe",
        summary: "flip the wall clock of Redis nodes between +2 leases and real time every period_ms (libfaketime)",
        targets: CLOCK_TARGETS,
        default_duration_ms: None,
        default_duration_leases: Some(2.0),
        check: no_params,
        support: fakes_time,
        build: |_| Box::<clock::ClockStrobe>::default(),
        allows: allows::server_clock,
        changes_servers: true,
    },
    FaultEntry {
        name: "client-clock-jump",
        summary: "jump the lock holder's wall clock (its worker and adapter, under libfaketime; the monotonic clock untouched) forward by 2 leases for a lease",
        targets: WORKER_TARGETS,
        default_duration_ms: None,
        default_duration_leases: Some(1.0),
        check: no_params,
        support: fakes_client_time,
        build: |_| Box::new(client_clock::ClientClockJump),
        allows: allows::client_clock,
        changes_servers: false,
    },
    FaultEntry {
        name: "client-clock-strobe",
        summary: "flip the lock holder's wall clock (its worker and adapter, under libfaketime) between +2 leases and real time every period_ms",
        targets: WORKER_TARGETS,
        default_duration_ms: None,
        default_duration_leases: Some(2.0),
        check: no_params,
        support: fakes_client_time,
        build: |_| Box::<client_clock::ClientClockStrobe>::default(),
        allows: allows::client_clock,
        changes_servers: false,
    },
    FaultEntry {
        name: "failover",
        summary: "promote a replica that has not applied a fresh grant (CLIENT PAUSE WRITE): Sentinel's primary is SIGKILLed (restarted as a replica); Redis Cluster's replica of the key's primary runs CLUSTER FAILOVER FORCE (forced)",
        targets: &[Target::Primary, Target::Leader],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_failover,
        build: |_| Box::new(failover::Failover),
        allows: allows::replica_promoted,
        changes_servers: true,
    },
    FaultEntry {
        name: "failover-takeover",
        summary: "CLUSTER FAILOVER TAKEOVER (no election) on the replica of the key's primary while it has not applied a fresh grant (CLIENT PAUSE WRITE; forced)",
        targets: &[Target::Primary, Target::Leader],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_cluster_failover,
        build: |_| Box::new(ClusterFailover(How::Takeover)),
        allows: allows::replica_promoted,
        changes_servers: true,
    },
    FaultEntry {
        name: "failover-coordinated",
        summary: "CLUSTER FAILOVER (coordinated: the replica of the key's primary takes over once caught up) right after a grant",
        targets: &[Target::Primary, Target::Leader],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_cluster_failover,
        build: |_| Box::new(ClusterFailover(How::Coordinated)),
        allows: allows::caught_up,
        changes_servers: true,
    },
    FaultEntry {
        name: "mixed",
        summary: "a seeded random mix of the faults in `faults` (default: all) that apply to the system, mode and workload",
        targets: &[Target::All],
        default_duration_ms: None,
        default_duration_leases: None,
        check: mixed::check,
        support: anywhere,
        build: |_| Box::<mixed::Mixed>::default(),
        allows: allows::drawn,
        changes_servers: false,
    },
    FaultEntry {
        name: "together",
        summary: "two faults as one injection (`together` table: `first`, `second`, `delay_ms`): both on the same holder, or one on the holder and one on the servers; landed when both landed",
        targets: &[Target::All],
        default_duration_ms: None,
        default_duration_leases: None,
        check: together::check,
        support: together::support,
        build: |_| Box::<together::Together>::default(),
        allows: allows::pair,
        changes_servers: false,
    },
];

const NODE_TARGETS: &[Target] = &[
    Target::Leader,
    Target::Primary,
    Target::Random,
    Target::Minority,
    Target::Majority,
    Target::All,
];

/// The faults aimed at one worker: the holder (default), a worker blocked
/// in acquire, the worker whose renewal is in flight ([`super::aim`]).
const WORKER_TARGETS: &[Target] = &[Target::Holder, Target::Waiter, Target::Renewer];

const CLOCK_TARGETS: &[Target] = &[
    Target::Majority,
    Target::Minority,
    Target::Random,
    Target::All,
    Target::Primary,
    Target::Leader,
];

/// Whether a run of `spec` on `system` must start its Redis nodes under
/// libfaketime.
pub fn needs_faketime(spec: &NemesisSpec, system: System) -> bool {
    clock::needs_faketime(spec, system)
}

/// Whether a run of `spec` starts its workers under libfaketime.
pub fn needs_client_faketime(spec: &NemesisSpec) -> bool {
    client_clock::needs_client_faketime(spec)
}

/// Whether a run of `spec` cuts nodes off with iptables
/// (`partition-node`, or `mixed` drawing from it).
pub fn cuts_hosts(spec: &NemesisSpec) -> bool {
    together::leaves(spec)
        .iter()
        .any(|s| s.fault == "partition-node")
}

/// Whether a run of `spec` may change its servers' state (a fault of it,
/// or one `mixed` or `together` draws from, does): a campaign then gives
/// no later run the cluster this run used.
pub fn changes_servers(spec: &NemesisSpec) -> bool {
    together::leaves(spec).iter().any(|s| match find(&s.fault) {
        Some(e) => e.changes_servers,
        // Unknown here: assume the worst.
        None => true,
    })
}

/// The entry of fault `name`.
pub fn find(name: &str) -> Option<&'static FaultEntry> {
    FAULTS.iter().find(|e| e.name == name)
}

/// Whether the nemesis of `c` applies to its system, placement and
/// workload (the host aside); the error says why not. Only
/// `crate::combination::applies` calls this.
pub fn supports(c: &Scope) -> Result<(), String> {
    let e = find(&c.nemesis.fault).ok_or_else(|| format!("unknown fault {:?}", c.nemesis.fault))?;
    (e.support)(c)?;
    super::aim::support(c)?;
    if e.name == "mixed" {
        mixed::applicable(&c.nemesis, c, false)?;
    }
    Ok(())
}

/// What this host must have for the nemesis of `c` beyond the support
/// table (cgroups and iptables, libfaketime); for `mixed`, that one of the
/// faults it draws from applies here and now.
pub fn host_ready(c: &Scope) -> Result<(), String> {
    // On --hosts, what a fault needs (iptables, libfaketime) is checked on
    // each host when lockjaw connects.
    let here = c.placement != Placement::Hosts;
    match c.nemesis.fault.as_str() {
        "partition-node" | "clock-jump" | "clock-strobe" if !here => Ok(()),
        "partition-node" => partition::host_ready(),
        "clock-jump" | "clock-strobe" => clock::host_ready(),
        "client-clock-jump" | "client-clock-strobe" => client_clock::host_ready(),
        "mixed" => mixed::applicable(&c.nemesis, c, true).map(drop),
        "together" => together::parts(&c.nemesis)?
            .into_iter()
            .try_for_each(|s| host_ready(&c.with_nemesis(s))),
        _ => Ok(()),
    }
}

/// Build the nemesis for `spec` (its fault must be known: [`spec::load`]
/// checked it).
///
/// [`spec::load`]: super::spec::load
pub fn build(spec: &NemesisSpec) -> Box<dyn Nemesis> {
    let e = find(&spec.fault).expect("the nemesis file was checked against the registry");
    (e.build)(spec)
}

fn no_params(s: &NemesisSpec) -> Result<(), ParamError> {
    if s.strike.is_some() {
        return Err((
            "strike",
            format!("{} takes no `strike` table", s.fault),
            "it is the parameter of strike-command only; remove it",
        ));
    }
    Ok(())
}

fn strike_params(s: &NemesisSpec) -> Result<(), ParamError> {
    match &s.strike {
        Some(t) => t.check(),
        None => Err((
            "fault",
            "strike-command needs a `strike` table".into(),
            "add e.g. strike = { command = \"DEL\", action = \"hold\", until = \"grant\" }",
        )),
    }
}

/// Matching a request by content: the embedded Toxiproxy's `match_next`
/// reads RESP and ZooKeeper's frames (lockjaw's links carry no TLS); on
/// ZooKeeper `command` names operations and no script is matched.
fn matched_by_content(c: &Scope) -> Result<(), String> {
    needs_lock_links(c)?;
    match c.facts().wire {
        crate::service::Wire::Resp => {}
        crate::service::Wire::ZooKeeper => strike::zookeeper_ops(&c.nemesis)?,
        crate::service::Wire::Opaque => return Err("it matches Redis requests (RESP) and ZooKeeper operations by content; these links are matched by time only (on etcd use the faults timed by the protocol)".into()),
    }
    if c.toxiproxy == ToxiproxyChoice::External {
        return Err("it needs the match_next toxic of lockjaw's embedded Toxiproxy; an external Toxiproxy has none (drop --toxiproxy)".into());
    }
    Ok(())
}

fn needs_latency(s: &NemesisSpec) -> Result<(), ParamError> {
    if s.latency_ms == 0 {
        return Err(("latency_ms", "must be positive".into(), "use e.g. 100"));
    }
    Ok(())
}

#[path = "registry_support.rs"]
mod support;
use support::*;

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
