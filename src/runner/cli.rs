//! Command-line entry points of the runner: `lockjaw run`, the internal
//! `lockjaw worker`, and `lockjaw heal`.

use super::controller::{self, RunConfig};
use crate::cluster::System;
use crate::exit::Exit;
use crate::storage::Fencing;
use crate::workload::{self, Overrides};
use std::path::PathBuf;

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

pub fn heal(args: HealArgs) -> Exit {
    match super::heal::heal_dir(&args.dir, args.force) {
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
