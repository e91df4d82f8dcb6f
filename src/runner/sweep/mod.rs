//! `lockjaw sweep`: rates of each anomaly kind against a varied fault or
//! workload parameter (`--vary`), per system, and `--find-boundary`'s
//! search for the 50 % crossing.
//!
//! Everything is checked before the first run ([`vary`]). Each value of a
//! nemesis parameter becomes a nemesis file under OUT/nemesis/ (the
//! original's text with that one field set), passed to each `lockjaw run`
//! child as `--nemesis PATH`, so every run directory under OUT/runs/ stays
//! re-checkable and its reproduce line works. The runs go through the
//! comparison's machinery ([`super::compare::run_cells`], `--jobs` at
//! once; Ctrl-C lets the running children heal, keeps what finished and
//! writes the tables). Each (system, value) is tallied with
//! [`Tally::of`]; `report::sweep` renders the tables and plots.

pub mod boundary;
pub mod vary;

use super::cli::{Choices, CompareArgs};
use super::compare::{self as cmp, INTERRUPTED};
use crate::exit::Exit;
use crate::nemesis::spec::{self, NemesisSpec};
use crate::report::compare::{Cell, CellOutcome, CellSpec};
use crate::report::summary::RunSummary;
use crate::report::sweep::{self as rep, Axis, Boundary, Row, Sweep, SystemSweep};
use crate::report::trials::{self, Rate, Tally};
use crate::storage::Fencing;
use crate::toml_file::Source;
use crate::workload::{self, Overrides};
use indicatif::ProgressBar;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use vary::{value_text, Param, Vary};

/// Rates of anomalies against a varied fault or workload parameter.
///
/// Each (system, value) runs --runs times as `lockjaw run` children (their
/// run directories under OUT/runs/). Writes sweep.md, sweep.html (one plot
/// per system) and sweep.json into OUT. Exit code: 0 when the tables were
/// written, 2 when interrupted (the tables hold what finished), 3 on bad
/// usage or when a run could not run.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Systems, e.g. redis,etcd.
    #[arg(long, value_delimiter = ',', required = true)]
    pub system: Vec<String>,
    /// The nemesis (a name or a nemesis file).
    #[arg(long)]
    pub nemesis: String,
    /// PARAM=V1,V2,... or PARAM=FROM..TO/STEPS; PARAM one of
    /// duration_leases, offset_ms, latency_ms, hold_ms, ttl_ms.
    #[arg(long)]
    pub vary: String,
    /// Runs per value (seeds S, S+1, ...) [default: 1; with
    /// --find-boundary, runs added to a probe at a time: 2].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// How many runs go at once (each on its own ports and names).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    #[arg(long, default_value = "fenced-counter")]
    pub workload: String,
    #[arg(long, value_enum)]
    pub fencing: Option<Fencing>,
    /// Seconds per run.
    #[arg(long)]
    pub time_limit: Option<f64>,
    #[arg(long)]
    pub ttl_ms: Option<u64>,
    #[arg(long)]
    pub hold_ms: Option<u64>,
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Seed of each value's first run [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the tables and the runs go [default: histories/sweep-<UTC>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Search the value at which the rate of --anomaly crosses 50 %,
    /// between the smallest and the largest --vary value.
    #[arg(long)]
    pub find_boundary: bool,
    /// With --find-boundary: any, two-holders, fence-order, stale-writes,
    /// lost-updates, duplicate-effects or not-linearizable.
    #[arg(long)]
    pub anomaly: Option<String>,
    /// With --find-boundary: runs at most per probed value.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs_per_probe: Option<u32>,
    /// No progress bar on stderr.
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub choices: Choices,
    /// More `lockjaw run` flags for every run, after `--`.
    #[arg(last = true, value_name = "RUN_FLAGS")]
    pub run_flags: Vec<String>,
}

/// A checked sweep, ready to run.
struct Plan {
    vary: Vary,
    kind: &'static str,
    axis: Axis,
    original: Source,
    spec: NemesisSpec,
    ov: Overrides,
    seed: u64,
    out: PathBuf,
    /// Children get --no-progress (the sweep's bar owns the terminal).
    quiet_children: bool,
}

fn fencing_word(f: Fencing) -> &'static str {
    if f.is_on() {
        "on"
    } else {
        "off"
    }
}

/// Check everything a sweep needs before any run.
fn plan(args: &SweepArgs) -> Result<Plan, String> {
    let vary = vary::parse(&args.vary)?;
    let kind = trials::parse_kind(args.anomaly.as_deref().unwrap_or(trials::ANY))
        .map_err(|e| format!("--anomaly: {e}"))?;
    if !args.find_boundary {
        for (set, flag) in [
            (args.anomaly.is_some(), "--anomaly"),
            (args.max_runs_per_probe.is_some(), "--max-runs-per-probe"),
        ] {
            if set {
                return Err(format!(
                    "{flag} applies to --find-boundary only (hint: add --find-boundary, or drop {flag})"
                ));
            }
        }
    } else if vary.values.len() < 2 {
        return Err(format!(
            "--vary {}: --find-boundary needs a range, two values or more (hint: --vary {}=FROM,TO; it searches between the smallest and the largest)",
            vary.param.name(),
            vary.param.name()
        ));
    }
    for (p, set, flag) in [
        (Param::HoldMs, args.hold_ms.is_some(), "--hold-ms"),
        (Param::TtlMs, args.ttl_ms.is_some(), "--ttl-ms"),
    ] {
        if vary.param == p && set {
            return Err(format!(
                "--vary {} and {flag} both set it (hint: drop {flag})",
                p.name()
            ));
        }
    }
    let (original, _) = crate::toml_file::find(&args.nemesis, "nemesis", spec::BUILTIN)
        .map_err(|e| format!("--nemesis: {e}"))?;
    let spec = spec::from_source(&original).map_err(|e| format!("--nemesis: {e}"))?;
    let ov = Overrides {
        ttl_ms: args.ttl_ms,
        hold_ms: args.hold_ms,
        concurrency: args.concurrency,
        time_limit_s: args.time_limit,
        ..Overrides::default()
    };
    let w = match vary.param {
        Param::HoldMs => None,
        _ => Some(workload::load(&args.workload, &ov).map_err(|e| format!("--workload: {e}"))?),
    };
    for &v in &vary.values {
        vary::check(vary.param, v, &original, &spec, &args.workload, &ov)?;
    }
    let ttl_ms = match w {
        Some(w) => w.ttl_ms,
        None => {
            let first = Overrides {
                hold_ms: Some(vary.values[0] as u64),
                ..ov.clone()
            };
            workload::load(&args.workload, &first)
                .map_err(|e| format!("--workload: {e}"))?
                .ttl_ms
        }
    };
    let axis = Axis {
        param: vary.param.name().into(),
        fault: spec.fault.clone(),
        ttl_ms,
    };
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!("histories/sweep-{}", super::rundir::utc_stamp()))
    });
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let mut plan = Plan {
        vary,
        kind,
        axis,
        original,
        spec,
        ov,
        seed,
        out,
        quiet_children: false,
    };
    // A system that cannot apply is refused before any run.
    let cells = cmp::plan(&compare_args(
        args,
        &plan,
        plan.vary.values[0],
        &args.nemesis,
    ))?;
    for c in cells {
        if let CellOutcome::NotApplicable { reason } = c.outcome {
            return Err(format!(
                "--system {}: {reason} (hint: leave it out of the sweep)",
                c.spec.system
            ));
        }
    }
    std::fs::create_dir_all(plan.out.join("nemesis"))
        .map_err(|e| format!("--out {}: {e}", plan.out.display()))?;
    plan.out = std::fs::canonicalize(&plan.out).unwrap_or(plan.out);
    Ok(plan)
}

/// The comparison arguments of one value: its nemesis, its flags.
fn compare_args(args: &SweepArgs, plan: &Plan, value: f64, nemesis: &str) -> CompareArgs {
    let mut run_flags = args.run_flags.clone();
    let hold = match plan.vary.param {
        Param::HoldMs => Some(value as u64),
        _ => args.hold_ms,
    };
    if let Some(h) = hold {
        run_flags.extend(["--hold-ms".into(), h.to_string()]);
    }
    if plan.quiet_children && !run_flags.iter().any(|f| f == "--no-progress") {
        run_flags.push("--no-progress".into());
    }
    CompareArgs {
        systems: args.system.clone(),
        workload: args.workload.clone(),
        nemesis: vec![nemesis.to_string()],
        fencing: args
            .fencing
            .map(|f| vec![fencing_word(f).to_string()])
            .unwrap_or_default(),
        clients: vec![],
        runs: 1,
        jobs: args.jobs,
        time_limit: args.time_limit,
        concurrency: args.concurrency,
        contention: vec![],
        ttl_ms: match plan.vary.param {
            Param::TtlMs => Some(value as u64),
            _ => args.ttl_ms,
        },
        seed: Some(plan.seed),
        out: Some(plan.out.clone()),
        choices: args.choices.clone(),
        from_runs: vec![],
        // Given to the runs with the other run flags, after `--`.
        pause_budget: crate::report::cli::PauseBudget {
            pause_budget_ms: None,
        },
        run_flags,
    }
}

/// The nemesis to run at `value`: a file written under OUT/nemesis/ for a
/// nemesis parameter, else the given nemesis.
fn nemesis_for(args: &SweepArgs, plan: &Plan, value: f64) -> Result<String, String> {
    let text = vary::check(
        plan.vary.param,
        value,
        &plan.original,
        &plan.spec,
        &args.workload,
        &plan.ov,
    )?;
    let Some(text) = text else {
        return Ok(args.nemesis.clone());
    };
    let path = plan.out.join("nemesis").join(format!(
        "{}-{}-{}.toml",
        plan.spec.name,
        plan.vary.param.name(),
        value_text(value)
    ));
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.display().to_string())
}

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

fn find_boundaries(args: &SweepArgs, plan: &Plan, bar: &ProgressBar) -> Vec<SystemSweep> {
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

fn sweep_values(
    args: &SweepArgs,
    plan: &Plan,
    bar: &ProgressBar,
) -> Result<Vec<SystemSweep>, String> {
    let mut jobs = vec![];
    for &v in &plan.vary.values {
        let nemesis = nemesis_for(args, plan, v)?;
        for s in &args.system {
            jobs.push((s.clone(), v, nemesis.clone()));
        }
    }
    let mut seen = HashMap::new();
    run_batch(args, plan, &jobs, 0, args.runs.unwrap_or(1), bar, &mut seen);
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

fn title(args: &SweepArgs, plan: &Plan) -> String {
    let w = &plan.axis;
    let values: Vec<String> = plan.vary.values.iter().map(|v| value_text(*v)).collect();
    let what = if args.find_boundary {
        format!(
            "50 % boundary of {} in {} = {}..{}",
            trials::kind_label(plan.kind),
            w.param,
            values[0],
            values[values.len() - 1]
        )
    } else {
        format!("{} = {}", w.param, values.join(", "))
    };
    let each = args
        .time_limit
        .map(|t| format!(", {t} s each"))
        .unwrap_or_default();
    format!(
        "lockjaw sweep: {} under {}, {what} ({}, ttl {} ms{}{each}, fencing {})",
        args.system.join(", "),
        args.nemesis,
        args.workload,
        w.ttl_ms,
        args.hold_ms
            .map(|h| format!(", hold {h} ms"))
            .unwrap_or_default(),
        args.fencing.map_or("default", fencing_word)
    )
}

/// `lockjaw sweep`: check, run, write and print the tables.
pub fn run(args: &SweepArgs) -> Result<Exit, String> {
    let mut plan = plan(args)?;
    let runs = args.runs.unwrap_or(1);
    let total = (!args.find_boundary)
        .then(|| (plan.vary.values.len() * args.system.len()) as u64 * u64::from(runs));
    let bar = super::progress::runs_bar(total, !args.no_progress);
    plan.quiet_children = !bar.is_hidden();
    cmp::catch_sigint();
    let systems = if args.find_boundary {
        find_boundaries(args, &plan, &bar)
    } else {
        sweep_values(args, &plan, &bar)?
    };
    bar.finish_and_clear();
    let interrupted = INTERRUPTED.load(Ordering::SeqCst);
    let s = Sweep::new(
        title(args, &plan),
        args.nemesis.clone(),
        plan.axis.clone(),
        systems,
        args.find_boundary.then_some(plan.kind),
        interrupted,
    );
    rep::write_sweep(&plan.out, &s).map_err(|e| format!("{}: {e}", plan.out.display()))?;
    print!("{}", rep::sweep_md(&s));
    println!("\n{}", plan.out.join("sweep.html").display());
    let failed = s.systems.iter().any(|x| {
        x.rows.iter().any(|r| r.error.is_some())
            || x.boundary
                .as_ref()
                .is_some_and(|b| matches!(b.found, rep::Found::Stopped { .. }) && !interrupted)
    });
    Ok(if interrupted {
        Exit::Unknown
    } else if failed {
        Exit::Error
    } else {
        Exit::Valid
    })
}

/// The `lockjaw sweep` command.
pub fn sweep(args: SweepArgs) -> Exit {
    match run(&args) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
