//! Issue 30: `lockjaw report DIR` on an invalid run writes its witness
//! histories (when none exist) and shows each in summary.md and
//! report.html; `--no-witness` writes none. On the committed example run
//! (redis, pause-holder, fencing off), copied to a temp dir.

use crate::report_common::lockjaw;
use std::path::{Path, PathBuf};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

/// A copy of the committed invalid example run.
fn example_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ex = repo("histories/examples/redis-fenced-counter-pause-holder");
    for f in ["history.jsonl", "run.json", "results.json", "nemesis.json"] {
        std::fs::copy(ex.join(f), tmp.path().join(f)).unwrap();
    }
    tmp
}

fn witness_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("witness-") && n.ends_with(".jsonl"))
        .collect();
    v.sort();
    v
}

fn report(args: &[&str], dir: &Path) -> (i32, String) {
    let out = lockjaw()
        .arg("report")
        .args(args)
        .arg(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Every witness file of `dir` has its section in summary.md (link, the
/// kind as a heading) and in report.html.
fn assert_sections(dir: &Path) {
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for f in witness_files(dir) {
        let kind = f.trim_start_matches("witness-").trim_end_matches(".jsonl");
        assert!(md.contains("## Witness histories\n"), "{md}");
        assert!(md.contains(&format!("### {kind}\n")), "{md}");
        assert!(md.contains(&format!("[{f}]({f})")), "{md}");
        assert!(html.contains(&format!(r#"<a href="{f}">"#)), "{f}");
    }
}

/// A witness file already in the run directory (newer than its history)
/// is shown, not searched again.
#[test]
fn issue30_report_shows_a_witness_file_of_the_run() {
    let tmp = example_copy();
    let fixture = repo("histories/examples/witness/witness-stale-write-accepted.jsonl");
    std::fs::copy(
        &fixture,
        tmp.path().join("witness-stale-write-accepted.jsonl"),
    )
    .unwrap();
    let (code, out) = report(&[], tmp.path());
    assert_eq!(code, 1, "the verdict stays the run's: {out}");
    assert_eq!(
        witness_files(tmp.path()),
        ["witness-stale-write-accepted.jsonl"]
    );
    assert_sections(tmp.path());
    let md = std::fs::read_to_string(tmp.path().join("summary.md")).unwrap();
    assert!(
        md.contains(
            "Client A held the lock with fencing token 33 until its lease ran out at 1.013 s."
        ),
        "{md}"
    );
    assert!(md.contains("```mermaid\nsequenceDiagram\n"), "{md}");
    // Written elsewhere (--out), the pages keep their links: the witness
    // files go beside them.
    let other = tempfile::tempdir().unwrap();
    let out = other.path().to_str().unwrap();
    let (code, text) = report(&["--out", out], tmp.path());
    assert_eq!(code, 1, "{text}");
    assert_eq!(
        witness_files(other.path()),
        ["witness-stale-write-accepted.jsonl"]
    );
    assert_sections(other.path());
}

/// Without witness files, `lockjaw report` searches them (the merged
/// search finds the stale write and the lost updates of this run), and
/// summary.md shows each; `--no-witness` writes none.
#[test]
fn issue30_report_writes_witnesses_of_an_invalid_run_unless_no_witness() {
    let tmp = example_copy();
    let (code, out) = report(&["--no-witness"], tmp.path());
    assert_eq!(code, 1, "{out}");
    assert!(witness_files(tmp.path()).is_empty(), "{out}");
    let (code, out) = report(&[], tmp.path());
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains("warning: no witness"), "{out}");
    let files = witness_files(tmp.path());
    for f in &files {
        assert!(
            out.contains(&format!("witness: {}", tmp.path().join(f).display())),
            "{out}"
        );
    }
    assert_sections(tmp.path());
}

/// Needs the merged witness search (issue 30): the example's stale write
/// gets a witness of at most 30 op lines.
#[test]
fn issue30_report_on_the_example_finds_its_stale_write_witness() {
    let tmp = example_copy();
    let (code, out) = report(&[], tmp.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        witness_files(tmp.path()).contains(&"witness-stale-write-accepted.jsonl".to_string()),
        "issue 30: `lockjaw report` writes the stale-write witness (needs the merged search): {out}"
    );
    assert_sections(tmp.path());
}
