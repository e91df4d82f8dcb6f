//! Files a killed run or a hostile user leaves: forms nested thousands
//! deep, a history whose last line was cut mid-write, a gzip holding one
//! gigantic line. Each gives a verdict or a clear `FILE:LINE` error (exit
//! 3), never an abort, and memory stays bounded.

use crate::check_cli::{code, good, lockjaw, stderr, stdout, write};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Assert exit 3 (not a signal) and an error containing `want` and `what`.
fn assert_refused(args: &[&str], want: &str, what: &str) {
    let o = lockjaw(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{args:.60?}: {err}");
    assert!(
        err.contains(want) && err.contains(what),
        "want `{want}` and `{what}`, got: {err}"
    );
    assert!(
        !err.contains("overflow") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn forms_nested_too_deep_are_an_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = |name: &str, text: &str| write(d, name, text).display().to_string();
    let deep = "[".repeat(20_000);
    let edn = p("n.edn", &format!("; nested\n{deep}\n"));
    let what = "nest deeper than 1000 levels";
    assert_refused(&["check", &edn], &format!("{edn}:2: "), what);
    assert_refused(
        &["convert", &edn, "--to", "jsonl"],
        &format!("{edn}:2: "),
        what,
    );
    // A .jsonl whose first line starts with `[` is read as EDN.
    let jsonl = p("n.jsonl", &deep);
    assert_refused(&["check", &jsonl], &format!("{jsonl}:1: "), what);
    // Deep JSON: serde_json's own limit, as a clear error too.
    let json = format!("{}1{}\n", "{\"a\":".repeat(20_000), "}".repeat(20_000));
    let json = p("j.jsonl", &json);
    assert_refused(&["check", &json], &format!("{json}:1: "), "recursion limit");
    let g = good(d).display().to_string();
    assert_refused(
        &["check", &g, "--init", &deep],
        "--init: ",
        "nests deeper than 1000",
    );
    let init = format!("{deep}0{}", "]".repeat(20_000));
    assert_refused(
        &["convert", &g, "--to", "edn", "--init", &init],
        "--init: ",
        "nests",
    );
    // As deep as allowed still reads.
    let ok = format!("{}0{}", "[".repeat(1000), "]".repeat(1000));
    let o = lockjaw(&["check", &g, "--init", &ok]);
    assert!(matches!(code(&o), 0 | 1), "a valid init: {}", stderr(&o));
}

/// A copy of the committed example run (its history and run.json) in
/// `dir/name`; returns the copy's history.
fn example_run(dir: &Path, name: &str, history: &[u8]) -> PathBuf {
    let run = dir.join(name);
    std::fs::create_dir(&run).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/redis-fenced-counter-pause-holder");
    std::fs::copy(example.join("run.json"), run.join("run.json")).unwrap();
    std::fs::write(run.join("history.jsonl"), history).unwrap();
    run.join("history.jsonl")
}

#[test]
fn a_cut_last_line_is_ignored_with_a_warning_as_after_heal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/redis-fenced-counter-pause-holder/history.jsonl");
    let text = std::fs::read(example).unwrap();
    let body = &text[..text.len() - 1];
    let last = body.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let line = body[..last].iter().filter(|&&b| b == b'\n').count() + 1;
    let cut = &body[..last + (body.len() - last) / 2];
    // What a killed run leaves, and what `lockjaw heal` makes of it.
    let killed = example_run(d, "killed", cut);
    let healed = example_run(d, "healed", &body[..last]);
    let k = lockjaw(&["check", killed.parent().unwrap().to_str().unwrap()]);
    let h = lockjaw(&["check", healed.parent().unwrap().to_str().unwrap()]);
    assert_eq!(code(&h), 1, "the example shows anomalies: {}", stderr(&h));
    assert_eq!(code(&k), code(&h), "{}", stderr(&k));
    assert_eq!(stdout(&k).replace("killed", "healed"), stdout(&h));
    let warning = format!(
        "warning: {}:{line}: the last line is cut off",
        killed.display()
    );
    assert!(stderr(&k).contains(&warning), "{}", stderr(&k));
    assert!(!stderr(&h).contains("warning"), "{}", stderr(&h));
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(killed.with_file_name("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["warnings"][0]["line"], line as u64, "{results}");
    // The history file itself, as given: the same.
    let f = lockjaw(&["check", killed.to_str().unwrap()]);
    assert_eq!(code(&f), 1);
    assert!(stderr(&f).contains(&warning), "{}", stderr(&f));
    // Only the last line may be cut: one with more after it is an error.
    let mut middle = cut.to_vec();
    middle.extend_from_slice(b"\n");
    middle.extend_from_slice(&body[last..]);
    middle.extend_from_slice(b"\n");
    std::fs::write(&killed, middle).unwrap();
    assert_refused(
        &["check", killed.to_str().unwrap()],
        &format!("{}:{line}: ", killed.display()),
        "truncated line",
    );
}

/// Run lockjaw; its exit code, stderr and peak resident memory in KiB as
/// the kernel counted it for this child alone. (The child is reaped by
/// `wait4`, which std does not offer, hence the lint's exception.)
#[allow(clippy::zombie_processes)]
fn lockjaw_with_rss(args: &[&str]) -> (Option<i32>, String, i64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockjaw"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 reaps our own child, which
    // nothing else waits for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, err, usage.ru_maxrss)
}

#[test]
fn a_gzip_holding_one_huge_line_is_refused_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl.gz");
    // A 1 GiB line in a file of a few MB: one compressed MiB of `a`,
    // repeated as concatenated gzip members.
    let member = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let mut f = std::fs::File::create(&path).unwrap();
    let head = format!(
        "{{\"type\":\"meta\",\"model\":\"register\",\"init\":0}}\n{}\n{{\"time\":2,\"process\":0,\"type\":\"ok\",\"f\":\"write\",\"value\":\"",
        r#"{"time":1,"process":0,"type":"invoke","f":"write"}"#,
    );
    f.write_all(&member(head.as_bytes())).unwrap();
    let mib = member(&vec![b'a'; 1 << 20]);
    for _ in 0..1024 {
        f.write_all(&mib).unwrap();
    }
    drop(f);
    let p = path.to_str().unwrap();
    let (code, err, rss_kib) = lockjaw_with_rss(&["check", p]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains(&format!("{p}:3: line longer than 67108864 bytes"))
            && err.contains("--max-line-bytes"),
        "{err}"
    );
    // The cap (64 MiB) plus the program; reading the line whole took over 1 GB.
    assert!(rss_kib < 200 << 10, "peak RSS {rss_kib} KiB");
    eprintln!("peak RSS refusing a 1 GiB line: {} MiB", rss_kib >> 10);
    // A lower cap is a flag away, and names the same line.
    let (code, err, _) = lockjaw_with_rss(&["check", "--max-line-bytes", "1000", p]);
    assert_eq!(code, Some(3));
    assert!(
        err.contains(&format!("{p}:3: line longer than 1000 bytes")),
        "{err}"
    );
}

#[test]
fn the_line_cap_is_raised_by_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let v = "x".repeat(4000);
    let long = format!(
        "{{\"type\":\"meta\",\"model\":\"register\",\"init\":0}}\n\
         {{\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"write\",\"value\":\"{v}\"}}\n\
         {{\"time\":2,\"process\":0,\"type\":\"ok\",\"f\":\"write\",\"value\":\"{v}\"}}\n"
    );
    let p = write(dir.path(), "long.jsonl", &long).display().to_string();
    assert_refused(
        &["check", "--max-line-bytes", "1000", &p],
        &format!("{p}:2: "),
        "line longer than 1000 bytes",
    );
    let o = lockjaw(&["check", "--max-line-bytes", "5000", &p]);
    assert_eq!(code(&o), 0, "read and checked: {}", stderr(&o));
    assert_refused(
        &["convert", "--max-line-bytes", "1000", &p, "--to", "edn"],
        &format!("{p}:2: "),
        "line longer than 1000 bytes",
    );
}
