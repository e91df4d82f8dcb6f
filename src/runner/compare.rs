//! `lockjaw compare`: plan the matrix (systems × clients × nemeses ×
//! fencing, N/A cells where the service registry's `applies` or a client
//! adapter's handshake says no), run each cell as
//! a `lockjaw run` child process (or take saved runs with --from-runs),
//! and have `report` write the tables.
//!
//! `--jobs J` runs up to J cells' runs at once: each child reserves its
//! own ports and names by its run id, so they never collide.
//!
//! Ctrl-C reaches the running child (same process group), which heals and
//! ends as `interrupted`; compare then stops, marks the cells it did not
//! run, and still writes the tables.

use super::cli::CompareArgs;
use crate::client::adapter::Offer;
use crate::cluster::System;
use crate::exit::Exit;
use crate::report::compare::{self, Cell, CellOutcome, CellRun, CellSpec};
use crate::service::{self, ClientChoice, Combination, Dimension, Placement, ToxiproxyChoice};
use crate::workload::{self, Kind, Overrides};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

const DEFAULT_SYSTEMS: [&str; 4] = ["redis", "redlock", "etcd", "zookeeper"];

pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Note Ctrl-C instead of dying of it, so the tables get written; the
/// handler is reset in children at exec, so `lockjaw run` handles its own.
pub(crate) fn catch_sigint() {
    let handler = on_sigint as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

fn fencings(args: &CompareArgs) -> Result<Vec<Option<bool>>, String> {
    if args.fencing.is_empty() {
        return Ok(vec![None]);
    }
    args.fencing
        .iter()
        .map(|f| match f.as_str() {
            "on" => Ok(Some(true)),
            "off" => Ok(Some(false)),
            other => Err(format!(
                "--fencing: `{other}` is not on or off (hint: --fencing on,off)"
            )),
        })
        .collect()
}

/// Why a cell cannot apply (the service registry's answer, then an
/// adapter's handshake), `None` when it can; an error for what no cell
/// supports (`--storage`, `--hosts`), for unknown names, and for an
/// adapter that cannot be run.
fn na_reason(
    args: &CompareArgs,
    system: &str,
    client: &str,
    kind: Kind,
    nemesis: &str,
    fencing: Option<bool>,
    adapters: &mut Adapters,
) -> Result<Option<String>, String> {
    let system = <System as clap::ValueEnum>::from_str(system, true).map_err(|_| {
        let known: Vec<&str> = service::systems().iter().map(|s| s.name()).collect();
        format!(
            "--systems: unknown system `{system}` (hint: {})",
            known.join(", ")
        )
    })?;
    let spec = crate::nemesis::spec::load(nemesis).map_err(|e| format!("--nemesis: {e}"))?;
    let flag = |f: &str| args.run_flags.iter().any(|a| a.starts_with(f));
    let c = Combination {
        system,
        client: ClientChoice::parse(client),
        storage: args.choices.storage,
        workload: kind,
        nemesis: spec,
        fencing,
        placement: Placement::from_flags(args.choices.hosts.is_some(), flag("--endpoints")),
        toxiproxy: if flag("--toxiproxy") {
            ToxiproxyChoice::External
        } else {
            ToxiproxyChoice::Embedded
        },
    };
    match service::applies(&c) {
        Ok(()) => {}
        Err(e) if matches!(e.dimension, Dimension::Choice) => return Err(e.to_string()),
        Err(e) => return Ok(Some(e.why)),
    }
    let ClientChoice::Adapter(name) = &c.client else {
        return Ok(None);
    };
    let offer = match adapters.ask(name, system, &args.workload)? {
        Ok(offer) => offer,
        Err(why) => return Ok(Some(format!("{name} does not serve {system}: {why}"))),
    };
    if fencing == Some(true) && !offer.fence {
        return Ok(Some(format!("{} gives no fencing token", offer.title())));
    }
    Ok(None)
}

/// Adapters' handshake answers per (client, system), asked once each.
#[derive(Default)]
pub struct Adapters(HashMap<(String, System), Result<Offer, String>>);

impl Adapters {
    fn ask(
        &mut self,
        name: &str,
        system: System,
        workload: &str,
    ) -> Result<Result<Offer, String>, String> {
        if let Some(a) = self.0.get(&(name.to_string(), system)) {
            return Ok(a.clone());
        }
        let w = workload::load(workload, &Overrides::default())
            .map_err(|e| format!("--workload: {e}"))?;
        let a = crate::runner::adapter::ask(name, system, &w, None)?.map(|spec| spec.offer);
        self.0.insert((name.to_string(), system), a.clone());
        Ok(a)
    }
}

/// The clients the matrix compares: `--clients`, else `--client`.
fn clients(args: &CompareArgs) -> Result<Vec<String>, String> {
    match (args.clients.is_empty(), args.choices.client.as_str()) {
        (true, c) => Ok(vec![c.to_string()]),
        (false, "builtin") => Ok(args.clients.clone()),
        (false, c) => Err(format!(
            "--client {c} and --clients: give the clients to compare with --clients only"
        )),
    }
}

/// The cells of the matrix, N/A ones marked. Without --systems or
/// --nemesis: the defaults when running, and only the saved runs' cells
/// with --from-runs.
pub fn plan(args: &CompareArgs) -> Result<Vec<Cell>, String> {
    let tabulating = !args.from_runs.is_empty();
    let or = |given: &Vec<String>, default: &[&str]| -> Vec<String> {
        match (given.is_empty(), tabulating) {
            (false, _) => given.clone(),
            (true, true) => vec![],
            (true, false) => default.iter().map(|s| s.to_string()).collect(),
        }
    };
    let systems = or(&args.systems, &DEFAULT_SYSTEMS);
    let nemeses = or(&args.nemesis, &["pause-holder"]);
    let kind = workload::load(&args.workload, &Overrides::default())
        .map_err(|e| format!("--workload: {e}"))?
        .kind;
    let mut cells = vec![];
    let mut adapters = Adapters::default();
    for system in &systems {
        for client in clients(args)? {
            for nemesis in &nemeses {
                for fencing in fencings(args)? {
                    let reason =
                        na_reason(args, system, &client, kind, nemesis, fencing, &mut adapters)?;
                    cells.push(cell(args, system, &client, nemesis, fencing, None, reason));
                }
            }
            for &n in &args.contention {
                for fencing in fencings(args)? {
                    let reason =
                        na_reason(args, system, &client, kind, "none", fencing, &mut adapters)?;
                    cells.push(cell(
                        args,
                        system,
                        &client,
                        "none",
                        fencing,
                        Some(n),
                        reason,
                    ));
                }
            }
        }
    }
    Ok(cells)
}

/// One planned cell; N/A when `reason` says why.
fn cell(
    args: &CompareArgs,
    system: &str,
    client: &str,
    nemesis: &str,
    fencing: Option<bool>,
    concurrency: Option<usize>,
    reason: Option<String>,
) -> Cell {
    Cell {
        spec: CellSpec {
            system: system.to_string(),
            client: client.to_string(),
            workload: args.workload.clone(),
            nemesis: nemesis.to_string(),
            fencing,
            concurrency,
        },
        outcome: match reason {
            Some(reason) => CellOutcome::NotApplicable { reason },
            None => CellOutcome::Runs { runs: vec![] },
        },
    }
}

/// The `lockjaw run` arguments of run `k` of a cell.
pub fn run_args(args: &CompareArgs, spec: &CellSpec, k: u32, dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "run",
        "--system",
        &spec.system,
        "--workload",
        &spec.workload,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(["--nemesis".into(), spec.nemesis.clone()]);
    if let Some(f) = spec.fencing {
        a.extend(["--fencing".into(), (if f { "on" } else { "off" }).into()]);
    }
    let mut opt = |flag: &str, v: Option<String>| {
        if let Some(v) = v {
            a.extend([flag.to_string(), v]);
        }
    };
    opt("--time-limit", args.time_limit.map(|t| t.to_string()));
    opt(
        "--concurrency",
        spec.concurrency.or(args.concurrency).map(|c| c.to_string()),
    );
    opt("--ttl-ms", args.ttl_ms.map(|t| t.to_string()));
    opt(
        "--pause-budget-ms",
        args.pause_budget.pause_budget_ms.map(|t| t.to_string()),
    );
    opt(
        "--seed",
        args.seed.map(|s| s.wrapping_add(u64::from(k)).to_string()),
    );
    let c = &args.choices;
    opt(
        "--client",
        (spec.client != "builtin").then(|| spec.client.clone()),
    );
    opt(
        "--storage",
        (c.storage != service::StorageChoice::Builtin).then(|| "postgres".into()),
    );
    opt("--hosts", c.hosts.as_ref().map(|h| h.display().to_string()));
    a.extend(["--out".into(), dir.display().to_string()]);
    a.extend(args.run_flags.iter().cloned());
    a
}

/// Run one cell's run `k` as a child `lockjaw run`.
/// Runs that go at once share the terminal: no progress bars then.
pub(crate) fn run_cell(
    args: &CompareArgs,
    spec: &CellSpec,
    k: u32,
    dir: &Path,
    parallel: bool,
) -> Result<(), String> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err("not run: the comparison was interrupted".into());
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the lockjaw binary: {e}"))?;
    let mut argv = run_args(args, spec, k, dir);
    if parallel && !argv.iter().any(|a| a == "--no-progress") {
        argv.push("--no-progress".into());
    }
    eprintln!("next: lockjaw {}", argv.join(" "));
    let status = std::process::Command::new(exe)
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot start lockjaw run: {e}"))?;
    let outcome = std::fs::read_to_string(dir.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| {
            v.get("outcome")
                .and_then(|o| o.as_str())
                .map(str::to_string)
        });
    if outcome.as_deref() == Some("interrupted") {
        INTERRUPTED.store(true, Ordering::SeqCst);
        return Err("interrupted".into());
    }
    match status.code() {
        Some(0..=2) => Ok(()),
        Some(c) => Err(outcome
            .filter(|o| o.starts_with("failed"))
            .unwrap_or_else(|| format!("lockjaw run exited with {c} (its error is above)"))),
        None => Err("lockjaw run was killed by a signal".into()),
    }
}

fn relative(run_dir: &Path, out: &Path) -> String {
    let report = run_dir.join("report.html");
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (r, o) = (abs(&report), abs(out));
    match r.strip_prefix(&o) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => r.display().to_string(),
    }
}

/// Put saved runs into their cells (adding a cell for a combination the
/// matrix does not name).
fn place(cells: &mut Vec<Cell>, runs: &[PathBuf], out: &Path) -> Result<(), String> {
    for dir in runs {
        let summary = compare::ensure_report(dir)?;
        let run = CellRun {
            report: relative(dir, out),
            summary,
        };
        let s = &run.summary;
        let client = s.client.clone().unwrap_or_else(|| "builtin".into());
        let key = |c: &CellSpec| {
            Some(&c.system) == s.system.as_ref()
                && c.client == client
                && Some(&c.nemesis) == s.nemesis.as_ref()
                && (c.fencing.is_none() || c.fencing == s.fencing)
                && c.concurrency
                    .map_or(true, |n| Some(n as i64) == s.concurrency)
        };
        match cells.iter_mut().find(|c| key(&c.spec)) {
            Some(Cell {
                outcome: CellOutcome::Runs { runs },
                ..
            }) => runs.push(run),
            Some(c) => c.outcome = CellOutcome::Runs { runs: vec![run] },
            None => cells.push(Cell {
                spec: CellSpec {
                    system: s.system.clone().unwrap_or_else(|| "?".into()),
                    client,
                    workload: s.workload.clone().unwrap_or_else(|| "?".into()),
                    nemesis: s.nemesis.clone().unwrap_or_else(|| "?".into()),
                    fencing: s.fencing,
                    concurrency: None,
                },
                outcome: CellOutcome::Runs { runs: vec![run] },
            }),
        }
    }
    for c in cells.iter_mut() {
        if matches!(&c.outcome, CellOutcome::Runs { runs } if runs.is_empty()) {
            c.outcome = CellOutcome::Failed {
                error: "no saved run for this cell".into(),
            };
        }
    }
    Ok(())
}

/// `lockjaw compare`: plan, run (or place saved runs), write the tables.
pub fn compare(args: &CompareArgs) -> Result<Exit, String> {
    let mut cells = plan(args)?;
    let out = match &args.out {
        Some(o) => o.clone(),
        None => PathBuf::from(format!(
            "histories/compare-{}",
            crate::runner::rundir::utc_stamp()
        )),
    };
    if args.from_runs.is_empty() {
        catch_sigint();
        let jobs = args.jobs.max(1) as usize;
        run_matrix(&mut cells, args.runs.max(1), jobs, &out, |spec, k, dir| {
            run_cell(args, spec, k, dir, jobs > 1)
        });
    } else {
        place(&mut cells, &args.from_runs, &out)?;
    }
    let each = args
        .time_limit
        .map(|t| format!(", {t} s each"))
        .unwrap_or_default();
    let title = format!(
        "lockjaw compare: {} ({} run(s) per cell{each})",
        args.workload,
        args.runs.max(1)
    );
    compare::write_compare(&out, &title, &cells).map_err(|e| format!("{}: {e}", out.display()))?;
    print!("{}", compare::compare_terminal(&title, &cells, &out));
    let failed = cells
        .iter()
        .any(|c| matches!(c.outcome, CellOutcome::Failed { .. }));
    Ok(if INTERRUPTED.load(Ordering::SeqCst) {
        Exit::Unknown
    } else if failed {
        Exit::Error
    } else {
        Exit::Valid
    })
}

/// The directory of run `k` of a cell, under `out/cells/`.
pub fn cell_dir(out: &Path, spec: &CellSpec, k: u32) -> PathBuf {
    let f = match spec.fencing {
        Some(true) => "-fenced",
        Some(false) => "-unfenced",
        None => "",
    };
    let client = match spec.client.as_str() {
        "builtin" => String::new(),
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
mod pause_budget_tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn every_cell_run_gets_the_pause_budget() {
        #[derive(Parser)]
        struct Compare {
            #[command(flatten)]
            args: CompareArgs,
        }
        let args =
            Compare::try_parse_from(["compare", "--systems", "redis", "--pause-budget-ms", "30"])
                .unwrap()
                .args;
        let spec = CellSpec {
            system: "redis".into(),
            client: "builtin".into(),
            workload: "fenced-counter".into(),
            nemesis: "none".into(),
            fencing: None,
            concurrency: None,
        };
        let a = run_args(&args, &spec, 0, Path::new("x")).join(" ");
        assert!(a.contains("--pause-budget-ms 30"), "{a}");
    }
}
