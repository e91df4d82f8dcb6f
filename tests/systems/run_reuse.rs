//! `lockjaw run --runs N` sharing one local cluster between its runs
//! (issue 44): the runs on a reused cluster reach the verdicts they reach
//! on fresh ones, a run that left something behind gets the next run a new
//! cluster, and a campaign killed mid-run is healed, its shared cluster
//! included. Redis, ports 39200–39599 (a 50-port block per campaign).
//! In `make test`: the orphan (about 7 s), the foreign key (5 s) and the
//! killed campaign (4 s); the paused clients' pair of campaigns (15 s)
//! and a shrink whose steps share clusters (60 s) are `#[ignore]`d (make
//! test-long).

use crate::run_util::{assert_nothing_left, json_file, lockjaw, run, Guard, Run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A free base port in `lo..lo + 50` (Redis takes one port; the runs of
/// a campaign take the same one).
fn free_base(lo: u16) -> u16 {
    (lo..lo + 50)
        .step_by(10)
        .find(|b| lockjaw::process::ports::reserve(Some(*b), 1).is_ok())
        .unwrap_or_else(|| panic!("no free port in {lo}..{}", lo + 50))
}

/// `--runs N` of a 2 s fenced-counter on one Redis under `nemesis`, seed 5,
/// into `dir`, on ports from `block`; `fresh`: `--fresh-cluster`.
fn campaign(name: &str, dir: &Path, block: u16, runs: u32, nemesis: &str, fresh: bool) -> Run {
    let base = free_base(block).to_string();
    let n = runs.to_string();
    let mut a = vec!["--system", "redis", "--nemesis", nemesis, "--runs", &n];
    a.extend(["--time-limit", "2", "--ttl-ms", "1000", "--hold-ms", "100"]);
    a.extend(["--seed", "5", "--base-port", &base]);
    if fresh {
        a.push("--fresh-cluster");
    }
    run(name, dir, &a)
}

/// A Redis campaign of `runs` runs of `secs` s under `nemesis` (1 s
/// leases, seed 5) from base port `b` into `dir`, running beside the test.
fn spawn_campaign(nemesis: &str, runs: u32, secs: u32, b: &str, dir: &Path) -> Guard {
    Guard::spawn(
        lockjaw()
            .args(["run", "--system", "redis", "--nemesis", nemesis])
            .args([
                "--runs",
                &runs.to_string(),
                "--time-limit",
                &secs.to_string(),
            ])
            .args(["--ttl-ms", "1000", "--seed", "5"])
            .args(["--base-port", b, "--no-progress", "--out"])
            .arg(dir),
    )
}

fn run_json(dir: &Path, i: u32) -> Value {
    json_file(&dir.join(format!("run-{i}")).join("run.json"))
}

/// Each run's service and resource verdicts (results.json's `valid` of
/// each), in run order.
fn verdicts(dir: &Path, runs: u32) -> Vec<(Value, Value)> {
    (1..=runs)
        .map(|i| {
            let r = json_file(&dir.join(format!("run-{i}")).join("results.json"));
            (
                r["lock"]["service"]["valid"].clone(),
                r["lock"]["resource"]["valid"].clone(),
            )
        })
        .collect()
}

/// A campaign's shared cluster(s): each run's `cluster.home`.
fn homes(dir: &Path, runs: u32) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = (1..=runs)
        .filter_map(|i| {
            run_json(dir, i)["cluster"]["home"]
                .as_str()
                .map(PathBuf::from)
        })
        .collect();
    v.dedup();
    v
}

/// Three runs of `pause-holder` (each pauses holders: the paused clients
/// of run 1 are resumed and stopped by its own undo log) share one
/// cluster; their verdicts are those of the same seeds on fresh clusters,
/// every run took grants on its own key, and the campaign stops the
/// cluster at its end.
#[test]
#[ignore = "make test-long: two campaigns of 3 runs, about 15 s"]
fn runs_after_paused_clients_reuse_the_cluster_with_a_fresh_ones_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let (shared, fresh) = (tmp.path().join("shared"), tmp.path().join("fresh"));
    let s = campaign("reused", &shared, 39200, 3, "pause-holder", false);
    let f = campaign("fresh", &fresh, 39250, 3, "pause-holder", true);
    assert_eq!(s.code, 0, "fenced runs stay valid");
    assert_eq!(verdicts(&shared, 3), verdicts(&fresh, 3));
    let uses: Vec<Value> = (1..=3)
        .map(|i| run_json(&shared, i)["cluster"].clone())
        .collect();
    assert_eq!(uses[0]["reused"], false);
    assert!(uses[1..].iter().all(|u| u["reused"] == true), "{uses:?}");
    assert!(uses.iter().all(|u| u["id"] == uses[0]["id"]), "{uses:?}");
    assert!(
        s.stdout
            .contains("clusters: 3 runs on 1 cluster(s), 2 of them on one an earlier run used"),
        "{}",
        s.stdout
    );
    assert!(std::fs::read_to_string(shared.join("tally.md"))
        .unwrap()
        .contains("clusters: 3 runs"));
    // Each run's lock key carries its run id, and each took grants on it.
    let mut keys = Vec::new();
    for i in 1..=3 {
        let info = run_json(&shared, i);
        let key = info["workload"]["lock_key"].as_str().unwrap().to_string();
        assert_eq!(key, format!("lockjaw-{}", info["run_id"].as_str().unwrap()));
        assert!(info["counts"]["grants"].as_u64().unwrap() > 0, "run {i}");
        keys.push(key);
    }
    keys.dedup();
    assert_eq!(keys.len(), 3);
    // The fresh campaign: a cluster per run, none reused.
    let fresh_ids: Vec<Value> = (1..=3)
        .map(|i| run_json(&fresh, i)["cluster"].clone())
        .collect();
    assert!(
        fresh_ids
            .iter()
            .all(|u| u["reused"] == false && u["home"].is_null()),
        "{fresh_ids:?}"
    );
    for h in homes(&shared, 3) {
        assert_nothing_left(&h);
    }
    assert_eq!(f.code, 0);
}

/// Holds lock key `key` on the Redis at `addr` as another client would:
/// takes it as soon as the server answers and the key is free (`SET NX PX
/// 1000`, tried every 5 ms, before the run's workers start), then renews
/// it every 200 ms while it is its own, until `stop` or until its server
/// goes away after it held the key. The renewals it made.
fn renewing_orphan(
    addr: String,
    key: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u32> {
    std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut renewals = 0;
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            let Ok(mut c) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            while !stop.load(Ordering::SeqCst) {
                let took: Result<Option<String>, _> = redis::cmd("SET")
                    .arg(&key)
                    .arg("orphan")
                    .arg("NX")
                    .arg("PX")
                    .arg(1000)
                    .query(&mut c);
                let held: Result<Option<String>, _> = redis::cmd("GET").arg(&key).query(&mut c);
                match (took, held) {
                    (Err(_), _) | (_, Err(_)) if renewals > 0 => return renewals,
                    (Err(_), _) | (_, Err(_)) => break,
                    (_, Ok(Some(v))) if v == "orphan" => {
                        let _: Result<i64, _> =
                            redis::cmd("PEXPIRE").arg(&key).arg(1000).query(&mut c);
                        renewals += 1;
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    _ => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        renewals
    })
}

/// Waits for the history of `run-1` of the campaign in `dir` to begin
/// (its meta record is written before the cluster starts); its lock key.
fn first_runs_key_early(dir: &Path) -> String {
    let h = dir.join("run-1").join("history.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&h).unwrap_or_default();
        if let Some(Ok(meta)) = text
            .lines()
            .next()
            .filter(|_| text.contains('\n'))
            .map(serde_json::from_str::<Value>)
        {
            return meta["lock_key"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "run 1 wrote no history");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits for `run-1` of the campaign in `dir` to record ops; its lock key.
fn first_runs_key(dir: &Path) -> String {
    let h = dir.join("run-1").join("history.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&h).unwrap_or_default();
        if text.contains("\"invoke\"") {
            let meta: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
            return meta["lock_key"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "run 1 recorded no op");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run 1 ends with its lock key held and renewed by a client of no run
/// (an orphan): the next run gets a new cluster, says why, and reaches the
/// fresh run's verdict. A key of the workload's bare name held by a
/// foreign client does not keep the runs from their own keys.
#[test]
fn a_renewing_orphan_gets_the_next_run_a_new_cluster_a_foreign_key_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("orphan");
    let base = free_base(39300);
    let addr = format!("127.0.0.1:{base}");
    let b = base.to_string();
    let mut g = spawn_campaign("none", 2, 3, &b, &dir);
    let key = first_runs_key_early(&dir);
    let stop = Arc::new(AtomicBool::new(false));
    let orphan = renewing_orphan(addr.clone(), key.clone(), stop.clone());
    first_runs_key(&dir);
    // A foreign client holds the workload's own key name for a minute.
    let c = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let mut conn = c
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap();
    let () = redis::cmd("SET")
        .arg("lockjaw")
        .arg("foreign")
        .arg("PX")
        .arg(60_000)
        .query(&mut conn)
        .unwrap();
    // Run 1's workers may wait on the orphan's key (its verdict is its
    // own); the campaign ends.
    assert!(
        g.wait(Duration::from_secs(120)).is_some(),
        "the campaign exits"
    );
    stop.store(true, Ordering::SeqCst);
    assert!(orphan.join().unwrap() > 0, "the orphan never held {key}");
    let second = run_json(&dir, 2)["cluster"].clone();
    assert_eq!(second["reused"], false, "{second}");
    let why = second["fresh_because"].as_str().unwrap_or_default();
    assert!(why.contains(&format!("of its lock key \"{key}\"")), "{why}");
    assert_ne!(second["id"], run_json(&dir, 1)["cluster"]["id"]);
    assert!(run_json(&dir, 2)["counts"]["grants"].as_u64().unwrap() > 0);
    // As a fresh cluster's run without faults: valid on both counts.
    assert_eq!(verdicts(&dir, 2)[1], (Value::Bool(true), Value::Bool(true)));
    for h in homes(&dir, 2) {
        assert_nothing_left(&h);
    }
}

/// The foreign key alone (no orphan): the second run reuses the cluster,
/// and its workers are granted their own key as on a fresh cluster.
#[test]
fn a_foreign_key_of_the_bare_name_leaves_the_cluster_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("foreign");
    let base = free_base(39400);
    let b = base.to_string();
    let mut g = spawn_campaign("none", 2, 2, &b, &dir);
    first_runs_key(&dir);
    let c = redis::Client::open(format!("redis://127.0.0.1:{base}/")).unwrap();
    let mut conn = c
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap();
    let () = redis::cmd("SET")
        .arg("lockjaw")
        .arg("foreign")
        .arg("PX")
        .arg(60_000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(g.wait(Duration::from_secs(120)), Some(0), "both runs valid");
    let second = run_json(&dir, 2);
    assert_eq!(second["cluster"]["reused"], true, "{}", second["cluster"]);
    assert!(second["counts"]["grants"].as_u64().unwrap() > 0);
    assert_eq!(verdicts(&dir, 2)[1], (Value::Bool(true), Value::Bool(true)));
    for h in homes(&dir, 2) {
        assert_nothing_left(&h);
    }
}

/// A campaign SIGKILLed while its second run goes on the cluster the
/// first started: `lockjaw heal` of that run alone (what
/// `histories/latest` names) follows its `run.json` to the shared cluster
/// and heals it too: no server of it runs, both undo logs are drained,
/// the nodes' data directories are gone.
#[test]
fn a_killed_campaign_is_healed_its_shared_cluster_included() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("killed");
    let b = free_base(39500).to_string();
    let mut g = spawn_campaign("pause-holder", 3, 3, &b, &dir);
    let second = dir.join("run-2");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(second.join("history.jsonl"))
        .unwrap_or_default()
        .contains("\"invoke\"")
    {
        assert!(Instant::now() < deadline, "run 2 recorded no op");
        std::thread::sleep(Duration::from_millis(20));
    }
    g.signal(libc::SIGKILL);
    g.wait(Duration::from_secs(30));
    let home = PathBuf::from(run_json(&dir, 2)["cluster"]["home"].as_str().unwrap());
    assert_eq!(run_json(&dir, 2)["cluster"]["reused"], true);
    let pending = lockjaw::undo::read_pending(&home.join("undo.jsonl")).unwrap();
    assert!(
        !pending.is_empty(),
        "the shared cluster's log has its entries"
    );
    let state = json_file(&home.join("cluster.json"));
    let data: Vec<PathBuf> = state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| PathBuf::from(n["data_dir"].as_str().unwrap()))
        .collect();
    let out = lockjaw().arg("heal").arg(&second).output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{said}");
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains(&home.display().to_string()), "{said}");
    assert_nothing_left(&second);
    assert_nothing_left(&home);
    for d in data {
        assert!(!d.exists(), "{} is left", d.display());
    }
}

/// `lockjaw shrink` of a Redis run with lost updates (pause-holder,
/// fencing off): each step's later runs get the cluster its first run
/// started, and the shrink leaves no server running. The reruns drop
/// `--base-port` (each step's cluster reserves a block in 10000–16999).
#[test]
#[ignore = "make test-long: a shrink of 60 s"]
fn a_shrinks_step_runs_share_a_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("orig");
    let b = free_base(39550).to_string();
    let mut a = vec![
        "--system",
        "redis",
        "--nemesis",
        "pause-holder",
        "--fencing",
        "off",
    ];
    a.extend(["--time-limit", "4", "--ttl-ms", "1000", "--base-port", &b]);
    let r = run("to-shrink", &dir, &a);
    assert_eq!(r.code, 1, "lost updates without fencing");
    let out = lockjaw()
        .arg("shrink")
        .arg(&dir)
        .args(["--runs", "2", "--confirm", "2", "--budget", "60s"])
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    let steps = dir.join("shrink").join("runs");
    let mut reused = 0;
    for step in std::fs::read_dir(&steps).unwrap() {
        let step = step.unwrap().path();
        let second = step.join("run-2").join("run.json");
        if !second.is_file() {
            continue;
        }
        let first = json_file(&step.join("run-1").join("run.json"));
        let c = json_file(&second)["cluster"].clone();
        if c["reused"] == true {
            assert_eq!(c["id"], first["cluster"]["id"], "{}", step.display());
            reused += 1;
        }
        let home = PathBuf::from(first["cluster"]["home"].as_str().unwrap());
        assert_nothing_left(&home);
    }
    assert!(reused > 0, "no step's second run reused its cluster");
}
