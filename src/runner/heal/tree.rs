//! The runs beneath a directory: below a `compare`, `sweep` or `--runs`
//! directory (no run itself) and below a run (a shrink's step runs in
//! `RUN_DIR/shrink/runs/step-N/run-I/`), every directory, to a small
//! depth and never through a symbolic link, whose undo log has something
//! pending; runs inside runs are found too. Only reads; each run found is
//! then healed with all the checks of a run directory of its own.

use crate::undo::{read_pending, UNDO_FILE};
use std::path::{Path, PathBuf};

/// How deep below the given directory runs are looked for (a compare's
/// cells are at `DIR/cells/NAME`, a sweep's repeats one level deeper, a
/// shrink's step runs four levels below the run it shrinks:
/// `cells/NAME/shrink/runs/step-N/run-I` is six).
const DEPTH: usize = 6;

/// The run directories beneath `dir` (not `dir` itself) with an undo log
/// holding pending entries, each before the runs inside it, in name
/// order; and how many run directories (undo logs) were found in all.
pub(super) fn runs_beneath(dir: &Path) -> (Vec<PathBuf>, usize) {
    let mut out = Vec::new();
    let mut all = 0;
    walk(dir, DEPTH, &mut out, &mut all);
    (out, all)
}

/// The shared clusters of campaigns beneath `dir` (`shared-cluster/`
/// directories inside the runs that started them, `crate::runner::shared`)
/// whose undo log has something pending, in name order.
pub(super) fn shared_beneath(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk_shared(dir, DEPTH + 1, &mut out);
    out
}

/// The directories directly under `dir`, sorted (none when it cannot be
/// read).
fn sorted_subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    subdirs
}

fn walk_shared(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    for d in sorted_subdirs(dir) {
        if d.join(crate::runner::shared::MARK).is_file() {
            if read_pending(&d.join(UNDO_FILE)).is_ok_and(|p| !p.is_empty()) {
                out.push(d);
            }
        } else if depth > 1 {
            walk_shared(&d, depth - 1, out);
        }
    }
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>, all: &mut usize) {
    for d in sorted_subdirs(dir) {
        if d.join(crate::runner::shared::MARK).is_file() {
            // A campaign's shared cluster: no run ([`shared_beneath`]).
            continue;
        }
        let log = d.join(UNDO_FILE);
        let is_file = std::fs::symlink_metadata(&log).is_ok_and(|m| m.file_type().is_file());
        if is_file {
            *all += 1;
            if read_pending(&log).is_ok_and(|p| !p.is_empty()) {
                out.push(d.clone());
            }
        }
        if depth > 1 {
            walk(&d, depth - 1, out, all);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_with_something_pending_are_found_below_and_links_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let pending = "{\"id\":1,\"undo\":{\"kind\":\"redis-client-pause\",\"addr\":\"a\"}}\n";
        for (d, text) in [
            ("cells/a", pending),
            ("cells/b", ""),
            ("cells/c/runs/1", pending),
            ("x", &format!("{pending}{{\"done\":1}}\n")),
        ] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
            std::fs::write(t.path().join(d).join(UNDO_FILE), text).unwrap();
        }
        std::os::unix::fs::symlink(t.path().join("cells"), t.path().join("latest")).unwrap();
        let (found, all) = runs_beneath(t.path());
        assert_eq!(
            found,
            vec![t.path().join("cells/a"), t.path().join("cells/c/runs/1")]
        );
        assert_eq!(all, 4);
    }

    /// A shrink's step runs lie beneath the run it shrinks, itself a run:
    /// they are found from the run, and from a directory above it.
    #[test]
    fn runs_inside_a_run_are_found() {
        let t = tempfile::tempdir().unwrap();
        let pending = "{\"id\":1,\"undo\":{\"kind\":\"redis-client-pause\",\"addr\":\"a\"}}\n";
        for (d, text) in [
            ("run", ""),
            ("run/shrink/runs/step-1/run-1", ""),
            ("run/shrink/runs/step-2/run-1", pending),
            ("run/shrink/runs/step-2/run-2", pending),
        ] {
            std::fs::create_dir_all(t.path().join(d)).unwrap();
            std::fs::write(t.path().join(d).join(UNDO_FILE), text).unwrap();
        }
        let run = t.path().join("run");
        let (found, all) = runs_beneath(&run);
        let step = run.join("shrink/runs/step-2");
        assert_eq!(found, vec![step.join("run-1"), step.join("run-2")]);
        assert_eq!(all, 3, "the run itself is not beneath itself");
        let (found, all) = runs_beneath(t.path());
        assert_eq!(found.len(), 2);
        assert_eq!(all, 4);
    }
}
