//! Progress bars (indicatif) for the phases of a run: cluster start, run
//! (elapsed, ops/s, grants, faults, anomalies so far, stale writes
//! refused), heal and teardown, check. Drawn on stderr only when it is a terminal (or never,
//! with `--no-progress`); otherwise each phase prints one plain line.

use super::recorder::Counters;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The bars of one run.
pub struct Progress {
    mp: MultiProgress,
    drawn: bool,
    quiet: bool,
}

impl Progress {
    /// `enabled` false: nothing at all on stderr but errors.
    pub fn new(enabled: bool) -> Progress {
        let drawn = enabled && std::io::stderr().is_terminal();
        let target = if drawn {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Progress {
            mp: MultiProgress::with_draw_target(target),
            drawn,
            quiet: !enabled,
        }
    }

    /// A spinner for a phase; finish it with [`Phase::done`].
    pub fn phase(&self, what: &str) -> Phase {
        let pb = self.mp.add(ProgressBar::new_spinner());
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("a valid template"),
        );
        pb.set_message(what.to_string());
        pb.enable_steady_tick(Duration::from_millis(100));
        if !self.drawn && !self.quiet {
            eprintln!("lockjaw: {what}");
        }
        Phase {
            pb,
            what: what.to_string(),
            drawn: self.drawn,
            quiet: self.quiet,
            start: Instant::now(),
        }
    }

    /// The run bar: elapsed of `limit`, with live counters.
    pub fn run_bar(
        &self,
        limit: Duration,
        counters: Arc<Counters>,
        faults: Arc<AtomicU64>,
    ) -> RunBar {
        let pb = self.mp.add(ProgressBar::new(limit.as_millis() as u64));
        pb.set_style(
            ProgressStyle::with_template("run   [{bar:30}] {elapsed}/{duration}  {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        if !self.drawn && !self.quiet {
            eprintln!("lockjaw: running for {:.1} s", limit.as_secs_f64());
        }
        let start = Instant::now();
        let bar = pb.clone();
        let task = tokio::spawn(async move {
            let mut last = (Instant::now(), 0u64);
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let ops = Counters::get(&counters.ops);
                let rate = (ops - last.1) as f64 / last.0.elapsed().as_secs_f64().max(1e-3);
                last = (Instant::now(), ops);
                bar.set_position(start.elapsed().as_millis() as u64);
                bar.set_message(format!(
                    "{rate:.0} ops/s, {} grants, {} faults, {} anomalies so far, {} stale writes refused, {} info",
                    Counters::get(&counters.grants),
                    faults.load(Ordering::Relaxed),
                    Counters::get(&counters.anomalies),
                    Counters::get(&counters.stale_rejected),
                    Counters::get(&counters.infos),
                ));
            }
        });
        RunBar { pb, task }
    }
}

/// One phase's spinner.
pub struct Phase {
    pb: ProgressBar,
    what: String,
    drawn: bool,
    quiet: bool,
    start: Instant,
}

impl Phase {
    pub fn done(self, result: &str) {
        let line = format!(
            "{}: {result} ({:.1} s)",
            self.what,
            self.start.elapsed().as_secs_f64()
        );
        if self.drawn {
            self.pb.finish_with_message(line);
        } else {
            self.pb.finish_and_clear();
            if !self.quiet {
                eprintln!("lockjaw: {line}");
            }
        }
    }
}

/// The run bar and its updater.
pub struct RunBar {
    pb: ProgressBar,
    task: tokio::task::JoinHandle<()>,
}

impl RunBar {
    pub fn done(self) {
        self.task.abort();
        self.pb.finish();
    }
}

/// A bar over `total` runs with an ETA (a counting spinner when the total
/// is unknown), drawn on stderr only when it is a terminal and `enabled`.
pub fn runs_bar(total: Option<u64>, enabled: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let (pb, template) = match total {
        Some(n) => (
            ProgressBar::new(n),
            "{bar:30} {pos}/{len} runs [{elapsed} elapsed, ETA {eta}] {msg}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} {pos} runs [{elapsed}] {msg}",
        ),
    };
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("a valid template")
            .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}
