//! `compare --shard K/N`: the plan's units (the applicable cells, each
//! with all its runs), the part a shard runs, what its manifest keeps
//! (the whole plan, N/A cells with their reasons, and each of its cells'
//! run directories or error), and the cells rebuilt from the manifests of
//! all shards for `lockjaw merge`.

use super::super::cli::CompareArgs;
use super::super::shard::{placement_free, Manifest, Shard};
use super::{cell_dir, run_args};
use crate::report::compare::{Cell, CellOutcome, CellRun, CellSpec};
use crate::report::RunSummary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A manifest's `data` for `compare`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompareData {
    /// The title of the unsharded tables.
    pub title: String,
    /// Every cell of the plan, in plan order.
    pub cells: Vec<Planned>,
    /// This shard's cells, by unit name.
    pub outcomes: BTreeMap<String, Outcome>,
}

/// A planned cell: N/A with its reason, or a unit of the plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Planned {
    pub spec: CellSpec,
    pub not_applicable: Option<String>,
}

/// How a shard's cell ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// Its run directories, relative to the shard's directory.
    Runs {
        dirs: Vec<String>,
    },
    Failed {
        error: String,
    },
}

/// A cell's unit name: its run directories' name without the run number.
pub fn unit(spec: &CellSpec) -> String {
    let d = cell_dir(Path::new(""), spec, 0);
    let name = d.display().to_string();
    name.strip_suffix("-0").unwrap_or(&name).to_string()
}

fn applicable(c: &Cell) -> bool {
    !matches!(c.outcome, CellOutcome::NotApplicable { .. })
}

/// The plan's units: its applicable cells, in plan order.
pub fn units(cells: &[Cell]) -> Vec<String> {
    cells
        .iter()
        .filter(|c| applicable(c))
        .map(|c| unit(&c.spec))
        .collect()
}

/// The plan's description for its hash: the runs per cell, the title and
/// each cell with the `lockjaw run` arguments of its first run (ports and
/// output left out).
pub fn plan_text(args: &CompareArgs, title: &str, cells: &[Cell]) -> Vec<String> {
    let mut v = vec![
        "compare".to_string(),
        format!("runs {}", args.runs.max(1)),
        title.to_string(),
    ];
    for c in cells {
        let spec = serde_json::to_string(&c.spec).unwrap_or_default();
        match &c.outcome {
            CellOutcome::NotApplicable { reason } => v.push(format!("{spec} n/a {reason}")),
            _ => {
                let argv = run_args(args, &c.spec, 0, Path::new("DIR"));
                v.push(format!("{spec} {}", placement_free(&argv).join(" ")));
            }
        }
    }
    v
}

/// The cells shard `s` runs (its applicable cells only).
pub fn take(cells: &[Cell], s: Shard) -> Vec<Cell> {
    cells
        .iter()
        .filter(|c| applicable(c))
        .enumerate()
        .filter(|(i, _)| s.owns(*i))
        .map(|(_, c)| c.clone())
        .collect()
}

/// The manifest of shard `s` of the plan `planned`, whose cells `ran`
/// (their reports relative to `out`).
pub fn manifest(
    args: &CompareArgs,
    title: &str,
    planned: &[Cell],
    ran: &[Cell],
    s: Shard,
    seed: u64,
    out: &Path,
) -> Manifest {
    let mut outcomes = BTreeMap::new();
    let mut dirs: Vec<PathBuf> = vec![];
    for c in ran {
        let o = match &c.outcome {
            CellOutcome::Runs { runs } => {
                let d: Vec<String> = runs
                    .iter()
                    .map(|r| {
                        let p = Path::new(&r.report);
                        p.parent().unwrap_or(p).display().to_string()
                    })
                    .collect();
                dirs.extend(d.iter().map(|x| out.join(x)));
                Outcome::Runs { dirs: d }
            }
            CellOutcome::Failed { error } => Outcome::Failed {
                error: error.clone(),
            },
            CellOutcome::NotApplicable { .. } => continue,
        };
        outcomes.insert(unit(&c.spec), o);
    }
    let data = CompareData {
        title: title.into(),
        cells: planned
            .iter()
            .map(|c| Planned {
                spec: c.spec.clone(),
                not_applicable: match &c.outcome {
                    CellOutcome::NotApplicable { reason } => Some(reason.clone()),
                    _ => None,
                },
            })
            .collect(),
        outcomes,
    };
    let text = plan_text(args, title, planned);
    let mut m = Manifest::new(
        "compare",
        &text,
        s,
        seed,
        units(planned),
        dirs.iter().map(PathBuf::as_path),
    );
    m.data = serde_json::to_value(data).unwrap_or_default();
    m
}

/// The cells of the whole plan from the shards' manifests: N/A cells
/// from the plan, each other cell from the shard that ran it, its run
/// directories made available under the merged output by `place(shard's
/// directory, run directory relative to it)`, which returns the path
/// relative to the merged output. Returns the title and the cells.
pub fn rebuild<P>(
    shards: &[(PathBuf, Manifest)],
    mut place: P,
) -> Result<(String, Vec<Cell>), String>
where
    P: FnMut(&Path, &str) -> Result<(PathBuf, String), String>,
{
    let mut datas = vec![];
    for (dir, m) in shards {
        let d: CompareData = serde_json::from_value(m.data.clone()).map_err(|e| {
            format!(
                "{}: its compare data: {e}",
                dir.join(super::super::shard::MANIFEST).display()
            )
        })?;
        datas.push((dir.as_path(), d));
    }
    let Some((_, first)) = datas.first() else {
        return Err("no shard given".into());
    };
    let mut cells = vec![];
    for p in &first.cells {
        let outcome = match &p.not_applicable {
            Some(reason) => CellOutcome::NotApplicable {
                reason: reason.clone(),
            },
            None => {
                let name = unit(&p.spec);
                let (dir, o) = datas
                    .iter()
                    .find_map(|(dir, d)| d.outcomes.get(&name).map(|o| (*dir, o)))
                    .ok_or_else(|| format!("no shard has the outcome of cell {name}"))?;
                match o {
                    Outcome::Failed { error } => CellOutcome::Failed {
                        error: error.clone(),
                    },
                    Outcome::Runs { dirs } => {
                        let mut runs = vec![];
                        for r in dirs {
                            let (abs, rel) = place(dir, r)?;
                            let summary = RunSummary::from_dir(&abs).map_err(|e| e.to_string())?;
                            runs.push(CellRun {
                                summary,
                                report: format!("{rel}/report.html"),
                            });
                        }
                        CellOutcome::Runs { runs }
                    }
                }
            }
        };
        cells.push(Cell {
            spec: p.spec.clone(),
            outcome,
        });
    }
    Ok((first.title.clone(), cells))
}
