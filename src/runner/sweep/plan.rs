//! A sweep's plan: everything checked before the first run (flags, the
//! nemesis and workload at each value, each system applies), and what
//! each value's runs get from it (their comparison arguments, their
//! nemesis file, the title).

use super::vary::{self, value_text, Param, Vary};
use super::SweepArgs;
use crate::nemesis::spec::{self, NemesisSpec};
use crate::report::compare::CellOutcome;
use crate::report::sweep::Axis;
use crate::report::trials;
use crate::runner::cli::CompareArgs;
use crate::runner::{compare, rundir};
use crate::storage::Fencing;
use crate::toml_file::Source;
use crate::workload::{self, Overrides};
use std::path::PathBuf;

/// A checked sweep, ready to run.
pub(super) struct Plan {
    pub vary: Vary,
    pub kind: &'static str,
    pub axis: Axis,
    pub original: Source,
    pub spec: NemesisSpec,
    pub ov: Overrides,
    pub seed: u64,
    pub out: PathBuf,
    /// Children get --no-progress (the sweep's bar owns the terminal).
    pub quiet_children: bool,
}

fn fencing_word(f: Fencing) -> &'static str {
    if f.is_on() {
        "on"
    } else {
        "off"
    }
}

/// Check everything a sweep needs before any run: the flags, the nemesis
/// and workload at every value, and that each system applies.
pub(super) fn plan(args: &SweepArgs) -> Result<Plan, String> {
    let vary = vary::parse(&args.vary)?;
    let kind = trials::parse_kind(args.anomaly.as_deref().unwrap_or(trials::ANY))
        .map_err(|e| format!("--anomaly: {e}"))?;
    check_flags(args, &vary)?;
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
    for &v in &vary.values {
        vary::check(vary.param, v, &original, &spec, &args.workload, &ov)?;
    }
    let axis = Axis {
        param: vary.param.name().into(),
        fault: spec.fault.clone(),
        ttl_ms: ttl_ms(args, &vary, &ov)?,
    };
    let mut plan = Plan {
        vary,
        kind,
        axis,
        original,
        spec,
        ov,
        seed: args.seed.unwrap_or_else(clock_seed),
        out: args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("histories/sweep-{}", rundir::utc_stamp()))),
        quiet_children: false,
    };
    refuse_na(args, &plan)?;
    std::fs::create_dir_all(plan.out.join("nemesis"))
        .map_err(|e| format!("--out {}: {e}", plan.out.display()))?;
    plan.out = std::fs::canonicalize(&plan.out).unwrap_or(plan.out);
    Ok(plan)
}

/// Flags that go together: --anomaly and --max-runs-per-probe with
/// --find-boundary (which needs two values), and no flag that sets what
/// --vary varies.
fn check_flags(args: &SweepArgs, vary: &Vary) -> Result<(), String> {
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
    Ok(())
}

/// The workload's lease (ms), the axis's unit: at the first value when the
/// sweep varies the hold.
fn ttl_ms(args: &SweepArgs, vary: &Vary, ov: &Overrides) -> Result<u64, String> {
    let ov = match vary.param {
        Param::HoldMs => Overrides {
            hold_ms: Some(vary.values[0] as u64),
            ..ov.clone()
        },
        _ => ov.clone(),
    };
    Ok(workload::load(&args.workload, &ov)
        .map_err(|e| format!("--workload: {e}"))?
        .ttl_ms)
}

/// A seed from the clock, when --seed is not given.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A system that cannot apply is refused before any run.
fn refuse_na(args: &SweepArgs, plan: &Plan) -> Result<(), String> {
    let first = compare_args(args, plan, plan.vary.values[0], &args.nemesis);
    for c in compare::plan(&first)? {
        if let CellOutcome::NotApplicable { reason } = c.outcome {
            return Err(format!(
                "--system {}: {reason} (hint: leave it out of the sweep)",
                c.spec.system
            ));
        }
    }
    Ok(())
}

/// The comparison arguments of one value: its nemesis, its flags.
pub(super) fn compare_args(
    args: &SweepArgs,
    plan: &Plan,
    value: f64,
    nemesis: &str,
) -> CompareArgs {
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
        shard: None,
        ci: Default::default(),
        choices: args.choices.clone(),
        from_runs: vec![],
        // Given to the runs with the other run flags, after `--`.
        pause_budget: crate::report::cli::PauseBudget {
            pause_budget_ms: None,
        },
        witness: args.witness,
        run_flags,
    }
}

/// The nemesis to run at `value`: a file written under OUT/nemesis/ for a
/// nemesis parameter, else the given nemesis.
pub(super) fn nemesis_for(args: &SweepArgs, plan: &Plan, value: f64) -> Result<String, String> {
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

/// The title of the sweep's tables.
pub(super) fn title(args: &SweepArgs, plan: &Plan) -> String {
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
