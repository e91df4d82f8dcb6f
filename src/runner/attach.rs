//! `--attach`: a run against servers lockjaw did not start. What is
//! refused before anything starts (and why), the hosts file's private
//! copy in the run directory (heal takes the start commands from it),
//! what run.json records of the servers found, the warnings a systemd
//! unit's settings call for, and the end of the run: every node answers
//! again, its log lines of the run's window are copied.

use super::controller::{RunConfig, RunError};
use crate::cluster::Cluster;
use crate::nemesis::{clock, node::how_many, NemesisSpec, Target};
use crate::remote::HostSpec;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The faults lockjaw applies to attached servers themselves.
const SERVER_FAULTS: &[&str] = &["pause-node", "kill-node", "partition-node", "kill-service"];

/// The faults a nemesis applies (each of a `mixed` one's pool, both of
/// a `together` one's).
fn faults(spec: &NemesisSpec) -> Vec<NemesisSpec> {
    crate::nemesis::together::leaves(spec)
}

/// Refuse what `--attach`, `--plan` and `--allow-majority` cannot do
/// together with the rest of the run (before anything starts); loads the
/// hosts file as the run will.
pub fn check(cfg: &RunConfig) -> Result<(), RunError> {
    let e = |m: String| RunError::new(m);
    let Some(path) = &cfg.hosts else {
        if cfg.attach || cfg.plan {
            return Err(e("--attach and --plan need --hosts FILE, whose nodes describe the running servers (hint: see docs/remote.md, \"Your own servers, faults included\")".into()));
        }
        if cfg.allow_majority {
            return Err(e(
                "--allow-majority applies only with --attach (hint: drop it)".into(),
            ));
        }
        return Ok(());
    };
    if !cfg.attach {
        if cfg.plan || cfg.allow_majority {
            return Err(e(
                "--plan and --allow-majority apply only with --attach (hint: add --attach, or drop them)".into(),
            ));
        }
        super::hosts::load(path, cfg.system, cfg.nodes)
            .map_err(|m| e(format!("--hosts {}: {m}", path.display())))?;
        return Ok(());
    }
    if cfg.nodes.is_some() {
        return Err(e("--nodes with --attach: the cluster is every node of the hosts file that allows the system (hint: drop --nodes, or narrow the nodes' systems)".into()));
    }
    let hosts = super::hosts::load_attached(path, cfg.system)
        .map_err(|m| e(format!("--hosts {}: {m}", path.display())))?;
    refuse_faults(cfg)?;
    guard(cfg, &hosts)
}

/// Clock faults and the faults not yet routed through the attached
/// processes are refused, with the reason.
fn refuse_faults(cfg: &RunConfig) -> Result<(), RunError> {
    for f in faults(&cfg.nemesis) {
        let why = if clock::is_clock_fault(&f.fault) {
            "the servers' processes do not run under lockjaw's libfaketime (lockjaw did not start them), so their clocks cannot be moved (hint: client-clock-jump moves the workers' clocks instead)"
        } else {
            continue;
        };
        return Err(RunError::new(format!(
            "nemesis {} ({}) with --attach: {why}",
            cfg.nemesis.name, f.fault
        )));
    }
    Ok(())
}

/// Whether losing `k` of `n` servers is what the guard rail refuses on
/// `cfg`'s system.
fn breach(cfg: &RunConfig, k: usize, n: usize) -> bool {
    crate::nemesis::attached::is_majority(k, n, quorum(cfg))
}

/// Whether `cfg`'s system keeps its service only while a majority of its
/// servers is up (as `kill-service` decides how many it kills).
pub(super) fn quorum(cfg: &RunConfig) -> bool {
    let f = cfg.system.facts();
    f.partitionable_peers.is_yes() && !f.failover.is_yes()
}

/// Never pause, kill or cut off a majority of the servers (or every
/// replica) unless `--allow-majority`: checked here from the target, and
/// again at each strike.
fn guard(cfg: &RunConfig, hosts: &[HostSpec]) -> Result<(), RunError> {
    if cfg.allow_majority {
        return Ok(());
    }
    let n = hosts
        .iter()
        .filter(|h| {
            h.attach
                .as_ref()
                .is_some_and(|a| a.role == crate::remote::attach::AttachRole::Server)
        })
        .count();
    for f in faults(&cfg.nemesis) {
        if !SERVER_FAULTS.contains(&f.fault.as_str()) {
            continue;
        }
        let k = match f.fault.as_str() {
            // The whole service: a majority of a quorum's servers, else all.
            "kill-service" if quorum(cfg) => how_many(Target::Majority, n).unwrap_or(n),
            "kill-service" => n,
            _ => how_many(f.target, n).unwrap_or(0),
        };
        if breach(cfg, k, n) {
            return Err(RunError::new(format!(
                "nemesis {} ({} on {}) would take {k} of the {n} attached servers, and the cluster would lose its quorum (or every replica): refused (hint: target fewer nodes, or add --allow-majority if your cluster may)",
                cfg.nemesis.name,
                f.fault,
                f.target.name()
            )));
        }
    }
    Ok(())
}

/// Copy the hosts file to `DIR/hosts.toml`, mode 0600, before the
/// cluster is touched: heal takes the start commands from this copy.
pub fn copy_hosts_file(from: &Path, dir: &Path) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text = std::fs::read(from)
        .map_err(|e| format!("--hosts {}: cannot read it: {e}", from.display()))?;
    let to = dir.join(crate::remote::attach::RUN_HOSTS_FILE);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&to)
        .map_err(|e| format!("{}: {e}", to.display()))?;
    f.write_all(&text)
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("{}: {e}", to.display()))
}

/// What run.json records of one attached node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttachedRecord {
    pub node: String,
    pub host: String,
    pub client: String,
    /// (pid, start time in clock ticks since boot), main process first.
    pub procs: Vec<(u32, u64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<UnitRecord>,
    /// How its found processes were proven to be its server (the last
    /// proof: at discovery, or before the last strike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<crate::cluster::proof::Proof>,
}

/// A unit's settings as discovery read them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitRecord {
    pub restart: String,
    pub restart_ms: u64,
    pub watchdog_ms: u64,
}

/// The attached nodes and what was found on each.
pub fn records(c: &Cluster) -> Vec<AttachedRecord> {
    c.nodes()
        .iter()
        .filter_map(|n| {
            let a = n.attached.as_ref()?;
            let f = a.found();
            Some(AttachedRecord {
                node: n.name.clone(),
                host: a.spec.target.to_string(),
                client: n.addr.clone(),
                procs: f.procs.iter().map(|p| (p.pid, p.start)).collect(),
                unit: f.unit.map(|u| UnitRecord {
                    restart: u.restart,
                    restart_ms: u.restart_ms,
                    watchdog_ms: u.watchdog_ms,
                }),
                proof: a.proof(),
            })
        })
        .collect()
}

/// What the units' settings make of the faults, before the run: a pause
/// longer than `WatchdogSec=` becomes a kill (a warning); a kill longer
/// than `RestartSec=` of a unit that restarts is refused (the manager
/// would start it before lockjaw does, so the fault would not be what
/// was asked; the run would only record the real downtime).
pub fn unit_checks(cfg: &RunConfig, c: &Cluster) -> Result<Vec<String>, RunError> {
    let ttl = Duration::from_millis(cfg.workload.ttl_ms);
    let mut warnings = Vec::new();
    for f in faults(&cfg.nemesis) {
        let d = f.duration(ttl).as_millis() as u64;
        for r in records(c) {
            let Some(u) = &r.unit else { continue };
            if f.fault == "pause-node" && u.watchdog_ms > 0 && d > u.watchdog_ms {
                warnings.push(format!(
                    "node {}: a pause of {d} ms outlasts its unit's WatchdogSec ({} ms): systemd will kill it, so the pause becomes a kill (the run records the restart as what happened)",
                    r.node, u.watchdog_ms
                ));
            }
            if f.fault == "kill-node" && u.restart != "no" && d > u.restart_ms {
                return Err(RunError::new(format!(
                    "nemesis {}: node {}'s unit restarts it (Restart={}) {} ms after a kill, before the fault's {d} ms are over (hint: a duration_ms of at most {} ms, or a unit with Restart=no; lockjaw never edits unit files)",
                    cfg.nemesis.name, r.node, u.restart, u.restart_ms, u.restart_ms
                )));
            }
        }
    }
    Ok(warnings)
}

/// The end of a run on attached servers (its faults healed): every node
/// answers its health check again (at most 60 s each), and each node's
/// log lines since it was found are in `logs/`. `Err` names the nodes
/// that do not answer.
pub async fn end(c: &Cluster) -> Result<(), String> {
    for p in c.copy_attached_logs().await {
        crate::exit::say(&format!("warning: {p}"));
    }
    let bad = c.unanswering(Duration::from_secs(60)).await;
    if bad.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = bad.iter().map(|(n, why)| format!("{n} ({why})")).collect();
    let hint = match bad
        .iter()
        .any(|(_, why)| why.contains(crate::client::redis_query::NEEDS_PASSWORD))
    {
        true => crate::client::redis_query::AUTH_HINT,
        false => "every fault was taken back; look at the node's log in logs/ and start it by hand",
    };
    Err(format!(
        "attached node(s) not answering their health check after the run: {} (hint: {hint})",
        names.join(", ")
    ))
}
