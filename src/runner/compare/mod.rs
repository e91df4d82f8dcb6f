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
//!
//! Here: the plan and the command; [`cells`] runs the cells (shared with
//! `sweep`), [`child`] runs one as a child `lockjaw run`.

use super::cli::CompareArgs;
use crate::client::adapter::Offer;
use crate::combination::{self, ClientChoice, Combination, Dimension, Placement, ToxiproxyChoice};
use crate::exit::Exit;
use crate::report::compare::{self, Cell, CellOutcome, CellRun, CellSpec};
use crate::service::{self, System};
use crate::workload::{self, Kind, Overrides};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

pub mod args;
mod cells;
pub(crate) mod child;
pub mod ci;
mod secret;
pub mod sharded;

pub use cells::{cell_dir, run_cells, run_matrix};
pub use child::run_args;
pub(crate) use child::{catch_sigint, run_cell, INTERRUPTED};

/// The systems a comparison runs without `--systems`, from the registry.
fn default_systems() -> Vec<String> {
    service::systems()
        .iter()
        .filter(|s| s.facts().compared_by_default)
        .map(|s| s.name().to_string())
        .collect()
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
        attach: args.choices.attach,
        toxiproxy: if flag("--toxiproxy") {
            ToxiproxyChoice::External
        } else {
            ToxiproxyChoice::Embedded
        },
    };
    match combination::applies(&c) {
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
    if flag("--auth") && !offer.auth {
        return Ok(Some(format!("{} does not take --auth", offer.title())));
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
        let a = crate::runner::adapter::ask(name, system, &w, None, &Default::default(), true)?
            .map(|spec| spec.offer);
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
    let or = |given: &Vec<String>, default: Vec<String>| -> Vec<String> {
        match (given.is_empty(), tabulating) {
            (false, _) => given.clone(),
            (true, true) => vec![],
            (true, false) => default,
        }
    };
    let systems = or(&args.systems, default_systems());
    let nemeses = or(&args.nemesis, vec!["pause-holder".to_string()]);
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
    if args.choices.attach && args.jobs > 1 {
        return Err(format!(
            "--jobs {} with --attach: runs at once would fault one cluster together (hint: --jobs 1)",
            args.jobs
        ));
    }
    let shard = match args.shard {
        Some(s) if !args.from_runs.is_empty() => {
            return Err(format!(
                "--shard {s} with --from-runs: saved runs are tabulated, not split (hint: `lockjaw merge` joins the shards' directories)"
            ))
        }
        Some(s) => Some((s, super::shard::require(s, args.seed, args.out.as_deref())?.0)),
        None => None,
    };
    let baseline = args.ci.load()?;
    let planned = plan(args)?;
    let mut cells = match shard {
        Some((s, _)) => sharded::take(&planned, s),
        None => planned.clone(),
    };
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
    let shown = match shard {
        Some((s, _)) => format!("{title} (shard {s})"),
        None => title.clone(),
    };
    compare::write_compare(&out, &shown, &cells).map_err(|e| format!("{}: {e}", out.display()))?;
    if let Some((s, seed)) = shard {
        let mut m = sharded::manifest(args, &title, &planned, &cells, s, seed, &out);
        m.interrupted = INTERRUPTED.load(Ordering::SeqCst);
        m.write(&out)?;
    }
    print!("{}", compare::compare_terminal(&shown, &cells, &out));
    let failed = cells
        .iter()
        .any(|c| matches!(c.outcome, CellOutcome::Failed { .. }));
    let ci = args.ci.finish(&baseline, ci::cases(&cells));
    Ok(if INTERRUPTED.load(Ordering::SeqCst) {
        Exit::Unknown
    } else if let Some(e) = ci {
        e
    } else if failed {
        Exit::Error
    } else {
        Exit::Valid
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_systems_come_from_the_registry() {
        assert_eq!(
            super::default_systems(),
            ["redis", "redlock", "etcd", "zookeeper"],
            "the default comparison changed: say so in docs/reports.md"
        );
    }
}
