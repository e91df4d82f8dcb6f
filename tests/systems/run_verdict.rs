//! Issue 29, "no verdict for a run that tested nothing": a real `lockjaw
//! run` whose every acquire fails, and one whose nemesis fails at every
//! injection, exit 2 (unknown) with the reason in stdout, results.json,
//! summary.md and the report, instead of 0 (valid).
//! Ports: the 100-port blocks at 38400 (a `lockjaw cluster up`) and 38500
//! (run_util::run_local).

use crate::run_util::*;

/// The reason must be everywhere a reader looks.
fn assert_unknown_everywhere(r: &Run, reason: &str) {
    assert_eq!(r.code, 2, "unknown exits 2");
    assert!(
        r.stdout.contains(&format!("unknown: {reason}")),
        "stdout names the reason: {}",
        r.stdout
    );
    let res = r.results();
    assert_eq!(res["valid"], "unknown", "{res}");
    let why = res["run"]["unknown"].to_string();
    assert!(why.contains(reason), "results.json run.unknown: {why}");
    for file in ["summary.md", "report.html"] {
        let text = std::fs::read_to_string(r.dir.join(file)).unwrap();
        assert!(text.contains(reason), "{file} names the reason");
    }
    assert_nothing_left(&r.dir);
}

#[test]
fn a_run_whose_every_acquire_fails_is_unknown_not_valid() {
    let tmp = tempfile::tempdir().unwrap();
    // A Redis lockjaw did not start, out of memory (`maxmemory 1`, the
    // default `noeviction`): it refuses every write, so every acquire,
    // with an error reply, while reads and the run's DEL of its keys go
    // on. (A run through --endpoints has a lock key of its own, so a key
    // held by someone else can no longer be the refusal.) Before issue
    // 29: 0 grants, exit 0, "valid". (The other case, a `ttl_ms`
    // Redis refuses, is now refused before the run starts: see the
    // workload ranges.)
    let (port, _, _down) = crate::run_redis::cluster_up("redis", 38400, &tmp.path().join("c"));
    let ep = format!("127.0.0.1:{port}");
    let full: String = ::redis::Client::open(format!("redis://{ep}/"))
        .unwrap()
        .get_connection()
        .and_then(|mut c| {
            ::redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg("1")
                .query(&mut c)
        })
        .unwrap();
    assert_eq!(full, "OK");
    let r = run(
        "verdict-no-grant",
        &tmp.path().join("run"),
        &[
            "--system",
            "redis",
            "--endpoints",
            &ep,
            "--workload",
            "lock",
            "--nemesis",
            "none",
            "--time-limit",
            "1.5",
        ],
    );
    let (_, ops) = r.history();
    // Refused: the script's OOM error is recorded as `info` (an error
    // inside a script is not told apart from one after its write).
    use lockjaw::history::OpType;
    let refused = |o: &&lockjaw::history::Op| {
        o.f == "acquire" && matches!(o.kind, OpType::Fail | OpType::Info)
    };
    assert!(
        ops.iter().any(|o| refused(&o)),
        "the workers tried and were refused"
    );
    assert!(
        !ops.iter().any(|o| o.f == "acquire" && o.kind == OpType::Ok),
        "no acquire was granted"
    );
    assert_unknown_everywhere(&r, "no acquire succeeded (0 grants)");
    assert!(r
        .stdout
        .contains("covers: no faults (nemesis none), 0 grants"));
}

#[test]
fn a_run_whose_nemesis_fails_at_every_injection_is_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    // A single Redis node has no minority to pause: every injection fails.
    let nemesis = tmp.path().join("pause-minority.toml");
    std::fs::write(
        &nemesis,
        "name = \"pause-minority\"\nfault = \"pause-node\"\ntarget = \"minority\"\n\
         interval_ms = 300\nduration_ms = 300\n",
    )
    .unwrap();
    let r = run_local(
        "verdict-nemesis-error",
        tmp.path(),
        38500,
        &[
            "--system",
            "redis",
            "--workload",
            "lock",
            "--nemesis",
            nemesis.to_str().unwrap(),
            "--time-limit",
            "1.5",
            "--ttl-ms",
            "1000",
        ],
    );
    assert_unknown_everywhere(&r, "the nemesis failed: nemesis pause-node: a cluster of 1");
    assert!(r.stdout.contains("the nemesis applied none of its faults"));
    let grants = r.results()["run"]["covers"].to_string();
    assert!(
        !grants.contains(" 0 grants"),
        "the workers did work: {grants}"
    );
}
