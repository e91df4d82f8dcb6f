//! What lockjaw says when an attached server cannot be used as asked: a
//! Redis that wants a password and is given none (with `--endpoints`:
//! the same probe as attached servers), and a start command that fails
//! (its error told once, with what the command printed; `make
//! test-long`).

use crate::attach_util::{BedCluster, Control};
use crate::run_util::{lockjaw, run};

/// A redis-server of this test's own, killed and reaped on drop.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_redis_that_wants_a_password_says_so_and_hints_at_auth() {
    let t = tempfile::tempdir().unwrap();
    // 42520: this test's port (docs/testing.md, Ports).
    let _s = Server(
        std::process::Command::new("redis-server")
            .args(["--port", "42520", "--bind", "127.0.0.1", "--save", ""])
            .args(["--requirepass", "not-given", "--dir"])
            .arg(t.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect("127.0.0.1:42520").is_err() {
        assert!(std::time::Instant::now() < until, "redis-server up");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = run(
        "noauth",
        &t.path().join("run"),
        &[
            "--system",
            "redis",
            "--endpoints",
            "127.0.0.1:42520",
            "--time-limit",
            "2",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("127.0.0.1:42520 needs a password (NOAUTH Authentication required.)")
            && r.stderr
                .contains("(hint: give the credentials with --auth FILE (docs/auth.md))"),
        "{}",
        r.stderr
    );
}

#[tokio::test]
#[ignore = "make test-long: a failing start command after kill-node on an attached etcd, told once; heal --hosts with a corrected file, ~30 s"]
async fn a_failing_start_command_is_told_once_with_what_it_printed() {
    let c = BedCluster::etcd(Control::Pidfile).await;
    let t = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&c.hosts_file).unwrap();
    let mut bad = String::new();
    for l in text.lines() {
        if l.starts_with("start = ") {
            bad.push_str("start = \"echo no space left on /srv/etcd >&2; exit 1\"\n");
        } else {
            bad.push_str(l);
            bad.push('\n');
        }
    }
    let hosts = t.path().join("bad-start.toml");
    std::fs::write(&hosts, bad).unwrap();
    let r = run(
        "bad-start",
        &t.path().join("run"),
        &[
            "--system",
            "etcd",
            "--hosts",
            hosts.to_str().unwrap(),
            "--attach",
            "--nemesis",
            "kill-node",
            "--ttl-ms",
            "2000",
            "--time-limit",
            "5",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    let said = "its start command `echo no space left on /srv/etcd >&2; exit 1` exited with 1, printing: no space left on /srv/etcd";
    assert_eq!(r.stderr.matches(said).count(), 1, "told once: {}", r.stderr);
    assert_eq!(r.stderr.matches("printing:").count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("as told above"), "{}", r.stderr);
    // One member down, not two: the next kill counts it.
    let alive = |pid: u32| lockjaw::process::ProcId::of(pid as i32).is_some_and(|p| p.is_alive());
    let down: Vec<String> = c
        .pids()
        .into_iter()
        .filter(|(_, p)| !alive(*p))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(down.len(), 1, "{down:?}: {}", r.stderr);
    // heal: the run's copy still has the failing command; a corrected
    // file given with --hosts starts the member.
    let heal = |extra: &[&std::ffi::OsStr]| {
        let mut cmd = lockjaw();
        cmd.arg("heal").args(extra).arg(&r.dir);
        cmd.output().unwrap()
    };
    let out = heal(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(said)
            && err.contains(&format!(
                "the start command of {}",
                r.dir.join("hosts.toml").display()
            ))
            && err.contains("lockjaw heal --hosts FILE"),
        "{err}"
    );
    let out = heal(&["--hosts".as_ref(), c.hosts_file.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("node {} was down", down[0])) && err.contains("(given with --hosts)"),
        "{err}"
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while c.all_answer().await.is_err() {
        assert!(
            std::time::Instant::now() < until,
            "every member answers after heal"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // Bring the killed member back by hand (its real start script).
    for n in c.nodes() {
        c.ssh_ok(n.host, &c.start_line(n));
    }
    c.down().await;
}
