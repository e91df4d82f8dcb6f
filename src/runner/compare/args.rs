//! `lockjaw compare`'s flags (clap) and its entry point.

use crate::exit::Exit;
use crate::runner::cli::Choices;
use std::path::PathBuf;

/// Run a matrix of systems × nemeses × fencing and compare the cells.
///
/// Each cell is `lockjaw run` (a child process) with the cell's system,
/// nemesis and fencing, the flags below, and anything after `--`; its run
/// directory goes under OUT/cells/. Writes compare.md, compare.html and
/// compare.json into OUT. A combination that cannot apply is an N/A cell
/// with its reason. Exit code: 0 when the tables were written (anomalies
/// in cells are what a comparison shows), 2 when interrupted (the tables
/// hold what ran), 3 on bad usage or when a cell could not run.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Systems to compare [default when running: those whose fact `in compare without --systems` is yes in docs/faults.md].
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    #[arg(long, default_value = "fenced-counter")]
    pub workload: String,
    /// Nemeses, e.g. pause-holder,kill-holder [default when running: pause-holder].
    #[arg(long, value_delimiter = ',')]
    pub nemesis: Vec<String>,
    /// Fencing settings to try: on, off, or both (on,off) [default: each
    /// system's default].
    #[arg(long, value_delimiter = ',')]
    pub fencing: Vec<String>,
    /// Lock clients to compare: `builtin` and client adapters by name or
    /// path, e.g. builtin,python-redis-py [default: --client's].
    #[arg(long, value_delimiter = ',')]
    pub clients: Vec<String>,
    /// Runs per cell (run k uses seed S+k). Jepsen's name: --test-count.
    #[arg(long, alias = "test-count", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// How many runs go at once (each on its own ports, cgroups and proxy
    /// names; a --base-port among the run flags would make them collide).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    /// Seconds per run.
    #[arg(long)]
    pub time_limit: Option<f64>,
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Also measure each system without faults at these numbers of
    /// workers (nemesis `none`): updates per second and retries per update
    /// under contention, e.g. 1,5,20,50. Adds an "At a glance" table.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(usize))]
    pub contention: Vec<usize>,
    #[arg(long)]
    pub ttl_ms: Option<u64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the tables and each cell's run directory go [default:
    /// histories/compare-<UTC>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only shard K of N of the matrix (its applicable cells at
    /// positions K, K+N, ...; needs --seed and --out) and write
    /// OUT/shard.json for `lockjaw merge` (docs/ci.md).
    #[arg(long, value_name = "K/N", value_parser = crate::runner::shard::shard_flag)]
    pub shard: Option<crate::runner::shard::Shard>,
    #[command(flatten)]
    pub ci: crate::report::ci::CiArgs,
    #[command(flatten)]
    pub choices: Choices,
    /// Tabulate these saved run directories instead of running the matrix:
    /// each goes into the cell of its system, nemesis and fencing.
    #[arg(long, num_args = 1.., value_name = "RUN_DIR")]
    pub from_runs: Vec<PathBuf>,
    #[command(flatten)]
    pub pause_budget: crate::report::cli::PauseBudget,
    /// Write witness histories (witness-<kind>.jsonl) in invalid cells;
    /// without it the cells' runs get `--no-witness`.
    #[arg(long)]
    pub witness: bool,
    /// More `lockjaw run` flags for every cell, after `--` (e.g. `--
    /// --hold-ms 300 --base-port 41000`).
    #[arg(last = true, value_name = "RUN_FLAGS")]
    pub run_flags: Vec<String>,
}

pub fn compare(args: CompareArgs) -> Exit {
    match super::compare(&args) {
        Ok(exit) => exit,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
