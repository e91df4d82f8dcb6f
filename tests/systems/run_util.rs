//! Helpers for the `lockjaw run` integration tests: run the real binary in
//! a temp directory, read what it wrote, and check that nothing it started
//! is left stopped, running or proxied (by recorded PIDs, never by name).

#![allow(dead_code)]

use lockjaw::history::jsonl::read_all;
use lockjaw::history::{Meta, Op};
use lockjaw::process::{proc_stat, ProcId};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn lockjaw() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockjaw"))
}

/// A finished `lockjaw run`.
#[derive(Debug)]
pub struct Run {
    pub dir: PathBuf,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
}

impl Run {
    pub fn results(&self) -> Value {
        json_file(&self.dir.join("results.json"))
    }

    /// The lock checker's report in results.json (`Null` if it did not run).
    pub fn lock(&self) -> Value {
        self.results()["lock"].clone()
    }

    pub fn nemesis(&self) -> Value {
        json_file(&self.dir.join("nemesis.json"))
    }

    pub fn run_json(&self) -> Value {
        json_file(&self.dir.join("run.json"))
    }

    pub fn history(&self) -> (Option<Meta>, Vec<Op>) {
        read_all(&self.dir.join("history.jsonl")).expect("a readable history")
    }
}

/// The injections in a run's nemesis.json.
pub fn injections(r: &Run) -> Vec<Value> {
    r.nemesis()["injections"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The injections of a run that landed inside a critical section
/// (`detail.landed_inside`), at least one (loose).
pub fn landed_inside(r: &Run) -> Vec<Value> {
    let all = injections(r);
    let l: Vec<Value> = all
        .iter()
        .filter(|i| i["detail"]["landed_inside"] == true)
        .cloned()
        .collect();
    assert!(!l.is_empty(), "no injection landed: {all:?}");
    l
}

/// How many injections of a run landed, read from its nemesis.json: no
/// error, not cut short by the run's end, and inside a critical section
/// when the fault reports it.
pub fn landed_count(run_dir: &Path) -> u64 {
    let n = json_file(&run_dir.join("nemesis.json"));
    n["injections"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|i| i.get("error").map_or(true, Value::is_null))
                .filter(|i| i.pointer("/detail/cut_short") != Some(&Value::Bool(true)))
                .filter(|i| i.pointer("/detail/landed_inside") != Some(&Value::Bool(false)))
                .count() as u64
        })
        .unwrap_or(0)
}

pub fn json_file(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The history's meta record as JSON (with the adapter's handshake).
pub fn meta_json(r: &Run) -> Value {
    let text = std::fs::read_to_string(r.dir.join("history.jsonl")).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// `lockjaw heal DIR`, its output printed; it must succeed.
pub fn heal_ok(dir: &Path) {
    let out = lockjaw().arg("heal").arg(dir).output().unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "heal succeeds");
}

/// `lockjaw run ARGS --out DIR --no-progress`, waited for; prints its wall time.
pub fn run(name: &str, dir: &Path, args: &[&str]) -> Run {
    let start = Instant::now();
    let out = lockjaw()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(dir)
        .arg("--no-progress")
        .output()
        .expect("lockjaw runs");
    let r = Run {
        dir: dir.to_path_buf(),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        wall: start.elapsed(),
    };
    eprintln!(
        "[{name}] exit {} in {:.1} s\n{}{}",
        r.code,
        r.wall.as_secs_f64(),
        r.stdout,
        r.stderr
    );
    r
}

/// A `lockjaw` child that gets SIGINT (it heals itself) and then SIGKILL
/// if the test ends without waiting for it.
pub struct Guard(pub Option<Child>);

impl Guard {
    pub fn spawn(cmd: &mut Command) -> Guard {
        Guard(Some(
            cmd.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("lockjaw starts"),
        ))
    }

    pub fn pid(&self) -> i32 {
        self.0.as_ref().expect("running").id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: a plain signal to our own child, which we have not reaped.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Wait for it to exit; its exit code (None if killed by a signal).
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let mut c = self.0.take().expect("running");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = c.try_wait().expect("waitable") {
                let mut err = String::new();
                if let Some(mut e) = c.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                eprintln!("lockjaw exited ({s}):\n{err}");
                return s.code();
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("lockjaw did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: as above.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGINT);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Poll until `cond` holds, within a generous deadline.
pub fn eventually(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every process a run recorded: the undo log's processes and pauses, and
/// the cluster state file's nodes.
pub fn recorded_processes(dir: &Path) -> Vec<(String, ProcId)> {
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("undo.jsonl")) {
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let u = &v["undo"];
            if u["kind"] == "process" || u["kind"] == "paused" {
                let id: ProcId = serde_json::from_value(u["proc"].clone()).unwrap();
                out.push((u["what"].as_str().unwrap_or("?").to_string(), id));
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("cluster.json")) {
        let v: Value = serde_json::from_str(&text).unwrap();
        for n in v["nodes"].as_array().cloned().unwrap_or_default() {
            if let Ok(id) = serde_json::from_value::<ProcId>(n["proc"].clone()) {
                out.push((n["name"].as_str().unwrap_or("?").to_string(), id));
            }
        }
    }
    out
}

/// Nothing the run started is still running or stopped (checked through
/// /proc by PID + start time), and its undo log has nothing pending.
pub fn assert_nothing_left(dir: &Path) {
    for (what, id) in recorded_processes(dir) {
        eventually(
            &format!("{what} (pid {}) to be gone", id.pid),
            Duration::from_secs(15),
            || {
                // Same PID and start time, not a zombie: still ours and alive.
                !id.is_alive()
            },
        );
        if let Some(s) = proc_stat(id.pid) {
            if s.start_time == id.start_time {
                assert!(s.state != 'T' && s.state != 't', "{what} is left stopped");
            }
        }
    }
    let pending = lockjaw::undo::read_pending(&dir.join("undo.jsonl")).unwrap();
    assert!(pending.is_empty(), "undo entries left pending: {pending:?}");
}

/// The `type: meta` first line's parameter `k`.
pub fn meta_param(meta: &Option<Meta>, k: &str) -> Value {
    meta.as_ref()
        .and_then(|m| m.params.get(k).cloned())
        .unwrap_or(Value::Null)
}

/// Ports one local cluster may use (ZooKeeper: 3 nodes × 3 ports).
pub const WIDTH: u16 = 10;

/// The first `base` in `block..block+100` (steps of [`WIDTH`]) whose ports
/// can all be bound right now and are not reserved by another lockjaw run
/// (tests run in parallel and share blocks). The machine is shared and our range
/// overlaps the ephemeral ports, so a port may be held by someone's
/// outgoing connection (or its TIME-WAIT).
pub fn free_base(block: u16) -> u16 {
    (block..block + 100)
        .step_by(WIDTH as usize)
        .find(|b| lockjaw::process::ports::reserve(Some(*b), WIDTH).is_ok())
        .unwrap_or_else(|| panic!("no {WIDTH} free ports in {block}..{}", block + 100))
}

/// `run` with a local cluster in the 100-port block starting at `block`;
/// if a port is taken between our check and the cluster's start, try again
/// (up to 5 times).
pub fn run_local(name: &str, root: &Path, block: u16, args: &[&str]) -> Run {
    for attempt in 0..5 {
        let port = free_base(block).to_string();
        let dir = root.join(format!("{name}-{attempt}"));
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--base-port", &port]);
        let r = run(name, &dir, &a);
        let busy =
            r.stderr.contains("is in use") || r.stderr.contains("reserved by another lockjaw run");
        if !(r.code == 3 && busy) {
            return r;
        }
    }
    panic!("{name}: the ports in {block}..{} stayed busy", block + 100);
}

/// A run without fencing whose service stayed valid (`why` says why) while
/// the resource was damaged: the damage shows in the history itself (a
/// stale write accepted, or the final value behind the acknowledged
/// writes), the checker finds the service valid and the resource not, and
/// the run exits 1.
pub fn assert_resource_damaged_service_valid(r: &Run, why: &str) {
    let (acked, _, stale, last) = storage_facts(&r.history().1);
    assert!(
        stale > 0 || last.is_some_and(|v| v < acked as i64),
        "damage in the history itself"
    );
    let res = r.lock();
    assert_eq!(res["service"]["valid"], true, "{why}: {res}");
    assert_eq!(res["resource"]["valid"], false, "{res}");
    assert_eq!(r.code, 1);
}

/// Storage facts read straight from a history, independent of the
/// checker: (acknowledged writes, indeterminate writes, writes accepted
/// after a higher fence, final value).
pub fn storage_facts(ops: &[Op]) -> (usize, usize, usize, Option<i64>) {
    use lockjaw::history::{OpType, Process};
    let done: Vec<&Op> = ops
        .iter()
        .filter(|o| o.kind != OpType::Invoke && (o.f == "read" || o.f == "write"))
        .collect();
    let acked = done
        .iter()
        .filter(|o| o.f == "write" && o.kind == OpType::Ok)
        .count();
    let info = done
        .iter()
        .filter(|o| o.f == "write" && o.kind == OpType::Info)
        .count();
    let mut by_seq: Vec<&&Op> = done.iter().filter(|o| o.seq.is_some()).collect();
    by_seq.sort_by_key(|o| o.seq);
    let mut highest = 0;
    let mut stale = 0;
    for o in by_seq {
        if let Some(f) = o.fence {
            if o.kind == OpType::Ok && o.f == "write" && f < highest {
                stale += 1;
            }
            highest = highest.max(f);
        }
    }
    let last = done
        .iter()
        .rfind(|o| o.process == Process::Named("final".into()) && o.kind == OpType::Ok)
        .and_then(|o| o.value.as_i64());
    (acked, info, stale, last)
}

/// `lockjaw check DIR`'s exit code.
pub fn check_exit(dir: &Path) -> i32 {
    let out = lockjaw().arg("check").arg(dir).output().unwrap();
    eprintln!(
        "lockjaw check {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.code().unwrap_or(-1)
}

/// An iptables rule a test adds (`iptables -w -A ARGS`), removed when
/// dropped, also when the test panics.
pub struct IptablesRule(pub Vec<String>);

impl IptablesRule {
    pub fn add(args: &[&str]) -> IptablesRule {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let ok = Command::new("iptables")
            .args(["-w", "-A"])
            .args(&args)
            .status()
            .unwrap();
        assert!(ok.success(), "iptables -A {args:?}");
        IptablesRule(args)
    }
}

impl Drop for IptablesRule {
    fn drop(&mut self) {
        let _ = Command::new("iptables")
            .args(["-w", "-D"])
            .args(&self.0)
            .status();
    }
}

/// True while something listens on TCP `port` (IPv4 or IPv6), read from
/// /proc/net/tcp{,6} (binding would also trip over our own sockets).
pub fn listening(port: u16) -> bool {
    use lockjaw::nemesis::partition::{parse_tcp_table, TCP_LISTEN};
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        parse_tcp_table(&text, TCP_LISTEN)
            .iter()
            .any(|(local, _, _)| *local == port)
    })
}

/// The cgroup directory of a run (`lockjaw/<run-id>` under the cgroup v2
/// root), `None` where the host has no writable cgroup v2.
pub fn run_cgroup(run_id: &str) -> Option<PathBuf> {
    assert!(
        !run_id.is_empty() && !run_id.contains('/'),
        "run id {run_id:?}"
    );
    Some(
        lockjaw::process::Cgroup::root()?
            .join("lockjaw")
            .join(run_id),
    )
}

/// The cgroup v2 path of a running process (`/lockjaw/ID/worker-0.0`).
pub fn cgroup_of(pid: i32) -> String {
    lockjaw::process::cgroup::of_pid(pid).unwrap_or_default()
}

/// Relations and functions named `lockjaw…` in the PostgreSQL database at
/// `url` (what a run created there and should have dropped).
pub async fn lockjaw_objects_left(url: &str) -> i64 {
    let t = std::time::Duration::from_secs(5);
    let c = lockjaw::client::postgres_conn::connect(url, None, t)
        .await
        .unwrap();
    let q = "SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE 'lockjaw%') \
             + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'lockjaw%')";
    c.query_one(q, &[]).await.unwrap().get(0)
}

/// `lockjaw run ARGS` refused before starting anything: exit 3 and no
/// run directory made; its stderr.
pub fn refused(args: &[&str]) -> String {
    refused_by(lockjaw(), args)
}

/// [`refused`] with `cmd`, a `lockjaw` command its caller prepared (its
/// environment, its working directory).
pub fn refused_by(mut cmd: Command, args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out = cmd
        .arg("run")
        .args(args)
        .arg("--histories")
        .arg(tmp.path())
        .arg("--no-progress")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "{args:?}"
    );
    err
}
