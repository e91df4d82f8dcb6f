//! Healing: every exit path of `lockjaw run` leaves nothing stopped,
//! running or proxied. Ctrl-C in the middle of a pause (lockjaw heals
//! itself), and SIGKILL at random points of a short run's life followed by
//! `lockjaw heal DIR`.
//! Processes are checked by the PIDs + start times the run recorded.
//! Also: heal signals no recorded process outside the run's cgroup; a
//! run's cgroup is gone after it and after heal; and (make test-long) many
//! SIGKILLs of `run` and `cluster up` at random moments.
//! Ports: one 100-port block per run in 36100-36499 (a free base found
//! first, see run_util::free_base), 36500-36599 for the cgroup test,
//! 37200-37399 for the random kills; Toxiproxy and storage on port 0.

use crate::run_util::*;
use lockjaw::process::proc_stat;
use lockjaw::toxiproxy::ToxiproxyApi;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};

fn history_has(dir: &Path, needle: &[&str]) -> bool {
    std::fs::read_to_string(dir.join("history.jsonl"))
        .map(|t| t.lines().any(|l| needle.iter().all(|n| l.contains(n))))
        .unwrap_or(false)
}

fn some_worker_stopped(dir: &Path) -> bool {
    recorded_processes(dir).iter().any(|(what, id)| {
        what.starts_with("worker")
            && proc_stat(id.pid).is_some_and(|s| s.start_time == id.start_time && s.state == 'T')
    })
}

#[test]
fn ctrl_c_in_the_middle_of_a_pause_leaves_nothing_behind() {
    let t = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut g = Guard::spawn(
        lockjaw()
            .args(["run", "--system", "redis", "--workload", "fenced-counter"])
            .args([
                "--nemesis",
                "pause-holder",
                "--time-limit",
                "120",
                "--ttl-ms",
                "1000",
            ])
            .args([
                "--hold-ms",
                "200",
                "--base-port",
                &free_base(36100).to_string(),
                "--seed",
                "5",
                "--no-progress",
            ])
            .arg("--out")
            .arg(&dir),
    );
    eventually("a holder to be paused", Duration::from_secs(60), || {
        history_has(&dir, &["\"nemesis\"", "\"start\"", "\"info\""]) && some_worker_stopped(&dir)
    });
    g.signal(libc::SIGINT);
    let code = g.wait(Duration::from_secs(60));
    assert_nothing_left(&dir);
    // An interrupted run is judged on what it recorded, never valid.
    assert_eq!(code, Some(2), "interrupted run's exit code");
    assert_eq!(json_file(&dir.join("run.json"))["outcome"], "interrupted");
    eprintln!("ctrl-c test: {:.1} s", t.elapsed().as_secs_f64());
}

/// LOCKJAW_KILLS, the number of kills of each kind, or `default`.
pub(crate) fn kills_per_kind(default: usize) -> usize {
    std::env::var("LOCKJAW_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The random generator of a test: LOCKJAW_TEST_SEED repeats a sequence.
pub(crate) fn seeded_rng() -> (u64, rand::rngs::StdRng) {
    let seed: u64 = std::env::var("LOCKJAW_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (LOCKJAW_TEST_SEED to repeat)");
    (seed, rand::rngs::StdRng::seed_from_u64(seed))
}

#[test]
fn sigkill_at_random_points_then_heal_leaves_nothing_behind() {
    let t = Instant::now();
    let (_, mut rng) = seeded_rng();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tox = rt.block_on(lockjaw::toxiproxy::spawn_loopback()).unwrap();
    let api = tox.client().unwrap();
    let rounds = [
        ("pause-holder", 36200),
        ("latency", 36300),
        ("partition-holder", 36400),
    ];
    for (nemesis, port) in rounds {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let mut g = Guard::spawn(
            lockjaw()
                .args(["run", "--system", "redis", "--workload", "fenced-counter"])
                .args([
                    "--nemesis",
                    nemesis,
                    "--time-limit",
                    "4",
                    "--ttl-ms",
                    "1000",
                ])
                .args(["--base-port", &free_base(port).to_string(), "--no-progress"])
                .args(["--toxiproxy", &tox.url()])
                .arg("--out")
                .arg(&dir),
        );
        // Anywhere in the run's life: set-up, faults, healing, the final
        // read, the check, teardown (a 4 s run ends after about 5 s).
        let after = Duration::from_millis(rng.gen_range(50..5200));
        std::thread::sleep(after);
        eprintln!("{nemesis}: SIGKILL after {after:?}");
        g.signal(libc::SIGKILL);
        let code = g.wait(Duration::from_secs(30));
        eprintln!("{nemesis}: exit {code:?} (None: killed)");
        let out = lockjaw().arg("heal").arg(&dir).output().unwrap();
        eprintln!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if dir.join("undo.jsonl").exists() {
            assert_eq!(out.status.code(), Some(0), "heal succeeds");
            assert_nothing_left(&dir);
        }
        let proxies = rt.block_on(api.proxies()).unwrap();
        assert!(
            proxies.is_empty(),
            "proxies left on Toxiproxy: {:?}",
            proxies.keys()
        );
        // Healing twice is harmless.
        if dir.join("undo.jsonl").exists() {
            let again = lockjaw().arg("heal").arg(&dir).output().unwrap();
            assert_eq!(again.status.code(), Some(0));
        }
        // What the killed run recorded can still be checked.
        if dir.join("history.jsonl").exists() {
            let c = lockjaw().arg("check").arg(&dir).output().unwrap();
            assert!(
                matches!(c.status.code(), Some(0..=2)),
                "lockjaw check reads the history: {}{}",
                String::from_utf8_lossy(&c.stdout),
                String::from_utf8_lossy(&c.stderr)
            );
        }
    }
    eprintln!("sigkill test: {:.1} s", t.elapsed().as_secs_f64());
}

#[test]
fn heal_removes_a_partial_last_history_line_so_check_reads_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("undo.jsonl"), "").unwrap();
    let meta = r#"{"type":"meta","checkers":["lock"],"workload":"lock","acquire_sets_ttl":true}"#;
    let op = r#"{"index":0,"time":5,"process":0,"type":"invoke","f":"acquire","key":"l"}"#;
    std::fs::write(
        dir.join("history.jsonl"),
        format!("{meta}\n{op}\n{{\"index\":1,\"time\":9,\"proc"),
    )
    .unwrap();
    let before = lockjaw().arg("check").arg(dir).output().unwrap();
    // Before heal, check reads the complete lines and warns of the cut one.
    // (Its one complete op is an acquire with no grant: nothing was
    // tested, so the verdict is unknown, exit 2, with that reason.)
    let warned = String::from_utf8_lossy(&before.stderr);
    assert_eq!(before.status.code(), Some(2), "{warned}");
    assert!(
        String::from_utf8_lossy(&before.stdout).contains("nothing was tested"),
        "{}",
        String::from_utf8_lossy(&before.stdout)
    );
    assert!(
        warned.contains("history.jsonl:3: the last line is cut off"),
        "{warned}"
    );
    let out = lockjaw().arg("heal").arg(dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("removed a partial last line (25 bytes)"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("history.jsonl")).unwrap(),
        format!("{meta}\n{op}\n")
    );
    let after = lockjaw().arg("check").arg(dir).output().unwrap();
    assert_eq!(
        after.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&after.stderr)
    );
}

#[test]
fn heal_refuses_a_directory_without_an_undo_log() {
    let tmp = tempfile::tempdir().unwrap();
    let out = lockjaw().arg("heal").arg(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("undo.jsonl") && err.contains("hint"), "{err}");
}

/// `heal` reads records someone else may have written: a process record
/// (in undo.jsonl, and a node in cluster.json) naming an unrelated
/// process with its true PID and start time must not get it signalled,
/// whether it runs outside every lockjaw cgroup or in another run's.
#[test]
fn heal_signals_no_recorded_process_that_is_not_in_the_runs_cgroup() {
    use lockjaw::process::{Cgroup, Owner, ProcId, Spec};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    // A process the test started itself, in no lockjaw cgroup.
    let outside = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let outsider = ProcId::of(outside.id() as i32).unwrap();
    let mut victims = vec![("outside", outsider)];
    // A process in another directory's lockjaw group (another run's).
    let other = tmp.path().join("other-run");
    std::fs::create_dir(&other).unwrap();
    let group = format!("lockjaw/test-heal-other-{}", std::process::id());
    let tag = Owner::of_dir(&other).unwrap();
    let gdir = Cgroup::create_group(&group, tag.tag()).unwrap();
    /// Removes the test's group (and kills what is in it) even on panic.
    struct Cleanup(Option<std::path::PathBuf>, std::process::Child);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = self.1.kill();
            let _ = self.1.wait();
            if let Some(g) = &self.0 {
                let _ = Cgroup::remove_tree(g);
            }
        }
    }
    let _cleanup = Cleanup(gdir.clone(), outside);
    let _other_child = gdir.as_ref().map(|g| {
        let mut spec = Spec::new("sleep").arg("60");
        spec.cgroup = Some(g.join("node"));
        let c = lockjaw::process::spawn(&spec).unwrap();
        victims.push(("another run's", c.id()));
        c
    });
    let mut undo = String::new();
    let mut nodes = Vec::new();
    for (i, (what, id)) in victims.iter().enumerate() {
        let proc = serde_json::to_string(id).unwrap();
        undo += &format!(
            "{{\"id\":{},\"undo\":{{\"kind\":\"process\",\"what\":\"worker {i}\",\"proc\":{proc}}}}}\n",
            2 * i + 1
        );
        undo += &format!(
            "{{\"id\":{},\"undo\":{{\"kind\":\"paused\",\"what\":\"worker {i}\",\"proc\":{proc}}}}}\n",
            2 * i + 2
        );
        nodes.push(serde_json::json!({
            "name": what, "role": "server", "addr": "127.0.0.1:1", "ports": {"client": 1},
            "log": dir.join("x.log"), "data_dir": dir.join("data"), "proc": id,
        }));
    }
    undo += &format!(
        "{{\"id\":9,\"undo\":{{\"kind\":\"cluster\",\"dir\":{}}}}}\n",
        serde_json::to_string(&dir).unwrap()
    );
    std::fs::write(dir.join("undo.jsonl"), undo).unwrap();
    let state = serde_json::json!({
        "version": 1, "system": "redis", "base_port": 1, "nodes": nodes,
    });
    std::fs::write(dir.join("cluster.json"), state.to_string()).unwrap();
    let out = lockjaw().arg("heal").arg(&dir).output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("heal: exit {:?}\n{said}", out.status.code());
    // SIGTERM would end a sleep at once; give a stray signal time to land.
    std::thread::sleep(Duration::from_millis(200));
    for (what, id) in &victims {
        assert!(id.is_alive(), "heal signalled the {what} process: {said}");
        assert_ne!(proc_stat(id.pid).unwrap().state, 'T', "{what} left stopped");
        assert!(said.contains(&format!("pid {}", id.pid)), "{said}");
    }
    assert!(said.contains("not signalled"), "{said}");
    assert_ne!(out.status.code(), Some(0), "heal reports what it refused");
}

/// Every process a run starts (servers and workers) runs in the run's
/// cgroup group `lockjaw/<run-id>`, and no directory of it is left after
/// the run ends, nor after `heal` of a run SIGKILLed mid-way.
/// Ports: one 10-port base in 36500-36599.
#[test]
fn a_runs_processes_are_in_its_cgroup_and_its_cgroup_is_gone_after_it_and_after_heal() {
    if lockjaw::process::Cgroup::root().is_none() {
        eprintln!("skipped: no writable cgroup v2 on this host");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for killed in [false, true] {
        let dir = tmp.path().join(format!("run-{killed}"));
        let mut g = Guard::spawn(
            lockjaw()
                .args(["run", "--system", "redis", "--workload", "fenced-counter"])
                .args(["--nemesis", "none", "--time-limit", "2", "--ttl-ms", "1000"])
                .args([
                    "--base-port",
                    &free_base(36500).to_string(),
                    "--no-progress",
                ])
                .arg("--out")
                .arg(&dir),
        );
        eventually("the workers to record ops", Duration::from_secs(60), || {
            history_has(&dir, &["\"invoke\""])
        });
        let run_id = json_file(&dir.join("run.json"))["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        let cg = run_cgroup(&run_id).unwrap();
        let prefix = format!("/lockjaw/{run_id}/");
        let procs = recorded_processes(&dir);
        assert!(
            procs.iter().any(|(w, _)| w.starts_with("worker")),
            "{procs:?}"
        );
        assert!(
            procs.iter().any(|(w, _)| w.starts_with("redis")),
            "{procs:?}"
        );
        for (what, id) in &procs {
            if id.is_alive() {
                let path = cgroup_of(id.pid);
                assert!(path.starts_with(&prefix), "{what} runs in cgroup {path:?}");
            }
        }
        if killed {
            g.signal(libc::SIGKILL);
            g.wait(Duration::from_secs(30));
            let out = lockjaw().arg("heal").arg(&dir).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        } else {
            assert_eq!(g.wait(Duration::from_secs(60)), Some(0));
        }
        assert_nothing_left(&dir);
        assert!(!cg.exists(), "{} is left (killed: {killed})", cg.display());
    }
}

/// What a killed `lockjaw run` or `cluster up` may have left, checked
/// after `heal` / `cluster down`: no recorded process running or stopped,
/// no listener on its ports, no iptables rule of the run, no clock offset,
/// no cgroup directory of its group, no data directory of its nodes in
/// the temporary directory. Returns what it found, as messages.
pub(crate) fn leftovers(
    dir: &Path,
    ports: std::ops::Range<u16>,
    group: Option<&str>,
) -> Vec<String> {
    let mut found = Vec::new();
    for (what, id) in recorded_processes(dir) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while id.is_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(s) = proc_stat(id.pid).filter(|s| s.start_time == id.start_time) {
            if s.state != 'Z' && s.state != 'X' {
                found.push(format!(
                    "{what} (pid {}) is left, state {}",
                    id.pid, s.state
                ));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while ports.clone().any(listening) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in ports.filter(|p| listening(*p)) {
        found.push(format!("port {p} is still listened on"));
    }
    if let Some(g) = group {
        if let Some(cg) = lockjaw::process::Cgroup::root().map(|r| r.join(g)) {
            if cg.exists() {
                found.push(format!("cgroup {} is left", cg.display()));
            }
        }
        if let Some(id) = g.strip_prefix("lockjaw/") {
            let rules = std::process::Command::new("iptables")
                .args(["-w", "-S", "OUTPUT"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            for r in rules
                .lines()
                .filter(|r| r.contains(&format!("lockjaw:{id} ")))
            {
                found.push(format!("iptables rule left: {r}"));
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("cluster.json")) {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for n in v["nodes"].as_array().cloned().unwrap_or_default() {
            // A data directory in the temporary directory (PostgreSQL,
            // MariaDB) goes with its node.
            if let Some(d) = n["data_dir"].as_str().map(Path::new) {
                if lockjaw::cluster::tmpdata::is_tmp_data(d) && d.exists() {
                    found.push(format!("data directory {} is left", d.display()));
                }
            }
            if let Some(f) = n["faketime_file"].as_str() {
                let off = std::fs::read_to_string(f).unwrap_or_else(|_| "+0\n".into());
                if off.trim() != "+0" {
                    found.push(format!("clock offset {} left in {f}", off.trim()));
                }
            }
        }
    }
    if dir.join("undo.jsonl").exists() {
        let pending = lockjaw::undo::read_pending(&dir.join("undo.jsonl")).unwrap();
        if !pending.is_empty() {
            found.push(format!("undo entries left pending: {pending:?}"));
        }
    }
    found
}

/// How long `cmd` takes when nobody kills it (it must end with a verdict,
/// 0-2, not a failure).
fn lifetime(cmd: &mut std::process::Command) -> Duration {
    let t = Instant::now();
    let out = cmd.output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "{:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    t.elapsed()
}

/// One kind of command the random kill test SIGKILLs.
pub(crate) struct Victim<'a> {
    /// `run` or `cluster up`, for messages.
    pub what: &'a str,
    /// The variants it cycles through (nemeses, systems).
    pub kinds: &'a [&'a str],
    /// Its ports come from the 100-port block here.
    pub block: u16,
    /// The command for a variant, base port and directory.
    pub cmd: &'a dyn Fn(&str, u16, &Path) -> std::process::Command,
    /// Cleans up after a kill (`heal`, `cluster down`): what it said, or
    /// why it failed.
    pub clean: &'a dyn Fn(&Path) -> Result<String, String>,
    /// The cgroup group its processes went in, as the directory says.
    pub group: &'a dyn Fn(&str, u16, &Path) -> Option<String>,
}

/// Measure each variant's unkilled lifetime, then start `kills` commands
/// and SIGKILL each at a uniformly random moment of that lifetime, clean
/// up, and add what was left to `problems`. Returns the kills made.
pub(crate) fn kill_at_random(
    v: &Victim,
    kills: usize,
    rng: &mut rand::rngs::StdRng,
    root: &Path,
    problems: &mut Vec<String>,
) -> usize {
    let mut life = std::collections::HashMap::new();
    for kind in v.kinds {
        let d = root.join(format!("calibrate-{kind}"));
        let mut c = (v.cmd)(kind, free_base(v.block), &d);
        let l = lifetime(c.stdout(std::process::Stdio::null()));
        (v.clean)(&d).unwrap();
        eprintln!("{} {kind}: {:.2} s unkilled", v.what, l.as_secs_f64());
        life.insert(*kind, l);
    }
    for i in 0..kills {
        let kind = v.kinds[i % v.kinds.len()];
        let base = free_base(v.block);
        let dir = root.join(format!("{i}"));
        let at = rng.gen_range(Duration::ZERO..life[kind]);
        let mut g = Guard::spawn(&mut (v.cmd)(kind, base, &dir));
        std::thread::sleep(at);
        g.signal(libc::SIGKILL);
        g.wait(Duration::from_secs(30));
        let name = format!("{} {i} ({kind}, killed after {at:?})", v.what);
        let cleaned = (v.clean)(&dir).unwrap_or_else(|e| {
            problems.push(format!("{name}: {e}"));
            e
        });
        let group = (v.group)(kind, base, &dir);
        let left = leftovers(&dir, base..base + WIDTH, group.as_deref());
        eprintln!("{name}: {}; left: {left:?}", cleaned.trim());
        problems.extend(left.into_iter().map(|l| format!("{name}: {l}")));
    }
    kills
}

/// `lockjaw ARGS`' stdout if it exits 0, else its exit code and stderr.
pub(crate) fn lockjaw_ok(args: &[&std::ffi::OsStr]) -> Result<String, String> {
    let out = lockjaw().args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match out.status.code() {
        Some(0) => Ok(text(&out.stdout)),
        c => Err(format!("exit {c:?}: {}", text(&out.stderr))),
    }
}

/// At least 50 SIGKILLs of `lockjaw run` and `lockjaw cluster up` at
/// uniformly random moments of their lives, each followed by `heal` or
/// `cluster down`, which must succeed and leave nothing behind (see
/// [`leftovers`]). LOCKJAW_KILLS sets the number of kills of each kind
/// (default 30); LOCKJAW_TEST_SEED repeats a sequence. make test-long.
/// Ports: runs 37200-37299, clusters 37300-37399 (free bases found first).
#[test]
#[ignore = "several minutes; make test-long"]
fn random_sigkills_of_run_and_cluster_up_leave_nothing_behind() {
    let t0 = Instant::now();
    let kills = kills_per_kind(30);
    let (seed, mut rng) = seeded_rng();
    let tmp = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    // `lockjaw run` on Redis under faults that leave a trace to undo: a
    // stopped process, iptables rules, clock offsets, toxics, respawns.
    let run = Victim {
        what: "run",
        kinds: &[
            "pause-holder",
            "partition-holder",
            "clock-jump",
            "latency",
            "kill-holder",
            // Redis Cluster: a replica held paused, then promoted.
            "redis-cluster/failover",
        ],
        block: 37200,
        cmd: &|kind, base, dir| {
            let (system, nemesis) = kind.split_once('/').unwrap_or(("redis", kind));
            let mut c = lockjaw();
            c.args(["run", "--system", system, "--workload", "fenced-counter"])
                .args([
                    "--nemesis",
                    nemesis,
                    "--time-limit",
                    "3",
                    "--ttl-ms",
                    "1000",
                ])
                .args(["--base-port", &base.to_string(), "--no-progress"])
                .arg("--out")
                .arg(dir);
            c
        },
        clean: &|dir| {
            if !dir.join("undo.jsonl").exists() {
                return Ok("no undo log yet: nothing to heal".into());
            }
            lockjaw_ok(&["heal".as_ref(), dir.as_os_str()])
                .map(|said| format!("heal said {} lines", said.lines().count()))
                .map_err(|e| format!("heal: {e}"))
        },
        group: &|_, _, dir| {
            let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            Some(format!("lockjaw/{}", v["run_id"].as_str()?))
        },
    };
    // `lockjaw cluster up` of every system.
    let up = Victim {
        what: "cluster up",
        kinds: &[
            "redlock",
            "redis",
            "sentinel",
            "redis-cluster",
            "etcd",
            "zookeeper",
            "mariadb",
        ],
        block: 37300,
        cmd: &|system, base, dir| {
            let mut c = lockjaw();
            c.args(["cluster", "up", "--system", system, "--base-port"])
                .arg(base.to_string())
                .arg("--dir")
                .arg(dir);
            c
        },
        clean: &|dir| {
            lockjaw_ok(&[
                "cluster".as_ref(),
                "down".as_ref(),
                "--dir".as_ref(),
                dir.as_os_str(),
            ])
            .map_err(|e| format!("cluster down: {e}"))
        },
        group: &|system, base, _| Some(format!("lockjaw/{system}-{base}")),
    };
    let n = kill_at_random(
        &run,
        kills,
        &mut rng,
        &tmp.path().join("run"),
        &mut problems,
    ) + kill_at_random(&up, kills, &mut rng, &tmp.path().join("up"), &mut problems);
    eprintln!(
        "{n} SIGKILLs in {:.0} s; {} problems",
        t0.elapsed().as_secs_f64(),
        problems.len()
    );
    assert!(n >= 50, "only {n} kills");
    assert!(problems.is_empty(), "seed {seed}:\n{}", problems.join("\n"));
}
