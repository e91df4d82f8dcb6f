//! What a budget covers: the plan's size, the trials a minute the learn
//! runs promise, and how many times the budget tries each point.

use super::learn::Learned;
use super::plan::{Family, Plan};
use serde::Serialize;

/// The plan against the budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Budget {
    pub points: usize,
    /// Points sharing runs (`per_run` to a run) and points with runs of
    /// their own.
    pub shared: usize,
    pub own: usize,
    /// Runs one pass over the plan takes.
    pub runs_per_pass: u64,
    /// Seconds one pass takes with `jobs` runs at once.
    pub pass_secs: f64,
    /// Injections a minute over all jobs.
    pub trials_per_min: f64,
    /// Passes the budget pays for (each point tried once a pass).
    pub passes: f64,
}

/// The plan's cost: runs of `learned.run_secs`, `per_run` injections in a
/// shared run, `jobs` runs at once, `budget_secs` to spend.
pub fn budget(plan: &Plan, learned: &Learned, budget_secs: u64, per_run: u64, jobs: u64) -> Budget {
    let per_run = per_run.max(1);
    let jobs = jobs.max(1);
    let own = plan.points.iter().filter(|p| p.own_run).count();
    let shared = plan.points.len() - own;
    let runs = (shared as u64).div_ceil(per_run) + own as u64;
    let run_secs = if learned.run_secs > 0.0 {
        learned.run_secs
    } else {
        30.0
    };
    let pass_secs = runs.div_ceil(jobs) as f64 * run_secs;
    let per_min = per_run as f64 * jobs as f64 * 60.0 / run_secs;
    Budget {
        points: plan.points.len(),
        shared,
        own,
        runs_per_pass: runs,
        pass_secs,
        trials_per_min: per_min,
        passes: if pass_secs > 0.0 {
            budget_secs as f64 / pass_secs
        } else {
            0.0
        },
    }
}

/// The lines `lockjaw explore` prints before it searches.
pub fn text(plan: &Plan, b: &Budget, budget_secs: u64) -> String {
    let by: Vec<String> = Family::ALL
        .iter()
        .filter_map(|f| {
            let n = plan.points.iter().filter(|p| p.family == *f).count();
            (n > 0).then(|| format!("{n} {}", f.name()))
        })
        .collect();
    let mut s = format!(
        "plan: {} fault points ({}); {} share runs, {} need a run of their own; {} not applicable here\n",
        b.points,
        by.join(", "),
        b.shared,
        b.own,
        plan.refused.len()
    );
    s += &format!(
        "one pass over the plan: {} runs, about {}; about {:.1} injections a minute\n",
        b.runs_per_pass,
        duration(b.pass_secs),
        b.trials_per_min
    );
    let covers = if b.passes >= 1.0 {
        format!("each point about {:.0} time(s)", b.passes.floor())
    } else {
        format!(
            "{:.0} % of one pass (the first points in order)",
            b.passes * 100.0
        )
    };
    s += &format!("budget {}: {covers}\n", duration(budget_secs as f64));
    s
}

/// `15m`, `45s`, `1h 10m`.
pub fn duration(secs: f64) -> String {
    let s = secs.round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}
