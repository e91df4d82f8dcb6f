//! Which files `lockjaw check` reads: history files as given, the history
//! of a run directory, and every history under a folder (recursively, in
//! name order); and [`check_and_record`], which checks one and rewrites a
//! run directory's `results.json`.

use super::results::{check_history, CheckOptions, Results};
use crate::history::HistoryError;
use std::path::{Path, PathBuf};

/// A run directory's results file.
pub const RESULTS: &str = "results.json";

/// The history files named by `paths`, in order; errors for missing paths.
pub fn expand(paths: &[PathBuf]) -> Vec<Result<PathBuf, HistoryError>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let before = out.len();
            walk(p, &mut out);
            if out.len() == before {
                out.push(Err(err(p, "no histories in this folder (hint: histories end in .jsonl, .edn, .log or .txt, optionally .gz)")));
            }
        } else if p.exists() {
            out.push(regular(p));
        } else {
            out.push(Err(err(p, "no such file or directory")));
        }
    }
    out
}

/// `p` if it is a regular file (symlinks followed): a FIFO, socket or
/// device would block the reader or never end, so it is refused.
fn regular(p: &Path) -> Result<PathBuf, HistoryError> {
    let kind = match std::fs::metadata(p) {
        Ok(m) if m.is_file() => return Ok(p.to_path_buf()),
        Ok(m) => kind_of(&m.file_type()),
        Err(e) => return Err(err(p, &format!("cannot read: {e}"))),
    };
    Err(err(
        p,
        &format!(
            "not a regular file but a {kind}: lockjaw reads histories only from regular files \
             (hint: save the history to a file first, e.g. `cat PIPE > history.jsonl`)"
        ),
    ))
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

fn err(p: &Path, msg: &str) -> HistoryError {
    HistoryError {
        file: p.display().to_string(),
        line: 0,
        msg: msg.into(),
    }
}

fn is_history(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(".gz").unwrap_or(name);
    !name.starts_with('.')
        && [".jsonl", ".edn", ".log", ".txt"]
            .iter()
            .any(|e| name.ends_with(e))
}

/// A run directory: `run.json`, or (a run killed before writing it) its
/// undo log.
pub fn is_run_dir(dir: &Path) -> bool {
    dir.join("run.json").is_file() || dir.join("undo.jsonl").is_file()
}

/// The run directory whose history `history` is, if it is one: the file
/// is `history.jsonl` (or `.gz`) inside a run directory.
pub fn run_dir_of(history: &Path) -> Option<&Path> {
    let name = history.file_name()?.to_str()?;
    let dir = history.parent()?;
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    (matches!(name, "history.jsonl" | "history.jsonl.gz") && is_run_dir(dir)).then_some(dir)
}

/// Check the history at `path`; when it is a run directory's history,
/// (re)write that directory's `results.json` (checker errors included).
pub fn check_and_record(path: &Path, opts: &CheckOptions) -> Result<Results, HistoryError> {
    let r = check_history(path, opts)?;
    if let Some(dir) = run_dir_of(path) {
        let out = dir.join(RESULTS);
        std::fs::write(&out, r.to_json_pretty() + "\n").map_err(|e| HistoryError {
            file: out.display().to_string(),
            line: 0,
            msg: format!("cannot write: {e} (hint: the run directory must be writable)"),
        })?;
    }
    Ok(r)
}

fn walk(dir: &Path, out: &mut Vec<Result<PathBuf, HistoryError>>) {
    // A run directory's history is the one file to check (not `undo.jsonl`).
    if is_run_dir(dir) {
        let gz = dir.join("history.jsonl.gz");
        let h = if gz.exists() {
            gz
        } else {
            dir.join("history.jsonl")
        };
        out.push(if h.exists() { regular(&h) } else { Ok(h) });
        return;
    }
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => {
            out.push(Err(err(dir, &format!("cannot read folder: {e}"))));
            return;
        }
    };
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if is_history(&p) {
            out.push(regular(&p));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_directory_gives_its_history_only() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run-1");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("run.json"), "{}").unwrap();
        std::fs::write(run.join("undo.jsonl"), "").unwrap();
        std::fs::write(d.path().join("a.jsonl"), "").unwrap();
        let got: Vec<PathBuf> = expand(&[d.path().to_path_buf()])
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got, [d.path().join("a.jsonl"), run.join("history.jsonl")]);
        assert_eq!(run_dir_of(&run.join("history.jsonl")), Some(run.as_path()));
        assert_eq!(run_dir_of(&d.path().join("a.jsonl")), None);
    }
}
