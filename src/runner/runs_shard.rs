//! `lockjaw run --runs N --shard K/N'`: the runs `run-i` (seed + i - 1)
//! at shard K's positions, each into `OUT/run-i`, the shard's tally over
//! them, and its manifest; and for `lockjaw merge`, the runs of all
//! shards read back (their exit codes from the manifests, their tallies
//! from their directories).

use super::controller::RunConfig;
use super::repeat::{self, Finished};
use super::shard::{Manifest, Shard};
use crate::exit::Exit;
use crate::report::ci::{run_outcome, Case, Outcome};
use crate::report::trials::Tally;
use crate::report::RunSummary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A manifest's `data` for `runs`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunsData {
    /// This shard's runs by unit name (`run-i`).
    pub outcomes: BTreeMap<String, RunRecord>,
}

/// How one run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub seed: u64,
    /// Its exit code (0, 1, 2, 3).
    pub exit: u8,
    /// Its directory relative to the shard's (none when it failed before
    /// making one).
    pub dir: Option<String>,
    pub error: Option<String>,
    /// The run ended (with any verdict) rather than failing to run: its
    /// summary counts in the tally, as in the unsharded `--runs`.
    pub ended: bool,
}

/// The unit names of `runs` runs.
pub fn units(runs: usize) -> Vec<String> {
    (1..=runs).map(|i| format!("run-{i}")).collect()
}

/// The plan's description: the run's configuration without what only
/// places it (output, ports, progress, the binary's path, the command
/// line, credentials, the adapter's path), and the number of runs.
fn plan_text(cfg: &RunConfig, runs: usize) -> Vec<String> {
    let mut c = cfg.clone();
    c.out = None;
    c.histories = PathBuf::new();
    c.base_port = None;
    c.progress = false;
    c.exe = PathBuf::new();
    c.command = vec![];
    c.auth = Default::default();
    c.postgres_url = None;
    c.adapter = None;
    vec!["runs".into(), format!("runs {runs}"), format!("{c:?}")]
}

/// How a finished run ended, its directory relative to `out`.
pub fn record(f: &Finished, out: &Path) -> RunRecord {
    let dir = match &f.result {
        Ok(o) => Some(o.dir.clone()),
        Err(e) => e.dir.clone(),
    };
    let error = match &f.result {
        Ok(o) => o.error.clone(),
        Err(e) => Some(e.msg.clone()),
    };
    RunRecord {
        seed: f.seed,
        exit: f.exit().code(),
        dir: dir.map(|d| super::shard::beneath(&d, out)),
        error,
        ended: f.result.is_ok(),
    }
}

/// A run as a CI case: `run-i`, failed with its anomalies, an error when
/// it could not run, unknown, or passed; `dir` is where it is now.
pub fn case(i: usize, r: &RunRecord, dir: Option<&Path>) -> Case {
    let summary = dir
        .filter(|_| r.ended)
        .and_then(|d| RunSummary::from_dir(d).ok());
    let mut keys = BTreeMap::new();
    if let Some(s) = &summary {
        let pairs = [
            ("system", s.system.clone()),
            ("client", s.client.clone().or(Some("builtin".into()))),
            ("nemesis", s.nemesis.clone()),
            (
                "fencing",
                s.fencing.map(|f| if f { "on" } else { "off" }.to_string()),
            ),
        ];
        for (k, v) in pairs {
            if let Some(v) = v {
                keys.insert(k.to_string(), v);
            }
        }
    }
    let rel = r.dir.clone().unwrap_or_default();
    let outcome = match (Exit::from_code(r.exit), &summary) {
        (Some(Exit::Error) | None, _) => Outcome::Error {
            message: r.error.clone().unwrap_or_else(|| "the run failed".into()),
        },
        (_, Some(s)) => run_outcome(s, &rel),
        (_, None) => Outcome::Unknown {
            reason: r.error.clone().unwrap_or_else(|| "interrupted".into()),
        },
    };
    Case {
        suite: "runs".into(),
        name: format!("run-{i} (seed {})", r.seed),
        keys,
        outcome,
    }
}

/// The CI cases of unsharded `--runs` (directories under `out`, if any).
pub fn cases(done: &[Finished], out: Option<&Path>) -> Vec<Case> {
    let base = out.unwrap_or(Path::new(""));
    done.iter()
        .map(|f| {
            let r = record(f, base);
            let dir = r.dir.as_ref().map(|d| base.join(d));
            case(f.index, &r, dir.as_deref())
        })
        .collect()
}

/// `--runs N --shard K/N'`: run this shard's runs, print each and the
/// shard's tally, write its tally and manifest under `out`.
pub fn run(
    cfg: &RunConfig,
    runs: usize,
    jobs: usize,
    s: Shard,
    out: &Path,
    ci: &crate::report::ci::CiArgs,
) -> Exit {
    let checked = super::controller::validate(cfg)
        .map_err(|e| e.to_string())
        .and_then(|()| ci.load());
    let baseline = match checked {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    let mut all = repeat::configs(cfg, runs.max(2), jobs);
    all.truncate(runs);
    let mine: Vec<RunConfig> = s
        .positions(runs)
        .into_iter()
        .map(|i| all[i].clone())
        .collect();
    let numbers: Vec<usize> = s.positions(runs).into_iter().map(|i| i + 1).collect();
    let print = |f: &Finished, _: usize| {
        let i = numbers[f.index - 1];
        match &f.result {
            Ok(o) => println!("== run {i}/{runs} (seed {})\n{}\n", f.seed, o.summary),
            Err(e) => eprintln!("== run {i}/{runs} (seed {}): error: {}\n", f.seed, e.msg),
        }
    };
    let done = repeat::run_all(mine.clone(), jobs, &print);
    println!("shard {s}: {}", repeat::tally(&done));
    let measured = repeat::measure(&done);
    for l in measured.lines() {
        println!("{l}");
    }
    let mut data = RunsData::default();
    for f in &done {
        data.outcomes
            .insert(format!("run-{}", numbers[f.index - 1]), record(f, out));
    }
    let dirs: Vec<PathBuf> = mine.iter().filter_map(|c| c.out.clone()).collect();
    let mut m = Manifest::new(
        "runs",
        &plan_text(cfg, runs),
        s,
        cfg.seed,
        units(runs),
        dirs.iter().map(PathBuf::as_path),
    );
    m.interrupted = done.len() < mine.len();
    m.data = serde_json::to_value(&data).unwrap_or_default();
    let written = repeat::write_tally(out, &measured)
        .map_err(|e| format!("{}: {e}", out.display()))
        .and_then(|()| m.write(out));
    let mut exit = repeat::exit(&done);
    let written_ok = written.is_ok();
    if let Err(e) = written {
        eprintln!("error: {e}");
        exit = exit.merge(Exit::Error);
    }
    let cases = data
        .outcomes
        .iter()
        .map(|(u, r)| {
            let i = u.trim_start_matches("run-").parse().unwrap_or(0);
            case(i, r, r.dir.as_ref().map(|d| out.join(d)).as_deref())
        })
        .collect();
    if let Some(e) = ci.finish(&baseline, cases) {
        exit = e.merge(if written_ok { Exit::Valid } else { Exit::Error });
    }
    if m.interrupted {
        println!(
            "interrupted: {} of this shard's {} runs were not started",
            mine.len() - done.len(),
            mine.len()
        );
        exit = exit.merge(Exit::Unknown);
    }
    exit
}

/// The runs of all shards in run order: their directories made available
/// under the merged output by `place(shard's directory, run directory)`
/// (which returns its path there), then the pooled tally, written as the
/// unsharded `--runs` writes it, and the composed exit code.
pub fn rebuild<P>(
    shards: &[(PathBuf, Manifest)],
    out: &Path,
    mut place: P,
) -> Result<(Exit, Vec<Case>), String>
where
    P: FnMut(&Path, &str) -> Result<(PathBuf, String), String>,
{
    let mut records = BTreeMap::new();
    for (dir, m) in shards {
        let d: RunsData = serde_json::from_value(m.data.clone()).map_err(|e| {
            format!(
                "{}: its runs data: {e}",
                dir.join(super::shard::MANIFEST).display()
            )
        })?;
        for (unit, r) in d.outcomes {
            let i: usize = unit
                .strip_prefix("run-")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{}: unit `{unit}` is not run-<i>", dir.display()))?;
            records.insert(i, (dir.clone(), r));
        }
    }
    let mut summaries = vec![];
    let mut cases = vec![];
    let mut exit = Exit::Valid;
    for (i, (dir, r)) in &records {
        exit = exit.merge(Exit::from_code(r.exit).unwrap_or(Exit::Error));
        let Some(d) = &r.dir else {
            cases.push(case(*i, r, None));
            continue;
        };
        let (abs, _) = place(dir, d)?;
        cases.push(case(*i, r, Some(&abs)));
        // As `repeat::measure`: an ended run whose directory reads.
        if let Some(s) = r.ended.then(|| RunSummary::from_dir(&abs).ok()).flatten() {
            summaries.push(s);
        }
    }
    let refs: Vec<&RunSummary> = summaries.iter().collect();
    let t = Tally::of(&refs);
    repeat::write_tally(out, &t).map_err(|e| format!("{}: {e}", out.display()))?;
    for l in t.lines() {
        println!("{l}");
    }
    Ok((exit, cases))
}
