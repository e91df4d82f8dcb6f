//! `lockjaw check` and `lockjaw convert` as a user runs them: exit codes,
//! verdict lines, malformed input (exit 3 with `FILE:LINE: what is wrong`,
//! never a panic), folders and run directories, JSON output, conversion.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) fn lockjaw(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockjaw"))
        .args(args)
        .output()
        .unwrap()
}

pub(crate) fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed by a signal")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub(crate) const META: &str = r#"{"type":"meta","model":"cas-register","init":0}"#;

pub(crate) fn good(dir: &Path) -> PathBuf {
    let text = format!(
        "{META}\n{}\n{}\n{}\n{}\n",
        r#"{"time":1,"process":0,"type":"invoke","f":"write","value":1}"#,
        r#"{"time":2,"process":1,"type":"invoke","f":"read"}"#,
        r#"{"time":3,"process":1,"type":"ok","f":"read","value":1}"#,
        r#"{"time":4,"process":0,"type":"ok","f":"write","value":1}"#,
    );
    write(dir, "good.jsonl", &text)
}

fn bad(dir: &Path) -> PathBuf {
    let text = format!(
        "{META}\n{}\n{}\n{}\n{}\n",
        r#"{"time":1,"process":0,"type":"invoke","f":"write","value":1}"#,
        r#"{"time":2,"process":0,"type":"ok","f":"write","value":1}"#,
        r#"{"time":3,"process":1,"type":"invoke","f":"read"}"#,
        r#"{"time":4,"process":1,"type":"ok","f":"read","value":0}"#,
    );
    write(dir, "bad.jsonl", &text)
}

/// Assert exit 3 and an error `FILE:LINE: ...` containing `what`.
fn assert_malformed(dir: &Path, name: &str, body: &[u8], line: u64, what: &str) {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    let o = lockjaw(&["check", p.to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(code(&o), 3, "{name}: {err}");
    let want = format!("{}:{line}: ", p.display());
    assert!(
        err.contains(&want) && err.contains(what),
        "{name}: want `{want}...{what}`, got: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn verdicts_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (g, b) = (good(dir.path()), bad(dir.path()));
    let o = lockjaw(&["check", g.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).starts_with(&format!("{}: valid (cas-register", g.display())));
    let o = lockjaw(&["check", b.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    let out = stdout(&o);
    assert!(out.contains("invalid") && out.contains("read → 0"), "{out}");
    assert!(
        out.contains("completed first; impossible in this state"),
        "{out}"
    );
    // Several files: one line each; 1 wins over 3 over 2 over 0.
    let missing = dir.path().join("missing.jsonl");
    let o = lockjaw(&["check", g.to_str().unwrap(), missing.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    let o = lockjaw(&[
        "check",
        missing.to_str().unwrap(),
        b.to_str().unwrap(),
        g.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1);
    assert_eq!(
        stdout(&o)
            .lines()
            .filter(|l| l.contains(": valid") || l.contains(": invalid"))
            .count(),
        2
    );
}

#[test]
fn json_output_has_verdict_and_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let b = bad(dir.path());
    let o = lockjaw(&["check", "--json", b.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["valid"], false);
    let lin = &v["linearizable"];
    assert_eq!(lin["model"], "cas-register");
    assert_eq!(lin["violation"]["prefix"][0]["op"], "write 1");
    assert_eq!(lin["violation"]["stuck"][0]["invoked"], 3);
    assert_eq!(lin["violation"]["stuck"][0]["completed"], 4);
}

#[test]
fn folders_run_directories_and_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run-1");
    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("run.json"), "{}").unwrap();
    let g = good(dir.path());
    std::fs::rename(&g, run.join("history.jsonl")).unwrap();
    let gz = std::fs::File::create(dir.path().join("b.jsonl.gz")).unwrap();
    let mut enc = flate2::write::GzEncoder::new(gz, flate2::Compression::fast());
    enc.write_all(&std::fs::read(bad(dir.path())).unwrap())
        .unwrap();
    enc.finish().unwrap();
    std::fs::remove_file(dir.path().join("bad.jsonl")).unwrap();
    let o = lockjaw(&["check", dir.path().to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(code(&o), 1, "{out}{}", stderr(&o));
    assert!(out.contains("b.jsonl.gz: invalid"), "{out}");
    assert!(out.contains("run-1/history.jsonl: valid"), "{out}");
    let o = lockjaw(&["check", run.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn malformed_input_exits_3_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inv = r#"{"time":1,"process":0,"type":"invoke","f":"read"}"#;
    assert_malformed(
        d,
        "truncated.jsonl",
        format!("{META}\n{inv}\n{{\"time\":2,\"proc\n{inv}\n").as_bytes(),
        3,
        "truncated line",
    );
    assert_malformed(
        d,
        "type.jsonl",
        format!("{META}\n{}\n", inv.replace("invoke", "begin")).as_bytes(),
        2,
        "field `type`",
    );
    assert_malformed(
        d,
        "orphan.jsonl",
        format!("{META}\n{}\n", inv.replace("invoke", "ok")).as_bytes(),
        2,
        "completion without invoke",
    );
    assert_malformed(
        d,
        "twice.jsonl",
        format!("{META}\n{inv}\n{inv}\n").as_bytes(),
        3,
        "still pending",
    );
    assert_malformed(
        d,
        "field.jsonl",
        format!("{META}\n{}\n", inv.replace("1", "\"soon\"")).as_bytes(),
        2,
        "field `time`",
    );
    assert_malformed(d, "empty.jsonl", b"", 0, "empty file");
    assert_malformed(
        d,
        "bad.jsonl.gz",
        &[0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5, 6, 7],
        1,
        "cannot read",
    );
    assert_malformed(
        d,
        "bad.edn",
        b"[{:process 0 :type :invoke :f :read}\n {:process 0 :type :ok :f :read :value}]",
        2,
        "even number",
    );
    assert_malformed(
        d,
        "value.jsonl",
        format!("{META}\n{}\n", inv.replace("read\"", "cas\",\"value\":3")).as_bytes(),
        2,
        "cas value must be [old, new]",
    );
}

#[test]
fn model_init_and_format_flags() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "k.edn",
        "[{:process 0 :type :invoke :f :read :value nil}\n {:process 0 :type :ok :f :read :value 5}]\n",
    );
    let o = lockjaw(&[
        "check",
        "--model",
        "cas-register",
        "--init",
        "5",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = lockjaw(&[
        "check",
        "--model",
        "cas-register",
        "--init",
        "0",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 1);
    let o = lockjaw(&["check", "--model", "nope", p.to_str().unwrap()]);
    assert_eq!(code(&o), 3);
    assert!(
        stderr(&o).contains("unknown model `nope`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn lock_histories_go_to_the_lock_checker() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "lock.jsonl",
        "{\"type\":\"meta\",\"checkers\":[\"lock\"],\"workload\":\"lock\",\"acquire_sets_ttl\":true}\n{\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"acquire\"}\n",
    );
    let o = lockjaw(&["check", p.to_str().unwrap()]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    // No acquire succeeded: nothing was tested (issue 29; exit 0 before).
    assert_eq!(code(&o), 2, "{all}");
    assert!(all.contains("lock checks: unknown"), "{all}");
    assert!(
        !all.contains("cas-register") && !all.contains("partition"),
        "{all}"
    );
}

/// Issue 29: a lock history in which nothing was tested is unknown (exit
/// 2) with the reason, in the verdict line and in the JSON; an anomaly
/// found still makes it invalid (exit 1); a tested one says what it covers.
#[test]
fn a_lock_history_that_tested_nothing_is_unknown_unless_an_anomaly_was_found() {
    let dir = tempfile::tempdir().unwrap();
    let meta = r#"{"type":"meta","checkers":["lock"],"workload":"fenced-counter","acquire_sets_ttl":true}"#;
    let refused = [
        r#"{"time":1,"process":0,"type":"invoke","f":"acquire","key":"l","owner":"a"}"#,
        r#"{"time":2,"process":0,"type":"fail","f":"acquire","key":"l","owner":"a","error":"invalid expire time"}"#,
    ];
    let p = write(
        dir.path(),
        "none.jsonl",
        &format!("{meta}\n{}\n", refused.join("\n")),
    );
    let o = lockjaw(&["check", p.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(code(&o), 2, "{out}{}", stderr(&o));
    assert!(
        out.contains("lock checks: unknown") && out.contains("covers 0 grant(s), 0 protected write(s); unknown: no acquire succeeded: nothing was tested"),
        "{out}"
    );
    let o = lockjaw(&["check", "--json", p.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert_eq!(v["valid"], "unknown", "{v}");
    let notes = v["lock"]["notes"].to_string();
    assert!(
        notes.contains("no acquire succeeded: nothing was tested"),
        "{notes}"
    );
    // No grant, but the storage accepted fence 1 after fence 2: invalid.
    let stale = [
        r#"{"time":3,"process":1,"type":"invoke","f":"write","key":"c","fence":2,"value":1,"seq":1}"#,
        r#"{"time":4,"process":1,"type":"ok","f":"write","key":"c","fence":2,"value":1,"seq":1}"#,
        r#"{"time":5,"process":2,"type":"invoke","f":"write","key":"c","fence":1,"value":2,"seq":2}"#,
        r#"{"time":6,"process":2,"type":"ok","f":"write","key":"c","fence":1,"value":2,"seq":2}"#,
    ];
    let body = format!(
        "{meta}
{}
{}
",
        refused.join("\n"),
        stale.join("\n")
    );
    let p = write(dir.path(), "stale.jsonl", &body);
    let o = lockjaw(&["check", p.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    // A lock-free history (`--system cas`: storage ops, no lock op at all)
    // tests its writes: valid with writes, unknown with none accepted.
    let cas_meta = r#"{"type":"meta","checkers":["lock"],"workload":"fenced-counter","acquire_sets_ttl":false}"#;
    let writes = [
        r#"{"time":1,"process":0,"type":"invoke","f":"write","key":"c","value":1,"seq":1}"#,
        r#"{"time":2,"process":0,"type":"ok","f":"write","key":"c","value":1,"seq":1}"#,
        r#"{"time":3,"process":1,"type":"invoke","f":"read","key":"c"}"#,
        r#"{"time":4,"process":1,"type":"ok","f":"read","key":"c","value":1}"#,
    ];
    let p = write(
        dir.path(),
        "cas.jsonl",
        &format!("{cas_meta}\n{}\n", writes.join("\n")),
    );
    let o = lockjaw(&["check", p.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("covers 0 grant(s), 1 protected write(s)"),
        "{}",
        stdout(&o)
    );
    let refused = writes[0..1].join("\n")
        + "\n"
        + r#"{"time":2,"process":0,"type":"fail","f":"write","key":"c","value":1,"seq":1,"error":"version-conflict"}"#;
    let p = write(
        dir.path(),
        "cas-none.jsonl",
        &format!("{cas_meta}\n{refused}\n"),
    );
    let o = lockjaw(&["check", p.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("no write was accepted"),
        "{}",
        stdout(&o)
    );
    // A tested history says what its verdict covers.
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/lock/stale-write-rejected.jsonl");
    let o = lockjaw(&["check", p.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(code(&o), 0, "{out}");
    assert!(
        out.contains("lock checks: valid (service: valid, resource: valid); covers 2 grant(s), "),
        "{out}"
    );
}

#[test]
fn convert_round_trips_through_edn() {
    let dir = tempfile::tempdir().unwrap();
    let b = bad(dir.path());
    let edn = dir.path().join("b.edn");
    let o = lockjaw(&[
        "convert",
        b.to_str().unwrap(),
        "--to",
        "edn",
        "-o",
        edn.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(&edn).unwrap();
    let mut lines = text.lines();
    let meta = lines.next().unwrap();
    assert!(
        meta.starts_with("; lockjaw-meta {") && meta.contains("\"model\":\"cas-register\""),
        "{text}"
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("[{:type :invoke, :f :write, :value 1, :process 0, :time 1, :index 0}"),
        "{text}"
    );
    // The meta record travels in the comment: no flags needed.
    let o = lockjaw(&["check", edn.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    let back = dir.path().join("b2.jsonl");
    let o = lockjaw(&[
        "convert",
        edn.to_str().unwrap(),
        "--to",
        "jsonl",
        "-o",
        back.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0);
    let first = std::fs::read_to_string(&back).unwrap();
    assert!(
        first
            .lines()
            .next()
            .unwrap()
            .contains("\"model\":\"cas-register\""),
        "{first}"
    );
    assert!(
        first.lines().nth(1).unwrap().contains("\"f\":\"write\""),
        "{first}"
    );
}

#[test]
fn a_lock_history_checks_the_same_after_an_edn_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("histories/examples/lock");
    for name in ["stale-write-accepted", "safety-violation", "set-lost"] {
        let src = ex.join(format!("{name}.jsonl"));
        let edn = dir.path().join(format!("{name}.edn"));
        let o = lockjaw(&[
            "convert",
            src.to_str().unwrap(),
            "--to",
            "edn",
            "-o",
            edn.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let verdict = |p: &Path| {
            let o = lockjaw(&["check", "--json", p.to_str().unwrap()]);
            let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            // The file name and the timings differ; the rest must not.
            v.as_object_mut().unwrap().remove("file");
            v.as_object_mut().unwrap().remove("stats");
            (code(&o), v)
        };
        let (a, b) = (verdict(&src), verdict(&edn));
        assert_eq!(a.0, 1, "{name}: the example is invalid");
        assert_eq!(a, b, "{name}: same verdict and counts through EDN");
    }
}

#[test]
fn convert_takes_model_and_init_and_rejects_malformed_input() {
    let dir = tempfile::tempdir().unwrap();
    let edn = write(
        dir.path(),
        "mr.edn",
        "[{:process 0 :type :invoke :f :write :value 1}\n {:process 0 :type :ok :f :write :value 1}\n {:process 1 :type :invoke :f :read}\n {:process 1 :type :ok :f :read :value 0}]\n",
    );
    let out = dir.path().join("mr.jsonl");
    let o = lockjaw(&[
        "convert",
        edn.to_str().unwrap(),
        "--to",
        "jsonl",
        "--model",
        "register",
        "--init",
        "0",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = lockjaw(&["check", out.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "a stale read of the initial 0: {}", stdout(&o));
    assert!(stdout(&o).contains("register"), "{}", stdout(&o));
    let broken = write(
        dir.path(),
        "broken.edn",
        "[{:process 0 :type :invoke :f :write :value 1}\n {:process 1 :type :ok :f :read :value 0}]\n",
    );
    let o = lockjaw(&["convert", broken.to_str().unwrap(), "--to", "jsonl"]);
    assert_eq!(code(&o), 3);
    assert!(
        stderr(&o).contains("broken.edn:2:") && stderr(&o).contains("completion without invoke"),
        "{}",
        stderr(&o)
    );
}

/// Issue 29: `--timeout 1e308` panicked converting seconds to a Duration.
#[test]
fn a_timeout_out_of_range_is_refused_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let f = good(d.path());
    for t in ["1e308", "-1", "nan", "0"] {
        let arg = format!("--timeout={t}");
        let o = lockjaw(&["check", &arg, f.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(code(&o), 3, "--timeout {t}: {err}");
        assert!(
            err.contains(&format!("--timeout {t}")) && !err.contains("panicked"),
            "{err}"
        );
    }
    assert_eq!(
        code(&lockjaw(&["check", "--timeout", "60", f.to_str().unwrap()])),
        0
    );
}

/// Issue 29: `lockjaw check` on a FIFO blocked forever (the reader waited
/// for a writer). Refused now, named, exit 3, as a file given and as one
/// found in a folder.
#[test]
fn a_fifo_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("folder");
    std::fs::create_dir(&sub).unwrap();
    let fifo = sub.join("pipe.jsonl");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success(), "mkfifo failed");
    for arg in [&fifo, &sub] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lockjaw"))
            .arg("check")
            .arg(arg)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("lockjaw check {} still waits on the FIFO", arg.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert_eq!(code(&o), 3, "{err}");
        assert!(err.contains(&fifo.display().to_string()), "{err}");
        assert!(err.contains("not a regular file but a FIFO"), "{err}");
    }
}
