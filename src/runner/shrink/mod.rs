//! `lockjaw shrink RUN_DIR`: re-run a test with a smaller configuration
//! while its anomaly still reproduces, and end with the smallest command
//! that does, confirmed on fresh seeds.
//!
//! One file per job: [`origin`] reads the run (its anomaly kind, the fault
//! it follows, its command, the knobs), [`search`] decides which candidate
//! comes next, [`stats`] holds the counting rules, [`state`] the resumable
//! record and the next decision, [`command`] builds each candidate's
//! `lockjaw run` line, [`runs`] runs a step through the real runner and
//! judges each run, [`markdown`] writes shrink.md. This file only loops.

pub mod command;
pub mod markdown;
pub mod origin;
pub mod runs;
pub mod search;
pub mod state;
pub mod stats;

use crate::exit::Exit;
use markdown::Status;
use origin::Origin;
use search::{Dim, Search};
use state::{Limits, Next, Role, State, Step};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Re-run a run with a smaller configuration while its anomaly reproduces.
///
/// Candidates shrink the workers (to 2), max_injections, the time limit,
/// the fault's size, the think and hold times, and the workload
/// (fenced-counter → lock for two holders), one at a time. A run
/// reproduces when the run's anomaly kind follows a landed injection of
/// its fault; a candidate is kept when at least 2 of its 3 runs do; the
/// final command is confirmed on 10 fresh seeds at 5 or more. Runs go to
/// RUN_DIR/shrink/runs/ (ordinary run directories), the steps to
/// RUN_DIR/shrink/shrink.md. Ctrl-C stops (the runs heal); running it
/// again resumes. Exit code: 0 a command was confirmed, 1 the original
/// does not reproduce, 2 stopped (budget or Ctrl-C) before a
/// confirmation, 3 bad input.
#[derive(clap::Args, Debug)]
pub struct ShrinkArgs {
    /// The run directory of a run with an anomaly.
    pub run_dir: PathBuf,
    /// How many runs go at once (each on its own ports, cgroups and proxy
    /// names).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    /// Wall time of this invocation (e.g. 90s, 10m, 1h): no step starts
    /// that would leave too little for the confirmation.
    #[arg(long, default_value = "10m", value_parser = budget_flag)]
    pub budget: Duration,
    /// Runs per candidate; kept when at least two thirds reproduce.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Runs of the final command on fresh seeds; confirmed when at least
    /// half reproduce.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub confirm: u32,
    /// The first seed [default: the run's seed + 1]; each run takes the
    /// next, none twice.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The anomaly kind to reproduce when the run has several:
    /// two-holders, fence-order, stale-writes, lost-updates,
    /// duplicate-effects or not-linearizable [default: the first found].
    #[arg(long)]
    pub anomaly: Option<String>,
}

/// `--budget`: seconds, or a number with s, m or h.
pub fn budget_flag(s: &str) -> Result<Duration, String> {
    let bad = || format!("--budget {s}: not a length (hint: e.g. 90s, 10m or 1h)");
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num.trim().parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(n * scale)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(bad)
}

/// The `lockjaw shrink` command.
pub fn shrink(a: ShrinkArgs) -> Exit {
    match run(&a) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}

fn stopped() -> bool {
    crate::runner::controller::interrupted()
        || crate::runner::compare::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// The saved state, or a new one.
fn state(a: &ShrinkArgs, o: &Origin) -> Result<State, String> {
    match State::load(&o.dir)? {
        Some(s) if s.kind != o.kind => Err(format!(
            "{}: a shrink of {} was started here; this one asks for {} (hint: remove {} to start afresh)",
            o.dir.display(),
            s.kind,
            o.kind,
            o.dir.join(state::DIR).display()
        )),
        Some(s) => {
            println!("resuming the shrink of {}: {} steps done", o.dir.display(), s.steps.len());
            Ok(s)
        }
        None => {
            let knobs = origin::knobs(&o.info, &o.kind, o.landed);
            let seed = a.seed.unwrap_or(o.info.seed.wrapping_add(1));
            Ok(State::new(&o.dir, &o.kind, &o.fault, knobs, seed))
        }
    }
}

fn run(a: &ShrinkArgs) -> Result<Exit, String> {
    let o = origin::read(&a.run_dir, a.anomaly.as_deref())?;
    let mut st = state(a, &o)?;
    st.save(&o.dir)?;
    println!(
        "shrinking {}: {} after a landed {} injection",
        o.dir.display(),
        crate::report::trials::kind_label(&o.kind),
        o.fault
    );
    crate::runner::compare::catch_sigint();
    let started = Instant::now();
    let original_ms = (o.info.workload.time_limit_s * 1000.0).round() as u64;
    let time_ms = |s: &Search| s.value(Dim::TimeLimit).unwrap_or(original_ms);
    loop {
        if stopped() {
            return stop(&st, &o, "interrupted (Ctrl-C)");
        }
        let l = Limits {
            runs: u64::from(a.runs),
            confirm: u64::from(a.confirm),
            jobs: u64::from(a.jobs),
            left_ms: a.budget.saturating_sub(started.elapsed()).as_millis() as u64,
        };
        let next = st.next(l, time_ms);
        let (role, search, n) = match st.plan(&next, l) {
            Some(p) => p,
            None if next == Next::Done => return done(&st, &o),
            None if next == Next::NotReproducing => return not_reproducing(&st, &o),
            None => {
                let why = format!(
                    "the budget ({}) ran out before a confirmation",
                    show(a.budget)
                );
                return stop(&st, &o, &why);
            }
        };
        let step = take_step(a, &o, &mut st, role, &search, n)?;
        let Some(step) = step else {
            return stop(&st, &o, "interrupted (Ctrl-C)");
        };
        st.record(step, time_ms(&search));
        st.search.refloor_time(|s| origin::time_floor(&o.info, s));
        st.save(&o.dir)?;
        if let Some(s) = st.steps.last() {
            println!("{}", outcome_line(s));
        }
        let why = "in progress (if no shrink is running, it was stopped before it could say why)";
        markdown::write(&st, &o.dir, &Status::Stopped { why })?;
    }
}

fn show(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 {
        format!("{} min", s / 60.0)
    } else {
        format!("{s} s")
    }
}

/// Run one step; None when it was interrupted (it is not recorded).
fn take_step(
    a: &ShrinkArgs,
    o: &Origin,
    st: &mut State,
    role: Role,
    search: &Search,
    n: u64,
) -> Result<Option<Step>, String> {
    let number = st.next_step;
    st.next_step += 1;
    let first = st.seeds(n);
    st.save(&o.dir)?;
    let argv = candidate_argv(o, search, number)?;
    let change = change(role, st, search);
    println!(
        "step {number}: {change} ({n} runs, seeds {first}..{})",
        first + n - 1
    );
    let out = o
        .dir
        .join(state::DIR)
        .join("runs")
        .join(format!("step-{number}"));
    let target = runs::Target {
        kind: &o.kind,
        fault: &o.fault,
    };
    let say = |l: String| println!("{l}");
    let records = runs::run_step(
        &argv,
        first,
        n as usize,
        &out,
        a.jobs as usize,
        &target,
        &say,
    );
    let records = match records {
        Ok(r) if stopped() || (r.len() as u64) < n => return Ok(None),
        Ok(r) => r,
        // The command cannot run at all (e.g. a file it names is gone):
        // none of its runs can reproduce.
        Err(e) => {
            eprintln!("error: step {number}: {e}");
            (0..n)
                .map(|i| state::RunRecord {
                    seed: first + i,
                    dir: out.join(format!("run-{}", i + 1)),
                    outcome: state::Outcome::Failed { error: e.clone() },
                    wall_ms: 0,
                    witness: None,
                })
                .collect()
        }
    };
    Ok(Some(Step {
        n: number,
        role,
        change,
        command: command::line(&argv),
        runs: records,
        kept: false,
        undone: false,
    }))
}

/// The command of `search`, writing its nemesis file when a fault field
/// changed.
fn candidate_argv(o: &Origin, search: &Search, number: u64) -> Result<Vec<String>, String> {
    let file = if command::nemesis_changed(search) {
        let dir = o.dir.join(state::DIR).join("nemesis");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let p = dir.join(format!("step-{number}.toml"));
        let text = command::nemesis_text(&o.nemesis, search)?;
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        Some(p)
    } else {
        None
    };
    Ok(command::argv(&o.argv, search, &o.info, file.as_deref()))
}

/// What a step changes, for people.
fn change(role: Role, st: &State, search: &Search) -> String {
    match role {
        Role::Original => "the original command".into(),
        Role::Candidate {
            knob,
            value,
            previous,
        } => {
            let d = st.search.knobs[knob].dim;
            format!("{} {} → {}", d.label(), d.show(previous), d.show(value))
        }
        Role::Confirm => {
            let changed: Vec<String> = search
                .changed()
                .map(|k| {
                    format!(
                        "{} {} → {}",
                        k.dim.label(),
                        k.dim.show(k.original),
                        k.dim.show(k.current)
                    )
                })
                .collect();
            if changed.is_empty() {
                "confirm the original command".into()
            } else {
                format!("confirm: {}", changed.join(", "))
            }
        }
    }
}

fn outcome_line(s: &Step) -> String {
    let verdict = match (s.role, s.kept) {
        (Role::Original, true) => "reproduces",
        (Role::Original, false) => "does not reproduce",
        (Role::Confirm, true) => "confirmed",
        (Role::Confirm, false) => "not confirmed (the last kept change is taken back)",
        (_, true) => "kept",
        (_, false) => "dropped",
    };
    format!(
        "step {}: {}: {}: {}",
        s.n,
        s.change,
        stats::runs_text(s.reproduced(), s.total()),
        verdict
    )
}

fn final_command(st: &State) -> String {
    st.confirmed()
        .map(|s| s.command.clone())
        .unwrap_or_default()
}

fn done(st: &State, o: &Origin) -> Result<Exit, String> {
    let command = final_command(st);
    let p = markdown::write(st, &o.dir, &Status::Confirmed { command: &command })?;
    relink(&o.dir);
    let c = st
        .confirmed()
        .map_or((0, 0), |s| (s.reproduced(), s.total()));
    println!(
        "\n{command}\nreproduces in {}\n{}",
        stats::runs_text(c.0, c.1),
        p.display()
    );
    Ok(Exit::Valid)
}

fn not_reproducing(st: &State, o: &Origin) -> Result<Exit, String> {
    let p = markdown::write(st, &o.dir, &Status::NotReproducing)?;
    relink(&o.dir);
    let (k, n) = st
        .steps
        .last()
        .map_or((0, 0), |s| (s.reproduced(), s.total()));
    println!(
        "\nthe original command does not reproduce: {} ({})",
        stats::runs_text(k, n),
        p.display()
    );
    Ok(Exit::Invalid)
}

fn stop(st: &State, o: &Origin, why: &str) -> Result<Exit, String> {
    let p = markdown::write(st, &o.dir, &Status::Stopped { why })?;
    relink(&o.dir);
    println!(
        "\nstopped: {why}; `lockjaw shrink {}` continues ({})",
        o.dir.display(),
        p.display()
    );
    Ok(Exit::Unknown)
}

/// Rebuild the run's report so it links shrink.md.
fn relink(dir: &Path) {
    if let Err(e) = crate::report::write_report(dir, None) {
        eprintln!("warning: the run's report was not rebuilt to link shrink.md: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_read_seconds_minutes_and_hours() {
        assert_eq!(budget_flag("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(budget_flag("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(budget_flag("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(budget_flag("45"), Ok(Duration::from_secs(45)));
        for bad in ["", "0s", "-1m", "10x", "m"] {
            assert!(budget_flag(bad).unwrap_err().contains("hint"), "{bad}");
        }
    }
}
