//! Command-line entry points of the `report` module: `lockjaw report DIR`
//! (with its witness flags, shared with `lockjaw run`) and `lockjaw advise RUN_DIR...` (`lockjaw compare` is the runner's:
//! `crate::runner::cli`).

use super::write_report;
use crate::check::minimal::{WitnessOptions, DEFAULT_BUDGET};
use crate::exit::Exit;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Rebuild report.html and summary.md from a saved run directory.
///
/// An invalid run without witness histories (or with ones older than its
/// history) gets them first: witness-<kind>.jsonl in DIR.
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
    #[command(flatten)]
    pub witness: WitnessFlags,
}

pub fn report(args: ReportArgs) -> Exit {
    let start = Instant::now();
    // The witness histories first: the page and summary.md show them.
    if let Some(opts) = args.witness.options() {
        for line in witness_lines(&args.dir, &opts) {
            println!("{line}");
        }
    }
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

/// `--no-witness` and `--witness-budget` (run, report).
#[derive(clap::Args, Debug, Clone)]
pub struct WitnessFlags {
    /// Write no witness histories (witness-<kind>.jsonl) for an invalid run.
    #[arg(long)]
    pub no_witness: bool,
    /// Checks of candidate sub-histories per witness search; when they run
    /// out, the witness found so far is written and marked not minimal.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BUDGET, value_parser = clap::value_parser!(u64).range(1..))]
    pub witness_budget: u64,
}

impl WitnessFlags {
    /// The search's options, or `None` with `--no-witness`.
    pub fn options(&self) -> Option<WitnessOptions> {
        (!self.no_witness).then(|| WitnessOptions {
            budget: self.witness_budget,
            ..WitnessOptions::default()
        })
    }
}

/// Write the witness histories of the run in `dir` if it is invalid and
/// has none (or only older ones); one line per witness written, or a
/// warning line. Never an error: witnesses do not change a verdict.
pub fn witness_lines(dir: &Path, opts: &WitnessOptions) -> Vec<String> {
    match super::witness::ensure(dir, opts) {
        Ok(made) => made.lines(),
        Err(e) => vec![format!(
            "warning: no witness histories: {e} (the verdict stands; hint: `lockjaw report {}` retries)",
            dir.display()
        )],
    }
}

/// `--pause-budget-ms` (run, compare, advise).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PauseBudget {
    /// The longest pause a client may take (GC, scheduling, swap) that the
    /// lease advice must allow for; default: the longest worker stall
    /// measured outside injected faults. Recorded in run.json.
    #[arg(long, value_name = "MS", value_parser = pause_ms)]
    pub pause_budget_ms: Option<f64>,
}

/// A pause budget: a finite number of milliseconds ≥ 0.
pub fn pause_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of milliseconds ≥ 0 (hint: e.g. --pause-budget-ms 200)"
        )),
    }
}

/// Print the lease-advice box of saved runs.
///
/// Exit code: 0 when every directory was a run (with a lease or not); 3
/// when one was not a run directory (the others are still printed).
#[derive(clap::Args, Debug)]
pub struct AdviseArgs {
    /// Run directories (each holds history.jsonl, run.json, results.json).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub pause_budget: PauseBudget,
}

pub fn advise(args: AdviseArgs) -> Exit {
    let mut exit = Exit::Valid;
    for dir in &args.dirs {
        match advise_one(dir, args.pause_budget.pause_budget_ms) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: {e}");
                exit = Exit::Error;
            }
        }
    }
    exit
}

/// The box of one run directory (or why it has none).
fn advise_one(dir: &std::path::Path, budget: Option<f64>) -> Result<String, String> {
    use super::{advice, summary, RunDir, RunSummary, Timeline};
    let rd = RunDir::open(dir).map_err(|e| e.to_string())?;
    let t =
        Timeline::read(&rd.history_path(), summary::concurrency(&rd)).map_err(|e| e.to_string())?;
    if budget.is_none() && rd.run.pause_budget_ms.is_none() {
        // A broken stalls.json is bad input here, not a "not measured".
        super::stalls::read(dir)?;
    }
    let title = RunSummary::compute(&rd, &t).title();
    Ok(match advice::for_run(&rd, &t, budget) {
        Some(a) => advice::text(&format!("{title} ({})", dir.display()), &a),
        None => format!(
            "lease advice: {title} ({}): no lease (its grants carry none: a session lock, or no lock at all), so no advice",
            dir.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        w: WitnessFlags,
    }

    #[test]
    fn issue30_witness_flags() {
        let parse = |a: &[&str]| Flags::try_parse_from(a).map(|f| f.w.options());
        let d = parse(&["x"]).unwrap().unwrap();
        assert_eq!(d.budget, DEFAULT_BUDGET);
        assert!(parse(&["x", "--no-witness"]).unwrap().is_none());
        assert_eq!(
            parse(&["x", "--witness-budget", "7"])
                .unwrap()
                .unwrap()
                .budget,
            7
        );
        assert!(parse(&["x", "--witness-budget", "0"]).is_err());
    }
}
