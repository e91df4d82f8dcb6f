//! `lockjaw run --attach --plan`: every command a run would send to each
//! host (discovery, each fault of the chosen nemesis and its undo, the
//! start command, the partition rules, the log read), printed and not
//! run. Discovery itself does run over SSH (it only reads `/proc`, and
//! for a unit asks `systemctl show`), so the fault commands carry the
//! real pids, start times and cgroups they would be checked against.

use super::controller::RunConfig;
use crate::cluster::{attach_plan as script, AttachedNode};
use crate::exit::Exit;
use crate::nemesis::mixed;
use crate::process::Signal;
use crate::remote::{control_root, rule_script, Host, HostSpec, RemoteChain, RemoteRule};
use std::fmt::Write;
use std::sync::Arc;

/// Print the plan of `cfg` (checked by `validate`); exit 0 when every
/// host was reached and discovery found each node's server, else 3.
pub fn print(cfg: &RunConfig) -> Exit {
    if let Err(e) = super::controller::validate(cfg) {
        eprintln!("error: {}", e.msg);
        return Exit::Error;
    }
    let Some(path) = &cfg.hosts else {
        return Exit::Error;
    };
    let hosts = match super::hosts::load_attached(path, cfg.system) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: --hosts {}: {e}", path.display());
            return Exit::Error;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Error;
        }
    };
    println!(
        "plan: lockjaw run --system {} --nemesis {} on {} attached node(s) of {}; nothing below is run except discovery",
        cfg.system,
        cfg.nemesis.name,
        hosts.len(),
        path.display()
    );
    let mut exit = Exit::Valid;
    for h in &hosts {
        match rt.block_on(node_plan(cfg, h, &hosts)) {
            Ok(text) => print!("{text}"),
            Err(e) => {
                println!("node {}: {e}", h.name);
                eprintln!("error: node {}: {e}", h.name);
                exit = Exit::Error;
            }
        }
    }
    exit
}

/// The faults of the nemesis (each of a `mixed` one's pool).
fn fault_names(cfg: &RunConfig) -> Vec<String> {
    match cfg.nemesis.fault.as_str() {
        "mixed" => mixed::pool(&cfg.nemesis)
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.fault)
            .collect(),
        f => vec![f.to_string()],
    }
}

fn block(out: &mut String, title: &str, script: &str) {
    let _ = writeln!(out, "  {title}:");
    for l in script.lines() {
        let _ = writeln!(out, "    {l}");
    }
}

/// Connect, discover, and write down node `h`'s commands.
async fn node_plan(cfg: &RunConfig, h: &HostSpec, all: &[HostSpec]) -> Result<String, String> {
    let a = h.attach.as_ref().ok_or("no attach table")?;
    let mut out = String::new();
    let _ = writeln!(out, "\nnode {} on host {}:", h.name, h.target);
    block(&mut out, "discovery", &script::discover(a));
    let host = Host::connect(&h.name, &h.target, &control_root())
        .await
        .map_err(|e| e.to_string())?
        .shared();
    let port = cfg.system.servers().host_base_port();
    let found = AttachedNode::discover(host.clone(), h.clone(), port).await;
    let text = match found {
        Err(e) => Err(format!("discovery: {e}")),
        Ok(node) => match node.prove(cfg.system.servers(), &cfg.auth, true).await {
            Err(e) => Err(format!("proof: {e}")),
            Ok(p) => {
                let _ = writeln!(out, "  proof: {p}");
                faults_plan(cfg, h, all, &node, &mut out);
                Ok(())
            }
        },
    };
    if let Ok(host) = Arc::try_unwrap(host) {
        host.close().await;
    }
    text.map(|()| out)
}

/// The fault commands of the nemesis on the node discovery found.
fn faults_plan(
    cfg: &RunConfig,
    h: &HostSpec,
    all: &[HostSpec],
    node: &AttachedNode,
    out: &mut String,
) {
    let a = &node.attach;
    let f = node.found();
    let _ = writeln!(out, "  clients dial: {}", node.client);
    let procs: Vec<String> = f
        .procs
        .iter()
        .map(|p| format!("pid {} (start {}, cgroup {})", p.pid, p.start, p.cgroup))
        .collect();
    let _ = writeln!(out, "  found: {}", procs.join("; "));
    if let Some(u) = &f.unit {
        let _ = writeln!(
            out,
            "  unit: Restart={} RestartSec={} ms WatchdogSec={} ms",
            u.restart, u.restart_ms, u.watchdog_ms
        );
    }
    for fault in fault_names(cfg) {
        match fault.as_str() {
            "pause-node" => {
                block(out, "pause-node", &script::signal(&f.procs, Signal::Stop));
                block(
                    out,
                    "pause-node undo",
                    &script::signal(&f.procs, Signal::Cont),
                );
            }
            "kill-node" => {
                block(out, "kill-node", &script::kill(a, &f.procs));
                block(out, "kill-node undo (start)", &script::start(a));
            }
            "partition-node" => {
                let (cut, heal) = partition_rules(h, all);
                block(out, "partition-node", &cut);
                block(out, "partition-node undo", &heal);
            }
            other => {
                let _ = writeln!(
                    out,
                    "  {other}: no command on the hosts (it acts between the clients and the servers)"
                );
            }
        }
    }
    if let Some(s) = script::log_mark(a) {
        block(out, "log: where it stands when the run starts", &s);
    }
    if let Some(s) = script::log_since(a, &script::LogMark::default()) {
        block(
            out,
            "log: the run's window, at its end (from that mark)",
            &s,
        );
    }
}

/// partition-node's rules on `h`'s host when it is the one cut off:
/// (insert, delete), the comment's run id left as `RUN_ID`.
fn partition_rules(h: &HostSpec, all: &[HostSpec]) -> (String, String) {
    let (mut cut, mut heal) = (String::new(), String::new());
    for p in all.iter().filter(|p| p.name != h.name) {
        for chain in [RemoteChain::Input, RemoteChain::Output] {
            let r = RemoteRule {
                chain,
                peer: p.address,
                comment: format!("lockjaw:RUN_ID partition-node {}", h.name),
            };
            let _ = writeln!(cut, "{}", rule_script(&r, true));
            let _ = writeln!(heal, "{}", rule_script(&r, false));
        }
    }
    (cut, heal)
}
