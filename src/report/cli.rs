//! Command-line entry points of the `report` module: `lockjaw report DIR`
//! and `lockjaw compare`.

use super::compare::{self, Cell, CellOutcome, CellRun, CellSpec};
use super::write_report;
use crate::exit::Exit;
use std::path::{Path, PathBuf};
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
/// Writes compare.md, compare.html and compare.json into --out. A
/// combination that cannot apply is an N/A cell with its reason. Exit code
/// 0 when the tables were written (anomalies in cells are the point of a
/// comparison), 3 on bad usage or when a table cannot be written.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Systems to compare [default when running: redis,redlock,etcd,zookeeper].
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    #[arg(long, default_value = "fenced-counter")]
    pub workload: String,
    /// Nemeses, e.g. pause-holder,clock-jump [default when running: pause-holder].
    #[arg(long, value_delimiter = ',')]
    pub nemesis: Vec<String>,
    /// Fencing settings to try: on, off, or both (on,off).
    #[arg(long, value_delimiter = ',')]
    pub fencing: Vec<String>,
    /// Runs per cell.
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// Seconds per run.
    #[arg(long)]
    pub time_limit: Option<u64>,
    #[arg(long)]
    pub concurrency: Option<u32>,
    #[arg(long)]
    pub ttl_ms: Option<u64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the tables and each cell's run directory go.
    #[arg(long, default_value = "histories/compare")]
    pub out: PathBuf,
    /// Tabulate these saved run directories instead of running the matrix:
    /// each goes into the cell of its system, nemesis and fencing.
    #[arg(long, num_args = 1.., value_name = "RUN_DIR")]
    pub from_runs: Vec<PathBuf>,
}

fn fencings(args: &CompareArgs) -> Result<Vec<Option<bool>>, String> {
    if args.fencing.is_empty() {
        return Ok(vec![None]);
    }
    args.fencing
        .iter()
        .map(|f| match f.as_str() {
            "on" => Ok(Some(true)),
            "off" => Ok(Some(false)),
            other => Err(format!(
                "--fencing: `{other}` is not on or off (hint: --fencing on,off)"
            )),
        })
        .collect()
}

const DEFAULT_SYSTEMS: [&str; 4] = ["redis", "redlock", "etcd", "zookeeper"];

/// The cells of the matrix, N/A ones already marked. Without --systems or
/// --nemesis: the defaults when running, and no cells (only the saved
/// runs') with --from-runs.
pub fn plan(args: &CompareArgs) -> Result<Vec<Cell>, String> {
    let tabulating = !args.from_runs.is_empty();
    let or = |given: &Vec<String>, default: &[&str]| -> Vec<String> {
        match (given.is_empty(), tabulating) {
            (false, _) => given.clone(),
            (true, true) => vec![],
            (true, false) => default.iter().map(|s| s.to_string()).collect(),
        }
    };
    let (systems, nemeses) = (
        or(&args.systems, &DEFAULT_SYSTEMS),
        or(&args.nemesis, &["pause-holder"]),
    );
    let mut cells = vec![];
    for system in &systems {
        for nemesis in &nemeses {
            for fencing in fencings(args)? {
                let spec = CellSpec {
                    system: system.clone(),
                    workload: args.workload.clone(),
                    nemesis: nemesis.clone(),
                    fencing,
                };
                let outcome =
                    match compare::not_applicable(system, &args.workload, nemesis, fencing) {
                        Some(reason) => CellOutcome::NotApplicable { reason },
                        None => CellOutcome::Runs { runs: vec![] },
                    };
                cells.push(Cell { spec, outcome });
            }
        }
    }
    Ok(cells)
}

fn relative(run_dir: &Path, out: &Path) -> String {
    let report = run_dir.join("report.html");
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (r, o) = (abs(&report), abs(out));
    match r.strip_prefix(&o) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => r.display().to_string(),
    }
}

/// Put saved runs into their cells (adding a cell for a combination the
/// matrix does not name).
fn place(cells: &mut Vec<Cell>, runs: &[PathBuf], out: &Path) -> Result<(), String> {
    for dir in runs {
        let summary = compare::ensure_report(dir)?;
        let run = CellRun {
            report: relative(dir, out),
            summary,
        };
        let s = &run.summary;
        let key = |c: &CellSpec| {
            Some(&c.system) == s.system.as_ref()
                && Some(&c.nemesis) == s.nemesis.as_ref()
                && (c.fencing.is_none() || c.fencing == s.fencing)
        };
        match cells.iter_mut().find(|c| key(&c.spec)) {
            Some(Cell {
                outcome: CellOutcome::Runs { runs },
                ..
            }) => runs.push(run),
            Some(c) => c.outcome = CellOutcome::Runs { runs: vec![run] },
            None => cells.push(Cell {
                spec: CellSpec {
                    system: s.system.clone().unwrap_or_else(|| "?".into()),
                    workload: s.workload.clone().unwrap_or_else(|| "?".into()),
                    nemesis: s.nemesis.clone().unwrap_or_else(|| "?".into()),
                    fencing: s.fencing,
                },
                outcome: CellOutcome::Runs { runs: vec![run] },
            }),
        }
    }
    for c in cells.iter_mut() {
        if matches!(&c.outcome, CellOutcome::Runs { runs } if runs.is_empty()) {
            c.outcome = CellOutcome::Failed {
                error: "no saved run for this cell".into(),
            };
        }
    }
    Ok(())
}

pub fn compare(args: CompareArgs) -> Exit {
    let mut cells = match plan(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    if args.from_runs.is_empty() {
        eprintln!(
            "error: compare: running the matrix needs `lockjaw run`, which this build does not have yet \
             (hint: tabulate saved runs with --from-runs DIR...)"
        );
        return Exit::Error;
    }
    if let Err(e) = place(&mut cells, &args.from_runs, &args.out) {
        eprintln!("error: {e}");
        return Exit::Error;
    }
    let title = format!(
        "lockjaw compare: {} ({} run(s) per cell)",
        args.workload, args.runs
    );
    match compare::write_compare(&args.out, &title, &cells) {
        Ok(()) => {
            print!("{}", compare::compare_md(&title, &cells));
            println!("\n{}", args.out.join("compare.html").display());
            Exit::Valid
        }
        Err(e) => {
            eprintln!("error: {}: {e}", args.out.display());
            Exit::Error
        }
    }
}
