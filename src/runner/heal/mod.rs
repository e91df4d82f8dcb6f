//! Healing a run directory after its lockjaw was killed (`lockjaw heal
//! DIR`): refuse a directory or undo log another user could have written
//! and a run whose controller still lives, cut a partial last history
//! line, and drain the undo log. Everything is opened from the run
//! directory's descriptor ([`RunDir`]); a record that fails its checks is
//! reported and skipped, and the rest is still healed.
//!
//! How each record is taken back (the undo executor, handed to every undo
//! log as its [`Heal`]) is in the files beside: [`execute`] picks the
//! file by kind: `local` (processes, cgroups, clock files, iptables),
//! `cluster` (a local cluster, PostgreSQL tables, Redis), `remote` (hosts
//! over SSH), `netns` (a test bed's namespaces and links).

mod attached;
pub use attached::use_hosts;
mod cluster;
pub mod execute;
mod local;
mod netns;
mod refuse;
mod remote;
#[cfg(test)]
mod tests;
mod tree;

use crate::process::ProcId;
use crate::undo::{check_private, Heal, RunDir, UndoLog, UNDO_FILE};
use rustix::fs::{Mode, OFlags};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

/// The undo executor, to open an undo log with: it takes back every kind
/// of record.
pub fn executor() -> Arc<dyn Heal> {
    Arc::new(execute::Executor)
}

/// File in the run directory naming the controller (PID + start time).
pub const CONTROLLER_FILE: &str = "controller.json";

/// Write down who runs `dir`, so `heal` can refuse to pull a live run apart.
pub fn write_controller(dir: &Path) {
    if let Some(me) = ProcId::of(std::process::id() as i32) {
        let _ = std::fs::write(
            dir.join(CONTROLLER_FILE),
            serde_json::to_string(&me).unwrap_or_default(),
        );
    }
}

/// A run killed mid-write can leave its history's last line cut short:
/// remove that partial line, so `lockjaw check` reads the rest (what it
/// held was never complete; the verdict is judged on what was recorded).
fn repair_history(run: &RunDir, dry: bool) -> Result<Option<String>, String> {
    let shown = run.path().join(super::rundir::HISTORY);
    let err = |e: std::io::Error| format!("{}: {}", shown.display(), crate::undo::explain(&e));
    let mode = if dry { OFlags::RDONLY } else { OFlags::RDWR };
    let mut f = match run.open_file(Path::new(super::rundir::HISTORY), mode, Mode::empty()) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let len = f.metadata().map_err(err)?.len();
    // Look back far enough for any one line.
    let tail = len.min(1 << 20);
    f.seek(SeekFrom::Start(len - tail)).map_err(err)?;
    let mut buf = Vec::with_capacity(tail as usize);
    f.read_to_end(&mut buf).map_err(err)?;
    if buf.is_empty() || buf.ends_with(b"\n") {
        return Ok(None);
    }
    let keep = match buf.iter().rposition(|&b| b == b'\n') {
        Some(i) => len - tail + i as u64 + 1,
        None if tail == len => 0,
        None => {
            return Err(format!(
                "{}: its last line is over 1 MiB long",
                shown.display()
            ))
        }
    };
    if !dry {
        f.set_len(keep).map_err(err)?;
    }
    Ok(Some(format!(
        "{}: {} a partial last line ({} bytes) that the kill cut short",
        shown.display(),
        if dry { "would remove" } else { "removed" },
        len - keep
    )))
}

/// What `heal` did: one line per effect undone or file repaired, and one
/// per record it skipped or could not undo (then it exits 3).
#[derive(Debug, Default)]
pub struct Healed {
    pub lines: Vec<String>,
    pub problems: Vec<String>,
}

/// The run's id from `run.json` (None in runs older than run ids, or when
/// it cannot be read): iptables rules are deleted only if they carry it.
fn run_id(run: &RunDir) -> Option<String> {
    // A shared cluster's directory has its id in its own file.
    let text = run
        .read(Path::new(super::rundir::RUN))
        .or_else(|_| run.read(Path::new(super::shared::MARK)))
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    v.get("run_id")?.as_str().map(str::to_string)
}

/// Whether the run's lockjaw (`controller.json`) is still alive.
fn live_controller(run: &RunDir) -> Option<ProcId> {
    let text = run.read(Path::new(CONTROLLER_FILE)).ok()?;
    serde_json::from_slice::<ProcId>(&text)
        .ok()
        .filter(|p| p.is_alive() && p.pid != std::process::id() as i32)
}

/// Open `dir` and its undo log, refusing either if another user could
/// have written it, and a run whose lockjaw still lives (unless `force`):
/// the log is read (and a partial last line cut) only after that.
fn open_log(dir: &Path, force: bool, dry: bool) -> Result<UndoLog, String> {
    let hint = "(hint: give the run directory, e.g. histories/latest)";
    let run = RunDir::open(dir).map_err(|e| format!("{}: {e} {hint}", dir.display()))?;
    run.check_private()?;
    let path = dir.join(UNDO_FILE);
    let mode = if dry {
        OFlags::RDONLY
    } else {
        OFlags::RDWR | OFlags::APPEND
    };
    let file = match run.open_file(Path::new(UNDO_FILE), mode, Mode::empty()) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{}: no undo log {hint}", path.display()))
        }
        Err(e) => {
            return Err(format!(
                "{}: {} (hint: heal reads only a regular file beneath the run directory)",
                path.display(),
                crate::undo::explain(&e)
            ))
        }
    };
    check_private(&file, &path)?;
    if let Some(p) = live_controller(&run).filter(|_| !force && !dry) {
        return Err(format!(
            "the run in {} is still going (lockjaw pid {}) (hint: press Ctrl-C in its terminal; it heals itself; or pass --force)",
            dir.display(),
            p.pid
        ));
    }
    let log = if dry {
        UndoLog::inspect_in(run, file, executor())
    } else {
        UndoLog::open_in(run, file, executor())
    };
    log.map_err(|e| format!("{}: {e}", path.display()))
}

/// Drain `dir`'s undo log (with `dry`, only say what would be done and
/// what refused), then every run beneath it with something pending (a
/// shrink's step runs under `RUN_DIR/shrink/runs/`). A directory without
/// an undo log that holds runs beneath it (`compare`, `sweep`, `--runs`):
/// each of them with something pending. `Err` when the directory is
/// refused (nothing was done); otherwise what was healed, run by run, and
/// what was skipped or failed.
pub fn heal_dir(dir: &Path, force: bool, dry: bool) -> Result<Healed, String> {
    // A test bed (its directory or its hosts file): the same drain; it has
    // no run id, no controller and no history.
    let bed = crate::testbed::bed_of(dir);
    if let Some(bed) = &bed {
        let mut out = heal_one(bed, force, dry)?;
        out.lines.push(format!(
            "{}: a test bed; its keys and logs stay (hint: `lockjaw testbed down --out HOSTS_FILE` removes them)",
            bed.display()
        ));
        return Ok(out);
    }
    let is_run = dir.join(UNDO_FILE).exists();
    let (runs, all) = tree::runs_beneath(dir);
    if !is_run && all == 0 {
        // No run here nor beneath: heal_one says why ("no undo log").
        return heal_one(dir, force, dry);
    }
    let mut out = if is_run {
        heal_one(dir, force, dry)?
    } else {
        Healed::default()
    };
    if all > 0 {
        let below = heal_runs(&runs, force, dry);
        out.lines.extend(below.lines);
        out.problems.extend(below.problems);
        out.lines.push(format!(
            "{}: {all} run(s) beneath, {} with something to heal",
            dir.display(),
            runs.len()
        ));
    }
    let mut homes = tree::shared_beneath(dir);
    let healed = is_run.then(|| dir.to_path_buf()).into_iter().chain(runs);
    homes.extend(healed.filter_map(|r| shared_home(&r)));
    let after = heal_shared(homes, force, dry);
    out.lines.extend(after.lines);
    out.problems.extend(after.problems);
    Ok(out)
}

/// The shared clusters (`super::shared`) found beneath or named by the
/// runs healed, each with something pending: each healed once, unless the
/// campaign that runs it still lives (then it is left alone, and said so).
fn heal_shared(homes: Vec<std::path::PathBuf>, force: bool, dry: bool) -> Healed {
    // One path per directory, however it was spelt.
    let mut homes: Vec<std::path::PathBuf> = homes
        .into_iter()
        .map(|h| h.canonicalize().unwrap_or(h))
        .collect();
    homes.sort();
    homes.dedup();
    let mut out = Healed::default();
    for home in homes {
        let live = RunDir::open(&home).ok().and_then(|d| live_controller(&d));
        if let Some(p) = live.filter(|_| !force) {
            out.lines.push(format!(
                "{}: the shared cluster of a campaign that still runs (lockjaw pid {}); left alone",
                home.display(),
                p.pid
            ));
            continue;
        }
        match heal_one(&home, force, dry) {
            Ok(h) => {
                out.lines.extend(h.lines);
                out.problems.extend(h.problems);
            }
            Err(e) => out.problems.push(e),
        }
    }
    out
}

/// The shared cluster the run in `run` used (`run.json`'s `cluster.home`),
/// when its directory is one (named `shared-cluster`, its mark carrying
/// the id the run recorded) with something pending in its undo log.
fn shared_home(run: &Path) -> Option<std::path::PathBuf> {
    let read = |p: std::path::PathBuf| -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(p).ok()?).ok()
    };
    let v = read(run.join(super::rundir::RUN))?;
    let home = std::path::PathBuf::from(v["cluster"]["home"].as_str()?);
    let id = v["cluster"]["id"].as_str()?;
    if home.file_name()? != std::ffi::OsStr::new(super::shared::HOME) {
        return None;
    }
    let mark = read(home.join(super::shared::MARK))?;
    if mark["run_id"].as_str() != Some(id) {
        return None;
    }
    let pending = crate::undo::read_pending(&home.join(UNDO_FILE)).ok()?;
    (!pending.is_empty()).then_some(home)
}

/// [`heal_one`] of each run: a run refused is one problem, the others
/// are still healed.
fn heal_runs(runs: &[std::path::PathBuf], force: bool, dry: bool) -> Healed {
    let mut out = Healed::default();
    for r in runs {
        match heal_one(r, force, dry) {
            Ok(h) => {
                out.lines.extend(h.lines);
                out.problems.extend(h.problems);
            }
            Err(e) => out.problems.push(e),
        }
    }
    out
}

/// Drain (or with `dry`, plan) the undo log of one run directory.
fn heal_one(dir: &Path, force: bool, dry: bool) -> Result<Healed, String> {
    let log = open_log(dir, force, dry)?;
    let run = log.scope().dir.clone();
    let mut out = Healed::default();
    out.lines.extend(repair_history(&run, dry)?);
    out.lines.extend(log.repaired().iter().cloned());
    out.problems.extend(log.skipped().iter().cloned());
    let log = match run_id(&run) {
        Some(id) => log.with_run_id(&id),
        None => log,
    };
    if dry {
        for (what, verdict) in log.plan() {
            match verdict {
                Ok(()) => out.lines.push(format!("would: {what}")),
                Err(e) => out.problems.push(format!("would refuse: {what}: {e}")),
            }
        }
        out.lines
            .push(format!("{}: dry run, nothing changed", dir.display()));
        return Ok(out);
    }
    let pending = log.pending();
    if pending.is_empty() {
        out.lines
            .push(format!("{}: nothing to heal", dir.display()));
        return Ok(out);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let errors = rt.block_on(log.drain());
    out.problems.extend(errors.iter().map(|e| e.to_string()));
    let left: std::collections::BTreeSet<u64> = log.pending().iter().map(|(id, _)| *id).collect();
    out.lines.extend(
        pending
            .iter()
            .rev()
            .filter(|(id, _)| !left.contains(id))
            .map(|(_, u)| format!("healed: {}", u.describe())),
    );
    let healed = pending.len() - left.len();
    out.lines
        .push(format!("{}: healed {healed} effects", dir.display()));
    Ok(out)
}
