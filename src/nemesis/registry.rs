//! The fault registry: one [`FaultEntry`] per fault name, saying which
//! targets it takes, its default length, how its parameters are checked,
//! where it applies (system × local cluster or `--endpoints` × workload) and
//! how to build it. Adding a fault = one file implementing
//! [`super::Nemesis`] plus one entry here (and a `nemesis/<name>.toml`).
//!
//! [`support_table`] renders the README's support table from these entries;
//! a test keeps the README in step.

use super::spec::{NemesisSpec, Target};
use super::{clock, failover, holder, mixed, network, node, partition, Nemesis};
use crate::cluster::System;
use crate::workload::Kind;

/// Where a run would apply a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    pub system: System,
    /// True when lockjaw starts the cluster; false with `--endpoints`.
    pub local: bool,
    pub workload: Kind,
}

/// A parameter check's complaint: (field, message, hint).
pub type ParamError = (&'static str, String, &'static str);

/// One fault lockjaw knows.
pub struct FaultEntry {
    pub name: &'static str,
    /// One line for `--help` and the README.
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
}

/// Every fault, in the order the README lists them.
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
    },
    FaultEntry {
        name: "pause-holder",
        summary: "SIGSTOP the lock holder between its grant and its protected write, for longer than its lease; then SIGCONT",
        targets: &[Target::Holder],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_holder,
        build: |_| Box::new(holder::PauseHolder),
    },
    FaultEntry {
        name: "kill-holder",
        summary: "SIGKILL the lock holder inside its critical section; respawn the worker after the fault's duration",
        targets: &[Target::Holder],
        default_duration_ms: Some(0),
        default_duration_leases: None,
        check: no_params,
        support: needs_holder,
        build: |_| Box::new(holder::KillHolder),
    },
    FaultEntry {
        name: "partition-holder",
        summary: "cut the holder off from every lock-service node (its proxies disabled), for longer than its lease",
        targets: &[Target::Holder],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: needs_holder,
        build: |_| Box::new(network::PartitionHolder),
    },
    FaultEntry {
        name: "latency",
        summary: "latency ± jitter on every worker's links to the lock service",
        targets: &[Target::AllClients],
        default_duration_ms: Some(3000),
        default_duration_leases: None,
        check: needs_latency,
        support: anywhere,
        build: |_| Box::new(network::Latency),
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
    },
    FaultEntry {
        name: "kill-node",
        summary: "SIGKILL lock-service nodes (leader/primary, random, minority, majority, all); restart them with their data 2 s later",
        targets: NODE_TARGETS,
        default_duration_ms: Some(2000),
        default_duration_leases: None,
        check: no_params,
        support: local_only,
        build: |_| Box::new(node::KillNode),
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
    },
    FaultEntry {
        name: "failover",
        summary: "SIGKILL the Sentinel primary while its replicas have not applied a fresh grant (CLIENT PAUSE WRITE); restart it as a replica",
        targets: &[Target::Primary, Target::Leader],
        default_duration_ms: None,
        default_duration_leases: Some(1.5),
        check: no_params,
        support: sentinel_only,
        build: |_| Box::new(failover::Failover),
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

/// The entry of fault `name`.
pub fn find(name: &str) -> Option<&'static FaultEntry> {
    FAULTS.iter().find(|e| e.name == name)
}

/// Whether `spec`'s fault applies in `scope`; the error says why not.
pub fn check_support(spec: &NemesisSpec, scope: &Scope) -> Result<(), String> {
    let e = find(&spec.fault).ok_or_else(|| format!("unknown fault {:?}", spec.fault))?;
    // What this host must have beyond the table (cgroups, iptables,
    // libfaketime), then what a mix draws from.
    let support = (e.support)(scope).and_then(|()| match e.name {
        "partition-node" => partition::host_ready(),
        "clock-jump" | "clock-strobe" => clock::host_ready(),
        "mixed" => mixed::applicable(spec, scope).map(drop),
        _ => Ok(()),
    });
    support.map_err(|why| {
        format!(
            "nemesis {} ({}) is not supported with --system {} {} and workload {}: {why} (hint: see the support table in the README)",
            spec.name,
            e.name,
            scope.system,
            if scope.local { "(local cluster)" } else { "--endpoints" },
            scope.workload.name()
        )
    })
}

/// Build the nemesis for `spec` (its fault must be known: [`spec::load`]
/// checked it).
///
/// [`spec::load`]: super::spec::load
pub fn build(spec: &NemesisSpec) -> Box<dyn Nemesis> {
    let e = find(&spec.fault).expect("the nemesis file was checked against the registry");
    (e.build)(spec)
}

fn no_params(_: &NemesisSpec) -> Result<(), ParamError> {
    Ok(())
}

fn needs_latency(s: &NemesisSpec) -> Result<(), ParamError> {
    if s.latency_ms == 0 {
        return Err(("latency_ms", "must be positive".into(), "use e.g. 100"));
    }
    Ok(())
}

fn anywhere(_: &Scope) -> Result<(), String> {
    Ok(())
}

fn needs_holder(s: &Scope) -> Result<(), String> {
    if s.workload.uses_lock() {
        Ok(())
    } else {
        Err("the workload takes no lock, so there is no holder".into())
    }
}

const NO_PROCESS: &str = "it needs the servers' processes, which lockjaw has only for a cluster it started (drop --endpoints)";

fn local_only(s: &Scope) -> Result<(), String> {
    if s.local {
        Ok(())
    } else {
        Err(NO_PROCESS.into())
    }
}

fn has_peers(s: &Scope) -> Result<(), String> {
    match s.system {
        System::Redis => Err("a single Redis has no peers to cut it off from (use partition-holder to cut a client off)".into()),
        System::Redlock => Err("Redlock's nodes are independent and talk to no peer (use partition-holder to cut a client off)".into()),
        _ => local_only(s),
    }
}

fn fakes_time(s: &Scope) -> Result<(), String> {
    match s.system {
        System::Etcd => Err("etcd ignores libfaketime (Go reads the clock without libc), so its clock cannot be moved".into()),
        System::Zookeeper => Err("clock faults under libfaketime are not validated on ZooKeeper's JVM".into()),
        _ if !s.local => Err("the clock is moved through libfaketime, preloaded when lockjaw starts the Redis servers (drop --endpoints)".into()),
        _ => Ok(()),
    }
}

fn sentinel_only(s: &Scope) -> Result<(), String> {
    if s.system != System::Sentinel {
        return Err("failover kills the primary of Redis under Sentinel (use --system sentinel; for other systems, kill-node)".into());
    }
    local_only(s)?;
    needs_holder(s)
}

fn needs_storage(s: &Scope) -> Result<(), String> {
    if s.workload.uses_storage() {
        Ok(())
    } else {
        Err("the workload writes nothing to the storage (use fenced-counter or lock-set)".into())
    }
}

/// The support table as Markdown: one row per fault, one column per system
/// and mode, for a lock workload with storage (fenced-counter).
pub fn support_table() -> String {
    let systems = [
        System::Redis,
        System::Redlock,
        System::Sentinel,
        System::Etcd,
        System::Zookeeper,
    ];
    let mut out = String::from("| nemesis |");
    for s in systems {
        out.push_str(&format!(" {s} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(systems.len()));
    out.push('\n');
    for e in FAULTS {
        out.push_str(&format!("| `{}` |", e.name));
        for system in systems {
            let cell = |local| {
                let scope = Scope {
                    system,
                    local,
                    workload: Kind::FencedCounter,
                };
                (e.support)(&scope).is_ok()
            };
            let text = match (cell(true), cell(false)) {
                (true, true) => "local, endpoints",
                (true, false) => "local",
                (false, true) => "endpoints",
                (false, false) => "no",
            };
            out.push_str(&format!(" {text} |"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_fault_has_a_builtin_file() {
        let mut names: Vec<&str> = FAULTS.iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FAULTS.len());
        for e in FAULTS {
            assert!(
                super::super::spec::BUILTIN
                    .iter()
                    .any(|(n, _)| *n == e.name),
                "no nemesis/{}.toml",
                e.name
            );
        }
    }

    #[test]
    fn the_readme_carries_the_current_support_table() {
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(&support_table()),
            "README.md's support table is out of date; paste this:\n{}",
            support_table()
        );
    }

    #[test]
    fn holder_faults_are_refused_on_the_register_workload() {
        let spec = NemesisSpec::of("pause-holder").unwrap();
        let scope = Scope {
            system: System::Etcd,
            local: true,
            workload: Kind::Register,
        };
        let e = check_support(&spec, &scope).unwrap_err();
        assert!(e.contains("no holder") && e.contains("hint"), "{e}");
    }
}
