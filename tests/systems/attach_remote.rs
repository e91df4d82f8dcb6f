//! The remote layer of attached servers (`lockjaw::remote::attach`) on a
//! 2-host test bed, against harmless long-running `sleep` processes the
//! test starts by plain SSH as the "servers" (a start script and a
//! pidfile each, standing in for a service manager), and the stub
//! `systemctl`/`journalctl` of tests/fixtures/attach/ for the unit mode.
//! Discovery finds exactly the described process: not a decoy with
//! another node's arguments on the same host, nor one with the same
//! arguments on the other host (another network namespace in the same
//! process table); two matches are refused naming both. Signals reach
//! only a process that still carries its stamp; kill and start give a
//! new process with a new stamp; `lockjaw heal` of a run directory as a
//! killed run leaves it continues the paused server and starts the
//! killed ones from the run's copy of the hosts file.
//! Every process signalled by hand here is one the test started (its
//! pid and start time recorded); the bed takes down whatever is left in
//! its namespaces.

use crate::remote_hosts::up;
use crate::run_util::lockjaw;
use lockjaw::process::{proc_stat, ProcId, Signal};
use lockjaw::remote::attach::{self, AttachSpec, Running};
use lockjaw::remote::{control_root, Host, HostSpec, HostsFile};
use lockjaw::testbed::Bed;
use lockjaw::undo::{RemoteEffect, Undo};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The processes the test started (pid and start time); SIGKILLed at
/// the end if they still run as themselves.
#[derive(Default)]
struct Mine(Vec<ProcId>);

impl Mine {
    fn add(&mut self, pid: u32) {
        if let Some(p) = ProcId::of(pid as i32) {
            self.0.push(p);
        }
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        for p in &self.0 {
            if p.is_alive() {
                // SAFETY: plain syscall, on a pid whose start time is ours.
                unsafe { libc::kill(p.pid, libc::SIGKILL) };
            }
        }
    }
}

fn ssh(bed: &Bed, i: usize, cmd: &str) -> String {
    let out = bed.ssh(&bed.hosts[i]).arg(cmd).output().unwrap();
    assert!(
        out.status.success(),
        "ssh {} {cmd}: {}",
        bed.hosts[i].name,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `sleep ARG` on host `i`, detached; its pid.
fn sleeper(bed: &Bed, i: usize, arg: &str, mine: &mut Mine) -> u32 {
    let pid = ssh(
        bed,
        i,
        &format!("setsid sleep {arg} </dev/null >/dev/null 2>&1 & echo $!"),
    )
    .trim()
    .parse()
    .unwrap();
    mine.add(pid);
    pid
}

fn state(pid: u32) -> Option<char> {
    proc_stat(pid as i32).map(|s| s.state)
}

/// Whether `pid` reaches a state `want` accepts within 5 s.
fn becomes(pid: u32, want: impl Fn(Option<char>) -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if want(state(pid)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn gone(s: Option<char>) -> bool {
    matches!(s, None | Some('Z'))
}

/// The hosts file: the bed's `[defaults]`, the stubs as `programs`, and
/// one node per server.
fn hosts_file(bed: &Bed, t: &Path, sleep: &str, args: [&str; 2]) -> PathBuf {
    let text = std::fs::read_to_string(&bed.hosts_file).unwrap();
    let defaults = &text[..text.find("\n[[node]]").unwrap()];
    let (h1, h2) = (bed.hosts[0].address, bed.hosts[1].address);
    let (srv, stub) = (t.join("srv"), t.join("stub"));
    let (srv, stub) = (srv.display(), stub.display());
    let body = format!(
        r#"{defaults}
programs = {{ systemctl = "{stub}/systemctl", journalctl = "{stub}/journalctl" }}

[[node]]
name = "e1"
host = "{h1}"
[node.attach]
exe = "{sleep}"
arg = "{a1}"
start = "sh {srv}/start-e1.sh"

[[node]]
name = "e2"
host = "{h2}"
[node.attach]
exe = "{sleep}"
arg = "{a2}"
start = "sh {srv}/start-e2.sh"

[[node]]
name = "p1"
host = "{h1}"
[node.attach]
pidfile = "{srv}/e1.pid"
exe = "{sleep}"
start = "sh {srv}/start-e1.sh"

[[node]]
name = "u2"
host = "{h2}"
base_port = 2379
[node.attach]
unit = "lj-u2.service"
"#,
        a1 = args[0],
        a2 = args[1],
    );
    let p = t.join("attach-hosts.toml");
    std::fs::write(&p, body).unwrap();
    p
}

/// A start script: `sleep ARG` in a session of its own, its pid in PIDFILE.
fn start_script(path: &Path, arg: &str, pidfile: &Path, log: Option<&Path>) {
    let say = log.map_or(String::new(), |l| {
        format!("echo started {arg} >> {}\n", l.display())
    });
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\nsetsid sleep {arg} </dev/null >/dev/null 2>&1 &\necho $! > {}\n{say}",
            pidfile.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Copy the stubs into `t/stub` and make unit `lj-u2.service` of them.
fn stub_unit(t: &Path, arg: &str) -> PathBuf {
    let stub = t.join("stub");
    let unit = stub.join("units/lj-u2.service");
    std::fs::create_dir_all(&unit).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/attach");
    for p in ["systemctl", "journalctl"] {
        std::fs::copy(fixtures.join(p), stub.join(p)).unwrap();
    }
    start_script(
        &unit.join("start"),
        arg,
        &unit.join("pidfile"),
        Some(&unit.join("log")),
    );
    std::fs::write(
        unit.join("props"),
        "Restart=always\nRestartUSec=100ms\nWatchdogUSec=2s\n",
    )
    .unwrap();
    unit
}

fn node<'a>(f: &'a HostsFile, name: &str) -> (&'a HostSpec, &'a AttachSpec) {
    let n = f.nodes.iter().find(|n| n.name == name).unwrap();
    (n, n.attach.as_ref().unwrap())
}

async fn connect(n: &HostSpec) -> Host {
    Host::connect(&n.name, &n.target, &control_root())
        .await
        .unwrap()
}

fn pids(f: &attach::Found) -> Vec<u32> {
    f.procs.iter().map(|p| p.pid).collect()
}

#[test]
fn discovery_signals_kill_start_and_heal_on_a_two_host_bed() {
    let t = tempfile::tempdir().unwrap();
    let (bed, _hosts, _down) = up(2, t.path());
    let mut mine = Mine::default();
    let base = 700_000 + (std::process::id() % 10_000) * 10;
    let [a1, a2, a3] = [1, 2, 3].map(|i| (base + i).to_string());
    let sleep = std::fs::canonicalize("/bin/sleep")
        .or_else(|_| std::fs::canonicalize("/usr/bin/sleep"))
        .unwrap()
        .display()
        .to_string();
    let srv = t.path().join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    for (n, a) in [("e1", &a1), ("e2", &a2)] {
        start_script(
            &srv.join(format!("start-{n}.sh")),
            a,
            &srv.join(format!("{n}.pid")),
            None,
        );
    }
    let unit_dir = stub_unit(t.path(), &a3);
    let path = hosts_file(&bed, t.path(), &sleep, [&a1, &a2]);
    let file = HostsFile::read(&path).unwrap();

    // The servers, and the decoys: e2's arguments on h1, e1's on h2.
    let srv_s = srv.display();
    ssh(&bed, 0, &format!("sh {srv_s}/start-e1.sh"));
    ssh(&bed, 1, &format!("sh {srv_s}/start-e2.sh"));
    let pidfile = |n: &str| -> u32 {
        std::fs::read_to_string(srv.join(format!("{n}.pid")))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (e1, e2) = (pidfile("e1"), pidfile("e2"));
    mine.add(e1);
    mine.add(e2);
    let decoy_h1 = sleeper(&bed, 0, &a2, &mut mine);
    let decoy_h2 = sleeper(&bed, 1, &a1, &mut mine);

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (n1, s1) = node(&file, "e1");
        let (n2, s2) = node(&file, "e2");
        let (h1, h2) = (connect(n1).await, connect(n2).await);
        for (h, s) in [(&h1, s1), (&h2, s2)] {
            attach::check_tools(h, s, false).await.unwrap();
        }

        // Exactly the described process, in the SSH session's namespace.
        let f1 = attach::discover(&h1, s1).await.unwrap();
        assert_eq!(pids(&f1), [e1], "not h1's decoy {decoy_h1}, nor h2's {decoy_h2}");
        // The start time as the host sees it (its own boot-time clock).
        let there = ssh(&bed, 0, &format!("cut -d' ' -f22 /proc/{e1}/stat"));
        assert_eq!(f1.procs[0].start.to_string(), there.trim());
        assert_eq!(pids(&attach::discover(&h2, s2).await.unwrap()), [e2]);
        assert_eq!(pids(&attach::discover(&h2, s1).await.unwrap()), [decoy_h2]);
        let (_, p1) = node(&file, "p1");
        assert_eq!(attach::discover(&h1, p1).await.unwrap().procs, f1.procs);
        // A pidfile naming a process of the other host is refused.
        let other = srv.join("other.pid");
        std::fs::write(&other, format!("{e2}\n")).unwrap();
        let mut p2 = p1.clone();
        p2.find = lockjaw::remote::Find::Pidfile {
            pidfile: other.display().to_string(),
            exe: None,
        };
        let e = attach::discover(&h1, &p2).await.unwrap_err().to_string();
        assert!(e.contains("another network namespace"), "{e}");

        // Two matches: refused, naming both.
        let twin = sleeper(&bed, 0, &a1, &mut mine);
        let e = attach::discover(&h1, s1).await.unwrap_err().to_string();
        for p in [e1, twin] {
            assert!(e.contains(&format!("pid {p}: sleep {a1}")), "{e}");
        }
        ssh(&bed, 0, &format!("kill -s KILL {twin}"));
        assert!(becomes(twin, gone));

        // A stamp with another start time is not signalled; the real one is.
        let mut wrong = f1.procs.clone();
        wrong[0].start += 1;
        let r = attach::signal(&h1, &wrong, Signal::Stop).await.unwrap();
        assert_eq!((r.sent.len(), r.gone.len()), (0, 1));
        let r = attach::signal(&h1, &f1.procs, Signal::Stop).await.unwrap();
        assert_eq!(r.sent, f1.procs);
        assert!(becomes(e1, |s| s == Some('T')));
        assert_ne!(state(decoy_h2), Some('T'));
        attach::signal(&h1, &f1.procs, Signal::Cont).await.unwrap();
        assert!(becomes(e1, |s| s.is_some_and(|c| c != 'T')));

        // Kill, then start: a new process with a new stamp.
        attach::kill(&h1, s1, &f1).await.unwrap();
        assert!(gone(state(e1)));
        assert!(matches!(attach::running(&h1, s1).await.unwrap(), Running::No(_)));
        attach::start(&h1, s1).await.unwrap();
        let again = attach::discover(&h1, s1).await.unwrap();
        mine.add(again.procs[0].pid);
        assert_ne!(again.procs, f1.procs);
        assert_eq!(pids(&again), [pidfile("e1")]);

        // The unit mode, through the stub systemctl and journalctl.
        let (nu, su) = node(&file, "u2");
        assert_eq!(su.client.as_deref(), Some(&*format!("{}:2379", bed.hosts[1].address)));
        attach::check_tools(&h2, su, false).await.unwrap();
        assert!(matches!(attach::running(&h2, su).await.unwrap(), Running::No(w) if w.contains("MainPID=0")));
        let mark = attach::log_mark(&h2, su).await.unwrap().unwrap();
        attach::start(&h2, su).await.unwrap();
        let fu = attach::discover(&h2, su).await.unwrap();
        mine.add(fu.procs[0].pid);
        let props = fu.unit.clone().unwrap();
        assert_eq!((props.restart.as_str(), props.restart_ms, props.watchdog_ms), ("always", 100, 2000));
        let log = attach::log_since(&h2, su, &mark).await.unwrap().unwrap();
        assert!(log.contains(&format!("started {a3}")), "{log}");
        attach::kill(&h2, su, &fu).await.unwrap();
        assert!(gone(state(fu.procs[0].pid)));
        attach::start(&h2, su).await.unwrap();
        let fu2 = attach::discover(&h2, su).await.unwrap();
        mine.add(fu2.procs[0].pid);
        assert_ne!(fu2.procs[0].pid, fu.procs[0].pid);

        // As a killed run leaves it: e2 paused, e1 and u2 killed.
        let mut decoy = s2.clone();
        decoy.find = lockjaw::remote::Find::Exe {
            exe: sleep.clone(),
            arg: a2.clone(),
        };
        let f2 = attach::discover(&h2, s2).await.unwrap();
        attach::signal(&h2, &f2.procs, Signal::Stop).await.unwrap();
        assert!(becomes(e2, |s| s == Some('T')));
        attach::kill(&h1, s1, &again).await.unwrap();
        attach::kill(&h2, su, &fu2).await.unwrap();
        // A process stopped by someone else, recorded with another start
        // time: heal cannot prove it is the one the run paused.
        let fd = attach::discover(&h1, &decoy).await.unwrap();
        ssh(&bed, 0, &format!("kill -s STOP {decoy_h1}"));
        let mut unproven = fd.procs.clone();
        unproven[0].start += 1;
        let run = t.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("run.json"), json!({ "run_id": "ab12cd34" }).to_string()).unwrap();
        let copy = run.join("hosts.toml");
        std::fs::copy(&path, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600)).unwrap();
        let entry = |n: &HostSpec, effect| Undo::Remote {
            host: n.name.clone(),
            target: n.target.clone(),
            effect,
        };
        let undo = [
            entry(n1, RemoteEffect::AttachedFound { node: "e1".into(), procs: again.procs.clone() }),
            entry(n2, RemoteEffect::AttachedFound { node: "e2".into(), procs: f2.procs.clone() }),
            entry(n2, RemoteEffect::AttachedPaused { node: "e2".into(), procs: f2.procs.clone() }),
            entry(n1, RemoteEffect::AttachedDown { node: "e1".into(), find: Box::new(s1.find.clone()) }),
            entry(n1, RemoteEffect::AttachedPaused { node: "d1".into(), procs: unproven }),
            entry(nu, RemoteEffect::AttachedDown { node: "u2".into(), find: Box::new(su.find.clone()) }),
        ];
        let lines: Vec<String> = undo
            .iter()
            .enumerate()
            .map(|(i, u)| json!({ "id": i + 1, "undo": u }).to_string() + "\n")
            .collect();
        std::fs::write(run.join("undo.jsonl"), lines.concat()).unwrap();
        h1.close().await;
        h2.close().await;
    });

    let out = lockjaw()
        .arg("heal")
        .arg(t.path().join("run"))
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{said}");
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        becomes(e2, |s| s.is_some_and(|c| c != 'T')),
        "continued: {said}"
    );
    let e1_new = pidfile("e1");
    mine.add(e1_new);
    assert!(!gone(state(e1_new)), "e1 started again: {said}");
    let u2_new: u32 = std::fs::read_to_string(unit_dir.join("pidfile"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    mine.add(u2_new);
    assert!(!gone(state(u2_new)), "u2 started again: {said}");
    assert!(said.contains("started with `sh "), "{said}");
    assert!(
        said.contains(&format!("pid(s) {decoy_h1} gone or now another process")),
        "{said}"
    );
    assert_eq!(state(decoy_h1), Some('T'), "never signalled by heal");
    ssh(&bed, 0, &format!("kill -s CONT {decoy_h1}"));
    drop(mine);
}
