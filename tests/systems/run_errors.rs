//! `lockjaw run` refuses what cannot work, before starting anything, with
//! exit code 3 and a message that names the flag, file, line or field.

use crate::run_util::lockjaw;

fn refused(args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = lockjaw()
        .arg("run")
        .args(args)
        .arg("--histories")
        .arg(tmp.path())
        .arg("--no-progress")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
    // Nothing was started: no run directory was made.
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "{args:?}"
    );
    err
}

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
