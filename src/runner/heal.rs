//! Healing a run directory after its lockjaw was killed (`lockjaw heal
//! DIR`): refuse a run whose controller still lives, cut a partial last
//! history line, and drain the undo log.

use crate::process::ProcId;
use crate::undo::{UndoLog, UNDO_FILE};
use std::path::Path;

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
fn repair_history(dir: &Path) -> Result<Option<String>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let path = dir.join(super::rundir::HISTORY);
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    else {
        return Ok(None);
    };
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
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
                path.display()
            ))
        }
    };
    f.set_len(keep).map_err(err)?;
    Ok(Some(format!(
        "{}: removed a partial last line ({} bytes) that the kill cut short",
        path.display(),
        len - keep
    )))
}

/// Drain `dir`'s undo log; returns one line per effect undone.
pub fn heal_dir(dir: &Path, force: bool) -> Result<Vec<String>, String> {
    let path = dir.join(UNDO_FILE);
    if !path.is_file() {
        return Err(format!(
            "{}: no undo log (hint: give the run directory, e.g. histories/latest)",
            path.display()
        ));
    }
    if !force {
        let owner = std::fs::read_to_string(dir.join(CONTROLLER_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<ProcId>(&t).ok());
        if let Some(p) = owner.filter(|p| p.is_alive() && p.pid != std::process::id() as i32) {
            return Err(format!(
                "the run in {} is still going (lockjaw pid {}) (hint: press Ctrl-C in its terminal; it heals itself; or pass --force)",
                dir.display(),
                p.pid
            ));
        }
    }
    let repaired = repair_history(dir)?;
    let log = UndoLog::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let pending = log.pending();
    if pending.is_empty() {
        return Ok(repaired
            .into_iter()
            .chain([format!("{}: nothing to heal", dir.display())])
            .collect());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let errors = rt.block_on(log.drain());
    let failed: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let mut lines: Vec<String> = repaired.into_iter().collect();
    lines.extend(
        pending
            .iter()
            .rev()
            .map(|(_, u)| format!("healed: {}", u.describe()))
            .filter(|l| {
                !failed
                    .iter()
                    .any(|f| f.contains(l.trim_start_matches("healed: ")))
            }),
    );
    if !failed.is_empty() {
        return Err(format!(
            "{} (hint: fix the cause and run `lockjaw heal {}` again)",
            failed.join("; "),
            dir.display()
        ));
    }
    lines.push(format!(
        "{}: healed {} effects",
        dir.display(),
        pending.len()
    ));
    Ok(lines)
}
