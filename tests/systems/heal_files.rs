//! `lockjaw heal` on hostile run directories: what `undo.jsonl` and
//! `cluster.json` say is data, not orders. A path outside the run
//! directory (or through a symbolic link) is neither written nor removed,
//! an iptables record that is not this run's never reaches iptables, a bad
//! line is skipped alone, and a directory another user may write is
//! refused. Each case heals the good records around the bad ones.
//! No servers and no ports; the iptables case adds one harmless ACCEPT
//! rule of its own (loopback, port 9) and removes it.

use crate::run_util::{lockjaw, IptablesRule};
use serde_json::json;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A run directory `ROOT/run` with a run id, beside `ROOT/outside`.
struct Fake {
    _tmp: tempfile::TempDir,
    run: PathBuf,
    outside: PathBuf,
    id: String,
}

impl Fake {
    fn new() -> Fake {
        let tmp = tempfile::tempdir().unwrap();
        let (run, outside) = (tmp.path().join("run"), tmp.path().join("outside"));
        std::fs::create_dir_all(run.join("faketime")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let id = format!("{:08x}", rand::random::<u32>());
        std::fs::write(run.join("run.json"), json!({ "run_id": id }).to_string()).unwrap();
        Fake {
            _tmp: tmp,
            run,
            outside,
            id,
        }
    }

    /// Write `undo.jsonl`: one line per entry (raw bytes).
    fn undo(&self, lines: &[Vec<u8>]) {
        let mut bytes = Vec::new();
        for l in lines {
            bytes.extend(l);
            bytes.push(b'\n');
        }
        std::fs::write(self.run.join("undo.jsonl"), bytes).unwrap();
    }

    fn heal(&self) -> (Option<i32>, String) {
        let out: Output = lockjaw().arg("heal").arg(&self.run).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    }
}

fn entry(id: u64, undo: serde_json::Value) -> Vec<u8> {
    json!({ "id": id, "undo": undo }).to_string().into_bytes()
}

fn clock(id: u64, file: &Path) -> Vec<u8> {
    entry(
        id,
        json!({ "kind": "clock", "file": file, "previous": "+0" }),
    )
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn heal_writes_no_clock_file_outside_the_run_directory() {
    let f = Fake::new();
    let victim = f.outside.join("victim.offset");
    let victim2 = f.outside.join("victim2.offset");
    std::fs::write(&victim, "keep\n").unwrap();
    std::fs::write(&victim2, "keep\n").unwrap();
    let good = f.run.join("faketime/n1.offset");
    std::fs::write(&good, "+4.000s\n").unwrap();
    symlink(&victim2, f.run.join("faketime/n2.offset")).unwrap();
    f.undo(&[
        clock(1, &victim),
        clock(2, &good),
        clock(3, &f.run.join("faketime/n2.offset")),
        clock(4, &f.run.join("../outside/victim.offset")),
    ]);
    let (code, said) = f.heal();
    assert_eq!(code, Some(3), "{said}");
    assert_eq!(read(&victim), "keep\n", "{said}");
    assert_eq!(read(&victim2), "keep\n", "{said}");
    assert_eq!(read(&good), "+0\n", "the good record is healed: {said}");
    assert!(said.contains("outside the run directory"), "{said}");
    assert!(said.contains("symbolic link"), "{said}");
    assert!(said.contains("leaves the run directory"), "{said}");
    for line in [":1)", ":3)", ":4)"] {
        assert!(
            said.contains(&format!("undo.jsonl{line}")),
            "{line}: {said}"
        );
    }
}

#[test]
fn heal_removes_no_data_directory_outside_the_run_directory() {
    let f = Fake::new();
    for d in ["victim", "victim2", "victim3"] {
        std::fs::create_dir_all(f.outside.join(d)).unwrap();
        std::fs::write(f.outside.join(d).join("keep"), "x").unwrap();
    }
    symlink(f.outside.join("victim2"), f.run.join("link")).unwrap();
    let n3 = f.run.join("n3");
    std::fs::create_dir_all(n3.join("sub/deeper")).unwrap();
    std::fs::write(n3.join("sub/deeper/aof"), "data").unwrap();
    symlink(f.outside.join("victim3"), n3.join("sub/out")).unwrap();
    symlink(f.outside.join("victim3/keep"), n3.join("keep")).unwrap();
    let node = |name: &str, data: PathBuf| {
        json!({
            "name": name, "role": "server", "addr": "127.0.0.1:1",
            "ports": { "client": 1 }, "log": f.run.join("logs/x.log"), "data_dir": data,
        })
    };
    let state = json!({
        "version": 1, "system": "redis", "base_port": 1,
        "nodes": [
            node("n1", f.run.join("../outside/victim")),
            node("n2", f.run.join("link")),
            node("n3", n3.clone()),
        ],
    });
    std::fs::write(f.run.join("cluster.json"), state.to_string()).unwrap();
    f.undo(&[entry(1, json!({ "kind": "cluster", "dir": f.run }))]);
    let (code, said) = f.heal();
    assert_eq!(code, Some(3), "{said}");
    for d in ["victim", "victim2", "victim3"] {
        assert!(f.outside.join(d).join("keep").exists(), "{d}: {said}");
    }
    assert!(!n3.exists(), "the data directory inside is removed: {said}");
    assert!(
        std::fs::symlink_metadata(f.run.join("link")).is_ok(),
        "{said}"
    );
    assert!(said.contains("node n1's data directory"), "{said}");
    assert!(said.contains("node n2's data directory"), "{said}");
    assert!(!said.contains("node n3's"), "{said}");
}

/// `iptables -S OUTPUT` lines that carry `needle`.
fn rules_with(needle: &str) -> Vec<String> {
    let out = Command::new("iptables")
        .args(["-w", "-S", "OUTPUT"])
        .output()
        .expect("iptables runs (the partition tests need it too)");
    assert!(out.status.success(), "iptables -S OUTPUT: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[test]
fn heal_passes_no_foreign_or_untyped_iptables_record_to_iptables() {
    let f = Fake::new();
    let comment = format!("lockjaw-test-{}", f.id);
    // A harmless rule of the test's own: ACCEPT tcp to 127.0.0.1:9, last.
    let rule = IptablesRule::add(&[
        "OUTPUT",
        "-p",
        "tcp",
        "-d",
        "127.0.0.1",
        "--dport",
        "9",
        "-m",
        "comment",
        "--comment",
        &comment,
        "-j",
        "ACCEPT",
    ]);
    let before = rules_with(&comment);
    assert_eq!(before.len(), 1, "{before:?}");
    let typed = |cgroup: String, comment: String| {
        json!({
            "kind": "iptables", "chain": "OUTPUT", "protocol": "tcp", "cgroup": cgroup,
            "dports": [9], "comment": comment, "jump": "DROP",
        })
    };
    let ours = format!("lockjaw:{} partition-node n1", f.id);
    let cg = format!("lockjaw/{}/n1", f.id);
    f.undo(&[
        // The old untyped form: these exact arguments would delete the rule.
        entry(1, json!({ "kind": "iptables", "args": rule.0 })),
        // Exactly the nemesis' shape, but another comment.
        entry(2, typed(cg.clone(), comment.clone())),
        entry(3, typed(format!("{cg} -j ACCEPT"), ours.clone())),
        entry(4, typed(cg.clone(), format!("{ours}\n-F OUTPUT"))),
        entry(
            5,
            typed("lockjaw/ffffffff/n1".into(), "lockjaw:ffffffff x".into()),
        ),
    ]);
    let (code, said) = f.heal();
    assert_eq!(code, Some(3), "{said}");
    assert_eq!(rules_with(&comment), before, "{said}");
    assert!(
        said.contains("undo.jsonl:1: skipped: an iptables rule in the old untyped form"),
        "{said}"
    );
    assert!(said.contains("not this run's"), "{said}");
    assert!(said.contains("is not a cgroup lockjaw makes"), "{said}");
    assert!(said.contains("is not of the form"), "{said}");
    for line in [":2)", ":3)", ":4)", ":5)"] {
        assert!(
            said.contains(&format!("undo.jsonl{line}")),
            "{line}: {said}"
        );
    }
    drop(rule);
    assert!(rules_with(&comment).is_empty());
}

#[test]
fn a_line_of_undo_jsonl_that_is_not_utf8_skips_that_line_only() {
    let f = Fake::new();
    let (a, b) = (
        f.run.join("faketime/a.offset"),
        f.run.join("faketime/b.offset"),
    );
    std::fs::write(&a, "+4.000s\n").unwrap();
    std::fs::write(&b, "+4.000s\n").unwrap();
    let mut bad = clock(2, &f.run.join("faketime/c.offset"));
    bad.insert(10, 0xff);
    f.undo(&[clock(1, &a), bad, b"not json".to_vec(), clock(4, &b)]);
    let (code, said) = f.heal();
    assert_eq!(code, Some(3), "{said}");
    assert_eq!(read(&a), "+0\n", "{said}");
    assert_eq!(read(&b), "+0\n", "{said}");
    assert!(said.contains("undo.jsonl:2: skipped: not UTF-8"), "{said}");
    assert!(said.contains("undo.jsonl:3: skipped: not JSON"), "{said}");
    assert!(said.contains("healed 2 effects"), "{said}");
}

#[test]
fn heal_refuses_a_run_directory_or_undo_log_others_may_write() {
    let f = Fake::new();
    let good = f.run.join("faketime/n1.offset");
    std::fs::write(&good, "+4.000s\n").unwrap();
    f.undo(&[clock(1, &good)]);
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    let undo = f.run.join("undo.jsonl");
    for (path, m, why) in [
        (&f.run, 0o777, "writable by its group and every user"),
        (&f.run, 0o775, "writable by its group"),
        (&undo, 0o646, "writable by every user"),
    ] {
        mode(path, m).unwrap();
        let (code, said) = f.heal();
        assert_eq!(code, Some(3), "{said}");
        assert!(said.contains(why) && said.contains("chmod go-w"), "{said}");
        assert_eq!(read(&good), "+4.000s\n", "nothing is done: {said}");
        mode(path, if path == &f.run { 0o755 } else { 0o644 }).unwrap();
    }
    // Owned by another user (the tests run as root; elsewhere chown fails
    // and the case is covered by the modes above).
    if std::os::unix::fs::chown(&undo, Some(65534), None).is_ok() {
        let (code, said) = f.heal();
        assert_eq!(code, Some(3), "{said}");
        assert!(said.contains("owned by uid 65534"), "{said}");
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        std::os::unix::fs::chown(&undo, Some(me), None).unwrap();
    }
    let (code, said) = f.heal();
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(read(&good), "+0\n", "{said}");
}
