//! `lockjaw run` refuses what cannot work, before starting anything, with
//! exit code 3 and a message that names the flag, file, line or field; a
//! Toxiproxy or endpoint that does not answer is named, with only that
//! error.

use crate::run_util::{lockjaw, refused};

#[test]
fn fencing_on_with_redlock_is_refused() {
    let e = refused(&["--system", "redlock", "--fencing", "on"]);
    assert!(e.contains("--fencing on") && e.contains("hint"), "{e}");
}

#[test]
fn a_holder_fault_on_the_register_workload_is_refused() {
    let e = refused(&[
        "--system",
        "etcd",
        "--workload",
        "register",
        "--nemesis",
        "pause-holder",
    ]);
    assert!(
        e.contains("not supported") && e.contains("no holder"),
        "{e}"
    );
}

#[test]
fn delay_storage_needs_a_workload_that_writes() {
    let e = refused(&[
        "--system",
        "redis",
        "--workload",
        "lock",
        "--nemesis",
        "delay-storage",
    ]);
    assert!(e.contains("not supported"), "{e}");
}

#[test]
fn a_bad_workload_file_names_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("w.toml");
    std::fs::write(&f, "name = \"w\"\nkind = \"lock\"\nttl_ms = \"soon\"\n").unwrap();
    let e = refused(&["--system", "redis", "--workload", f.to_str().unwrap()]);
    assert!(e.contains("w.toml:3: field `ttl_ms`"), "{e}");
}

#[test]
fn a_bad_nemesis_file_names_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("n.toml");
    std::fs::write(&f, "name = \"n\"\nfault = \"latency\"\nlatency_ms = 0\n").unwrap();
    let e = refused(&["--system", "redis", "--nemesis", f.to_str().unwrap()]);
    assert!(e.contains("n.toml:3: field `latency_ms`"), "{e}");
}

/// Trust on the operator's hosts, part 8: a strike-command file whose
/// strike can match no request is refused when read (before, the run
/// went on to "unknown" or "valid: 0 of 1 faults landed").
#[test]
fn a_strike_that_can_never_match_is_refused_naming_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, command) in ["", "|", "SET NX"].iter().enumerate() {
        let f = tmp.path().join(format!("strike-{i}.toml"));
        let text = format!(
            "name = \"s\"\nfault = \"strike-command\"\ninterval_ms = 300\nstrike = {{ command = \"{command}\", action = \"hold\" }}\n"
        );
        std::fs::write(&f, text).unwrap();
        let e = refused(&["--system", "redis", "--nemesis", f.to_str().unwrap()]);
        let at = format!("strike-{i}.toml:4: field `strike.command`: ");
        assert!(e.contains(&at) && e.contains("hint"), "{command:?}: {e}");
    }
}

#[test]
fn an_unknown_nemesis_lists_the_known_ones() {
    let e = refused(&["--system", "redis", "--nemesis", "meteor"]);
    assert!(e.contains("pause-holder") && e.contains("hint"), "{e}");
}

#[test]
fn a_bad_flag_value_is_named_as_the_flag() {
    let e = refused(&["--system", "redis", "--concurrency", "0"]);
    assert!(e.contains("--concurrency"), "{e}");
}

#[test]
fn bad_endpoints_are_refused() {
    let e = refused(&["--system", "redis", "--endpoints", "localhost"]);
    assert!(e.contains("--endpoints") && e.contains("host:port"), "{e}");
}

#[test]
fn a_sentinel_master_name_needs_sentinel_endpoints() {
    let e = refused(&["--system", "redis", "--sentinel-master", "mymaster"]);
    assert!(
        e.contains("--sentinel-master") && e.contains("sentinel"),
        "{e}"
    );
    let e = refused(&["--system", "sentinel", "--sentinel-master", "mymaster"]);
    assert!(e.contains("--endpoints"), "{e}");
}

#[test]
fn an_unknown_client_cas_without_a_storage_write_and_hosts_are_refused() {
    let e = refused(&["--system", "redis", "--client", "redis-py"]);
    assert!(
        e.contains("--client redis-py: no adapter found (looked for clients/redis-py/adapter")
            && e.contains("hint"),
        "{e}"
    );
    let e = refused(&["--system", "cas", "--workload", "lock"]);
    assert!(
        e.contains("the lock workload on --system cas: cas takes no lock") && e.contains("hint"),
        "{e}"
    );
    let e = refused(&["--system", "cas", "--nemesis", "kill-node"]);
    assert!(
        e.contains("kill-node") && e.contains("cas takes no lock"),
        "{e}"
    );
    let e = refused(&["--system", "redis", "--hosts", "no-such-hosts.toml"]);
    assert!(
        e.contains("--hosts no-such-hosts.toml") && e.contains("cannot read the hosts file"),
        "{e}"
    );
    let e = refused(&["--system", "sentinel", "--hosts", "no-such-hosts.toml"]);
    assert!(
        e.contains("--system sentinel --hosts") && e.contains("hint"),
        "{e}"
    );
}

#[test]
fn zero_nodes_are_refused_before_anything_starts() {
    let e = refused(&["--system", "redis", "--nodes", "0"]);
    assert!(e.contains("--nodes 0") && e.contains("hint"), "{e}");
    assert!(!e.contains("warning"), "only the real error: {e}");
}

/// Issue 29: `duration_leases = 1e308` panicked the nemesis task and the
/// run said "valid"; `--nodes 1000` started a thousand servers; `--base-port
/// 0` was taken. All are refused before anything starts, naming the place.
#[test]
fn out_of_range_numbers_are_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("n.toml");
    std::fs::write(
        &f,
        "name = \"n\"\nfault = \"pause-holder\"\nduration_leases = 1e308\n",
    )
    .unwrap();
    let e = refused(&["--system", "redis", "--nemesis", f.to_str().unwrap()]);
    assert!(
        e.contains("n.toml:3: field `duration_leases`: 1e308 leases is out of range")
            && e.contains("hint"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    let e = refused(&["--system", "redis", "--nodes", "1000"]);
    assert!(e.contains("--nodes 1000") && e.contains("1 to 15"), "{e}");
    let e = refused(&["--system", "redis", "--base-port", "0"]);
    assert!(e.contains("--base-port 0") && e.contains("hint"), "{e}");
    let hosts = tmp.path().join("hosts.toml").display().to_string();
    let m = [
        "--system",
        "etcd",
        "--hosts",
        &hosts,
        "--dead-man-margin-ms",
    ];
    let e = refused(&[&m[..], &["5"]].concat());
    assert!(
        e.contains("--dead-man-margin-ms 5: the margin is 1000 ms") && e.contains("hint"),
        "{e}"
    );
}

/// A loopback port nothing listens on (bound, then let go).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `lockjaw run ARGS` that fails after making its run directory: its
/// stderr, and how long it took.
fn failed_run(args: &[&str]) -> (String, std::time::Duration) {
    let tmp = tempfile::tempdir().unwrap();
    let t = std::time::Instant::now();
    let out = lockjaw()
        .arg("run")
        .args(args)
        .args(["--time-limit", "5", "--no-progress", "--out"])
        .arg(tmp.path().join("run"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
    (err, t.elapsed())
}

#[test]
fn an_unreachable_toxiproxy_gives_only_the_real_error() {
    let url = format!("http://127.0.0.1:{}", dead_port());
    let (e, _) = failed_run(&["--system", "redis", "--toxiproxy", &url]);
    assert!(
        e.contains(&format!("cannot reach Toxiproxy at {url}")),
        "{e}"
    );
    assert!(!e.contains("warning"), "only the real error: {e}");
}

#[test]
fn a_dead_endpoint_is_named_within_the_op_timeout() {
    let ep = format!("127.0.0.1:{}", dead_port());
    let (e, took) = failed_run(&["--system", "redis", "--endpoints", &ep]);
    assert!(
        e.contains(&format!("--endpoints: {ep} does not answer")),
        "{e}"
    );
    assert!(!e.contains("warning"), "only the real error: {e}");
    // The op timeout is 2 s; the run gives up before any worker starts.
    assert!(took.as_secs_f64() < 5.0, "took {took:?}: {e}");
}
