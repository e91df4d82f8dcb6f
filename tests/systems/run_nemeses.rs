//! `lockjaw run` under the node, partition, clock, failover and mixed
//! faults, on real local clusters: Redlock loses mutual exclusion when a
//! majority's clocks jump; a Sentinel failover grants a lock twice; etcd and
//! ZooKeeper stay safe through a paused, killed or cut-off leader; a
//! partition's iptables rules are gone after a SIGKILLed run and `lockjaw
//! heal`; unsupported combinations exit 3 before starting anything.
//! Short runs (10-12 s); repeated ones are #[ignore] (make test-long).
//! Ports: clusters on 45000-45999 (retries move up by 30); Toxiproxy and
//! the storage on port 0.

use crate::run_util::*;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `--system S --nemesis N --time-limit 10 --ttl-ms 2000 --seed 17`, each
/// of the last three replaced where `extra` gives it.
fn short(system: &str, nemesis: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["--system", system, "--nemesis", nemesis]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (flag, default) in [
        ("--time-limit", "10"),
        ("--ttl-ms", "2000"),
        ("--seed", "17"),
    ] {
        if !extra.contains(&flag) {
            v.extend([flag.to_string(), default.to_string()]);
        }
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn go(name: &str, root: &Path, port: u16, args: &[String]) -> Run {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    run_local(name, root, port, &a)
}

fn count(r: &Run, check: &str) -> u64 {
    r.lock()["checks"][check]["count"].as_u64().unwrap_or(0)
}

/// Every libfaketime control file of the run says the real time again.
fn clocks_restored(dir: &Path) {
    let files: Vec<_> = std::fs::read_dir(dir.join("faketime"))
        .expect("the run started its nodes under libfaketime")
        .flatten()
        .collect();
    assert!(!files.is_empty());
    for f in files {
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert_eq!(text.trim(), "+0", "{}", f.path().display());
    }
}

/// The rules the run in `dir` (by the run id in its run.json) put into the
/// OUTPUT chain; none before run.json names the id.
fn our_rules(dir: &Path) -> Vec<String> {
    let id = std::fs::read_to_string(dir.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["run_id"].as_str().map(str::to_string))
        .unwrap_or_default();
    if id.is_empty() {
        return Vec::new();
    }
    let out = std::process::Command::new("iptables")
        .args(["-w", "-S", "OUTPUT"])
        .output()
        .expect("iptables runs");
    let tag = format!("lockjaw:{id} partition-node");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&tag))
        .map(str::to_string)
        .collect()
}

#[test]
fn redlock_clock_jump_on_a_majority_breaks_mutual_exclusion() {
    let tmp = tempfile::tempdir().unwrap();
    let r = go(
        "redlock-clock-jump",
        tmp.path(),
        45000,
        &short("redlock", "clock-jump", &[]),
    );
    let inj = injections(&r);
    assert!(!inj.is_empty(), "at least one jump");
    for i in &inj {
        assert_eq!(i["target"]["nodes"].as_array().unwrap().len(), 3, "{i}");
        assert_eq!(i["target"]["offset_ms"], 4000, "2 leases");
    }
    let res = r.lock();
    assert_eq!(res["service"]["valid"], false, "{res}");
    assert!(count(&r, "safety") > 0, "two valid leases at once");
    assert_eq!(r.code, 1);
    // Issue 30 (needs the merged witness search): the two holders' witness.
    let w = crate::witness_util::issue30_assert_witness(&r, "safety-violation");
    assert_eq!(w.info.owners.len(), 2, "two holders: {:?}", w.info.owners);
    clocks_restored(&r.dir);
    assert_nothing_left(&r.dir);
}

#[test]
fn sentinel_failover_grants_a_held_lock_again() {
    let tmp = tempfile::tempdir().unwrap();
    // The first holder's critical section (3 s) outlasts the failover
    // (about 1 s; 2 s on a loaded machine).
    let r = go(
        "sentinel-failover",
        tmp.path(),
        45100,
        &short(
            "sentinel",
            "failover",
            &[
                "--ttl-ms",
                "6000",
                "--hold-ms",
                "3000",
                // The replicas are paused just before a release goes out
                // (the first about 3 s in) and miss the grant after it;
                // an attempt that finds none retries at the next release.
                "--time-limit",
                "20",
            ],
        ),
    );
    let inj = injections(&r);
    assert!(!inj.is_empty(), "{:?}", r.nemesis());
    let first = &inj[0];
    assert_eq!(first["target"]["primary"], "redis1", "{first}");
    assert_eq!(
        first["target"]["detail"]["sentinel_failover"]["reply"],
        "OK"
    );
    let res = r.lock();
    assert_eq!(res["service"]["valid"], false, "{res}");
    assert!(count(&r, "safety") > 0, "two valid leases at once: {res}");
    assert_eq!(r.code, 1);
    assert_nothing_left(&r.dir);
}

/// A short run that must end with service and resource valid; the temp
/// directory comes back with it for more checks.
fn stays_valid(system: &str, nemesis: &str, port: u16) -> (tempfile::TempDir, Run) {
    let tmp = tempfile::tempdir().unwrap();
    let r = go(
        &format!("{system}-{nemesis}"),
        tmp.path(),
        port,
        &short(system, nemesis, &[]),
    );
    let inj = injections(&r);
    assert!(!inj.is_empty(), "{:?}", r.nemesis());
    assert!(
        inj.iter().all(|i| i["error"].is_null()),
        "every fault was taken back: {inj:?}"
    );
    let res = r.lock();
    assert_eq!(res["service"]["valid"], true, "{res}");
    assert_eq!(res["resource"]["valid"], true, "fencing on: {res}");
    assert!(
        r.run_json()["counts"]["worker_grants"].as_u64().unwrap() > 0,
        "the workers made progress"
    );
    assert_eq!(r.code, 0);
    assert_nothing_left(&r.dir);
    (tmp, r)
}

#[test]
fn etcd_pause_leader_keeps_the_service_valid() {
    let (_tmp, r) = stays_valid("etcd", "pause-node", 45200);
    let nodes = &injections(&r)[0]["target"]["nodes"];
    assert_eq!(nodes.as_array().unwrap().len(), 1, "the leader alone");
}

#[test]
fn etcd_kill_leader_keeps_the_service_valid() {
    let (_tmp, r) = stays_valid("etcd", "kill-node", 45300);
    assert_eq!(injections(&r)[0]["detail"]["restarted"], true);
}

#[test]
fn zookeeper_pause_leader_keeps_the_service_valid() {
    let (_tmp, r) = stays_valid("zookeeper", "pause-node", 45400);
    assert_eq!(injections(&r)[0]["target"]["target"], "leader");
}

#[test]
fn zookeeper_kill_leader_keeps_the_service_valid() {
    let (_tmp, r) = stays_valid("zookeeper", "kill-node", 45500);
    assert_eq!(injections(&r)[0]["detail"]["restarted"], true);
}

#[test]
fn etcd_partitioned_leader_is_replaced_and_its_rules_removed() {
    let (_tmp, r) = stays_valid("etcd", "partition-node", 45600);
    let first = &injections(&r)[0];
    let cut = first["target"]["node"].as_str().unwrap().to_string();
    assert!(
        first["target"]["port_rules"].as_u64().unwrap() >= 4,
        "{first}"
    );
    let leader = &first["detail"]["leader_while_cut"];
    assert!(
        leader.is_string() && leader != &Value::String(cut.clone()),
        "a new leader while {cut} was cut off: {first}"
    );
}

#[test]
fn partition_rules_are_gone_after_sigkill_and_heal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut g = Guard::spawn(
        lockjaw()
            .args([
                "run",
                "--system",
                "zookeeper",
                "--nemesis",
                "partition-node",
            ])
            .args(["--time-limit", "120", "--ttl-ms", "2000", "--seed", "5"])
            .args(["--base-port", "45700", "--no-progress"])
            .arg("--out")
            .arg(&dir),
    );
    let pid = g.pid();
    let alive = || lockjaw::process::ProcId::of(pid).is_some_and(|p| p.is_alive());
    eventually(
        "partition rules in the OUTPUT chain",
        Duration::from_secs(120),
        || !our_rules(&dir).is_empty() || !alive(),
    );
    assert!(
        alive(),
        "the run ended early (exit {:?})",
        g.wait(Duration::from_secs(5))
    );
    g.signal(libc::SIGKILL);
    assert_eq!(g.wait(Duration::from_secs(10)), None, "killed by a signal");
    assert!(!our_rules(&dir).is_empty(), "a SIGKILL leaves the rules");
    heal_ok(&dir);
    assert_eq!(our_rules(&dir), Vec::<String>::new(), "heal removed them");
    assert_nothing_left(&dir);
}

#[test]
fn a_seeded_mix_draws_faults_that_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let r = go(
        "redis-mixed",
        tmp.path(),
        45800,
        &short("redis", "mixed", &["--time-limit", "12"]),
    );
    let inj = injections(&r);
    assert!(inj.len() >= 2, "{inj:?}");
    let allowed = [
        "pause-holder",
        "kill-holder",
        "partition-holder",
        "latency",
        "delay-storage",
        "pause-node",
        "kill-node",
        "kill-service",
        "clock-jump",
        "clock-strobe",
    ];
    for i in &inj {
        let f = i["fault"].as_str().unwrap();
        assert!(allowed.contains(&f), "{f} does not apply to a single Redis");
        assert_eq!(i["target"]["mixed"], true);
    }
    let (_, history) = r.history();
    let starts = history
        .iter()
        .filter(|o| o.f == "start" && o.value["mixed"] == true)
        .count();
    assert_eq!(starts, 2 * inj.len(), "invoke + info per injection");
    assert_nothing_left(&r.dir);
}

#[test]
fn unsupported_combinations_exit_3_before_starting_anything() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--system", "etcd", "--nemesis", "clock-jump"],
            "libfaketime",
        ),
        (
            &["--system", "zookeeper", "--nemesis", "clock-strobe"],
            "ZooKeeper",
        ),
        (&["--system", "redis", "--nemesis", "failover"], "Sentinel"),
        (
            &["--system", "redlock", "--nemesis", "partition-node"],
            "peer",
        ),
        (
            &[
                "--system",
                "etcd",
                "--nemesis",
                "kill-node",
                "--endpoints",
                "127.0.0.1:1",
            ],
            "--endpoints",
        ),
        (
            &[
                "--system",
                "redis",
                "--nemesis",
                "clock-jump",
                "--endpoints",
                "127.0.0.1:1",
            ],
            "--endpoints",
        ),
    ];
    for (args, why) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let r = run("unsupported", &tmp.path().join("run"), args);
        assert_eq!(r.code, 3, "{args:?}");
        assert!(
            r.stderr.contains("not supported")
                && r.stderr.contains(why)
                && r.stderr.contains("hint"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(!tmp.path().join("run").join("cluster.json").exists());
    }
}

/// make test-long: the failover recipe five times; every run must find
/// two holders at once. Prints the tally for the note.
#[test]
#[ignore]
fn sentinel_failover_five_runs() {
    let mut found = 0;
    let n = 5;
    for k in 0..n {
        let tmp = tempfile::tempdir().unwrap();
        let seed = (100 + k).to_string();
        let a = short(
            "sentinel",
            "failover",
            &[
                "--ttl-ms",
                "6000",
                "--hold-ms",
                "3000",
                "--time-limit",
                "20",
                "--seed",
                &seed,
            ],
        );
        let r = go("sentinel-failover-long", tmp.path(), 45900, &a);
        let faults = injections(&r).len();
        let safety = count(&r, "safety");
        eprintln!(
            "[failover run {k}] faults {faults}, two-holder violations {safety}, fence-order {}, lost updates {}",
            count(&r, "fence_order"),
            count(&r, "lost_updates")
        );
        found += usize::from(safety > 0);
        assert_nothing_left(&r.dir);
    }
    eprintln!("sentinel + failover: a safety violation in {found} of {n} runs");
    assert_eq!(found, n);
}

/// make test-long: clock-strobe on Redlock and a kill of an etcd majority.
#[test]
#[ignore]
fn strobe_and_majority_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let r = go(
        "redlock-strobe",
        tmp.path(),
        45950,
        &short("redlock", "clock-strobe", &["--time-limit", "15"]),
    );
    assert!(injections(&r)[0]["detail"]["flips"].as_u64().unwrap() > 2);
    assert_eq!(r.lock()["service"]["valid"], false);
    clocks_restored(&r.dir);
    assert_nothing_left(&r.dir);
    let spec = tmp.path().join("kill-majority.toml");
    std::fs::write(
        &spec,
        "name = \"kill-majority\"\nfault = \"kill-node\"\ntarget = \"majority\"\nduration_ms = 3000\n",
    )
    .unwrap();
    let a = short("etcd", spec.to_str().unwrap(), &["--time-limit", "15"]);
    let r = go("etcd-kill-majority", tmp.path(), 45970, &a);
    assert_eq!(
        injections(&r)[0]["target"]["nodes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(r.lock()["service"]["valid"], true);
    assert_nothing_left(&r.dir);
}
