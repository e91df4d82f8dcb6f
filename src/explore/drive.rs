//! The explore's loop: learn runs, the plan, search waves within the
//! budget, confirmations, then the report. Everything it does goes
//! through an [`Engine`] (runs, learning, planning, judging, healing, the
//! clock), so the loop's own logic (resume, budget, never a finished run
//! twice) is tested with a fake one; [`Real`] is the runner's.

use super::finding::{Judge, PointOutcome};
use super::learn::Learned;
use super::output::Report;
use super::plan::{Plan, PlanOptions, Point};
use super::search::{self, NewRun, Next};
use super::state::{Outcome, RunRec, Stage, State};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// How a run the engine started ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ran {
    /// It ran to its end (its exit code).
    Ended(u8),
    /// It could not be run, or failed.
    Failed(String),
}

/// What the loop needs of the world.
pub trait Engine: Sync {
    /// Run each `(n, argv)`, `jobs` at a time, calling `done(n, how,
    /// secs)` as each finishes. A run cut short (Ctrl-C) is not reported.
    fn run(
        &self,
        runs: Vec<(usize, Vec<String>)>,
        jobs: usize,
        done: &(dyn Fn(usize, Ran, f64) + Sync),
    );
    fn learn(&self, dirs: &[PathBuf]) -> Result<Learned, String>;
    /// What the judge is told: the system, the fencing the learn runs used,
    /// the library's promises.
    fn judge(&self, learn_dirs: &[PathBuf]) -> Judge;
    fn plan(&self, learned: &Learned, opts: &PlanOptions) -> Plan;
    /// `together` points of single points that landed, those with an
    /// allowed or undecided anomaly or that changed what the client sent
    /// (`promising`) first.
    fn pairs(&self, plan: &Plan, landed: &[String], promising: &[String]) -> Vec<Point>;
    fn classify(
        &self,
        dir: &Path,
        points: &[Point],
        judge: &Judge,
    ) -> Result<Vec<PointOutcome>, String>;
    /// What a finished search run's landed injections changed in what the
    /// client sent, per point ([`super::feedback::of_run`]).
    fn feedback(&self, dir: &Path, learned: &Learned) -> Result<super::feedback::Changes, String>;
    /// Undo what a run cut short by a SIGKILL left behind.
    fn heal(&self, dir: &Path) -> Result<(), String>;
    fn interrupted(&self) -> bool;
    /// Seconds since this invocation started.
    fn now(&self) -> f64;
}

/// Lines for the user: on the bar, or stderr when it is hidden.
pub fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// The directory of run `r`: learn runs under `learn/`, the others under
/// `runs/`; a restart after a cut gets `.<attempt>`.
fn run_dir(
    dir: &Path,
    stage: Stage,
    n: usize,
    workload: &str,
    attempt: u32,
    learn_i: usize,
) -> PathBuf {
    let base = match stage {
        Stage::Learn => dir.join("learn").join(format!("{workload}-{learn_i}")),
        _ => dir.join("runs").join(format!("run-{n}")),
    };
    if attempt == 0 {
        base
    } else {
        PathBuf::from(format!("{}.{attempt}", base.display()))
    }
}

/// The state's runs without an outcome (cut short by Ctrl-C or a kill):
/// healed, then given a new attempt in a new directory.
fn restart_unfinished(
    dir: &Path,
    s: &mut State,
    eng: &dyn Engine,
    bar: &ProgressBar,
) -> Vec<usize> {
    let mut out = vec![];
    for r in s.runs.iter_mut().filter(|r| !r.finished()) {
        if r.dir.exists() {
            match eng.heal(&r.dir) {
                Ok(()) => say(
                    bar,
                    format!("healed {} (cut short; run again)", r.dir.display()),
                ),
                Err(e) => say(bar, format!("heal {}: {e}", r.dir.display())),
            }
        }
        r.attempt += 1;
        r.seed = search::seed_of(s.settings.seed, r.n, r.attempt);
        let learn_i = learn_index(&r.dir);
        r.dir = run_dir(dir, r.stage, r.n, &r.workload, r.attempt, learn_i);
        out.push(r.n);
    }
    out
}

fn learn_index(d: &Path) -> usize {
    let name = d
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let stem = name.split('.').next().unwrap_or("");
    stem.rsplit('-')
        .next()
        .and_then(|i| i.parse().ok())
        .unwrap_or(1)
}

/// The nemesis file a run injects, written under `dir` when it is a batch.
fn nemesis_of(dir: &Path, s: &State, r: &RunRec) -> Result<(String, u64), String> {
    let lease = s.settings.ttl_ms;
    if r.stage == Stage::Learn {
        // A renewing workload holds for 3 s: room for a few holds.
        let t = s.settings.learn_secs;
        let t = if r.workload.ends_with("-renewing") {
            t.max(8)
        } else {
            t
        };
        return Ok(("none".into(), t));
    }
    let points: Vec<&Point> = r.points.iter().filter_map(|id| s.point(id)).collect();
    if points.len() != r.points.len() {
        return Err(format!("run {}: a point of it is in no plan", r.n));
    }
    let files: Vec<PathBuf> = points
        .iter()
        .map(|p| dir.join("points").join(search::point_file_name(&p.id)))
        .collect();
    let timings: Vec<search::Timing> = points
        .iter()
        .map(|p| search::timing(&p.nemesis, lease))
        .collect();
    let alone = matches!(r.stage, Stage::Confirm | Stage::Builtin) || points[0].own_run;
    if alone && points.len() == 1 {
        let limit = search::time_limit_s(&timings, lease, true);
        return Ok((files[0].display().to_string(), limit));
    }
    let path = dir.join("runs").join(format!("run-{}.toml", r.n));
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    std::fs::write(&path, search::batch_nemesis(r.n, &refs, lease))
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    Ok((
        path.display().to_string(),
        search::time_limit_s(&timings, lease, false),
    ))
}

/// Add `new` to the state as runs and make them (with the runs `again`
/// already in it), saving after each. Returns false when interrupted.
fn make(
    dir: &Path,
    s: &mut State,
    eng: &dyn Engine,
    new: Vec<NewRun>,
    again: Vec<usize>,
    spent0: f64,
    bar: &ProgressBar,
) -> Result<bool, String> {
    if eng.interrupted() {
        // Ctrl-C between two waves: start nothing more.
        return Ok(false);
    }
    let mut ns = again;
    for nr in new {
        let n = s.next_n();
        let learn_i = s
            .runs
            .iter()
            .filter(|r| r.stage == Stage::Learn && r.workload == nr.workload)
            .count()
            + 1;
        s.runs.push(RunRec {
            n,
            stage: nr.stage,
            dir: run_dir(dir, nr.stage, n, &nr.workload, 0, learn_i),
            workload: nr.workload,
            points: nr.points,
            seed: search::seed_of(s.settings.seed, n, 0),
            attempt: 0,
            outcome: None,
        });
        ns.push(n);
    }
    s.save(dir)?;
    bar.inc_length(ns.len() as u64);
    let mut argvs = vec![];
    for &n in &ns {
        let r = s.runs[n - 1].clone();
        match nemesis_of(dir, s, &r) {
            Ok((nem, limit)) => {
                let a = search::argv(
                    &s.settings,
                    &r.workload,
                    &nem,
                    r.stage,
                    limit,
                    r.seed,
                    &r.dir,
                );
                argvs.push((n, a));
            }
            Err(e) => {
                s.runs[n - 1].outcome = Some(Outcome::Failed {
                    error: e,
                    secs: 0.0,
                })
            }
        }
    }
    let jobs = s.settings.jobs;
    let shared = std::sync::Mutex::new(&mut *s);
    let done = |n: usize, how: Ran, secs: f64| {
        let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
        let outcome = finish(&s, &s.runs[n - 1], how, secs, eng, &dir.join("points"));
        let line = line_of(&s.runs[n - 1], &outcome);
        s.runs[n - 1].outcome = Some(outcome);
        s.spent_secs = spent0 + eng.now();
        if let Err(e) = s.save(dir) {
            say(bar, format!("error: {e}"));
        }
        bar.inc(1);
        say(bar, line);
        bar.set_message(progress(&s));
    };
    eng.run(argvs, jobs, &done);
    Ok(!eng.interrupted())
}

/// A finished run read back: its points' outcomes (a `together` point
/// judged by its parts' files in `points_dir`).
fn finish(
    s: &State,
    r: &RunRec,
    how: Ran,
    secs: f64,
    eng: &dyn Engine,
    points_dir: &Path,
) -> Outcome {
    let exit = match how {
        Ran::Failed(error) => return Outcome::Failed { error, secs },
        Ran::Ended(e) => e,
    };
    if r.stage == Stage::Learn {
        return Outcome::Ran {
            exit,
            outcomes: vec![],
            secs,
        };
    }
    let points: Vec<Point> = r
        .points
        .iter()
        .filter_map(|id| s.point(id))
        .map(|p| Point {
            nemesis: p.file_text(points_dir),
            ..p.clone()
        })
        .collect();
    let judge = s.judge.clone().unwrap_or_default();
    match eng.classify(&r.dir, &points, &judge) {
        Ok(mut outcomes) => {
            // What the faults changed in what the client sent: read when
            // the run was tapped; a run that cannot be read stays unread
            // (`changed` none), never a failed run.
            if let (true, Some(l)) = (r.stage.searches(), &s.learned) {
                if let Ok(c) = eng.feedback(&r.dir, l) {
                    super::feedback::annotate(&mut outcomes, &c);
                }
            }
            Outcome::Ran {
                exit,
                outcomes,
                secs,
            }
        }
        Err(error) => Outcome::Failed { error, secs },
    }
}

fn line_of(r: &RunRec, o: &Outcome) -> String {
    let what = match o {
        Outcome::Failed { error, .. } => format!("failed: {error}"),
        Outcome::Ran { exit, .. } if r.stage == Stage::Learn => format!("ended (exit {exit})"),
        Outcome::Ran { outcomes, .. } => {
            let landed: u64 = outcomes.iter().map(|o| o.landed).sum();
            let hits: Vec<String> = outcomes
                .iter()
                .flat_map(|o| {
                    o.hits
                        .iter()
                        .filter(|h| h.hits > 0)
                        .map(move |h| format!("{} at {}", h.kind, o.point))
                })
                .collect();
            let hits = if hits.is_empty() {
                String::new()
            } else {
                format!("; {}", hits.join(", "))
            };
            format!("{} point(s), {landed} landed{hits}", r.points.len())
        }
    };
    format!(
        "  run {} ({}, {}): {what} ({})",
        r.n,
        r.stage.name(),
        r.workload,
        r.dir.display()
    )
}

/// The bar's message: points tried, landed, findings.
fn progress(s: &State) -> String {
    let points: Vec<&Point> = s
        .plan
        .iter()
        .flat_map(|p| p.points.iter())
        .chain(s.pairs.iter().flatten())
        .collect();
    let tried = points.iter().filter(|p| s.tries(&p.id) > 0).count();
    let landed = points.iter().filter(|p| s.landed(&p.id) > 0).count();
    let findings = super::confirm::confirmed(s).len();
    format!(
        "{tried}/{} points tried, {landed} landed, {findings} finding(s)",
        points.len()
    )
}

/// The learn runs, then what they showed.
fn learn(
    dir: &Path,
    s: &mut State,
    eng: &dyn Engine,
    spent0: f64,
    bar: &ProgressBar,
) -> Result<bool, String> {
    if !s.runs.iter().any(|r| r.stage == Stage::Learn) {
        let new: Vec<NewRun> = s
            .workloads
            .iter()
            .map(|w| NewRun {
                stage: Stage::Learn,
                workload: w.clone(),
                points: vec![],
            })
            .collect();
        say(
            bar,
            format!(
                "learning: {} fault-free run(s) with the wire tap ({})",
                new.len(),
                s.workloads.join(", ")
            ),
        );
        if !make(dir, s, eng, new, vec![], spent0, bar)? {
            return Ok(false);
        }
    }
    let dirs: Vec<PathBuf> = s
        .finished(Stage::Learn)
        .filter(|r| matches!(r.outcome, Some(Outcome::Ran { .. })))
        .map(|r| r.dir.clone())
        .collect();
    let ran: Vec<String> = s
        .finished(Stage::Learn)
        .filter(|r| matches!(r.outcome, Some(Outcome::Ran { .. })))
        .map(|r| r.workload.clone())
        .collect();
    if dirs.is_empty() {
        return Err("no learn run ended (hint: each learn run's error is above; `lockjaw run` with the same --system and --client shows it)".into());
    }
    s.workloads.retain(|w| ran.contains(w));
    s.learned = Some(eng.learn(&dirs)?);
    s.judge = Some(eng.judge(&dirs));
    s.save(dir)?;
    Ok(true)
}

/// The plan, each point's file written to `DIR/points/`.
fn plan(dir: &Path, s: &mut State, eng: &dyn Engine, bar: &ProgressBar) -> Result<(), String> {
    let learned = s.learned.clone().unwrap_or_default();
    let opts = PlanOptions {
        system: s.settings.system.clone(),
        own_cluster: true,
        workloads: s.workloads.clone(),
        library_renews: s
            .judge
            .as_ref()
            .is_some_and(|j| j.promises.renews_itself == Some(true)),
    };
    let mut p = eng.plan(&learned, &opts);
    if let Some(sh) = s.settings.shard {
        // Shard K of N: the points whose name hashes to K (pairs are
        // made of these only).
        let all = p.points.len();
        p.points.retain(|q| sh.owns_key(&q.id));
        say(
            bar,
            format!(
                "shard {sh}: {} of the {all} planned point(s)",
                p.points.len()
            ),
        );
    }
    write_points(dir, &p.points)?;
    let own = p.points.iter().filter(|p| p.own_run).count();
    let run_secs = run_secs(s, &learned);
    let per_min = 60.0 / run_secs * s.settings.per_run.max(1) as f64;
    let left = (s.settings.budget_secs as f64 - s.spent_secs).max(0.0);
    let runs = (left / run_secs).floor();
    say(bar, format!(
        "plan: {} point(s) ({own} with a run of their own), in {}; a search run of up to {} takes about {run_secs:.0} s, so about {per_min:.0} points a minute per job; the {left:.0} s left of the budget cover about {runs} run(s) × {} job(s)",
        p.points.len(), dir.join("points").display(), s.settings.per_run, s.settings.jobs
    ));
    s.plan = Some(p);
    s.save(dir)
}

/// Write each point's nemesis file to `DIR/points/`.
/// A `together` point's file names its parts' files there by path.
pub fn write_points(dir: &Path, points: &[Point]) -> Result<(), String> {
    super::plan::write_points(&dir.join("points"), points).map(drop)
}

/// Seconds one search run takes: the mean of those made, else a full
/// batch's time limit plus what a learn run took beyond its own.
fn run_secs(s: &State, learned: &Learned) -> f64 {
    let made: Vec<f64> = s
        .runs
        .iter()
        .filter(|r| r.stage.searches())
        .filter_map(|r| r.outcome.as_ref())
        .map(Outcome::secs)
        .collect();
    if !made.is_empty() {
        return (made.iter().sum::<f64>() / made.len() as f64).max(1.0);
    }
    let lease = s.settings.ttl_ms;
    let t = vec![
        search::Timing {
            first_delay_ms: 0,
            interval_ms: 0,
            length_ms: 2 * lease
        };
        s.settings.per_run.max(1)
    ];
    let overhead = (learned.run_secs - s.settings.learn_secs as f64).max(2.0);
    search::time_limit_s(&t, lease, false) as f64 + overhead
}

/// Run the explore in `dir` from `s` to its end (or Ctrl-C): learn, plan,
/// search, confirm, then the report. `Ok(None)` when interrupted (the
/// state is saved; `lockjaw explore DIR` resumes).
pub fn drive(
    dir: &Path,
    s: &mut State,
    eng: &dyn Engine,
    bar: &ProgressBar,
) -> Result<Option<Report>, String> {
    let spent0 = s.spent_secs;
    let again = restart_unfinished(dir, s, eng, bar);
    std::fs::create_dir_all(dir.join("runs")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cont = make(dir, s, eng, vec![], again, spent0, bar)?;
    s.spent_secs = spent0 + eng.now();
    if !cont {
        s.save(dir)?;
        return Ok(None);
    }
    if s.learned.is_none() && !learn(dir, s, eng, spent0, bar)? {
        s.spent_secs = spent0 + eng.now();
        s.save(dir)?;
        return Ok(None);
    }
    if s.plan.is_none() {
        plan(dir, s, eng, bar)?;
    }
    loop {
        s.spent_secs = spent0 + eng.now();
        let left = s.settings.budget_secs as f64 - s.spent_secs;
        let per = run_secs(s, s.learned.as_ref().unwrap_or(&Learned::default()));
        match search::next(s, left, per) {
            Next::Done => break,
            Next::Pairs => {
                let landed = search::landed_points(s);
                let promising = search::pair_first_points(s);
                let pairs = eng.pairs(
                    s.plan.as_ref().unwrap_or(&Plan::default()),
                    &landed,
                    &promising,
                );
                write_points(dir, &pairs)?;
                say(
                    bar,
                    format!(
                        "pairs: {} of the {} point(s) that landed",
                        pairs.len(),
                        landed.len()
                    ),
                );
                s.pairs = Some(pairs);
                s.save(dir)?;
            }
            Next::Runs(new) => {
                if !make(dir, s, eng, new, vec![], spent0, bar)? {
                    s.spent_secs = spent0 + eng.now();
                    s.save(dir)?;
                    return Ok(None);
                }
            }
        }
    }
    s.spent_secs = spent0 + eng.now();
    s.save(dir)?;
    Ok(Some(super::confirm::report(dir, s)?))
}

#[cfg(test)]
#[path = "drive_tests.rs"]
mod tests;
