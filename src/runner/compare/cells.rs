//! The parallel cell runner that `compare` and `sweep` share: every
//! applicable cell's runs, at most `jobs` at once, each into its own run
//! directory, then each cell filled from its runs' summaries (or marked
//! failed with its first run's error).

use crate::report::compare::{self, Cell, CellOutcome, CellRun, CellSpec};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The directory of run `k` of a cell, under `out/cells/`.
pub fn cell_dir(out: &Path, spec: &CellSpec, k: u32) -> PathBuf {
    let f = match spec.fencing {
        Some(true) => "-fenced",
        Some(false) => "-unfenced",
        None => "",
    };
    let client = match spec.client.as_str() {
        "builtin" => String::new(),
        // `NAME@PATH`: the name and the source tree's folder name.
        c if c
            .split_once('@')
            .is_some_and(|(n, p)| !n.contains('/') && p.contains('/')) =>
        {
            let (n, p) = c.split_once('@').unwrap_or((c, ""));
            let tree = p.rsplit('/').find(|x| !x.is_empty()).unwrap_or("source");
            format!("-{n}@{tree}")
        }
        c => format!(
            "-{}",
            c.rsplit('/')
                .find(|p| !p.is_empty() && *p != "adapter")
                .unwrap_or("adapter")
        ),
    };
    let workers = spec
        .concurrency
        .map(|n| format!("-c{n}"))
        .unwrap_or_default();
    out.join("cells").join(format!(
        "{}{client}-{}-{}{f}{workers}-{k}",
        spec.system, spec.workload, spec.nemesis
    ))
}

/// Run every applicable cell `runs` times through `run` (which writes a
/// run directory at the path it is given), at most `jobs` runs at once,
/// then fill each cell from its runs' summaries. A run that fails, or
/// leaves a directory that cannot be read, makes its cell `Failed` with the
/// error of its first failed run (never a silent zero); the cell's runs not
/// yet started are skipped. With `jobs` 1 the runs go in matrix order.
pub fn run_matrix<F>(cells: &mut [Cell], runs: u32, jobs: usize, out: &Path, run: F)
where
    F: Fn(&CellSpec, u32, &Path) -> Result<(), String> + Sync,
{
    let specs: Vec<CellSpec> = cells.iter().map(|c| c.spec.clone()).collect();
    run_cells(
        cells,
        runs,
        jobs,
        out,
        |i, k| cell_dir(out, &specs[i], k),
        |_, spec, k, dir| run(spec, k, dir),
    );
}

/// [`run_matrix`] with the run directories given by `dir_of(cell index,
/// k)`, and `run` told the cell's index.
pub fn run_cells<D, F>(cells: &mut [Cell], runs: u32, jobs: usize, out: &Path, dir_of: D, run: F)
where
    D: Fn(usize, u32) -> PathBuf + Sync,
    F: Fn(usize, &CellSpec, u32, &Path) -> Result<(), String> + Sync,
{
    let tasks: Vec<(usize, u32)> = cells
        .iter()
        .enumerate()
        .filter(|(_, c)| !matches!(c.outcome, CellOutcome::NotApplicable { .. }))
        .flat_map(|(i, _)| (0..runs).map(move |k| (i, k)))
        .collect();
    let failed: Vec<AtomicBool> = cells.iter().map(|_| AtomicBool::new(false)).collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<HashMap<(usize, u32), Result<CellRun, String>>> = Mutex::default();
    let specs: Vec<CellSpec> = cells.iter().map(|c| c.spec.clone()).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, tasks.len().max(1)) {
            s.spawn(|| {
                while let Some(&(i, k)) = tasks.get(next.fetch_add(1, Ordering::SeqCst)) {
                    if failed[i].load(Ordering::SeqCst) {
                        continue;
                    }
                    let dir = dir_of(i, k);
                    let r = run(i, &specs[i], k, &dir)
                        .and_then(|()| compare::ensure_report(&dir))
                        .map(|summary| CellRun {
                            summary,
                            report: dir
                                .strip_prefix(out)
                                .unwrap_or(&dir)
                                .join("report.html")
                                .display()
                                .to_string(),
                        });
                    if r.is_err() {
                        failed[i].store(true, Ordering::SeqCst);
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert((i, k), r);
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    for (i, cell) in cells.iter_mut().enumerate() {
        if matches!(cell.outcome, CellOutcome::NotApplicable { .. }) {
            continue;
        }
        let mut done = vec![];
        let mut error = None;
        for k in 0..runs {
            match results.remove(&(i, k)) {
                Some(Ok(r)) => done.push(r),
                Some(Err(e)) => {
                    error = Some(format!("run {}: {e}", k + 1));
                    break;
                }
                // Skipped after an earlier failure of this cell, which a
                // later `k` must have been: keep looking for its error.
                None => continue,
            }
        }
        cell.outcome = match error {
            Some(error) => CellOutcome::Failed { error },
            None => CellOutcome::Runs { runs: done },
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_dirs_name_the_adapter_and_its_pin() {
        let dir = |client: &str| {
            let spec = CellSpec {
                system: "redis".into(),
                client: client.into(),
                workload: "lock".into(),
                nemesis: "none".into(),
                fencing: None,
                concurrency: None,
            };
            let d = cell_dir(Path::new("/o"), &spec, 0);
            d.file_name().unwrap().to_string_lossy().into_owned()
        };
        assert_eq!(dir("builtin"), "redis-lock-none-0");
        assert_eq!(
            dir("python-sherlock@0.4.0"),
            "redis-python-sherlock@0.4.0-lock-none-0"
        );
        assert_eq!(
            dir("python-redis-py@/src/redis-py/"),
            "redis-python-redis-py@redis-py-lock-none-0"
        );
        assert_eq!(dir("./mine/adapter"), "redis-mine-lock-none-0");
    }
}
