//! Command-line entry points of the `report` module: `lockjaw report DIR`
//! and `lockjaw compare`.

use super::write_report;
use crate::exit::Exit;
use std::path::PathBuf;
use std::time::Instant;

/// Rebuild report.html and summary.md from a saved run directory.
///
/// Exit code: the run's overall verdict (0 valid, 1 invalid, 2 unknown),
/// or 3 when the directory cannot be read.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The run directory (holds history.jsonl, run.json, results.json).
    pub dir: PathBuf,
    /// Write report.html and summary.md here instead of into DIR.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn report(args: ReportArgs) -> Exit {
    let start = Instant::now();
    match write_report(&args.dir, args.out.as_deref()) {
        Ok(w) => {
            println!(
                "{}: {} ({:.1} KiB, {:.0} ms)\n{}",
                w.summary.title(),
                w.summary.overall.as_str(),
                w.html_bytes as f64 / 1024.0,
                start.elapsed().as_secs_f64() * 1e3,
                w.html.display()
            );
            println!("{}", w.markdown.display());
            w.summary.overall.into()
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}

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
    /// Systems to compare [default when running: redis,redlock,etcd,zookeeper].
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
    /// Runs per cell (run k uses seed S+k).
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// Seconds per run.
    #[arg(long)]
    pub time_limit: Option<f64>,
    #[arg(long)]
    pub concurrency: Option<usize>,
    #[arg(long)]
    pub ttl_ms: Option<u64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the tables and each cell's run directory go [default:
    /// histories/compare-<UTC>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tabulate these saved run directories instead of running the matrix:
    /// each goes into the cell of its system, nemesis and fencing.
    #[arg(long, num_args = 1.., value_name = "RUN_DIR")]
    pub from_runs: Vec<PathBuf>,
    /// More `lockjaw run` flags for every cell, after `--` (e.g. `--
    /// --hold-ms 300 --base-port 41000`).
    #[arg(last = true, value_name = "RUN_FLAGS")]
    pub run_flags: Vec<String>,
}

pub fn compare(args: CompareArgs) -> Exit {
    match super::matrix::compare(&args) {
        Ok(exit) => exit,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
