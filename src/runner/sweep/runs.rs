//! A sweep's runs: each (system, value) run as a comparison cell through
//! the shared cell runner, tallied per value; for --find-boundary, the
//! real prober that the boundary search asks for more runs.

use super::boundary;
use super::plan::{compare_args, nemesis_for, Plan};
use super::vary::{value_text, Param};
use super::SweepArgs;
use crate::report::compare::{Cell, CellOutcome, CellSpec};
use crate::report::summary::RunSummary;
use crate::report::sweep::{self as rep, Boundary, Row, SystemSweep};
use crate::report::trials::{Rate, Tally};
use crate::runner::cli::CompareArgs;
use crate::runner::compare::{self as cmp, INTERRUPTED};
use crate::storage::Fencing;
use indicatif::ProgressBar;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// A value's runs so far, for one system.
#[derive(Default)]
struct Runs {
    summaries: Vec<RunSummary>,
    reports: Vec<String>,
    error: Option<String>,
}

impl Runs {
    fn tally(&self) -> Tally {
        let refs: Vec<&RunSummary> = self.summaries.iter().collect();
        Tally::of(&refs)
    }

    fn row(self, value: f64) -> Row {
        Row {
            value,
            tally: self.tally(),
            rates: BTreeMap::new(),
            reports: self.reports,
            error: self.error,
        }
    }
}

/// Run `runs` runs (numbered from `first`) of each (system, value) job,
/// `--jobs` at once, and add them to `into`.
fn run_batch(
    args: &SweepArgs,
    plan: &Plan,
    jobs: &[(String, f64, String)],
    first: u32,
    runs: u32,
    bar: &ProgressBar,
    into: &mut HashMap<(String, u64), Runs>,
) {
    let mut cells: Vec<Cell> = jobs
        .iter()
        .map(|(system, _, nemesis)| Cell {
            spec: CellSpec {
                system: system.clone(),
                client: args.choices.client.clone(),
                workload: args.workload.clone(),
                nemesis: nemesis.clone(),
                fencing: args.fencing.map(Fencing::is_on),
                concurrency: None,
            },
            outcome: CellOutcome::Runs { runs: vec![] },
        })
        .collect();
    let cargs: Vec<CompareArgs> = jobs
        .iter()
        .map(|(_, v, n)| compare_args(args, plan, *v, n))
        .collect();
    let dir_of = |i: usize, k: u32| {
        let (system, v, _) = &jobs[i];
        plan.out.join("runs").join(format!(
            "{system}-{}-{}-{}",
            plan.vary.param.name(),
            value_text(*v),
            first + k + 1
        ))
    };
    let done: Mutex<HashMap<(usize, u32), (RunSummary, String)>> = Mutex::default();
    let parallel = args.jobs > 1;
    cmp::run_cells(
        &mut cells,
        runs,
        args.jobs as usize,
        &plan.out,
        dir_of,
        |i, spec, k, dir| {
            let r = cmp::run_cell(&cargs[i], spec, first + k, dir, parallel)
                .and_then(|()| crate::report::compare::ensure_report(dir));
            bar.inc(1);
            let summary = r?;
            let report = dir
                .strip_prefix(&plan.out)
                .unwrap_or(dir)
                .join("report.html")
                .display()
                .to_string();
            done.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((i, k), (summary, report));
            Ok(())
        },
    );
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    let interrupted = INTERRUPTED.load(Ordering::SeqCst);
    for (i, (system, v, _)) in jobs.iter().enumerate() {
        let entry = into.entry((system.clone(), v.to_bits())).or_default();
        for k in 0..runs {
            if let Some((s, r)) = done.remove(&(i, k)) {
                entry.summaries.push(s);
                entry.reports.push(r);
            }
        }
        if let (CellOutcome::Failed { error }, false) = (&cells[i].outcome, interrupted) {
            entry.error = Some(error.clone());
        }
    }
}

/// The probe of one system's boundary search: real runs.
struct RealProber<'a> {
    args: &'a SweepArgs,
    plan: &'a Plan,
    system: &'a str,
    bar: &'a ProgressBar,
    seen: HashMap<(String, u64), Runs>,
    values: Vec<f64>,
}

impl boundary::Prober for RealProber<'_> {
    fn more(&mut self, value: f64, runs: u32) -> Result<Rate, String> {
        if INTERRUPTED.load(Ordering::SeqCst) {
            return Err("interrupted".into());
        }
        let nemesis = nemesis_for(self.args, self.plan, value)?;
        let key = (self.system.to_string(), value.to_bits());
        if !self.seen.contains_key(&key) {
            self.values.push(value);
        }
        let first = self.seen.get(&key).map_or(0, |r| r.summaries.len() as u32);
        self.bar.set_message(format!(
            "{}: probing {} = {}",
            self.system,
            self.plan.vary.param.name(),
            value_text(value)
        ));
        let job = [(self.system.to_string(), value, nemesis)];
        run_batch(
            self.args,
            self.plan,
            &job,
            first,
            runs,
            self.bar,
            &mut self.seen,
        );
        let r = &self.seen[&key];
        if INTERRUPTED.load(Ordering::SeqCst) {
            return Err("interrupted".into());
        }
        match &r.error {
            Some(e) => Err(e.clone()),
            None => Ok(r.tally().rate(self.plan.kind)),
        }
    }
}

/// Search each system's boundary, probing with real runs.
pub(super) fn find_boundaries(
    args: &SweepArgs,
    plan: &Plan,
    bar: &ProgressBar,
) -> Vec<SystemSweep> {
    let (from, to) = (
        plan.vary.values[0],
        plan.vary.values[plan.vary.values.len() - 1],
    );
    let tolerance = match plan.vary.param {
        Param::DurationLeases => 0.05,
        Param::TtlMs => 0.05 * to,
        _ => 0.05 * plan.axis.ttl_ms as f64,
    };
    let rules = boundary::Rules {
        batch: args.runs.unwrap_or(2),
        cap: args.max_runs_per_probe.unwrap_or(20),
        tolerance,
        max_decided: 8,
        integral: plan.vary.param.integral(),
    };
    let mut out = vec![];
    for system in &args.system {
        let mut p = RealProber {
            args,
            plan,
            system,
            bar,
            seen: HashMap::new(),
            values: vec![],
        };
        let b = boundary::bisect(from, to, rules, &mut p);
        let sentence = rep::sentence(system, &plan.axis, plan.kind, &b.found, b.runs);
        let rows = p
            .values
            .iter()
            .filter_map(|v| {
                let r = p.seen.remove(&(system.clone(), v.to_bits()))?;
                Some(r.row(*v))
            })
            .collect();
        out.push(SystemSweep {
            system: system.clone(),
            rows,
            boundary: Some(Boundary {
                kind: plan.kind.to_string(),
                found: b.found,
                probes: b.probes,
                runs: b.runs,
                sentence,
            }),
        });
        if INTERRUPTED.load(Ordering::SeqCst) {
            break;
        }
    }
    out
}

/// Every (system, value) pair with its nemesis, in the sweep's order.
pub(super) fn jobs(args: &SweepArgs, plan: &Plan) -> Result<Vec<(String, f64, String)>, String> {
    let mut jobs = vec![];
    for &v in &plan.vary.values {
        let nemesis = nemesis_for(args, plan, v)?;
        for s in &args.system {
            jobs.push((s.clone(), v, nemesis.clone()));
        }
    }
    Ok(jobs)
}

/// Run every (system, value) of `jobs` `--runs` times.
pub(super) fn sweep_values(
    args: &SweepArgs,
    plan: &Plan,
    bar: &ProgressBar,
    jobs: &[(String, f64, String)],
) -> Result<Vec<SystemSweep>, String> {
    let mut seen = HashMap::new();
    run_batch(args, plan, jobs, 0, args.runs.unwrap_or(1), bar, &mut seen);
    Ok(args
        .system
        .iter()
        .map(|s| SystemSweep {
            system: s.clone(),
            rows: plan
                .vary
                .values
                .iter()
                .filter_map(|v| Some(seen.remove(&(s.clone(), v.to_bits()))?.row(*v)))
                .collect(),
            boundary: None,
        })
        .collect())
}
