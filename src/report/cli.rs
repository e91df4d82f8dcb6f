//! Command-line entry point of the `report` module: `lockjaw report DIR`
//! (`lockjaw compare` is the runner's: `crate::runner::cli`).

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
