//! Issue 29, defect 2: the adapter `lockjaw run` starts before the run to
//! read its `hello_ok` is contained like the workers' adapters: one that
//! leaves a `setsid` double-forked daemon ignoring SIGTERM behind makes
//! the run refuse to start (exit 3, naming the adapter), and the daemon
//! does not survive. No ports: the run stops before any server starts.

use crate::run_util::*;
use std::time::Duration;

/// Prints `hello_ok` after double-forking a daemon (`setsid`, SIGTERM
/// ignored) whose argv carries a marker. The first adapter started (the
/// handshake's) puts its daemon's pid in `$PIDFILE`.
const ESCAPEE: &str = r#"#!/bin/bash
read -r hello
mine="$PIDFILE.$$"
( setsid bash -c 'trap "" TERM; echo $$ > "$0"; exec -a lockjaw-escapee-29 sleep 300' "$mine" </dev/null >/dev/null 2>&1 & )
while [ ! -s "$mine" ]; do sleep 0.01; done
set -C; cat "$mine" > "$PIDFILE" 2>/dev/null; set +C
echo '{"type": "hello_ok", "library": "escapee", "version": "0", "fence": false, "lease": "acquire", "renewals": "none"}'
cat > /dev/null
"#;

/// The daemon's pid if it is still the daemon (its argv has the marker).
fn daemon_alive(pidfile: &std::path::Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()?;
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let zombie = state
        .rsplit(')')
        .next()
        .is_some_and(|s| s.trim_start().starts_with('Z'));
    (String::from_utf8_lossy(&cmd).contains("lockjaw-escapee-29") && !zombie).then_some(pid)
}

#[test]
fn a_handshake_adapter_that_leaves_a_daemon_stops_the_run_and_the_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let adapter = tmp.path().join("escapee");
    std::fs::write(&adapter, ESCAPEE).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&adapter, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pidfile = tmp.path().join("daemon.pid");
    let out = lockjaw()
        .args([
            "run",
            "--system",
            "redis",
            "--workload",
            "lock",
            "--no-progress",
        ])
        .args(["--time-limit", "1", "--client"])
        .arg(&adapter)
        .arg("--out")
        .arg(tmp.path().join("run"))
        .env("PIDFILE", &pidfile)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let survived = {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut alive = daemon_alive(&pidfile);
        while alive.is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            alive = daemon_alive(&pidfile);
        }
        alive
    };
    if let Some(pid) = survived {
        // Only the daemon this test's adapter started (marker checked).
        // SAFETY: a plain signal to a process identified above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(pidfile.exists(), "the adapter ran: {err}");
    assert_eq!(survived, None, "the adapter's daemon outlived the run");
    assert_eq!(out.status.code(), Some(3), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: adapter ")
            && first.contains(adapter.to_str().unwrap())
            && first.contains("lockjaw-escapee-29")
            && first.contains("after its handshake"),
        "the error names the adapter and what it left: {err}"
    );
}
