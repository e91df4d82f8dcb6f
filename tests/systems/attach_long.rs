//! `lockjaw run --attach` on clusters lockjaw did not start (the bed
//! fixture of `attach_util`), in `make test-long`: ZooKeeper and etcd under
//! node faults on the leader, Sentinel failing over when its primary is
//! killed (`attach_run` runs the `failover` nemesis itself),
//! decoys never signalled, ambiguous descriptions refused, SIGKILL of the
//! run then `lockjaw heal`, `--plan` changing nothing, the systemd (stub)
//! variant; and the fixture's own ZooKeeper and Sentinel clusters.

use crate::attach_util::{exe_of, BedCluster, Control};
use crate::run_util::*;
use lockjaw::process::{proc_stat, ProcId, Signal};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The fixture's cluster of `system` answers, each node's pidfile names a
/// process of its executable with its identifying argument, a decoy with
/// a node's argument runs the same executable, and down ends them all.
async fn fixture_of(c: BedCluster) {
    c.all_answer().await.unwrap();
    for ((name, pid), n) in c.pids().iter().zip(c.nodes()) {
        assert_eq!(exe_of(*pid).as_deref(), Some(n.real_exe.as_str()), "{name}");
        assert!(
            cmdline(*pid).contains(&n.arg),
            "{name}: {:?}",
            cmdline(*pid)
        );
    }
    let n = c.nodes()[0].clone();
    let d = c.decoy(&c.nodes()[1].name, &n.name).await;
    assert_eq!(exe_of(d).as_deref(), Some(n.real_exe.as_str()));
    assert!(cmdline(d).contains(&n.arg), "{:?}", cmdline(d));
    c.all_answer().await.unwrap();
    let ours = c.started_pids();
    assert_eq!(ours.len(), c.nodes().len() + 1);
    c.down().await;
    assert!(ours.iter().all(|p| !p.is_alive()));
}

#[tokio::test]
#[ignore = "make test-long: ZooKeeper on 3 bed hosts, started by the fixture, ~15 s"]
async fn the_fixture_starts_zookeeper_on_three_hosts() {
    fixture_of(BedCluster::zookeeper(Control::Pidfile).await).await;
}

#[tokio::test]
#[ignore = "make test-long: Redis and 3 sentinels on 3 bed hosts, started by the fixture, ~10 s"]
async fn the_fixture_starts_redis_with_sentinels_on_three_hosts() {
    fixture_of(BedCluster::sentinel(Control::Exe).await).await;
}

/// `lockjaw run --system S --hosts HOSTS --attach --nemesis N --ttl-ms
/// 2000 --seed 17 EXTRA --out DIR`.
fn attach_run(c: &BedCluster, name: &str, dir: &Path, nemesis: &str, extra: &[&str]) -> Run {
    let mut a = vec![
        "--system",
        c.system,
        "--hosts",
        c.hosts_file.to_str().unwrap(),
    ];
    a.extend(["--attach", "--nemesis", nemesis, "--ttl-ms", "2000"]);
    a.extend(["--seed", "17"]);
    a.extend_from_slice(extra);
    run(name, dir, &a)
}

/// Every `lockjaw:` rule in the bed hosts' iptables.
pub(crate) fn rules(c: &BedCluster) -> Vec<String> {
    crate::remote_hosts::host_rules(&c.bed)
}

/// `lockjaw run --attach --plan` on the cluster's hosts file: exit 0, every
/// node's pid printed, and nothing changed (the same pids, none stopped,
/// no rule, every node answering).
pub(crate) async fn plan_changes_nothing(c: &BedCluster, nemesis: &str) -> String {
    let pids = c.pids();
    let out = lockjaw()
        .args(["run", "--system", c.system, "--hosts"])
        .arg(&c.hosts_file)
        .args(["--attach", "--plan", "--nemesis", nemesis])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}{err}");
    for (name, pid) in &pids {
        assert!(text.contains(&format!("node {name} ")), "{name}: {text}");
        assert!(text.contains(&format!("pid {pid} ")), "{pid}: {text}");
    }
    assert_eq!(c.pids(), pids, "no server restarted");
    for (name, pid) in &pids {
        let s = proc_stat(*pid as i32).unwrap();
        assert!(!matches!(s.state, 'T' | 't'), "{name} stopped by --plan");
    }
    assert_eq!(rules(c), Vec::<String>::new());
    c.all_answer().await.unwrap();
    text
}

/// Watches processes' states in /proc while a run goes on: how often each
/// was seen stopped (T).
pub(crate) struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<usize>>>,
}

impl Watch {
    pub fn start(pids: Vec<u32>) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut stopped = vec![0; pids.len()];
            while !s.load(Ordering::Relaxed) {
                for (k, pid) in pids.iter().enumerate() {
                    if proc_stat(*pid as i32).is_some_and(|p| matches!(p.state, 'T' | 't')) {
                        stopped[k] += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            stopped
        });
        Watch {
            stop,
            thread: Some(thread),
        }
    }

    /// How often each pid was seen stopped.
    pub fn end(mut self) -> Vec<usize> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// The node of the first injection's target (`target.node` or the first of
/// `target.nodes`).
fn target_of(r: &Run) -> String {
    let i = &injections(r)[0];
    i["target"]["node"]
        .as_str()
        .or_else(|| i["target"]["nodes"][0].as_str())
        .unwrap_or_else(|| panic!("no target node: {i}"))
        .to_string()
}

/// Every node an injection of the run targeted.
fn targets_of(r: &Run) -> Vec<String> {
    let mut all: Vec<String> = injections(r)
        .iter()
        .flat_map(|i| {
            let t = &i["target"];
            let mut v: Vec<String> = t["nodes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            v.extend(t["node"].as_str().map(String::from));
            v
        })
        .collect();
    all.sort();
    all.dedup();
    all
}

/// After a kill-node run: exactly the killed nodes have new pids.
fn only_the_killed_restarted(r: &Run, before: &[(String, u32)], after: &[(String, u32)]) {
    let killed = targets_of(r);
    assert!(!killed.is_empty());
    for ((name, old), (_, new)) in before.iter().zip(after) {
        assert_eq!(
            killed.contains(name),
            old != new,
            "{name}: {old} → {new}, killed {killed:?}"
        );
    }
}

/// The ZooKeeper ensemble `srvr` calls leader now.
async fn zk_leader(c: &BedCluster) -> String {
    for n in c.nodes() {
        if lockjaw::cluster::zookeeper::probe(&n.client, Duration::from_secs(2)).await
            == Ok("leader".to_string())
        {
            return n.name.clone();
        }
    }
    panic!("no ZooKeeper leader");
}

/// A valid run on an attached cluster; afterwards every node answers.
async fn valid(r: &Run, c: &BedCluster) {
    assert_eq!(r.code, 0, "valid: {}", r.stderr);
    assert_eq!(r.lock()["service"]["valid"], true);
    assert!(r.run_json()["counts"]["worker_grants"].as_u64().unwrap() > 0);
    let inj = injections(r);
    assert!(!inj.is_empty(), "{:?}", r.nemesis());
    assert!(inj.iter().all(|i| i["error"].is_null()), "{inj:?}");
    c.all_answer().await.unwrap();
    assert_eq!(rules(c), Vec::<String>::new(), "no rule left");
}

#[tokio::test]
#[ignore = "make test-long: ZooKeeper attached on 3 bed hosts, --plan, pause-node and kill-node of the leader, ~60 s"]
async fn attached_zookeeper_survives_a_paused_and_a_killed_leader() {
    let c = BedCluster::zookeeper(Control::Pidfile).await;
    let t = tempfile::tempdir().unwrap();
    plan_changes_nothing(&c, "kill-node").await;
    let before = c.pids();

    // pause-node on the leader: valid, the leader was stopped and resumed,
    // nobody restarted.
    let leader = zk_leader(&c).await;
    let w = Watch::start(before.iter().map(|p| p.1).collect());
    let r = attach_run(
        &c,
        "zk-pause",
        &t.path().join("pause"),
        "pause-node",
        &["--time-limit", "10"],
    );
    let seen = w.end();
    valid(&r, &c).await;
    assert_eq!(target_of(&r), leader, "the leader was paused");
    let k = before.iter().position(|p| p.0 == leader).unwrap();
    assert!(seen[k] > 0, "{leader} seen stopped: {seen:?}");
    assert_eq!(c.pids(), before, "nobody restarted");
    // The session settings, from the conf four-letter word.
    let s = &r.run_json()["server_settings"];
    assert_eq!(
        (&s["tickTime"], &s["maxSessionTimeout"]),
        (&"250".into(), &"5000".into()),
        "{s}"
    );

    // kill-node on the (new) leader: valid, the start script brought it
    // back with a new pid, the others kept theirs.
    let leader = zk_leader(&c).await;
    let r = attach_run(
        &c,
        "zk-kill",
        &t.path().join("kill"),
        "kill-node",
        &["--time-limit", "12"],
    );
    valid(&r, &c).await;
    assert_eq!(target_of(&r), leader, "the leader was killed first");
    only_the_killed_restarted(&r, &before, &c.pids());
    for n in c.nodes() {
        let a = lockjaw::cluster::zookeeper::probe(&n.client, Duration::from_secs(2)).await;
        assert!(
            matches!(a.as_deref(), Ok("leader" | "follower")),
            "{}: {a:?}",
            n.name
        );
    }
    c.down().await;
}

#[tokio::test]
#[ignore = "make test-long: etcd attached by executable and argument, decoys on every host, kill-node, ~30 s"]
async fn attached_etcd_by_exe_and_arg_kills_the_leader_and_never_a_decoy() {
    let c = BedCluster::etcd(Control::Exe).await;
    let t = tempfile::tempdir().unwrap();
    // On each host a decoy: etcd with the next node's name.
    let (decoys, ids) = c.decoys_with_the_next_nodes_args().await;
    plan_changes_nothing(&c, "kill-node").await;
    let before = c.pids();
    let mut watched: Vec<u32> = decoys.clone();
    watched.extend(before.iter().map(|p| p.1));
    let w = Watch::start(watched);
    let r = attach_run(
        &c,
        "etcd-exe-kill",
        &t.path().join("kill"),
        "kill-node",
        &["--time-limit", "8"],
    );
    let seen = w.end();
    valid(&r, &c).await;
    only_the_killed_restarted(&r, &before, &c.pids());
    // The decoys: never stopped, never killed (same pid and start time).
    assert_eq!(&seen[..3], &[0, 0, 0], "decoys seen stopped");
    for (d, id) in decoys.iter().zip(&ids) {
        assert!(id.is_alive(), "decoy {d} left alone");
        assert!(!matches!(proc_stat(*d as i32).unwrap().state, 'T' | 't'));
    }
    let s = &r.run_json()["server_settings"];
    assert_eq!(s["election-timeout"], "1000", "{s}");
    c.down().await;
}

/// A nemesis file: `kill-node` of the primary for 6 s, once.
fn kill_primary(dir: &Path) -> PathBuf {
    let p = dir.join("kill-primary.toml");
    std::fs::write(
        &p,
        "name = \"kill-primary\"\nfault = \"kill-node\"\ntarget = \"primary\"\n\
         first_delay_ms = 1000\nduration_ms = 6000\nmax_injections = 1\n",
    )
    .unwrap();
    p
}

#[tokio::test]
#[ignore = "make test-long: Redis with Sentinel attached on 3 bed hosts, the primary killed, the sentinels fail over, ~40 s"]
async fn attached_sentinel_fails_over_when_its_primary_is_killed() {
    let c = BedCluster::sentinel(Control::Pidfile).await;
    let t = tempfile::tempdir().unwrap();
    plan_changes_nothing(&c, "kill-node").await;
    let nemesis = kill_primary(t.path());
    let r = attach_run(
        &c,
        "sentinel-kill-primary",
        &t.path().join("kill"),
        nemesis.to_str().unwrap(),
        &["--time-limit", "12"],
    );
    // Violations are reported, not required: the verdict varies.
    assert!(matches!(r.code, 0 | 1), "{}", r.stderr);
    eprintln!("service valid: {}", r.lock()["service"]["valid"]);
    let inj = injections(&r);
    assert_eq!(inj.len(), 1, "{:?}", r.nemesis());
    assert!(inj[0]["error"].is_null(), "{}", inj[0]);
    assert_eq!(target_of(&r), "r1", "the primary was killed");
    // The failover landed: the sentinels name r2 as the primary, and r1,
    // started again by its start script, rejoined as its replica.
    let t2 = Duration::from_secs(2);
    let m = lockjaw::client::SENTINEL_MASTER;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = lockjaw::client::redis_query::ask_primary(&c.node("s1").client, m, t2).await;
        let role = lockjaw::client::redis_query::role(&c.node("r1").client, t2).await;
        if p.as_deref() == Ok(c.node("r2").client.as_str())
            && matches!(&role, Ok((r, _)) if r == "slave")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no failover: primary {p:?}, r1 {role:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.all_answer().await.unwrap();
    let s = &r.run_json()["server_settings"];
    assert_eq!(s["appendfsync"], "everysec", "{s}");
    c.down().await;
}

/// A nemesis file: `fault` on the leader, for 30 s, after 0.5 s.
fn long_fault(dir: &Path, fault: &str) -> PathBuf {
    let p = dir.join(format!("{fault}-long.toml"));
    std::fs::write(
        &p,
        format!(
            "name = \"{fault}-long\"\nfault = \"{fault}\"\ntarget = \"leader\"\n\
             first_delay_ms = 500\nduration_ms = 30000\n"
        ),
    )
    .unwrap();
    p
}

/// Start `lockjaw run --attach` with `nemesis` for 120 s, wait until
/// `landed` says the fault holds, SIGKILL the run; its directory.
fn killed_mid_fault(c: &BedCluster, dir: &Path, nemesis: &Path, landed: impl Fn() -> bool) {
    let mut g = Guard::spawn(
        lockjaw()
            .args(["run", "--system", c.system, "--attach", "--hosts"])
            .arg(&c.hosts_file)
            .arg("--nemesis")
            .arg(nemesis)
            .args(["--time-limit", "120", "--ttl-ms", "2000", "--seed", "5"])
            .args(["--no-progress", "--out"])
            .arg(dir),
    );
    let pid = g.pid();
    let alive = || ProcId::of(pid).is_some_and(|p| p.is_alive());
    eventually("the fault holds", Duration::from_secs(90), || {
        landed() || !alive()
    });
    assert!(alive(), "the run ended early");
    g.signal(libc::SIGKILL);
    assert_eq!(g.wait(Duration::from_secs(10)), None, "killed by a signal");
}

#[tokio::test]
#[ignore = "make test-long: SIGKILL of an attached run mid-pause and mid-partition, then heal, ~40 s"]
async fn heal_after_a_sigkill_mid_pause_and_mid_partition_resumes_and_unblocks() {
    let c = BedCluster::etcd(Control::Pidfile).await;
    let t = tempfile::tempdir().unwrap();
    let before = c.pids();
    let stopped = || {
        c.pids()
            .iter()
            .any(|(_, p)| proc_stat(*p as i32).is_some_and(|s| matches!(s.state, 'T' | 't')))
    };

    // Mid-pause: a server stays stopped until heal resumes it.
    let dir = t.path().join("pause");
    killed_mid_fault(&c, &dir, &long_fault(t.path(), "pause-node"), stopped);
    assert!(stopped(), "a SIGKILL leaves the server stopped");
    heal_ok(&dir);
    assert!(!stopped(), "heal resumed it");
    assert_eq!(
        crate::deadman::timers(&crate::deadman::run_id(&dir)),
        [""; 0]
    );
    assert_eq!(c.pids(), before, "the same processes");
    eventually_answer(&c).await;

    // Mid-partition: the rules stay until heal removes them.
    let dir = t.path().join("cut");
    killed_mid_fault(&c, &dir, &long_fault(t.path(), "partition-node"), || {
        !rules(&c).is_empty()
    });
    assert!(!rules(&c).is_empty(), "a SIGKILL leaves the rules");
    heal_ok(&dir);
    assert_eq!(rules(&c), Vec::<String>::new(), "heal removed them");
    assert_eq!(
        crate::deadman::timers(&crate::deadman::run_id(&dir)),
        [""; 0]
    );
    assert_eq!(c.pids(), before);
    eventually_answer(&c).await;
    c.down().await;
}

/// Every node answers within 30 s (after a heal a member catches up).
pub(crate) async fn eventually_answer(c: &BedCluster) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match c.all_answer().await {
            Ok(()) => return,
            Err(e) => assert!(Instant::now() < deadline, "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
#[ignore = "make test-long: etcd under stub systemd units, --plan, pause-node and kill-node, ~40 s"]
async fn attached_etcd_under_stub_systemd_units() {
    let c = BedCluster::etcd(Control::Systemd).await;
    let t = tempfile::tempdir().unwrap();
    let text = plan_changes_nothing(&c, "kill-node").await;
    assert!(text.contains("kill -s KILL"), "{text}");
    let before = c.pids();
    let r = attach_run(
        &c,
        "systemd-pause",
        &t.path().join("pause"),
        "pause-node",
        &["--time-limit", "6"],
    );
    valid(&r, &c).await;
    assert_eq!(c.pids(), before);
    let r = attach_run(
        &c,
        "systemd-kill",
        &t.path().join("kill"),
        "kill-node",
        &["--time-limit", "8"],
    );
    valid(&r, &c).await;
    only_the_killed_restarted(&r, &before, &c.pids());
    // The unit's restart settings are in run.json; its journal (the stub's)
    // was copied.
    let att = r.run_json()["attached"].clone();
    assert!(
        att.to_string().contains("Restart") || att.to_string().contains("restart"),
        "{att}"
    );
    assert!(r.dir.join(format!("logs/{}.log", target_of(&r))).is_file());
    c.down().await;
}

/// The median of `d`.
fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// One system's costs on the first node of `c`: through one SSH
/// connection and its kept-open shell, as a run's node handle sends them.
async fn costs_on(c: &BedCluster, rounds: usize) -> Vec<(String, Duration)> {
    use lockjaw::remote::attach;
    use lockjaw::remote::{control_root, HostsFile};
    let f = HostsFile::read(&c.hosts_file).unwrap();
    let spec = &f.nodes[0];
    let a = spec.attach.clone().expect("an attach table");
    let host = lockjaw::remote::Host::connect(&spec.name, &spec.target, &control_root())
        .await
        .unwrap();
    let client = c.nodes()[0].client.clone();
    let t = Duration::from_secs(2);
    let healthy = |client: String| async move {
        match c.system {
            "etcd" => lockjaw::cluster::etcd::probe(&client, &Default::default(), t)
                .await
                .is_ok(),
            _ => lockjaw::cluster::zookeeper::probe(&client, t).await.is_ok(),
        }
    };
    let listen = attach::Listen::of(&client);
    let mut found = attach::discover_at(&host, &a, listen.as_ref())
        .await
        .unwrap();
    let (mut disc, mut pause, mut kill, mut start, mut back) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut answer, mut socket) = (vec![], vec![]);
    for _ in 0..2 * rounds {
        let t0 = Instant::now();
        found = attach::discover_at(&host, &a, listen.as_ref())
            .await
            .unwrap();
        disc.push(t0.elapsed());
    }
    // The proof before a strike: the server's own answer (one query over
    // the client address), or without one the socket (one script).
    for _ in 0..2 * rounds {
        let t0 = Instant::now();
        let ok = match c.system {
            "etcd" => lockjaw::cluster::etcd::identity(&client, &Default::default(), t)
                .await
                .is_ok(),
            _ => lockjaw::cluster::zookeeper::identity(&client, t)
                .await
                .is_ok(),
        };
        answer.push(t0.elapsed());
        assert!(ok, "{} answers who it is", spec.name);
        let t0 = Instant::now();
        let l = attach::listening(&host, &found.procs, listen.as_ref().unwrap())
            .await
            .unwrap();
        socket.push(t0.elapsed());
        assert!(matches!(l, attach::Listening::Held { .. }), "{l:?}");
    }
    for _ in 0..2 * rounds {
        let t0 = Instant::now();
        let s = attach::signal(&host, &found.procs, Signal::Stop)
            .await
            .unwrap();
        let stopped = proc_stat(found.procs[0].pid as i32).map(|s| s.state);
        attach::signal(&host, &found.procs, Signal::Cont)
            .await
            .unwrap();
        pause.push(t0.elapsed());
        assert!(
            !s.sent.is_empty() && matches!(stopped, Some('T' | 't')),
            "{stopped:?}"
        );
    }
    for _ in 0..rounds {
        let t0 = Instant::now();
        attach::kill(&host, &a, &found).await.unwrap();
        kill.push(t0.elapsed());
        let t1 = Instant::now();
        attach::start(&host, &a).await.unwrap();
        start.push(t1.elapsed());
        while !healthy(client.clone()).await {
            assert!(
                t1.elapsed() < Duration::from_secs(60),
                "{} did not answer",
                spec.name
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        back.push(t1.elapsed());
        found = attach::discover_at(&host, &a, listen.as_ref())
            .await
            .unwrap();
    }
    host.close().await;
    vec![
        ("discovery (with the socket's holder)".into(), median(disc)),
        ("proof by the server's answer".into(), median(answer)),
        ("proof by the listening socket".into(), median(socket)),
        ("pause + resume (SIGSTOP, SIGCONT)".into(), median(pause)),
        ("kill (SIGKILL until gone)".into(), median(kill)),
        ("start command".into(), median(start)),
        ("start until healthy".into(), median(back)),
    ]
}

/// The bench of docs/remote.md's "Your own servers, faults included": on
/// an attached etcd member and an attached ZooKeeper server (pidfile
/// control), the medians of 20 discoveries, 20 pause + resume rounds and
/// 10 kill + start-until-healthy rounds, over SSH on the bed. Prints them;
/// asserts only that each pause took hold and each start came back.
#[tokio::test]
#[ignore = "bench: cargo test --profile ci --test systems attach_long::fault_cost -- --ignored --nocapture"]
async fn fault_cost_on_attached_nodes_over_ssh() {
    for system in ["etcd", "zookeeper"] {
        let c = match system {
            "etcd" => BedCluster::etcd(Control::Pidfile).await,
            _ => BedCluster::zookeeper(Control::Pidfile).await,
        };
        for (what, d) in costs_on(&c, 10).await {
            println!("{system} {}: {what}: median {}", c.nodes()[0].name, ms(d));
        }
        c.down().await;
    }
}
