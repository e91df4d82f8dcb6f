//! `lockjaw sweep`: rates of each anomaly kind against a varied fault or
//! workload parameter (`--vary`), per system, and `--find-boundary`'s
//! search for the 50 % crossing.
//!
//! Everything is checked before the first run ([`vary`]). Each value of a
//! nemesis parameter becomes a nemesis file under OUT/nemesis/ (the
//! original's text with that one field set), passed to each `lockjaw run`
//! child as `--nemesis PATH`, so every run directory under OUT/runs/ stays
//! re-checkable and its reproduce line works. The runs go through the
//! comparison's machinery ([`super::compare::run_cells`], `--jobs` at
//! once; Ctrl-C lets the running children heal, keeps what finished and
//! writes the tables). Each (system, value) is tallied with
//! [`crate::report::trials::Tally::of`]; `report::sweep` renders the
//! tables and plots. [`plan`] checks everything first; [`runs`] runs.

pub mod boundary;

mod plan;
mod runs;
pub mod sharded;
pub mod vary;

use super::compare::{self as cmp, INTERRUPTED};
use crate::exit::Exit;
use crate::report::sweep::{self as rep, Sweep};
use crate::storage::Fencing;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// Rates of anomalies against a varied fault or workload parameter.
///
/// Each (system, value) runs --runs times as `lockjaw run` children (their
/// run directories under OUT/runs/). Writes sweep.md, sweep.html (one plot
/// per system) and sweep.json into OUT. Exit code: 0 when the tables were
/// written, 2 when interrupted (the tables hold what finished), 3 on bad
/// usage or when a run could not run.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Systems, e.g. redis,etcd.
    #[arg(long, value_delimiter = ',', required = true)]
    pub system: Vec<String>,
    /// The nemesis (a name or a nemesis file).
    #[arg(long)]
    pub nemesis: String,
    /// PARAM=V1,V2,... or PARAM=FROM..TO/STEPS; PARAM one of
    /// duration_leases, offset_ms, latency_ms, hold_ms, ttl_ms.
    #[arg(long)]
    pub vary: String,
    /// Runs per value (seeds S, S+1, ...) [default: 1; with
    /// --find-boundary, runs added to a probe at a time: 2].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// How many runs go at once (each on its own ports and names).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    #[arg(long, default_value = "fenced-counter")]
    pub workload: String,
    #[arg(long, value_enum)]
    pub fencing: Option<Fencing>,
    /// Seconds per run.
    #[arg(long)]
    pub time_limit: Option<f64>,
    #[arg(long)]
    pub ttl_ms: Option<u64>,
    #[arg(long)]
    pub hold_ms: Option<u64>,
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Seed of each value's first run [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the tables and the runs go [default: histories/sweep-<UTC>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Search the value at which the rate of --anomaly crosses 50 %,
    /// between the smallest and the largest --vary value.
    #[arg(long)]
    pub find_boundary: bool,
    /// With --find-boundary: any, two-holders, fence-order, stale-writes,
    /// lost-updates, duplicate-effects or not-linearizable.
    #[arg(long)]
    pub anomaly: Option<String>,
    /// With --find-boundary: runs at most per probed value.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs_per_probe: Option<u32>,
    /// No progress bar on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// Run only shard K of N of the (system, value) pairs (positions K,
    /// K+N, ...; needs --seed and --out; not with --find-boundary) and
    /// write OUT/shard.json for `lockjaw merge` (docs/ci.md).
    #[arg(long, value_name = "K/N", value_parser = crate::runner::shard::shard_flag)]
    pub shard: Option<crate::runner::shard::Shard>,
    #[command(flatten)]
    pub choices: super::cli::Choices,
    /// Write witness histories (witness-<kind>.jsonl) in invalid runs;
    /// without it the runs get `--no-witness`.
    #[arg(long)]
    pub witness: bool,
    /// More `lockjaw run` flags for every run, after `--`.
    #[arg(last = true, value_name = "RUN_FLAGS")]
    pub run_flags: Vec<String>,
}

/// `lockjaw sweep`: check, run, write and print the tables.
pub fn run(args: &SweepArgs) -> Result<Exit, String> {
    let shard = match args.shard {
        Some(s) if args.find_boundary => {
            return Err(format!(
                "--shard {s} with --find-boundary: the search's probes depend on earlier ones (hint: shard a sweep over fixed --vary values)"
            ))
        }
        Some(s) => Some((s, crate::runner::shard::require(s, args.seed, args.out.as_deref())?.0)),
        None => None,
    };
    let mut plan = plan::plan(args)?;
    let runs = args.runs.unwrap_or(1);
    let all = runs::jobs(args, &plan)?;
    let mine: Vec<(String, f64, String)> = match shard {
        Some((s, _)) => s
            .positions(all.len())
            .into_iter()
            .map(|i| all[i].clone())
            .collect(),
        None => all.clone(),
    };
    let total = (!args.find_boundary).then(|| mine.len() as u64 * u64::from(runs));
    let bar = super::progress::runs_bar(total, !args.no_progress);
    plan.quiet_children = !bar.is_hidden();
    cmp::catch_sigint();
    let systems = if args.find_boundary {
        runs::find_boundaries(args, &plan, &bar)
    } else {
        runs::sweep_values(args, &plan, &bar, &mine)?
    };
    bar.finish_and_clear();
    let interrupted = INTERRUPTED.load(Ordering::SeqCst);
    let title = plan::title(args, &plan);
    let s = Sweep::new(
        match shard {
            Some((k, _)) => format!("{title} (shard {k})"),
            None => title.clone(),
        },
        args.nemesis.clone(),
        plan.axis.clone(),
        systems,
        args.find_boundary.then_some(plan.kind),
        interrupted,
    );
    rep::write_sweep(&plan.out, &s).map_err(|e| format!("{}: {e}", plan.out.display()))?;
    if let Some((k, seed)) = shard {
        let mut m = sharded::manifest(args, &plan, &all, &title, &s.systems, k, seed);
        m.interrupted = interrupted;
        m.write(&plan.out)?;
    }
    print!("{}", rep::sweep_md(&s));
    println!("\n{}", plan.out.join("sweep.html").display());
    let failed = s.systems.iter().any(|x| {
        x.rows.iter().any(|r| r.error.is_some())
            || x.boundary
                .as_ref()
                .is_some_and(|b| matches!(b.found, rep::Found::Stopped { .. }) && !interrupted)
    });
    Ok(if interrupted {
        Exit::Unknown
    } else if failed {
        Exit::Error
    } else {
        Exit::Valid
    })
}

/// The `lockjaw sweep` command.
pub fn sweep(args: SweepArgs) -> Exit {
    match run(&args) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
