//! `lockjaw::remote` against a real sshd on loopback: one `/usr/sbin/sshd`
//! per test on 127.0.0.1:37600–37619, with a host key and a client key
//! made by `ssh-keygen` in a temporary directory, reached through a hosts
//! file as a user would write it. Commands, files, processes by tag,
//! iptables rules (of this machine: the "host" is loopback) and heal after
//! a lockjaw that vanished without draining its undo log.

use lockjaw::process::Signal;
use lockjaw::remote::{self, Host, HostSpec, HostsFile, RemoteChain, RemoteLaunch, RemoteRule};
use lockjaw::undo::{RemoteEffect, Undo, UndoLog, UNDO_FILE};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A real sshd on 127.0.0.1:`port`, killed (its own PID) when dropped.
struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (package openssh-client)");
    assert!(st.success(), "ssh-keygen failed");
}

impl Sshd {
    fn start(port: u16) -> Sshd {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("host_key"));
        keygen(&d.join("id"));
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).unwrap();
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        let mut kh = host_pub
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        kh.insert_str(0, &format!("[127.0.0.1]:{port} "));
        std::fs::write(d.join("known_hosts"), kh + "\n").unwrap();
        let cfg = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
             StrictModes no\nUsePAM no\nPidFile none\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nMaxSessions 50\nMaxStartups 50\n\
             SetEnv SHLVL=1\n",
            d.join("host_key").display(),
            d.join("authorized_keys").display()
        );
        std::fs::write(d.join("sshd_config"), cfg).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .arg("-D")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .arg("-E")
            .arg(d.join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .expect("/usr/sbin/sshd (package openssh-server)");
        let sshd = Sshd { child, dir, port };
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "sshd did not listen on {port} within 5 s: {}",
                sshd.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        sshd
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// A hosts file for this sshd, as `lockjaw testbed up` writes one.
    fn hosts(&self) -> HostSpec {
        let p = self.dir.path().join("hosts.toml");
        std::fs::write(
            &p,
            format!(
                "[defaults]\nidentity_file = \"id\"\nknown_hosts = \"known_hosts\"\ndata_dir = \"{}\"\n\n\
                 [[node]]\nname = \"h1\"\nhost = \"127.0.0.1\"\nssh_port = {}\n",
                self.dir.path().join("data").display(),
                self.port
            ),
        )
        .unwrap();
        let f = HostsFile::read(&p).unwrap();
        f.nodes[0].clone()
    }

    async fn connect(&self) -> Host {
        let h = self.hosts();
        match Host::connect(&h.name, &h.target, &remote::control_root()).await {
            Ok(h) => h,
            Err(e) => panic!("{e}\nsshd log:\n{}", self.log()),
        }
    }
}

/// Whether an ssh ControlMaster answers on `socket`.
fn master_answers(socket: &Path) -> bool {
    Command::new("ssh")
        .arg("-S")
        .arg(socket)
        .args(["-O", "check", "x"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Whether a local process's command line names `socket` (the master).
fn master_process(socket: &Path) -> bool {
    let s = socket.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(&s))
            .unwrap_or(false)
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn sleeper(tag: &str, dir: &Path) -> RemoteLaunch {
    RemoteLaunch {
        tag: tag.into(),
        program: "sleep".into(),
        args: vec!["300".into()],
        env: vec![("LOCKJAW_NOTE".into(), "a b'c".into())],
        log: dir.join("logs/sleep.log").display().to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_host_runs_commands_files_and_tagged_processes() {
    let sshd = Sshd::start(37600);
    let h = sshd.connect().await;
    let socket = h.control_socket();
    assert!(
        socket.starts_with(remote::control_root()),
        "{}",
        socket.display()
    );
    assert!(master_answers(&socket));
    assert_eq!(h.sh("echo hi; echo there").await.unwrap(), "hi\nthere\n");
    let e = h.sh("echo oops >&2; exit 3").await.unwrap_err().to_string();
    assert!(
        e.starts_with("host h1 (127.0.0.1:37600): ") && e.contains("exited with 3: oops"),
        "{e}"
    );

    let d = sshd.dir.path();
    let f = d.join("deep/er/file.txt").display().to_string();
    h.write_file(&f, "one 'two' $three\n").await.unwrap();
    assert_eq!(h.read_file(&f).await.unwrap(), "one 'two' $three\n");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);

    // Processes by tag.
    let tag = "lockjaw-rt1-h1";
    let pid = remote::start(&h, &sleeper(tag, d)).await.unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        environ.contains("LOCKJAW_TAG=lockjaw-rt1-h1\0"),
        "pid {pid}: {environ}"
    );
    assert!(environ.contains("LOCKJAW_NOTE=a b'c\0"), "{environ}");
    assert!(remote::alive(&h, tag).await.unwrap());
    let again = remote::start(&h, &sleeper(tag, d))
        .await
        .unwrap_err()
        .to_string();
    assert!(again.contains("still run"), "{again}");
    assert!(!remote::stopped(&h, tag).await.unwrap());
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        assert_eq!(remote::signal(&h, tag, Signal::Stop).await.unwrap(), 1);
        let paused = t0.elapsed();
        assert!(remote::stopped(&h, tag).await.unwrap());
        let t1 = Instant::now();
        assert_eq!(remote::signal(&h, tag, Signal::Cont).await.unwrap(), 1);
        rounds.push(paused + t1.elapsed());
        assert!(!remote::stopped(&h, tag).await.unwrap());
    }
    // Loose: a pause and a resume are two channels on the open master.
    assert!(
        median(rounds.clone()) < Duration::from_secs(1),
        "{rounds:?}"
    );
    remote::signal(&h, tag, Signal::Stop).await.unwrap();
    // A stopped process is continued, then terminated.
    remote::stop(&h, tag, Duration::from_secs(2)).await.unwrap();
    assert!(!remote::alive(&h, tag).await.unwrap());
    assert!(
        !Path::new(&format!("/proc/{pid}/environ")).exists()
            || !remote::alive(&h, tag).await.unwrap()
    );
    assert_eq!(remote::signal(&h, tag, Signal::Kill).await.unwrap(), 0);
    assert!(remote::signal(&h, "x; reboot", Signal::Kill).await.is_err());

    let missing = RemoteLaunch {
        program: "lockjaw-no-such-program".into(),
        ..sleeper("lockjaw-rt1-h2", d)
    };
    let e = remote::start(&h, &missing).await.unwrap_err().to_string();
    assert!(
        e.contains("lockjaw-no-such-program exited at once") && e.contains("No such file"),
        "{e}"
    );

    // Tools.
    let e = h
        .check_tools(
            &[
                "sh".into(),
                "lockjaw-no-such-program".into(),
                "/bin/lockjaw-nope".into(),
            ],
            true,
            Some("/nonexistent/libfaketime.so.1"),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lockjaw-no-such-program (not found in PATH)"),
        "{e}"
    );
    assert!(e.contains("/bin/lockjaw-nope (no such executable)"), "{e}");
    assert!(
        e.contains("/nonexistent/libfaketime.so.1 (no such library)"),
        "{e}"
    );
    assert!(!e.contains("sh (") && !e.contains("iptables"), "{e}");
    h.check_tools(&["sh".into()], true, None).await.unwrap();

    // Clock files.
    let clock = d.join("lockjaw-rt1/h1/faketime").display().to_string();
    assert_eq!(remote::set_clock(&h, &clock, "+30s").await.unwrap(), "+0");
    assert_eq!(remote::set_clock(&h, &clock, "-2m").await.unwrap(), "+30s");
    assert_eq!(std::fs::read_to_string(&clock).unwrap(), "-2m\n");
    assert!(remote::set_clock(&h, &clock, "30s").await.is_err());
    assert!(remote::set_clock(&h, &clock, "+1; rm -rf /").await.is_err());

    h.close().await;
    assert!(!master_answers(&socket), "the master outlived close");
    assert!(
        !master_process(&socket),
        "an ssh master process outlived close"
    );
}

#[tokio::test]
async fn an_unreachable_host_and_a_bad_hosts_file_are_named() {
    let target = remote::SshTarget {
        host: "127.0.0.1".into(),
        port: Some(37619),
        user: None,
        identity_file: None,
        known_hosts: None,
    };
    let t0 = Instant::now();
    let e = Host::connect("h9", &target, &remote::control_root())
        .await
        .err()
        .expect("nobody listens on 37619")
        .to_string();
    assert!(
        e.starts_with("host h9 (127.0.0.1:37619): cannot connect"),
        "{e}"
    );
    assert!(e.contains("Connection refused"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(6));
    let long = PathBuf::from(format!("/tmp/{}", "x".repeat(90)));
    let e = Host::connect("h9", &target, &long)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("over the 107") && e.contains("TMPDIR"), "{e}");

    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("hosts.toml");
    std::fs::write(
        &p,
        "[[node]]\nname = \"h2\"\nhost = \"box\"\naddress = \"x\"\n",
    )
    .unwrap();
    let e = HostsFile::read(&p).unwrap_err();
    assert_eq!(
        e,
        format!(
            "{}:4: node h2: field address: \"x\" is not an IP address",
            p.display()
        )
    );
}

#[tokio::test]
async fn remote_rules_are_inserted_and_deleted_and_others_refused() {
    let sshd = Sshd::start(37601);
    let h = sshd.connect().await;
    let rule = RemoteRule {
        chain: RemoteChain::Input,
        peer: "198.51.100.7".parse().unwrap(),
        comment: "lockjaw:rt3 partition-node h1".into(),
    };
    let listed = || {
        let out = Command::new("iptables")
            .args(["-w", "-S", "INPUT"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ours =
        |s: &str| s.contains("198.51.100.7/32") && s.contains("lockjaw:rt3 partition-node h1");
    remote::insert_rule(&h, &rule).await.unwrap();
    let s = listed();
    let present = ours(&s);
    remote::delete_rule(&h, &rule).await.unwrap();
    assert!(present, "{s}");
    assert!(!ours(&listed()));
    // Absent counts as deleted.
    remote::delete_rule(&h, &rule).await.unwrap();
    let other = RemoteRule {
        comment: "someone else's".into(),
        ..rule.clone()
    };
    assert!(other.check(Some("rt3")).is_err());
    assert!(rule
        .check(Some("rt4"))
        .unwrap_err()
        .contains("not this run's"));
    assert!(remote::insert_rule(&h, &other).await.is_err());
    h.close().await;
}

/// A lockjaw that vanished (no drain, no `ssh -O exit`) left a tagged
/// process and its ControlMaster: heal, as `lockjaw heal DIR` does,
/// reconnects, stops the process and ends the master.
#[test]
fn heal_stops_remote_processes_and_ends_the_master_a_killed_run_left() {
    let sshd = Sshd::start(37602);
    let run = tempfile::tempdir().unwrap();
    std::fs::write(run.path().join("run.json"), r#"{"run_id":"rt2"}"#).unwrap();
    let spec = sshd.hosts();
    let tag = "lockjaw-rt2-h1";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let socket = rt.block_on(async {
        let log = UndoLog::open(
            &run.path().join(UNDO_FILE),
            lockjaw::runner::heal::executor(),
        )
        .unwrap()
        .with_run_id("rt2");
        let h = sshd.connect().await;
        log.push(Undo::SshMaster {
            socket: h.control_socket(),
        })
        .unwrap();
        log.push(Undo::Remote {
            host: spec.name.clone(),
            target: spec.target.clone(),
            effect: RemoteEffect::Processes { tag: tag.into() },
        })
        .unwrap();
        remote::start(&h, &sleeper(tag, sshd.dir.path()))
            .await
            .unwrap();
        assert!(remote::alive(&h, tag).await.unwrap());
        let socket = h.control_socket();
        // As a SIGKILL would: no drain, no `ssh -O exit`.
        std::mem::forget(h);
        drop(log);
        socket
    });
    drop(rt);
    assert!(master_answers(&socket));
    let healed = lockjaw::runner::heal::heal_dir(run.path(), false, false).unwrap();
    assert!(healed.problems.is_empty(), "{:?}", healed.problems);
    assert!(
        healed.lines.iter().any(|l| l.contains("healed 2 effects")),
        "{:?}",
        healed.lines
    );
    assert!(!master_answers(&socket), "the master outlived heal");
    assert!(
        !master_process(&socket),
        "an ssh master process outlived heal"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = sshd.connect().await;
        assert!(
            !remote::alive(&h, tag).await.unwrap(),
            "the tagged process outlived heal"
        );
        h.close().await;
    });
    // Nothing stays pending.
    assert!(lockjaw::undo::read_pending(&run.path().join(UNDO_FILE))
        .unwrap()
        .is_empty());
}

/// Connect time and the pause+resume round trip over the loopback sshd,
/// medians of 20 (`make test-long`; printed for docs/remote.md).
#[tokio::test]
#[ignore]
async fn remote_timings() {
    let sshd = Sshd::start(37603);
    let mut connects = Vec::new();
    for _ in 0..20 {
        let t0 = Instant::now();
        let h = sshd.connect().await;
        connects.push(t0.elapsed());
        h.close().await;
    }
    let h = sshd.connect().await;
    let tag = "lockjaw-rt5-h1";
    remote::start(&h, &sleeper(tag, sshd.dir.path()))
        .await
        .unwrap();
    let mut rounds = Vec::new();
    for _ in 0..20 {
        let t0 = Instant::now();
        remote::signal(&h, tag, Signal::Stop).await.unwrap();
        remote::signal(&h, tag, Signal::Cont).await.unwrap();
        rounds.push(t0.elapsed());
    }
    remote::stop(&h, tag, Duration::from_secs(1)).await.unwrap();
    h.close().await;
    let (c, r) = (median(connects), median(rounds));
    println!("connect median {c:?}, pause+resume median {r:?}");
    // The budget is 50 ms on an idle machine; loosely here, as the
    // machine may be busy.
    assert!(r < Duration::from_millis(200), "pause+resume median {r:?}");
}
