//! `lockjaw run --attach --plan`: what a run would do to each attached
//! server, for a person to read before it runs. First a table per node
//! (how its server was found, the proof that it is the server, where
//! clients dial, the start command, the log source, a unit's settings),
//! then per fault of the nemesis which node it strikes, how often and for
//! how long (the nemesis's own numbers), what the strike, its undo and
//! `lockjaw heal` do. `--verbose` adds every command each host would be
//! sent ([`scripts`]). Discovery and the proof do run (they read `/proc`,
//! ask `systemctl show` for a unit, and ask each server who it is), so
//! the plan names the real pids; nothing is changed.

mod faults;
mod scripts;

use super::controller::RunConfig;
use crate::cluster::AttachedNode;
use crate::exit::Exit;
use crate::remote::attach::{AttachSpec, LogSource};
use crate::remote::{control_root, Find, Host, HostSpec};
use std::fmt::Write;
use std::sync::Arc;

/// Print the plan of `cfg` (checked by `validate`), with every command
/// when `verbose`; exit 0 when every host was reached and each node's
/// server found and proven, else 3.
pub fn print(cfg: &RunConfig, verbose: bool) -> Exit {
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
        "plan: lockjaw run --system {} --nemesis {} on {} attached node(s) of {}; only discovery and the proofs run (reading /proc, asking each server who it is), nothing is changed",
        cfg.system,
        cfg.nemesis.name,
        hosts.len(),
        path.display()
    );
    println!("{}", cfg.load.plan_line(cfg.workload.concurrency));
    let mut exit = Exit::Valid;
    for h in &hosts {
        match rt.block_on(node_plan(cfg, h, &hosts, verbose)) {
            Ok(text) => print!("{text}"),
            Err(e) => {
                println!("\nnode {}: {e}", h.name);
                eprintln!("error: node {}: {e}", h.name);
                exit = Exit::Error;
            }
        }
    }
    let servers = hosts
        .iter()
        .filter(|h| {
            h.attach
                .as_ref()
                .is_some_and(|a| a.role == crate::remote::attach::AttachRole::Server)
        })
        .count();
    let mut out = format!("\nfaults: {}\n", faults::schedule(cfg));
    for f in faults::specs(cfg) {
        faults::write(&mut out, &faults::plan(cfg, &f, servers));
    }
    if !verbose {
        out.push_str("\n(--verbose adds every command each host would be sent)\n");
    }
    print!("{out}");
    exit
}

/// How the node's server is found, in words.
fn found_by(a: &AttachSpec) -> String {
    match &a.find {
        Find::Unit { unit } => format!("unit {unit} (its MainPID, then its cgroup)"),
        Find::Pidfile { pidfile, exe: None } => {
            format!("pidfile {pidfile} (the pid and its descendants)")
        }
        Find::Pidfile {
            pidfile,
            exe: Some(e),
        } => {
            format!("pidfile {pidfile} (the pid and its descendants), running {e}")
        }
        Find::Exe { exe, arg } => format!("the one process of {exe} with argument(s) {arg:?}"),
    }
}

/// Where the node's log is read, in words.
fn log_of(a: &AttachSpec, node: &str) -> String {
    match &a.log {
        LogSource::None => "none (no log is copied)".into(),
        LogSource::Journal { unit } => {
            format!("the journal of {unit}, the run's window, into logs/{node}.log")
        }
        LogSource::File { path } => {
            format!("{path}, the bytes appended during the run, into logs/{node}.log")
        }
    }
}

/// Connect, discover, prove, and write down node `h`'s table (and with
/// `verbose` its commands).
async fn node_plan(
    cfg: &RunConfig,
    h: &HostSpec,
    all: &[HostSpec],
    verbose: bool,
) -> Result<String, String> {
    let a = h.attach.as_ref().ok_or("no attach table")?;
    let host = Host::connect(&h.name, &h.target, &control_root())
        .await
        .map_err(|e| e.to_string())?
        .shared();
    let port = cfg.system.servers().host_base_port();
    let text = match AttachedNode::discover(host.clone(), h.clone(), port).await {
        Err(e) => Err(format!("discovery: {e}")),
        Ok(node) => match node.prove(cfg.system.servers(), &cfg.auth, true).await {
            Err(e) => Err(format!("proof: {e}")),
            Ok(p) => Ok(table(h, a, &node, &p.to_string(), cfg, all, verbose)),
        },
    };
    if let Ok(host) = Arc::try_unwrap(host) {
        host.close().await;
    }
    text
}

fn table(
    h: &HostSpec,
    a: &AttachSpec,
    node: &AttachedNode,
    proof: &str,
    cfg: &RunConfig,
    all: &[HostSpec],
    verbose: bool,
) -> String {
    let f = node.found();
    let mut out = format!("\nnode {} on host {}:\n", h.name, h.target);
    let main = f.procs.first().map_or(String::new(), |p| {
        format!("pid {} (start {}, cgroup {})", p.pid, p.start, p.cgroup)
    });
    let more = match f.procs.len() {
        0 | 1 => String::new(),
        n => format!(" and {} more process(es) of its tree", n - 1),
    };
    let mut rows = vec![
        ("found by", found_by(a)),
        ("found", format!("{main}{more}")),
        ("proof", proof.to_string()),
        ("clients dial", node.client.clone()),
        ("start", a.start.clone()),
        ("log", log_of(a, &h.name)),
    ];
    if let Some(u) = &f.unit {
        rows.push((
            "unit",
            format!(
                "Restart={} RestartSec={} ms WatchdogSec={} ms",
                u.restart, u.restart_ms, u.watchdog_ms
            ),
        ));
    }
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<13}{v}");
    }
    if verbose {
        scripts::commands(cfg, h, all, node, &mut out);
    }
    out
}
