//! The scripts of [`super::script`], run here with `sh -c` (this
//! machine's network namespace) against processes the tests start and
//! stop themselves, and read back through [`super::parse`].

use super::*;
use std::process::{Child, Command};

fn spec(find: Find) -> AttachSpec {
    AttachSpec {
        find,
        start: "true".into(),
        client: None,
        role: AttachRole::Server,
        log: LogSource::None,
        systemctl: "systemctl".into(),
        journalctl: "journalctl".into(),
        line: 1,
    }
}

/// `sh -c SCRIPT`: (exit code, stdout, stderr).
fn sh(script: &str) -> (i32, String, String) {
    let o = Command::new("sh").arg("-c").arg(script).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A `sleep` of this test's own, killed and reaped on drop.
struct Sleeper(Child);

impl Sleeper {
    fn new(secs: &str) -> Sleeper {
        Sleeper(Command::new("sleep").arg(secs).spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn state(&self) -> char {
        crate::process::proc_stat(self.pid() as i32).unwrap().state
    }
    /// Whether it is (`stopped`) or is not in state T within 5 s (a
    /// signal is delivered when the process next runs).
    fn stopped(&self, stopped: bool) -> bool {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(5) {
            if (self.state() == 'T') == stopped {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleep_exe() -> String {
    std::fs::canonicalize(
        String::from_utf8(
            Command::new("sh")
                .args(["-c", "command -v sleep"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    )
    .unwrap()
    .to_string_lossy()
    .into_owned()
}

/// An argument no other process carries.
fn unique(n: u32) -> String {
    format!("{}", 900_000 + (std::process::id() % 50_000) * 10 + n)
}

#[test]
fn exe_and_arg_find_the_one_process_and_refuse_two() {
    let arg = unique(1);
    let one = Sleeper::new(&arg);
    let _other = Sleeper::new(&unique(2));
    let a = spec(Find::Exe {
        exe: sleep_exe(),
        arg: arg.clone(),
    });
    let (code, out, err) = sh(&script::discover(&a));
    assert_eq!(code, 0, "{err}");
    let f = parse::found(&out, false).unwrap();
    assert_eq!(f.procs.len(), 1, "{out}");
    assert_eq!(f.procs[0].pid, one.pid());
    let id = crate::process::ProcId::of(one.pid() as i32).unwrap();
    assert_eq!(f.procs[0].start, id.start_time);
    assert!(!f.procs[0].cgroup.is_empty());
    let (_, out, _) = sh(&script::running(&a));
    assert_eq!(parse::running(&out).unwrap(), Running::Yes);

    let two = Sleeper::new(&arg);
    let (code, _, err) = sh(&script::discover(&a));
    assert_eq!(code, 2, "{err}");
    for p in [one.pid(), two.pid()] {
        assert!(err.contains(&format!("pid {p}: sleep {arg}")), "{err}");
    }
    let (_, out, _) = sh(&script::running(&a));
    assert!(parse::running(&out).is_err(), "{out}");
    drop((one, two));

    let (code, _, err) = sh(&script::discover(&a));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no process runs"), "{err}");
    let (_, out, _) = sh(&script::running(&a));
    assert!(
        matches!(parse::running(&out).unwrap(), Running::No(w) if w.contains("no process runs"))
    );
    // Whole arguments only: a prefix of the argument is not it.
    let _s = Sleeper::new(&format!("{arg}0"));
    assert_eq!(sh(&script::discover(&a)).0, 1);
}

#[test]
fn a_pidfile_names_its_process_and_its_exe_is_checked() {
    let s = Sleeper::new(&unique(3));
    let d = tempfile::tempdir().unwrap();
    let pf = d.path().join("p.pid");
    std::fs::write(&pf, format!("{}\n", s.pid())).unwrap();
    let pidfile = pf.to_string_lossy().into_owned();
    let a = spec(Find::Pidfile {
        pidfile: pidfile.clone(),
        exe: Some(sleep_exe()),
    });
    let (code, out, err) = sh(&script::discover(&a));
    assert_eq!(code, 0, "{err}");
    assert_eq!(parse::found(&out, false).unwrap().procs[0].pid, s.pid());
    let a = spec(Find::Pidfile {
        pidfile: pidfile.clone(),
        exe: Some("/bin/no-such".into()),
    });
    let (code, _, err) = sh(&script::discover(&a));
    assert_eq!(code, 1);
    assert!(err.contains("not /bin/no-such"), "{err}");
    // A pid without a newline after it is read all the same.
    std::fs::write(&pf, format!("{}", s.pid())).unwrap();
    assert_eq!(sh(&script::discover(&a)).0, 1, "still the wrong exe");
    let a = spec(Find::Pidfile {
        pidfile: pidfile.clone(),
        exe: None,
    });
    let (code, out, err) = sh(&script::discover(&a));
    assert_eq!(code, 0, "{err}");
    assert_eq!(parse::found(&out, false).unwrap().procs[0].pid, s.pid());
    std::fs::write(&pf, "").unwrap();
    let (code, _, err) = sh(&script::discover(&a));
    assert_eq!(code, 1);
    assert!(err.contains("no pid in the pidfile"), "{err}");
    std::fs::write(&pf, "x1\n").unwrap();
    let (code, _, err) = sh(&script::discover(&spec(Find::Pidfile {
        pidfile,
        exe: None,
    })));
    assert_eq!(code, 1);
    assert!(err.contains("not a pid"), "{err}");
}

#[test]
fn a_signal_reaches_only_a_process_with_its_stamp() {
    let s = Sleeper::new(&unique(4));
    let a = spec(Find::Exe {
        exe: sleep_exe(),
        arg: unique(4),
    });
    let (_, out, _) = sh(&script::discover(&a));
    let procs = parse::found(&out, false).unwrap().procs;
    let mut wrong = procs[0].clone();
    wrong.start += 1;
    let (_, out, _) = sh(&script::signal(std::slice::from_ref(&wrong), Signal::Stop));
    let r = parse::signalled(&out, std::slice::from_ref(&wrong)).unwrap();
    assert_eq!((r.sent.len(), r.gone.len()), (0, 1));
    assert_ne!(s.state(), 'T');
    let (_, out, _) = sh(&script::signal(&procs, Signal::Stop));
    assert_eq!(parse::signalled(&out, &procs).unwrap().sent, procs);
    assert!(s.stopped(true));
    let (_, out, _) = sh(&script::signal(&procs, Signal::Cont));
    assert_eq!(parse::signalled(&out, &procs).unwrap().sent, procs);
    assert!(s.stopped(false));
    // Kill: SIGKILL the stamped process and wait until it is gone (a
    // zombie counts as gone).
    let (code, _, err) = sh(&script::kill(&a, &procs));
    assert_eq!(code, 0, "{err}");
    let st = crate::process::proc_stat(s.pid() as i32).map(|p| p.state);
    assert!(matches!(st, None | Some('Z')), "{st:?}");
}

#[test]
fn start_shows_the_output_of_a_failing_command() {
    let mut a = spec(Find::Unit {
        unit: "x.service".into(),
    });
    a.start = "echo starting; echo broken >&2; exit 3".into();
    let (code, _, err) = sh(&script::start(&a));
    assert_eq!(code, 1);
    assert!(
        err.contains("exited with 3") && err.contains("starting") && err.contains("broken"),
        "{err}"
    );
    a.start = "true".into();
    assert_eq!(sh(&script::start(&a)).0, 0);
    // Told as one sentence, with what it printed.
    a.start = "echo no space left >&2; echo on /srv; exit 1".into();
    let (_, _, err) = sh(&script::start(&a));
    let e = RemoteError {
        host: "e1 (root@10.0.0.1)".into(),
        msg: format!("`PATH=...` exited with 1: {err}"),
    };
    assert_eq!(
        start_failed(e, &a.start).to_string(),
        "host e1 (root@10.0.0.1): its start command `echo no space left >&2; echo on /srv; exit 1` exited with 1, printing: no space left / on /srv"
    );
}

#[test]
fn the_scripts_say_what_they_run() {
    let mut a = spec(Find::Unit {
        unit: "etcd.service".into(),
    });
    a.systemctl = "/opt/stub/systemctl".into();
    a.log = LogSource::Journal {
        unit: "etcd.service".into(),
    };
    let d = script::discover(&a);
    assert!(d.contains("/opt/stub/systemctl show -p MainPID -p ControlGroup -p Restart -p RestartUSec -p WatchdogUSec etcd.service"), "{d}");
    assert!(d.contains("/proc/$$/ns/net"), "{d}");
    let k = script::kill(
        &a,
        &[ProcStamp {
            pid: 7,
            start: 9,
            cgroup: "0::/a b".into(),
        }],
    );
    assert!(
        k.contains("/opt/stub/systemctl kill -s KILL etcd.service"),
        "{k}"
    );
    assert!(k.contains("lj_left 7 9 '0::/a b'"), "{k}");
    let s = script::signal(
        &[ProcStamp {
            pid: 7,
            start: 9,
            cgroup: "0::/x".into(),
        }],
        Signal::Cont,
    );
    assert!(
        s.contains("kill -s CONT") && s.contains("lj_sig 7 9 0::/x"),
        "{s}"
    );
    let l = script::log_since(
        &a,
        &LogMark {
            unix: 1700000000,
            bytes: None,
        },
    )
    .unwrap();
    assert!(
        l.contains("journalctl -u etcd.service --since @1700000000 --no-pager"),
        "{l}"
    );
    assert_eq!(script::log_mark(&a).unwrap(), "date +%s\n");
    a.start = "/opt/stub/systemctl start etcd.service".into();
    assert!(script::start(&a)
        .contains("timeout 60 setsid sh -c '/opt/stub/systemctl start etcd.service'"));
    a.log = LogSource::None;
    assert!(script::log_since(&a, &LogMark::default()).is_none());
    assert!(tools(&a).contains(&"/opt/stub/systemctl".to_string()));
}

#[test]
fn a_log_file_is_read_from_its_mark() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("x.log");
    std::fs::write(&f, "before\n").unwrap();
    let mut a = spec(Find::Pidfile {
        pidfile: "/p".into(),
        exe: None,
    });
    a.log = LogSource::File {
        path: f.to_string_lossy().into_owned(),
    };
    let (_, out, _) = sh(&script::log_mark(&a).unwrap());
    let m = parse::mark(&out).unwrap();
    assert_eq!(m.bytes, Some(7));
    std::fs::write(&f, "before\nduring\n").unwrap();
    assert_eq!(sh(&script::log_since(&a, &m).unwrap()).1, "during\n");
    std::fs::write(&f, "new\n").unwrap();
    assert_eq!(
        sh(&script::log_since(&a, &m).unwrap()).1,
        "new\n",
        "rotated: all of it"
    );
}

#[test]
fn unit_settings_and_time_spans_are_read() {
    let out = "prop Restart=always\nprop RestartUSec=1min 30s\nprop WatchdogUSec=0\n12 34 0::/system.slice/etcd.service\n13 35 0::/system.slice/etcd.service\n";
    let f = parse::found(out, true).unwrap();
    assert_eq!(f.procs.iter().map(|p| p.pid).collect::<Vec<_>>(), [12, 13]);
    assert_eq!(
        f.unit,
        Some(UnitProps {
            restart: "always".into(),
            restart_ms: 90_000,
            watchdog_ms: 0
        })
    );
    for (v, ms) in [
        ("100ms", 100),
        ("2.5s", 2500),
        ("500000", 500),
        ("infinity", u64::MAX),
        ("1h", 3_600_000),
    ] {
        assert_eq!(parse::timespan_ms(v).unwrap(), ms, "{v}");
    }
    assert!(parse::timespan_ms("5 parsecs").is_err());
    assert!(parse::found("", false).is_err());
    assert!(parse::found("x y\n", false).is_err());
    assert_eq!(
        parse::start_program("A=1 /usr/bin/x start").as_deref(),
        Some("/usr/bin/x")
    );
}

#[test]
fn a_failed_script_is_told_as_what_it_was_doing() {
    let e = RemoteError {
        host: "e1 (root@10.0.0.1)".into(),
        msg: "`PATH=\"$PATH:/usr/sbin:/sbin\"…` exited with 2: 2 processes run /x: pid 1: a\n"
            .into(),
    };
    assert_eq!(
        said(e, "finding the server").to_string(),
        "host e1 (root@10.0.0.1): finding the server (exit 2): 2 processes run /x: pid 1: a"
    );
    let e = RemoteError {
        host: "h".into(),
        msg: "cannot connect".into(),
    };
    assert_eq!(said(e, "x").msg, "cannot connect");
}

#[test]
fn what_is_never_a_server_is_refused_naming_why() {
    let d = tempfile::tempdir().unwrap();
    let pf = d.path().join("p.pid");
    let a = spec(Find::Pidfile {
        pidfile: pf.to_string_lossy().into_owned(),
        exe: None,
    });
    // PID 1, and this test (an ancestor of the script's shell).
    for (pid, why) in [
        (1, "is PID 1"),
        (
            std::process::id(),
            "SSH session's own shell or one of its ancestors",
        ),
    ] {
        std::fs::write(&pf, format!("{pid}\n")).unwrap();
        let (code, out, err) = sh(&script::discover(&a));
        assert_eq!(code, 2, "{pid}: {out}{err}");
        assert!(
            err.contains(why) && err.contains("never taken for a server"),
            "{err}"
        );
        assert!(out.is_empty(), "nothing found: {out}");
    }
}

#[test]
fn the_listening_socket_and_who_holds_it() {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    // A listener of its own on the test block's 42510 (docs/testing.md).
    let code = "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('127.0.0.1',42510))\ns.listen()\nprint('up',flush=True)\ntime.sleep(30)\n";
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", code])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let pid = child.id();
    let d = tempfile::tempdir().unwrap();
    let pf = d.path().join("p.pid");
    std::fs::write(&pf, format!("{pid}\n")).unwrap();
    let a = spec(Find::Pidfile {
        pidfile: pf.to_string_lossy().into_owned(),
        exe: None,
    });
    let at = |port| Listen::of(&format!("127.0.0.1:{port}")).unwrap();
    let (code, out, err) = sh(&script::discover_at(&a, Some(&at(42510))));
    let f = parse::found(&out, false).unwrap();
    let (_, again, _) = sh(&script::listening(&f.procs, &at(42510)));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 0, "{err}");
    let lo = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 42510);
    assert_eq!(f.facts.listening, Listening::Held { pid, at: lo }, "{out}");
    assert_eq!(
        parse::listening(&again),
        Listening::Held { pid, at: lo },
        "{again}"
    );
    let (_, gone, _) = sh(&script::listening(&f.procs, &at(42510)));
    assert_eq!(parse::listening(&gone), Listening::Gone, "{gone}");
    assert!(f.facts.same_pid_ns && f.facts.boot.is_some(), "{out}");
    assert_eq!(f.facts.cmdline[0], "/usr/bin/python3", "{out}");
    // Another port: nothing listens there.
    let s = Sleeper::new(&unique(9));
    std::fs::write(&pf, format!("{}\n", s.pid())).unwrap();
    let (_, out, _) = sh(&script::discover_at(&a, Some(&at(42511))));
    assert_eq!(
        parse::found(&out, false).unwrap().facts.listening,
        Listening::Nothing
    );
}

#[test]
fn proc_net_addresses_read_back() {
    let l = Listen::of("10.0.0.3:6379").unwrap();
    let w = l.want();
    assert!(w.contains(&"0300000A:18EB".to_string()), "{w:?}");
    assert!(w.contains(&"00000000:18EB".to_string()), "{w:?}");
    assert!(w.contains(&format!("{}:18EB", "0".repeat(32))), "{w:?}");
    assert!(
        w.contains(&"0000000000000000FFFF00000300000A:18EB".to_string()),
        "{w:?}"
    );
    assert_eq!(
        from_proc_net("0300000A:18EB").unwrap().to_string(),
        "10.0.0.3:6379"
    );
    assert_eq!(
        from_proc_net("0000000000000000FFFF00000300000A:18EB")
            .unwrap()
            .to_string(),
        "10.0.0.3:6379"
    );
    assert_eq!(
        from_proc_net("00000000000000000000000000000000:0929")
            .unwrap()
            .to_string(),
        "[::]:2345"
    );
}
