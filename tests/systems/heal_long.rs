//! make test-long: more SIGKILLs at random moments, of what the first
//! random kill test (`run_heal`) leaves out (issue 29): `--storage
//! postgres` runs, runs with each adapter (`--client`), `compare --jobs
//! 2` (its cells heal themselves, then `heal` of its directory) and runs
//! on a test bed mid-fault; after each, nothing may be left.
//! LOCKJAW_KILLS sets the kills of each kind (default 6, and at least one
//! per adapter); LOCKJAW_TEST_SEED repeats a sequence.
//! Ports: runs with a local cluster in 37400-37499; the others reserve
//! their own.

use crate::heal_kills::run_id_of;
use crate::remote_hosts::{host_rules, up};
use crate::run_heal::{kill_at_random, kills_per_kind, leftovers, lockjaw_ok, seeded_rng, Victim};
use crate::run_util::*;
use lockjaw::process::ProcId;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `heal DIR` if the run wrote an undo log; what it said, or why it failed.
fn heal_run(dir: &Path) -> Result<String, String> {
    if !dir.join("undo.jsonl").exists() {
        return Ok("no undo log yet: nothing to heal".into());
    }
    lockjaw_ok(&["heal".as_ref(), dir.as_os_str()])
        .map(|said| format!("heal said {} lines", said.lines().count()))
        .map_err(|e| format!("heal: {e}"))
}

/// The cgroup group of the run in `dir`, from its run.json.
fn run_group(dir: &Path) -> Option<String> {
    run_id_of(dir).map(|id| format!("lockjaw/{id}"))
}

/// What a run's storage server (`DIR/postgres`) left: a process, its
/// data directory, its cgroup `lockjaw/<run-id>-pg`.
fn pg_leftovers(dir: &Path) -> Vec<String> {
    let pg = dir.join("postgres");
    let mut found = leftovers(&pg, 0..0, None);
    if let Ok(text) = std::fs::read_to_string(pg.join("cluster.json")) {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for n in v["nodes"].as_array().cloned().unwrap_or_default() {
            let data = PathBuf::from(n["data_dir"].as_str().unwrap_or_default());
            if data.exists() {
                found.push(format!("data directory {} is left", data.display()));
            }
        }
    }
    let cg = run_id_of(dir).zip(lockjaw::process::Cgroup::root());
    if let Some((id, root)) = cg {
        let cg = root.join(format!("lockjaw/{id}-pg"));
        if cg.exists() {
            found.push(format!("cgroup {} is left", cg.display()));
        }
    }
    found
}

/// The run directories beneath `root` (each with a run.json).
fn runs_beneath(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if p.join("run.json").exists() {
                out.push(p);
            } else {
                stack.push(p);
            }
        }
    }
    out
}

/// After a killed `compare`: its cells stop by themselves (their
/// parent-death signal), then `heal` of its directory must succeed and
/// leave nothing in any cell's run.
fn clean_compare(dir: &Path) -> Result<String, String> {
    let runs = runs_beneath(dir);
    let cells: Vec<ProcId> = runs
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("controller.json")).ok())
        .filter_map(|t| serde_json::from_str(&t).ok())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while cells.iter().any(ProcId::is_alive) {
        if Instant::now() > deadline {
            return Err("a cell outlived its compare by 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if runs.is_empty() {
        return Ok("no cell started yet".into());
    }
    let said = lockjaw_ok(&["heal".as_ref(), dir.as_os_str()]).map_err(|e| format!("heal: {e}"))?;
    let left: Vec<String> = runs
        .iter()
        .flat_map(|d| leftovers(d, 0..0, run_group(d).as_deref()))
        .collect();
    if left.is_empty() {
        Ok(format!(
            "{} cells; heal: {}",
            runs.len(),
            said.trim().replace('\n', " | ")
        ))
    } else {
        Err(left.join("; "))
    }
}

/// One victim for every kind of run the issue names.
#[test]
#[ignore = "many minutes; make test-long"]
fn random_sigkills_of_storage_adapter_compare_and_bed_runs_leave_nothing_behind() {
    let t0 = Instant::now();
    let kills = kills_per_kind(6);
    let (seed, mut rng) = seeded_rng();
    let tmp = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    let storage = Victim {
        what: "run --storage postgres",
        kinds: &["pause-holder", "none"],
        block: 37400,
        cmd: &|nemesis, base, dir| {
            let mut c = lockjaw();
            c.args(["run", "--system", "redis", "--workload", "fenced-counter"])
                .args(["--storage", "postgres", "--nemesis", nemesis])
                .args(["--time-limit", "3", "--ttl-ms", "1000", "--no-progress"])
                .args(["--base-port", &base.to_string(), "--out"])
                .arg(dir);
            c
        },
        clean: &|dir| {
            let said = heal_run(dir)?;
            let left = pg_leftovers(dir);
            if left.is_empty() {
                Ok(said)
            } else {
                Err(left.join("; "))
            }
        },
        group: &|_, _, dir| run_group(dir),
    };
    let broken = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adapters/broken-redis/adapter");
    let broken = format!("{}@redis", broken.display());
    let adapters = [
        "python-redis-py@redis",
        "node-redlock@redlock",
        "python-pottery@redlock",
        "python-kazoo@zookeeper",
        "java-curator@zookeeper",
        "go-etcd-concurrency@etcd",
        broken.as_str(),
    ];
    let adapter = Victim {
        what: "run --client",
        kinds: &adapters,
        block: 37400,
        cmd: &|kind, base, dir| {
            let (client, system) = kind.rsplit_once('@').unwrap();
            let mut c = lockjaw();
            c.args(["run", "--system", system, "--client", client])
                .args(["--nemesis", "pause-holder", "--time-limit", "4"])
                .args(["--ttl-ms", "2000", "--no-progress"])
                .args(["--base-port", &base.to_string(), "--out"])
                .arg(dir);
            c
        },
        clean: &heal_run,
        group: &|_, _, dir| run_group(dir),
    };
    let compare = Victim {
        what: "compare --jobs 2",
        kinds: &["pause-holder"],
        block: 37400,
        cmd: &|nemesis, _, dir| {
            let mut c = lockjaw();
            c.args(["compare", "--systems", "redis", "--nemesis", nemesis])
                .args(["--runs", "2", "--jobs", "2", "--time-limit", "3"])
                .args(["--ttl-ms", "1000", "--out"])
                .arg(dir);
            c
        },
        clean: &clean_compare,
        group: &|_, _, _| None,
    };
    let storage_kills = kill_at_random(
        &storage,
        kills,
        &mut rng,
        &tmp.path().join("pg"),
        &mut problems,
    );
    let adapter_kills = kill_at_random(
        &adapter,
        kills.max(adapters.len()),
        &mut rng,
        &tmp.path().join("adapter"),
        &mut problems,
    );
    let compare_kills = kill_at_random(
        &compare,
        kills,
        &mut rng,
        &tmp.path().join("cmp"),
        &mut problems,
    );
    let bed_kills = kill_bed_runs(kills, &mut rng, tmp.path(), &mut problems);
    let n = storage_kills + adapter_kills + compare_kills + bed_kills;
    eprintln!(
        "{n} SIGKILLs ({storage_kills} storage, {adapter_kills} adapter, {compare_kills} compare, {bed_kills} bed) in {:.0} s; {} problems",
        t0.elapsed().as_secs_f64(),
        problems.len()
    );
    assert!(problems.is_empty(), "seed {seed}:\n{}", problems.join("\n"));
}

/// Runs on a 3-host test bed under faults on the hosts (iptables rules,
/// paused servers), SIGKILLed at random moments; heal must leave no rule
/// and no server of the run on any host.
fn kill_bed_runs(
    kills: usize,
    rng: &mut rand::rngs::StdRng,
    root: &Path,
    problems: &mut Vec<String>,
) -> usize {
    let (bed, hosts, _down) = up(3, root);
    let tag_left = |id: &str| -> Vec<String> {
        let needle = format!("LOCKJAW_TAG=lockjaw-{id}-");
        bed.hosts
            .iter()
            .filter_map(|h| {
                let out = bed
                    .ssh(h)
                    .arg(format!(
                        "grep -l -z {needle} /proc/[0-9]*/environ 2>/dev/null || true"
                    ))
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
                (!text.is_empty()).then(|| format!("{}: processes of the run left: {text}", h.name))
            })
            .collect()
    };
    let hosts_ref = &hosts;
    let on_bed = Victim {
        what: "run --hosts (test bed)",
        kinds: &["partition-node", "pause-node"],
        block: 37400,
        cmd: &|nemesis, _, dir| {
            let mut c = lockjaw();
            c.args(["run", "--system", "etcd", "--nemesis", nemesis])
                .args(["--time-limit", "4", "--ttl-ms", "2000", "--hosts"])
                .arg(hosts_ref)
                .args(["--no-progress", "--out"])
                .arg(dir);
            c
        },
        clean: &|dir| {
            let said = heal_run(dir)?;
            let mut left = host_rules(&bed);
            if let Some(id) = run_id_of(dir) {
                left.extend(tag_left(&id));
            }
            if left.is_empty() {
                Ok(said)
            } else {
                Err(left.join("; "))
            }
        },
        group: &|_, _, dir| run_group(dir),
    };
    kill_at_random(&on_bed, kills, rng, &root.join("bed"), problems)
}
