//! `lockjaw bugs` on a test catalogue (not the shipped bugs/, whose rows
//! other work adds): `list`, a bad row (exit 3 naming file, line and
//! field), a not-reproduced row (its reason, no run), and `bugs run` of a
//! row both of whose sides are the built-in Redis client paused past its
//! lease without fencing: the buggy side meets its expectation, the fixed
//! side, showing the same stale writes, contradicts it (exit 1); the
//! printed counts agree with each run directory's own account.
//!
//! Ports: the runs go one after the other from --base-port 41500 (this
//! file's block is 41500-41899).

use crate::run_util::*;
use std::path::Path;
use std::process::Output;

const ROW: &str = r#"id = "pause-stale"
library = "lockjaw's built-in Redis client (a test row)"
title = "a holder paused past its lease writes without fencing"
class = "safety"
system = "redis"
workload = "fenced-counter"
nemesis = "pause-holder"
args = ["--fencing", "off", "--time-limit", "2.5", "--ttl-ms", "300", "--hold-ms", "150",
        "--concurrency", "3", "--base-port", "41500"]
expect = "stale-write-accepted"
per = "injection"
[buggy]
client = "builtin"
[fixed]
client = "builtin"
"#;

const NOT_REPRODUCED: &str = r#"id = "gone-1"
library = "gone"
title = "an old release"
class = "liveness"
system = "etcd"
expect = "stuck-lock"
per = "run"
status = "not-reproduced"
reason = "the old release does not import on Python 3.11"
"#;

fn bugs(catalogue: &Path, cwd: &Path, args: &[&str]) -> Output {
    lockjaw()
        .current_dir(cwd)
        .arg("bugs")
        .arg("--catalogue")
        .arg(catalogue)
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The number after `prefix` on the first line of `section` that has it.
fn number_after(section: &str, prefix: &str) -> u64 {
    let line = section
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {section}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn bugs_list_and_bad_rows_without_servers() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("cat");
    std::fs::create_dir(&cat).unwrap();
    std::fs::write(cat.join("pause-stale.toml"), ROW).unwrap();
    std::fs::write(cat.join("gone-1.toml"), NOT_REPRODUCED).unwrap();
    let o = bugs(&cat, tmp.path(), &["list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("pause-stale\tlockjaw's built-in Redis client (a test row)\tsafety\tredis\tbuiltin → builtin\treplayable"),
        "{out}"
    );
    assert!(
        out.contains("gone-1\tgone\tliveness\tetcd\t— → —\tnot-reproduced"),
        "{out}"
    );

    let o = bugs(&cat, tmp.path(), &["run", "gone-1"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).contains("does not import on Python 3.11"));
    assert!(!tmp.path().join("histories").exists(), "nothing ran");

    let o = bugs(&cat, tmp.path(), &["run", "nope"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("pause-stale"),
        "the ids are listed"
    );

    std::fs::write(
        cat.join("gone-1.toml"),
        NOT_REPRODUCED.replace("per = \"run\"", "per = \"try\""),
    )
    .unwrap();
    let o = bugs(&cat, tmp.path(), &["list"]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert!(err.contains("gone-1.toml:7: field `per`"), "{err}");
}

#[test]
fn bugs_run_counts_each_side_as_its_run_directories_do() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("cat");
    std::fs::create_dir(&cat).unwrap();
    std::fs::write(cat.join("pause-stale.toml"), ROW).unwrap();
    let out = tmp.path().join("out");
    let o = bugs(
        &cat,
        tmp.path(),
        &[
            "run",
            "pause-stale",
            "--runs",
            "1",
            "--required",
            "1",
            "--seed",
            "3",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    let (buggy, fixed) = stdout
        .split_once("== fixed (builtin)")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(buggy.contains("== buggy (builtin)"), "{stdout}");
    assert!(buggy.contains("expectation: met"), "{stdout}");
    assert!(
        fixed.contains("expectation: NOT met: the fixed release showed"),
        "{stdout}"
    );
    for (side, printed) in [("buggy", buggy), ("fixed", fixed)] {
        let dir = out.join(side).join("run-1");
        let stale = json_file(&dir.join("results.json"))["lock"]["checks"]["stale_writes"]["count"]
            .as_u64()
            .unwrap();
        assert!(stale > 0, "{side}: paused holders without fencing");
        assert_eq!(
            number_after(printed, "stale-write-accepted:"),
            stale,
            "{side}: {stdout}"
        );
        assert_eq!(
            number_after(printed, "landed injections:"),
            landed_count(&dir),
            "{side}: {stdout}"
        );
        let run = json_file(&dir.join("run.json"));
        assert_eq!(run["seed"], 3, "both sides run the same seed");
        assert_nothing_left(&dir);
    }
}
