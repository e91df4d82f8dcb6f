//! Command-line entry points of the runner: `lockjaw run`, the internal
//! `lockjaw worker`, and `lockjaw heal`.

use super::controller::{self, RunConfig};
use crate::cluster::System;
use crate::exit::Exit;
use crate::process::ProcId;
use crate::storage::Fencing;
use crate::undo::{UndoLog, UNDO_FILE};
use crate::workload::{self, Overrides};
use std::path::{Path, PathBuf};

/// Drive a lock service through faults and record a checked history.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The lock service.
    #[arg(long, value_enum)]
    pub system: System,
    /// A workload name (lock, fenced-counter, lock-set, register, leader) or a
    /// path to a workload file.
    #[arg(long, default_value = "fenced-counter")]
    pub workload: String,
    /// A nemesis name (none, pause-holder, kill-holder, partition-holder,
    /// latency, delay-storage, pause-node, kill-node, partition-node,
    /// clock-jump, clock-strobe, failover, mixed) or a path to a nemesis file.
    #[arg(long, default_value = "none")]
    pub nemesis: String,
    /// Seconds to run (overrides the workload file).
    #[arg(long)]
    pub time_limit: Option<f64>,
    /// Worker processes (overrides the workload file).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Requested lease in milliseconds (overrides the workload file).
    #[arg(long)]
    pub ttl_ms: Option<u64>,
    /// Time inside the critical section (overrides the workload file).
    #[arg(long)]
    pub hold_ms: Option<u64>,
    /// Pause between steps (overrides the workload file).
    #[arg(long)]
    pub think_ms: Option<u64>,
    /// Whether the storage enforces fencing tokens (default on; off for
    /// redlock, which has none).
    #[arg(long, value_enum)]
    pub fencing: Option<Fencing>,
    /// Use a running cluster (host:port,...) instead of starting one; for
    /// sentinel give the sentinels.
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Option<Vec<String>>,
    /// Sentinel with --endpoints: the master name your sentinels monitor
    /// (e.g. mymaster). A local cluster's is `lockjaw`.
    #[arg(long)]
    pub sentinel_master: Option<String>,
    /// An external Toxiproxy (http://host:port) instead of the embedded one.
    #[arg(long)]
    pub toxiproxy: Option<String>,
    /// Seed for every random choice (default: from the clock; recorded).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the run exactly here instead of histories/<name>-<UTC>/.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Local cluster: first port (default: the system's).
    #[arg(long)]
    pub base_port: Option<u16>,
    /// Local cluster: number of data nodes (default: the system's).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Where new run directories go.
    #[arg(long, default_value = "histories")]
    pub histories: PathBuf,
    /// No progress bars or phase lines on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// Do not record ops (only to measure the cost of recording).
    #[arg(long, hide = true)]
    pub no_record: bool,
}

fn config(a: RunArgs) -> Result<RunConfig, String> {
    let ov = Overrides {
        ttl_ms: a.ttl_ms,
        concurrency: a.concurrency,
        time_limit_s: a.time_limit,
        hold_ms: a.hold_ms,
        think_ms: a.think_ms,
    };
    let mut w = workload::load(&a.workload, &ov).map_err(|e| e.to_string())?;
    if w.kind == workload::Kind::Register {
        // A key of its own: the register starts absent in every run.
        w.register_key = format!("{}-{}", w.register_key, super::rundir::utc_stamp());
    }
    let nemesis = crate::nemesis::spec::load(&a.nemesis).map_err(|e| e.to_string())?;
    let fencing = a.fencing.unwrap_or(if a.system == System::Redlock {
        Fencing::Off
    } else {
        Fencing::On
    });
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let sentinel_master = match (&a.sentinel_master, a.system, &a.endpoints) {
        (None, _, _) => crate::cluster::SENTINEL_MASTER.to_string(),
        (Some(m), System::Sentinel, Some(_)) => m.clone(),
        (Some(_), System::Sentinel, None) => {
            return Err(format!(
                "--sentinel-master names the master of your own sentinels: give them with --endpoints (a local cluster's master is {:?})",
                crate::cluster::SENTINEL_MASTER
            ))
        }
        (Some(_), s, _) => {
            return Err(format!(
                "--sentinel-master applies to --system sentinel only, not {}",
                s.name()
            ))
        }
    };
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the lockjaw binary: {e}"))?;
    Ok(RunConfig {
        system: a.system,
        workload: w,
        nemesis,
        fencing,
        endpoints: a.endpoints,
        toxiproxy: a.toxiproxy,
        seed,
        out: a.out,
        histories: a.histories,
        base_port: a.base_port,
        nodes: a.nodes,
        progress: !a.no_progress,
        exe,
        command: std::env::args().collect(),
        record: !a.no_record,
        sentinel_master,
    })
}

pub fn run(args: RunArgs) -> Exit {
    let cfg = match config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    match controller::run(cfg) {
        Ok(o) => {
            println!("{}", o.summary);
            o.exit
        }
        Err(e) => {
            eprintln!("error: {}", e.msg);
            if let Some(d) = e.dir {
                eprintln!("run directory: {}", d.display());
            }
            Exit::Error
        }
    }
}

/// Internal: one client process of a run.
#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    /// The worker spec written by `lockjaw run`.
    #[arg(long)]
    pub spec: PathBuf,
}

pub fn worker(args: WorkerArgs) -> Exit {
    super::worker::main(&args.spec)
}

/// Undo every effect a killed run left behind, from its undo log.
#[derive(clap::Args, Debug)]
pub struct HealArgs {
    /// The run directory (holds undo.jsonl).
    pub dir: PathBuf,
    /// Heal even though the run's lockjaw still seems to be running.
    #[arg(long)]
    pub force: bool,
}

/// File in the run directory naming the controller (PID + start time).
pub const CONTROLLER_FILE: &str = "controller.json";

/// Write down who runs `dir`, so `heal` can refuse to pull a live run apart.
pub fn write_controller(dir: &Path) {
    if let Some(me) = ProcId::of(std::process::id() as i32) {
        let _ = std::fs::write(
            dir.join(CONTROLLER_FILE),
            serde_json::to_string(&me).unwrap_or_default(),
        );
    }
}

pub fn heal(args: HealArgs) -> Exit {
    match heal_dir(&args.dir, args.force) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            Exit::Valid
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}

/// A run killed mid-write can leave its history's last line cut short:
/// remove that partial line, so `lockjaw check` reads the rest (what it
/// held was never complete; the verdict is judged on what was recorded).
fn repair_history(dir: &Path) -> Result<Option<String>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let path = dir.join(super::rundir::HISTORY);
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    else {
        return Ok(None);
    };
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let len = f.metadata().map_err(err)?.len();
    // Look back far enough for any one line.
    let tail = len.min(1 << 20);
    f.seek(SeekFrom::Start(len - tail)).map_err(err)?;
    let mut buf = Vec::with_capacity(tail as usize);
    f.read_to_end(&mut buf).map_err(err)?;
    if buf.is_empty() || buf.ends_with(b"\n") {
        return Ok(None);
    }
    let keep = match buf.iter().rposition(|&b| b == b'\n') {
        Some(i) => len - tail + i as u64 + 1,
        None if tail == len => 0,
        None => {
            return Err(format!(
                "{}: its last line is over 1 MiB long",
                path.display()
            ))
        }
    };
    f.set_len(keep).map_err(err)?;
    Ok(Some(format!(
        "{}: removed a partial last line ({} bytes) that the kill cut short",
        path.display(),
        len - keep
    )))
}

/// Drain `dir`'s undo log; returns one line per effect undone.
pub fn heal_dir(dir: &Path, force: bool) -> Result<Vec<String>, String> {
    let path = dir.join(UNDO_FILE);
    if !path.is_file() {
        return Err(format!(
            "{}: no undo log (hint: give the run directory, e.g. histories/latest)",
            path.display()
        ));
    }
    if !force {
        let owner = std::fs::read_to_string(dir.join(CONTROLLER_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<ProcId>(&t).ok());
        if let Some(p) = owner.filter(|p| p.is_alive() && p.pid != std::process::id() as i32) {
            return Err(format!(
                "the run in {} is still going (lockjaw pid {}) (hint: press Ctrl-C in its terminal; it heals itself; or pass --force)",
                dir.display(),
                p.pid
            ));
        }
    }
    let repaired = repair_history(dir)?;
    let log = UndoLog::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let pending = log.pending();
    if pending.is_empty() {
        return Ok(repaired
            .into_iter()
            .chain([format!("{}: nothing to heal", dir.display())])
            .collect());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let errors = rt.block_on(log.drain());
    let failed: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let mut lines: Vec<String> = repaired.into_iter().collect();
    lines.extend(
        pending
            .iter()
            .rev()
            .map(|(_, u)| format!("healed: {}", u.describe()))
            .filter(|l| {
                !failed
                    .iter()
                    .any(|f| f.contains(l.trim_start_matches("healed: ")))
            }),
    );
    if !failed.is_empty() {
        return Err(format!(
            "{} (hint: fix the cause and run `lockjaw heal {}` again)",
            failed.join("; "),
            dir.display()
        ));
    }
    lines.push(format!(
        "{}: healed {} effects",
        dir.display(),
        pending.len()
    ));
    Ok(lines)
}
