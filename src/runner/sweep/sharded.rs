//! `sweep --shard K/N` over fixed values (not `--find-boundary`, whose
//! probes depend on earlier results): the plan's units are the (system,
//! value) pairs in the sweep's order, each with all its runs; a shard runs
//! those at its positions and its manifest keeps each one's run reports
//! or error; `lockjaw merge` rebuilds the whole sweep from them.

use super::plan::{compare_args, Plan};
use super::vary::value_text;
use super::SweepArgs;
use crate::report::summary::RunSummary;
use crate::report::sweep::{Axis, Row, Sweep, SystemSweep};
use crate::report::trials::Tally;
use crate::runner::shard::{placement_free, Manifest, Shard, MANIFEST};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A manifest's `data` for `sweep`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepData {
    pub title: String,
    pub nemesis: String,
    pub axis: Axis,
    pub systems: Vec<String>,
    pub values: Vec<f64>,
    /// This shard's (system, value) pairs, by unit name.
    pub outcomes: BTreeMap<String, Point>,
}

/// One (system, value) as it ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Its runs' reports, relative to the shard's directory.
    pub reports: Vec<String>,
    pub error: Option<String>,
}

/// A (system, value) pair's unit name: `redis@duration_leases=1.5`.
pub fn unit(system: &str, param: &str, value: f64) -> String {
    format!("{system}@{param}={}", value_text(value))
}

/// The plan's description: the title, and each pair with the `lockjaw
/// run` arguments of its first run (the output directory as `OUT`).
pub(super) fn plan_text(
    args: &SweepArgs,
    plan: &Plan,
    jobs: &[(String, f64, String)],
    title: &str,
) -> Vec<String> {
    let out = plan.out.display().to_string();
    let mut v = vec![
        "sweep".to_string(),
        title.to_string(),
        format!("runs {:?}", args.runs),
    ];
    for (system, value, nemesis) in jobs {
        let cargs = compare_args(args, plan, *value, nemesis);
        let spec = crate::report::compare::CellSpec {
            system: system.clone(),
            client: args.choices.client.clone(),
            workload: args.workload.clone(),
            nemesis: nemesis.clone(),
            fencing: args.fencing.map(crate::storage::Fencing::is_on),
            concurrency: None,
        };
        let argv = crate::runner::compare::run_args(&cargs, &spec, 0, Path::new("DIR"));
        let argv: Vec<String> = placement_free(&argv)
            .iter()
            .map(|a| a.replace(&out, "OUT"))
            .collect();
        v.push(argv.join(" "));
    }
    v.push(plan.original.text.clone());
    v
}

/// The manifest of shard `s`, whose rows `systems` ran.
#[allow(clippy::too_many_arguments)]
pub(super) fn manifest(
    args: &SweepArgs,
    plan: &Plan,
    jobs: &[(String, f64, String)],
    title: &str,
    systems: &[SystemSweep],
    s: Shard,
    seed: u64,
) -> Manifest {
    let param = plan.axis.param.clone();
    let mut outcomes = BTreeMap::new();
    let mut dirs = vec![];
    for sys in systems {
        for r in &sys.rows {
            dirs.extend(
                r.reports
                    .iter()
                    .map(|p| plan.out.join(p).with_file_name("")),
            );
            outcomes.insert(
                unit(&sys.system, &param, r.value),
                Point {
                    reports: r.reports.clone(),
                    error: r.error.clone(),
                },
            );
        }
    }
    let data = SweepData {
        title: title.to_string(),
        nemesis: args.nemesis.clone(),
        axis: plan.axis.clone(),
        systems: args.system.clone(),
        values: plan.vary.values.clone(),
        outcomes,
    };
    let names = jobs.iter().map(|(sy, v, _)| unit(sy, &param, *v)).collect();
    let mut m = Manifest::new(
        "sweep",
        &plan_text(args, plan, jobs, title),
        s,
        seed,
        names,
        dirs.iter().map(PathBuf::as_path),
    );
    m.data = serde_json::to_value(data).unwrap_or_default();
    m
}

/// The whole sweep from the shards' manifests, each pair's runs read
/// again from their directories (made available by `place`).
pub fn rebuild<P>(shards: &[(PathBuf, Manifest)], mut place: P) -> Result<Sweep, String>
where
    P: FnMut(&Path, &str) -> Result<(PathBuf, String), String>,
{
    let mut datas = vec![];
    for (dir, m) in shards {
        let d: SweepData = serde_json::from_value(m.data.clone())
            .map_err(|e| format!("{}: its sweep data: {e}", dir.join(MANIFEST).display()))?;
        datas.push((dir.as_path(), d));
    }
    let Some((_, first)) = datas.first() else {
        return Err("no shard given".into());
    };
    let mut systems = vec![];
    for system in &first.systems {
        let mut rows = vec![];
        for &value in &first.values {
            let name = unit(system, &first.axis.param, value);
            let Some((dir, p)) = datas
                .iter()
                .find_map(|(d, x)| x.outcomes.get(&name).map(|p| (*d, p)))
            else {
                continue; // not run: the shard was interrupted first
            };
            let mut summaries = vec![];
            for rep in &p.reports {
                let rel = Path::new(rep)
                    .parent()
                    .unwrap_or(Path::new(""))
                    .display()
                    .to_string();
                let (abs, _) = place(dir, &rel)?;
                summaries.push(RunSummary::from_dir(&abs).map_err(|e| e.to_string())?);
            }
            let refs: Vec<&RunSummary> = summaries.iter().collect();
            rows.push(Row {
                value,
                tally: Tally::of(&refs),
                rates: BTreeMap::new(),
                reports: p.reports.clone(),
                error: p.error.clone(),
            });
        }
        systems.push(SystemSweep {
            system: system.clone(),
            rows,
            boundary: None,
        });
    }
    let interrupted = shards.iter().any(|(_, m)| m.interrupted);
    Ok(Sweep::new(
        first.title.clone(),
        first.nemesis.clone(),
        first.axis.clone(),
        systems,
        None,
        interrupted,
    ))
}
