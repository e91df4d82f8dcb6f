//! Lease advice on a real run: a short Redis run under pause-holder writes
//! the lease-advice box into summary.md and report.html, with the run's
//! lease and a verdict that follows from the parts; the workers' stall
//! meters saw the injected pauses, which the pause budget leaves out;
//! `lockjaw advise DIR` prints the same box, and exits 3 on a directory
//! that is not a run.
//! Ports: one 100-port block in 50800-50899 (run_util::run_local).

use crate::run_util::*;

/// The bound and the verdict word of a box: "lease of L ms met|did not
/// meet the recommended bound of B ms".
fn verdict(text: &str) -> (f64, bool, f64) {
    let line = text
        .lines()
        .find(|l| l.contains("Verdict: the run's lease of"))
        .unwrap_or_else(|| panic!("no verdict in\n{text}"));
    let num = |after: &str| -> f64 {
        let rest = &line[line.find(after).unwrap() + after.len()..];
        rest.split(' ').next().unwrap().parse().unwrap()
    };
    let met = !line.contains("did not meet");
    (num("lease of "), met, num("bound of "))
}

fn advise(args: &[&str]) -> (i32, String, String) {
    let out = lockjaw().arg("advise").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_redis_run_shows_the_box_and_advise_prints_it() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "advice-redis",
        tmp.path(),
        50800,
        &[
            "--system",
            "redis",
            "--nemesis",
            "pause-holder",
            "--time-limit",
            "3",
            "--ttl-ms",
            "1000",
            "--concurrency",
            "3",
            "--seed",
            "17",
        ],
    );
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    assert!(
        r.stdout.contains("lease advice: the lease of 1000 ms"),
        "{}",
        r.stdout
    );

    // The meter saw each injected pause of ~1500 ms; the budget leaves them out.
    let stalls = json_file(&r.dir.join("stalls.json"));
    let longest = stalls["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["late_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let faults = r.nemesis()["injections"].as_array().unwrap().len();
    assert!(faults >= 1, "a pause was injected");
    assert!(
        longest >= 1000.0,
        "the paused worker's meter saw its pause: {stalls}"
    );

    let md = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
    assert!(
        md.contains("## Lease advice") && md.contains("The run's lease: **1000 ms**"),
        "{md}"
    );
    let pause_row = md
        .lines()
        .find(|l| l.starts_with("| pause budget |"))
        .unwrap();
    let pause: f64 = pause_row
        .split('|')
        .nth(2)
        .unwrap()
        .trim()
        .trim_end_matches(" ms")
        .parse()
        .unwrap();
    assert!(pause < 1000.0, "injected pauses never count: {pause_row}");
    assert!(pause_row.contains("outside injected faults"), "{pause_row}");
    let (lease, met, bound) = verdict(&md);
    assert_eq!(lease, 1000.0);
    assert_eq!(
        met,
        lease > bound,
        "the verdict follows from the bound: {md}"
    );
    assert!(md.contains("No lease length is safe without fencing"));

    let html = std::fs::read_to_string(r.dir.join("report.html")).unwrap();
    assert!(html.contains(r#"<section id="lease-advice">"#));
    let sentence = md.lines().find(|l| l.starts_with("Verdict:")).unwrap();
    let escaped = sentence.replace('\'', "&#39;");
    assert!(html.contains(&escaped), "report.html has the same verdict");

    let dir = r.dir.display().to_string();
    let (code, out, err) = advise(&[&dir]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(sentence), "advise prints the same box:\n{out}");
    // A budget given to advise replaces the measured one.
    let (code, out, _) = advise(&[&dir, "--pause-budget-ms", "5000"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("--pause-budget-ms") && out.contains("did not meet"),
        "{out}"
    );
}

#[test]
fn advise_refuses_what_is_not_a_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = advise(&[&tmp.path().display().to_string()]);
    assert_eq!(code, 3);
    assert!(err.contains("history.jsonl: missing"), "{err}");
    let gone = tmp.path().join("nope");
    let (code, _, err) = advise(&[&gone.display().to_string()]);
    assert_eq!(code, 3);
    assert!(err.contains("not a directory"), "{err}");
    let out = lockjaw()
        .args(["run", "--system", "redis", "--pause-budget-ms=-5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pause-budget-ms"));
}
