//! A step's runs through the real runner: its command parsed as `lockjaw
//! run` parses it, run `n` times on fresh seeds (`--jobs` at once, each on
//! its own ports and names: [`crate::runner::repeat`]) into
//! `RUN_DIR/shrink/runs/step-<n>/run-<i>/`, each an ordinary run
//! directory, and each run judged: did the anomaly kind follow a landed
//! injection of the fault?

use super::command;
use super::state::{Outcome, RunRecord};
use crate::check::minimal::file_name;
use crate::report::trials::{kind_label, RunTrials};
use crate::report::RunSummary;
use crate::runner::cli::RunArgs;
use crate::runner::controller::RunConfig;
use crate::runner::repeat;
use clap::Parser;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A `lockjaw run` line, parsed as the command line parses it.
#[derive(Parser)]
#[command(name = "lockjaw run")]
struct RunLine {
    #[command(flatten)]
    run: RunArgs,
}

/// The run configuration of a command (`lockjaw run ...`), recording the
/// command itself as the run's command line.
pub fn config(argv: &[String]) -> Result<RunConfig, String> {
    let line = RunLine::try_parse_from(argv.iter().skip(1)).map_err(|e| {
        let msg = e.render().to_string();
        format!("`{}`: {}", command::line(argv), msg.trim())
    })?;
    let mut cfg = crate::runner::cli::config(line.run)?;
    cfg.command = crate::auth::redact::args(argv);
    cfg.progress = false;
    Ok(cfg)
}

/// What a step is after: the kind, following a landed injection of the
/// fault.
pub struct Target<'a> {
    pub kind: &'a str,
    pub fault: &'a str,
}

/// Whether a run's trials show the kind after a landed injection of the
/// fault, and if not, why.
pub fn judge(t: &RunTrials, target: &Target) -> Outcome {
    let label = kind_label(target.kind);
    let landed: Vec<_> = t
        .trials
        .iter()
        .filter(|tr| tr.landed && tr.fault == target.fault)
        .collect();
    if landed.iter().any(|tr| tr.kinds.contains(target.kind)) {
        return Outcome::Reproduced;
    }
    let why = match t.anomalies.get(target.kind).copied().unwrap_or(0) {
        _ if landed.is_empty() => format!("no {} injection landed", target.fault),
        0 => format!("no {label}"),
        n => format!(
            "{label} ({n}) outside every landed {} injection's window",
            target.fault
        ),
    };
    Outcome::Missed { why }
}

/// A witness file the run wrote for `kind`: `witness-<kind>.jsonl`, else
/// the first `witness-*.jsonl`.
fn witness(dir: &Path, kind: &str) -> Option<PathBuf> {
    let exact = dir.join(file_name(kind));
    if exact.is_file() {
        return Some(exact);
    }
    crate::report::witness::files(dir).into_iter().next()
}

/// The record of a finished run (its wall time is filled in later).
fn record(f: &repeat::Finished, target: &Target) -> RunRecord {
    let (dir, outcome) = match &f.result {
        Ok(o) => match RunSummary::from_dir(&o.dir) {
            Ok(s) => (o.dir.clone(), judge(&s.trials, target)),
            Err(e) => (
                o.dir.clone(),
                Outcome::Failed {
                    error: e.to_string(),
                },
            ),
        },
        Err(e) => (
            e.dir.clone().unwrap_or_default(),
            Outcome::Failed {
                error: e.msg.clone(),
            },
        ),
    };
    let witness = (outcome == Outcome::Reproduced)
        .then(|| witness(&dir, target.kind))
        .flatten();
    RunRecord {
        seed: f.seed,
        dir,
        outcome,
        wall_ms: 0,
        witness,
    }
}

/// Run `argv` `n` times from seed `first` into `out/run-<i>`, `jobs` at a
/// time; `say` gets a line as each run ends. Returns the runs that ran
/// (fewer than `n` when interrupted).
pub fn run_step(
    argv: &[String],
    first: u64,
    n: usize,
    out: &Path,
    jobs: usize,
    target: &Target,
    say: &(dyn Fn(String) + Sync),
) -> Result<Vec<RunRecord>, String> {
    let mut base = config(argv)?;
    base.seed = first;
    base.out = Some(out.to_path_buf());
    let mut cfgs = repeat::configs(&base, n, jobs);
    if let [one] = cfgs.as_mut_slice() {
        one.out = Some(out.join("run-1"));
    }
    let judged: Mutex<Vec<(usize, RunRecord)>> = Mutex::new(vec![]);
    let started = std::time::Instant::now();
    let done = |f: &repeat::Finished, total: usize| {
        let r = record(f, target);
        let what = match &r.outcome {
            Outcome::Reproduced => "reproduced".to_string(),
            Outcome::Missed { why } => format!("not reproduced: {why}"),
            Outcome::Failed { error } => format!("failed: {error}"),
        };
        say(format!(
            "    run {}/{total} (seed {}): {what}",
            f.index, f.seed
        ));
        judged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((f.index, r));
    };
    // A step's runs share a cluster where that is sound (runner::shared).
    let finished = repeat::run_all_sharing(cfgs, jobs, true, &done);
    let rounds = (finished.len().div_ceil(jobs.max(1))).max(1) as u128;
    let wall_ms = (started.elapsed().as_millis() / rounds) as u64;
    let mut judged = judged.into_inner().unwrap_or_else(|e| e.into_inner());
    judged.sort_by_key(|j| j.0);
    Ok(judged
        .into_iter()
        .map(|(_, r)| RunRecord { wall_ms, ..r })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::trials::Trial;

    fn trial(fault: &str, landed: bool, kinds: &[&str]) -> Trial {
        Trial::sample(fault, landed, kinds)
    }

    #[test]
    fn a_run_counts_only_when_the_kind_follows_a_landed_injection_of_the_fault() {
        let target = Target {
            kind: "two-holders",
            fault: "clock-jump",
        };
        let mut t = RunTrials {
            trials: vec![
                trial("clock-jump", false, &["two-holders"]),
                trial("pause-holder", true, &["two-holders"]),
            ],
            ..Default::default()
        };
        let missed = |t: &RunTrials| match judge(t, &target) {
            Outcome::Missed { why } => why,
            o => panic!("{o:?}"),
        };
        assert_eq!(missed(&t), "no clock-jump injection landed");
        t.trials.push(trial("clock-jump", true, &["stale-writes"]));
        assert_eq!(missed(&t), "no two holders");
        t.anomalies.insert("two-holders".into(), 2);
        assert!(missed(&t).contains("outside every landed clock-jump"));
        t.trials.push(trial("clock-jump", true, &["two-holders"]));
        assert_eq!(judge(&t, &target), Outcome::Reproduced);
    }

    #[test]
    fn a_command_is_parsed_as_lockjaw_run_parses_it() {
        let argv: Vec<String> = ["lockjaw", "run", "--system", "redis", "--concurrency", "2"]
            .map(String::from)
            .to_vec();
        let c = config(&argv).unwrap();
        assert_eq!(c.workload.concurrency, 2);
        assert_eq!(c.command, argv, "the run records the command it ran");
        assert!(!c.progress);
        let bad: Vec<String> = ["lockjaw", "run", "--system", "nope"]
            .map(String::from)
            .to_vec();
        assert!(config(&bad).unwrap_err().contains("nope"));
    }

    #[test]
    fn the_witness_of_the_kind_comes_first() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(witness(d.path(), "two-holders"), None);
        std::fs::write(d.path().join("witness-lost-updates.jsonl"), "").unwrap();
        assert!(witness(d.path(), "two-holders").is_some());
        std::fs::write(d.path().join(file_name("two-holders")), "").unwrap();
        assert_eq!(
            witness(d.path(), "two-holders"),
            Some(d.path().join(file_name("two-holders")))
        );
    }
}
