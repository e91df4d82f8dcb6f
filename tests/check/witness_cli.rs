//! `lockjaw check --witness` as a user runs it: the witness file of an
//! invalid history (beside it, in its run directory, or in
//! `--witness-dir`), none for a valid one, an unwritable directory as
//! exit 3, and the witness file checked alone giving the same verdict.

use super::check_cli::{code, good, lockjaw, stderr, stdout};
use std::path::{Path, PathBuf};

const WITNESS: &str = "witness-non-linearizable.jsonl";

fn knossos(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/knossos/cas-register/bad/rethink-fail-smaller.edn");
    let p = dir.join("rethink.edn");
    std::fs::copy(src, &p).unwrap();
    p
}

fn check_witness(extra: &[&str], path: &Path) -> std::process::Output {
    let mut args = vec![
        "check",
        "--witness",
        "--model",
        "cas-register",
        "--init",
        "0",
    ];
    args.extend_from_slice(extra);
    args.push(path.to_str().unwrap());
    lockjaw(&args)
}

#[test]
fn an_invalid_history_gets_a_witness_that_checks_alone() {
    let d = tempfile::tempdir().unwrap();
    let p = knossos(d.path());
    let o = check_witness(&[], &p);
    assert_eq!(code(&o), 1, "the verdict's code: {}", stderr(&o));
    let w = d.path().join(WITNESS);
    let out = stdout(&o);
    let want = format!("witness {}: ", w.display());
    let line = out
        .lines()
        .find(|l| l.starts_with(&want))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains(" of 500 op lines, minimal, "), "{line}");
    // Checked alone, without --model or --init: the meta record says them,
    // and its `witness` object disturbs no checker.
    let o = lockjaw(&["check", "--json", w.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["checkers"], serde_json::json!(["linearizable"]));
    assert_eq!(v["linearizable"]["model"], "cas-register");
    assert!(v.get("errors").is_none(), "{v}");
}

#[test]
fn a_valid_history_gets_none_and_witness_dir_redirects() {
    let d = tempfile::tempdir().unwrap();
    let g = good(d.path());
    let o = lockjaw(&["check", "--witness", g.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stdout(&o).contains("witness"), "{}", stdout(&o));
    let names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // --witness-dir (created if missing) instead of beside the file; JSON
    // lists what was written.
    let p = knossos(d.path());
    let out = d.path().join("w/x");
    let o = check_witness(
        &[
            "--json",
            "--witness-dir",
            out.to_str().unwrap(),
            "--witness-budget",
            "2",
        ],
        &p,
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(out.join(WITNESS).is_file() && !d.path().join(WITNESS).exists());
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let w = &v["witnesses"][0];
    assert_eq!(w["file"], out.join(WITNESS).display().to_string());
    assert_eq!(
        (w["minimal"].as_bool(), w["oracle_calls"].as_u64()),
        (Some(false), Some(2)),
        "{w}"
    );
}

#[test]
fn an_unwritable_witness_dir_is_exit_3_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let p = knossos(d.path());
    // A regular file where the directory should be: unwritable even as root.
    let blocked = d.path().join("blocked");
    std::fs::write(&blocked, "").unwrap();
    let o = check_witness(&["--witness-dir", blocked.to_str().unwrap()], &p);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: cannot write witnesses into {}: ",
            blocked.display()
        )),
        "{err}"
    );
    assert!(err.contains("hint:") && !err.contains("panicked"), "{err}");
    // Without --witness, --witness-dir is a usage error.
    let o = lockjaw(&["check", "--witness-dir", "x", p.to_str().unwrap()]);
    assert_eq!(code(&o), 3, "a usage error: {}", stderr(&o));
    assert!(stderr(&o).contains("--witness"), "{}", stderr(&o));
}

#[test]
fn a_run_directory_gets_its_witness_inside() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run-1");
    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("run.json"), "{}\n").unwrap();
    // Write 1, then a read of 0 after it completed, and a read of 1.
    let lines = [
        r#"{"type":"meta","model":"cas-register","init":0,"run_id":"run-1"}"#,
        r#"{"index":0,"time":1,"process":0,"type":"invoke","f":"write","value":1}"#,
        r#"{"index":1,"time":2,"process":0,"type":"ok","f":"write","value":1}"#,
        r#"{"index":2,"time":3,"process":1,"type":"invoke","f":"read"}"#,
        r#"{"index":3,"time":4,"process":1,"type":"ok","f":"read","value":1}"#,
        r#"{"index":4,"time":5,"process":2,"type":"invoke","f":"read"}"#,
        r#"{"index":5,"time":6,"process":2,"type":"ok","f":"read","value":0}"#,
    ];
    std::fs::write(run.join("history.jsonl"), lines.join("\n") + "\n").unwrap();
    let o = lockjaw(&["check", "--witness", run.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let text = std::fs::read_to_string(run.join(WITNESS)).unwrap();
    let indexes: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        indexes,
        [0, 1, 4, 5],
        "the write and the stale read, original indexes"
    );
    assert!(
        text.lines().next().unwrap().contains(r#""run":"run-1""#),
        "{text}"
    );
    assert!(run.join("results.json").is_file());
}

/// Issue 43, item 2: a lock witness of a history whose meta record lacks
/// the checker's settings (given on the command line) records them, so it
/// re-checks alone; and `lockjaw check` verifies what a witness claims: a
/// duplicated op line, or a kind its own check does not find, is refused
/// (exit 3, naming the file and line).
#[test]
fn a_lock_witness_records_its_settings_and_its_claims_are_checked() {
    let d = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/lock/safety-violation.jsonl");
    let text = std::fs::read_to_string(src).unwrap();
    let mut lines = text.lines();
    let meta: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(meta["acquire_sets_ttl"], true, "the example says it");
    // The same history, its settings left to the command line.
    let bare = format!(
        "{{\"type\":\"meta\",\"checkers\":[\"lock\"]}}\n{}\n",
        lines.collect::<Vec<_>>().join("\n")
    );
    let h = d.path().join("h.jsonl");
    std::fs::write(&h, bare).unwrap();
    let p = h.to_str().unwrap();
    assert_eq!(code(&lockjaw(&["check", p])), 3, "the settings are missing");
    let o = lockjaw(&[
        "check",
        "--witness",
        "--acquire-sets-ttl",
        "true",
        "--workload",
        "lock",
        p,
    ]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let w = d.path().join("witness-safety-violation.jsonl");
    let ws = w.to_str().unwrap();
    let o = lockjaw(&["check", ws]);
    assert_eq!(
        code(&o),
        1,
        "the witness alone: {}{}",
        stdout(&o),
        stderr(&o)
    );

    // A duplicated op line is refused, naming its line.
    let wt = std::fs::read_to_string(&w).unwrap();
    let last = wt.lines().last().unwrap();
    let dup = d.path().join("dup.jsonl");
    std::fs::write(&dup, format!("{wt}{last}\n")).unwrap();
    let o = lockjaw(&["check", dup.to_str().unwrap()]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let n = wt.lines().count() + 1;
    assert!(
        stderr(&o).contains(&format!("dup.jsonl:{n}: op index")),
        "{}",
        stderr(&o)
    );
    // A claim its own check does not find: the grants no longer overlap.
    let claim = d.path().join("claim.jsonl");
    let fake = wt.replacen("safety-violation", "mutex-violation", 1);
    let fake = fake.replace(
        "\"kind\":\"safety-violation\"",
        "\"kind\":\"mutex-violation\"",
    );
    std::fs::write(&claim, fake).unwrap();
    let o = lockjaw(&["check", claim.to_str().unwrap()]);
    assert_eq!(code(&o), 3, "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("claims mutex-violation"),
        "{}",
        stderr(&o)
    );
}
