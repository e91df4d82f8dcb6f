//! `lockjaw bugs table --shard K/N`: the plan's units are the replayable
//! rows' sides (`ID/buggy`, `ID/fixed` or `ID/reference`, in catalogue
//! order), a shard runs those at its positions under `OUT/ID/SIDE/`,
//! writes the table of its rows to `OUT/bugs-table.md` and its manifest
//! (the rows themselves, and each side's runs as they ended); and for
//! `lockjaw merge`, the measured rows rebuilt from all shards' manifests,
//! each run read again from its directory.

use super::catalogue::{Bug, Role};
use super::cli::{bar, fill, measure, measured_exit, sides, TableArgs, Version};
use super::replay;
use super::side::RunResult;
use super::table::{self, Measured};
use crate::exit::Exit;
use crate::runner::shard::{self, Manifest, Shard};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A manifest's `data` for `bugs-table`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BugsData {
    /// Every row of the catalogue, in order.
    pub rows: Vec<Bug>,
    /// `--runs` (the table's heading names it).
    pub runs: Option<u32>,
    /// `--required`.
    pub required: u64,
    /// This shard's sides, by unit name.
    pub outcomes: BTreeMap<String, SideRecord>,
}

/// One side as it ended: its runs, or why it could not run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SideRecord {
    Runs { runs: Vec<RunRecord> },
    Failed { error: String },
}

/// One run of a side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Relative to the shard's directory.
    pub dir: Option<String>,
    pub exit: u8,
    /// Why it counts for nothing (it failed, or could not be read);
    /// `None`: it is counted from its directory.
    pub failed: Option<String>,
}

fn unit(id: &str, role: Role) -> String {
    format!("{id}/{}", role.name())
}

/// The plan's units: each replayable row's sides, in catalogue order.
pub fn units(bugs: &[Bug]) -> Vec<(usize, Role)> {
    bugs.iter()
        .enumerate()
        .filter(|(_, b)| b.not_reproduced.is_none())
        .flat_map(|(i, b)| {
            sides(b, Version::Both.roles())
                .0
                .into_iter()
                .map(move |r| (i, r))
        })
        .collect()
}

/// The plan's description: the rows, the broken rows' errors, the runs,
/// the trials required and the seed.
fn plan_text(bugs: &[Bug], broken: &[String], a: &TableArgs, seed: u64) -> Vec<String> {
    let mut v = vec![
        "bugs-table".to_string(),
        format!(
            "runs {:?} required {} seed {seed}",
            a.effort.runs, a.effort.required
        ),
    ];
    v.extend(bugs.iter().map(|b| {
        let mut b = b.clone();
        b.file = PathBuf::new();
        serde_json::to_string(&b).unwrap_or_default()
    }));
    v.extend(broken.iter().map(|e| format!("broken {e}")));
    v
}

/// `bugs table --shard K/N`.
pub fn table(
    bugs: &[Bug],
    broken: &[crate::toml_file::FileError],
    a: &TableArgs,
    s: Shard,
    baseline: &crate::report::ci::Baseline,
) -> Exit {
    let (seed, out) = match shard::require(s, a.effort.seed, a.out.as_deref()) {
        Ok(x) => x,
        Err(e) => return super::cli::bad(e),
    };
    let mut effort = a.effort.clone();
    effort.seed = Some(seed);
    let all = units(bugs);
    let mine: Vec<(usize, Role)> = s.positions(all.len()).into_iter().map(|i| all[i]).collect();
    let pb = bar(mine
        .iter()
        .map(|(i, _)| effort.runs(&bugs[*i]) as u64)
        .sum());
    let mut rows = vec![];
    let mut outcomes = BTreeMap::new();
    let mut dirs = vec![];
    for (i, b) in bugs.iter().enumerate() {
        let roles: Vec<Role> = mine
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, r)| *r)
            .collect();
        if roles.is_empty() {
            continue;
        }
        let (m, raw) = measure(b, &roles, &effort, &out.join(&b.id), &pb);
        for (role, side) in raw {
            outcomes.insert(unit(&b.id, role), record(&side, &out, &mut dirs));
        }
        rows.push(m);
    }
    pb.finish_and_clear();
    let md = table::markdown(&rows, a.effort.runs);
    print!("{md}");
    let cases = super::ci::cases(&rows, |id, r| {
        out.join(id).join(r.name()).display().to_string()
    });
    let mut e = match a.ci.finish(baseline, cases) {
        Some(ci) => ci,
        None => rows
            .iter()
            .fold(Exit::Valid, |e, m| e.merge(measured_exit(m))),
    };
    let errors: Vec<String> = broken.iter().map(|b| b.to_string()).collect();
    let mut m = Manifest::new(
        "bugs-table",
        &plan_text(bugs, &errors, a, seed),
        s,
        seed,
        all.iter().map(|(i, r)| unit(&bugs[*i].id, *r)).collect(),
        dirs.iter().map(PathBuf::as_path),
    );
    m.interrupted = replay::interrupted();
    let data = BugsData {
        rows: bugs.to_vec(),
        runs: a.effort.runs,
        required: a.effort.required,
        outcomes,
    };
    m.data = serde_json::to_value(data).unwrap_or_default();
    e = e.merge(table::write_file(&out, &md));
    if let Err(err) = m.write(&out) {
        e = e.merge(super::cli::bad(err));
    }
    e
}

/// A side's runs as the manifest keeps them, their directories added to
/// `dirs`.
fn record(
    side: &Result<Vec<RunResult>, String>,
    out: &Path,
    dirs: &mut Vec<PathBuf>,
) -> SideRecord {
    match side {
        Err(error) => SideRecord::Failed {
            error: error.clone(),
        },
        Ok(runs) => SideRecord::Runs {
            runs: runs
                .iter()
                .map(|r| {
                    dirs.extend(r.dir.clone());
                    RunRecord {
                        dir: r.dir.as_ref().map(|d| shard::beneath(d, out)),
                        exit: r.exit.code(),
                        failed: r.observed.as_ref().err().cloned(),
                    }
                })
                .collect(),
        },
    }
}

/// The measured rows of the whole catalogue from all shards' manifests
/// (each run counted again from its directory, made available under the
/// merged output by `place`), the table's markdown, the exit code the
/// unsharded `bugs table` gives, and the CI cases.
pub fn rebuild<P>(
    shards: &[(PathBuf, Manifest)],
    out: &Path,
    mut place: P,
) -> Result<(String, Exit, Vec<crate::report::ci::Case>), String>
where
    P: FnMut(&Path, &str) -> Result<(PathBuf, String), String>,
{
    let mut datas = vec![];
    for (dir, m) in shards {
        let d: BugsData = serde_json::from_value(m.data.clone()).map_err(|e| {
            format!(
                "{}: its bugs data: {e}",
                dir.join(shard::MANIFEST).display()
            )
        })?;
        datas.push((dir.as_path(), d));
    }
    let Some((_, first)) = datas.first() else {
        return Err("no shard given".into());
    };
    let mut rows = vec![];
    for b in &first.rows {
        let mut m = Measured {
            bug: b.clone(),
            buggy: None,
            fixed: None,
            errors: vec![],
        };
        if b.not_reproduced.is_none() {
            for role in sides(b, Version::Both.roles()).0 {
                let name = unit(&b.id, role);
                let Some((dir, rec)) = datas
                    .iter()
                    .find_map(|(d, x)| x.outcomes.get(&name).map(|r| (*d, r)))
                else {
                    continue; // not run: the shard was interrupted first
                };
                let side = match rec {
                    SideRecord::Failed { error } => Err(error.clone()),
                    SideRecord::Runs { runs } => Ok(results(b, dir, runs, &mut place)?),
                };
                fill(&mut m, role, side, b, first.required);
            }
        }
        rows.push(m);
    }
    let exit = rows
        .iter()
        .fold(Exit::Valid, |e, m| e.merge(measured_exit(m)));
    let cases = super::ci::cases(&rows, |id, r| {
        out.join(id).join(r.name()).display().to_string()
    });
    Ok((table::markdown(&rows, first.runs), exit, cases))
}

fn results<P>(
    b: &Bug,
    dir: &Path,
    runs: &[RunRecord],
    place: &mut P,
) -> Result<Vec<RunResult>, String>
where
    P: FnMut(&Path, &str) -> Result<(PathBuf, String), String>,
{
    let mut v = vec![];
    for r in runs {
        let abs = match &r.dir {
            Some(d) => Some(place(dir, d)?.0),
            None => None,
        };
        let observed = match (&r.failed, &abs) {
            (Some(e), _) => Err(e.clone()),
            (None, Some(d)) => replay::observe_dir(b.expect, d),
            (None, None) => Err("the run left no directory".into()),
        };
        v.push(RunResult {
            dir: abs,
            exit: Exit::from_code(r.exit).unwrap_or(Exit::Error),
            observed,
        });
    }
    Ok(v)
}
