//! scripts/ci-shard.sh, the steps of one CI shard (docs/ci.md): shard 2 of
//! a two-cell Redis compare whose second cell is the library under test,
//! given as `--client NAME@PATH` (Debian's redis-py tree as the "checkout"),
//! and the script's refusals. Ports 38620–38639.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn ci_shard(cwd: &Path, args: &[&str]) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ci-shard.sh"))
        .current_dir(cwd)
        .args(["--no-deps", "--lockjaw", env!("CARGO_BIN_EXE_lockjaw")])
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const LIB: &str = "/usr/lib/python3/dist-packages";

#[test]
fn ci_shard_runs_its_part_with_the_library_under_test() {
    let tmp = tempfile::tempdir().unwrap();
    let o = ci_shard(
        tmp.path(),
        &[
            "--shard",
            "2/2",
            "--seed",
            "7",
            "--out",
            "s2",
            "--client",
            &format!("python-redis-py@{LIB}"),
            "--",
            "compare",
            "--systems",
            "redis",
            "--clients",
            "builtin,{client}",
            "--nemesis",
            "none",
            "--fencing",
            "off",
            "--time-limit",
            "1",
            "--",
            "--base-port",
            "38620",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp.path().join("s2").canonicalize().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        stdout.lines().last(),
        Some(format!("shard directory: {}", dir.display()).as_str()),
        "{}",
        text(&o)
    );
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("shard.json")).unwrap()).unwrap();
    assert_eq!(m["shard"]["k"], 2, "{m}");
    assert_eq!(m["seed"], 7, "{m}");
    assert_eq!(m["plan"].as_array().unwrap().len(), 2, "{m}");
    let units = m["units"].as_array().unwrap();
    assert_eq!(units.len(), 1, "{m}");
    let unit = units[0].as_str().unwrap();
    assert!(
        unit.contains("python-redis-py"),
        "shard 2 runs the library's cell: {m}"
    );
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{unit}-0/run.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(run["client"], format!("python-redis-py@{LIB}"), "{run}");
}

#[test]
fn ci_shard_refuses_a_client_with_no_place_and_a_missing_seed() {
    let tmp = tempfile::tempdir().unwrap();
    let o = ci_shard(
        tmp.path(),
        &[
            "--shard",
            "1/2",
            "--seed",
            "7",
            "--out",
            "s1",
            "--client",
            &format!("python-redis-py@{LIB}"),
            "--",
            "compare",
            "--systems",
            "redis",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("names no {client}"), "{}", text(&o));
    let o = ci_shard(
        tmp.path(),
        &[
            "--shard",
            "1/2",
            "--seed",
            "7",
            "--out",
            "s1",
            "--client",
            "python-redis-py@/nonexistent/tree",
            "--",
            "compare",
            "--clients",
            "{client}",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("is not a directory"), "{}", text(&o));
    let o = ci_shard(
        tmp.path(),
        &["--shard", "1/2", "--out", "s1", "--", "bugs", "table"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("--seed S is required"), "{}", text(&o));
    assert!(!tmp.path().join("s1").exists(), "nothing ran");
}
