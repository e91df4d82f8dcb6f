//! What `lockjaw cluster up|status|down` do: start a local cluster
//! detached and tracked by its state file, show it, stop it.

use super::{state, Cluster, ClusterSpec, FindServers, NodeRole};
use crate::exit::Exit;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `cluster up`: start the cluster `spec` describes, detached, unless one
/// already runs in its directory; print its nodes and endpoints.
pub async fn up(spec: &ClusterSpec) -> anyhow::Result<Exit> {
    let dir = spec.dir.clone();
    if let Ok(st) = state::read(&dir) {
        if st
            .nodes
            .iter()
            .any(|n| n.proc.is_some_and(|p| p.is_alive()))
        {
            anyhow::bail!(
                "a {} cluster is already running in {} (hint: `lockjaw cluster down --dir {}` first, or use another --dir and --base-port)",
                st.system,
                dir.display(),
                dir.display()
            );
        }
    }
    let t0 = Instant::now();
    // Detached servers outlive lockjaw: an interrupt (Ctrl-C, SIGTERM,
    // SIGHUP) during start-up must stop what was started so far.
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let c = tokio::select! {
        r = Cluster::start(spec) => r?,
        _ = async { tokio::select! { _ = int.recv() => {}, _ = term.recv() => {}, _ = hup.recv() => {} } } => {
            // The state file lists what was started.
            let stopped = state::stop_all(&dir).unwrap_or_default();
            anyhow::bail!("interrupted during start-up; stopped {}", stopped.join(", "));
        }
    };
    println!(
        "{} cluster healthy in {:.2} s ({})",
        c.system,
        t0.elapsed().as_secs_f64(),
        state::path(c.dir.as_deref().unwrap_or(&dir)).display()
    );
    print_nodes(&c).await;
    if let Ok(v) = c.version().await {
        println!("version: {v}");
    }
    println!("endpoints: {}", c.client_endpoints().join(","));
    c.detach();
    Ok(Exit::Valid)
}

async fn print_nodes(c: &Cluster) {
    let leader = c.leader().await.ok().flatten().map(|n| n.name.clone());
    for n in c.nodes() {
        let pid = n.proc_id().map_or("-".to_string(), |p| p.pid.to_string());
        let st = if n.is_paused() {
            "paused"
        } else if n.is_alive() {
            "running"
        } else {
            "gone"
        };
        let role = match (n.role, leader.as_deref() == Some(n.name.as_str())) {
            (NodeRole::Sentinel, _) => "sentinel",
            (_, true) => c.system.leader_word().unwrap_or(""),
            _ => "",
        };
        println!(
            "  {:<10} {:<16} pid {:<8} {:<8} {:<8} log {}",
            n.name,
            n.addr,
            pid,
            st,
            role,
            n.log.display()
        );
        if let Some(f) = &n.faketime_file {
            println!("  {:<10} clock control file {}", "", f.display());
        }
    }
}

/// The cluster directories `--dir` names, or every one under `.lockjaw/`.
fn dirs(d: Option<PathBuf>) -> anyhow::Result<Vec<PathBuf>> {
    if let Some(d) = d {
        return Ok(vec![d]);
    }
    let root = Path::new(".lockjaw");
    let found: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| state::path(p).exists())
                .collect()
        })
        .unwrap_or_default();
    if found.is_empty() {
        anyhow::bail!(
            "no cluster state file under {} (hint: pass --dir DIR of a `lockjaw cluster up`)",
            root.display()
        );
    }
    Ok(found)
}

/// `cluster status`: every node of the cluster in `dir` (or of every
/// cluster under `.lockjaw/`); exit 3 when a node is not running.
pub async fn status(dir: Option<PathBuf>, find: FindServers) -> anyhow::Result<Exit> {
    let mut exit = Exit::Valid;
    for d in dirs(dir)? {
        let c = Cluster::attach(&d, find)?;
        let up = c.nodes().iter().filter(|n| n.is_alive()).count();
        println!(
            "{} cluster in {}: {up} of {} nodes running",
            c.system,
            d.display(),
            c.nodes().len()
        );
        print_nodes(&c).await;
        if up < c.nodes().len() {
            exit = Exit::Error;
        }
        c.detach();
    }
    Ok(exit)
}

/// Why `cluster down --dir D` finds no state file: `Some(reason)` when
/// nothing can have been started in `D`: it does not exist, is empty, or
/// holds what `cluster up` prepares before it writes its intent (an empty
/// `logs/` beside the nodes' data directories). `None` when `D` is not a
/// cluster directory.
fn never_started(d: &Path) -> Option<&'static str> {
    let Ok(mut rd) = std::fs::read_dir(d) else {
        return (!d.exists()).then_some("no such directory");
    };
    let empty = |p: &Path| std::fs::read_dir(p).is_ok_and(|mut l| l.next().is_none());
    if rd.next().is_none() || empty(&d.join("logs")) {
        return Some("no state file: `cluster up` was stopped before it started anything");
    }
    None
}

/// `cluster down`: stop every process the state file in `dir` (or of every
/// cluster under `.lockjaw/`) lists, and empty and remove their cgroups.
/// The state file lists every node before the first one is spawned, so a
/// directory without one had nothing started in it.
pub fn down(dir: Option<PathBuf>) -> anyhow::Result<Exit> {
    let explicit = dir.is_some();
    for d in dirs(dir)? {
        if explicit && !state::path(&d).exists() {
            if let Some(why) = never_started(&d) {
                println!("{}: nothing to stop ({why})", d.display());
                continue;
            }
        }
        let stopped = state::stop_all(&d)?;
        println!(
            "{}: stopped {}",
            d.display(),
            if stopped.is_empty() {
                "nothing (no node was running)".into()
            } else {
                stopped.join(", ")
            }
        );
    }
    Ok(Exit::Valid)
}
