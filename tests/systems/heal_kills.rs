//! Heal after SIGKILLs the older heal tests left out (issue 29): a
//! `--storage postgres` run killed once its storage server is up; a
//! `compare` killed once its cells run (the cells heal themselves); heal
//! of a directory holding several killed runs; `heal --dry-run`; forged
//! records naming proxies that are not the run's; `heal RUN_DIR` after a
//! SIGKILLed `lockjaw shrink RUN_DIR` (its step run beneath the run).
//! Ports: no `--base-port`: each run reserves a free block itself.

use crate::run_util::*;
use lockjaw::process::ProcId;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The run id in `dir/run.json`, once it is written.
pub fn run_id_of(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v["run_id"].as_str()?.to_string())
}

/// The nodes of the local cluster state file in `dir` that have a process
/// recorded: (name, process, data directory).
fn spawned_nodes(dir: &Path) -> Vec<(String, ProcId, PathBuf)> {
    let Ok(text) = std::fs::read_to_string(dir.join("cluster.json")) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    v["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|n| {
            let id = serde_json::from_value::<ProcId>(n["proc"].clone()).ok()?;
            let data = PathBuf::from(n["data_dir"].as_str()?);
            Some((n["name"].as_str()?.to_string(), id, data))
        })
        .collect()
}

/// Some line of `dir`'s history holds every one of `needle`.
pub fn history_has(dir: &Path, needle: &[&str]) -> bool {
    std::fs::read_to_string(dir.join("history.jsonl"))
        .map(|t| t.lines().any(|l| needle.iter().all(|n| l.contains(n))))
        .unwrap_or(false)
}

/// `lockjaw heal ARGS`: exit code and stdout + stderr, printed.
pub fn heal(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let out = lockjaw().arg("heal").args(args).output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("heal {args:?}: exit {:?}\n{said}", out.status.code());
    (out.status.code(), said)
}

/// Issue 29, defect 1: a `--storage postgres` run SIGKILLed once its
/// PostgreSQL server runs is healed: the server stopped, its data
/// directory in the temporary directory and its cgroup `lockjaw/<id>-pg`
/// removed (before, heal refused `DIR/postgres` as not the run's).
/// `heal --dry-run` before it lists the actions and changes nothing.
#[test]
fn a_storage_postgres_run_killed_with_its_server_up_is_healed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let mut g = Guard::spawn(
        lockjaw()
            .args(["run", "--system", "redis", "--workload", "fenced-counter"])
            .args(["--storage", "postgres", "--nemesis", "none"])
            .args(["--time-limit", "30", "--no-progress"])
            .arg("--out")
            .arg(&dir),
    );
    let pg = dir.join("postgres");
    // The workers write to the storage once the server runs.
    eventually("the storage server to run", Duration::from_secs(60), || {
        !spawned_nodes(&pg).is_empty() && history_has(&dir, &["\"invoke\"", "\"write\""])
    });
    g.signal(libc::SIGKILL);
    g.wait(Duration::from_secs(30));
    let id = run_id_of(&dir).expect("run.json names the run id");
    let nodes = spawned_nodes(&pg);
    let (_, server, data) = nodes[0].clone();
    assert!(data.exists(), "{}", data.display());
    // `heal --dry-run` says what it would do and changes nothing.
    let pending = lockjaw::undo::read_pending(&dir.join("undo.jsonl")).unwrap();
    let (code, said) = heal(&["--dry-run".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(0), "{said}");
    let stop_pg = format!("would: stop the cluster in {}", pg.display());
    assert!(said.contains(&stop_pg), "{said}");
    assert_eq!(said.matches("would: ").count(), pending.len(), "{said}");
    assert!(data.exists(), "{}", data.display());
    assert_eq!(
        lockjaw::undo::read_pending(&dir.join("undo.jsonl")).unwrap(),
        pending
    );
    let (code, said) = heal(&[dir.as_os_str()]);
    assert_eq!(code, Some(0), "{said}");
    eventually(
        "the storage server to be gone",
        Duration::from_secs(15),
        || !server.is_alive(),
    );
    assert!(!data.exists(), "{} is left", data.display());
    if let Some(root) = lockjaw::process::Cgroup::root() {
        let cg = root.join(format!("lockjaw/{id}-pg"));
        assert!(!cg.exists(), "{} is left", cg.display());
        let cg = root.join(format!("lockjaw/{id}"));
        assert!(!cg.exists(), "{} is left", cg.display());
    }
    assert_nothing_left(&dir);
}

/// Issue 29, defect 3 (and `heal --dry-run`): forged records naming a
/// proxy `victim` (with a toxic, disabled) and another run's proxy on a
/// Toxiproxy server are named and left, exit 3; only the proxy named
/// after this run is deleted. The proxies are made and looked at with the
/// independent `toxiproxy_rust` client.
#[test]
fn heal_deletes_on_a_toxiproxy_only_the_proxies_named_after_the_run() {
    use toxiproxy_rust::{client::Client, proxy::ProxyPack};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tox = rt.block_on(lockjaw::toxiproxy::spawn_loopback()).unwrap();
    let c = Client::new(tox.addr());
    let ours = "lockjaw-ab12cd34-w0-redis1";
    let names = ["victim", "lockjaw-deadbeef-w0-x", ours];
    let packs = names
        .iter()
        .map(|n| ProxyPack::new(n.to_string(), "127.0.0.1:0".into(), "127.0.0.1:1".into()))
        .collect();
    c.populate(packs).unwrap();
    c.find_proxy("victim")
        .unwrap()
        .with_latency("downstream".into(), 100, 0, 1.0);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("run.json"), r#"{"run_id":"ab12cd34"}"#).unwrap();
    let url = serde_json::to_string(&tox.url()).unwrap();
    let mut undo = String::new();
    for (i, (kind, proxy, extra)) in [
        ("proxy", ours, r#","embedded":false"#),
        ("proxy", "victim", r#","embedded":true"#),
        ("proxy", "lockjaw-deadbeef-w0-x", r#","embedded":false"#),
        ("proxy-disabled", "victim", r#","embedded":false"#),
        (
            "toxic",
            "victim",
            r#","toxic":"latency_downstream","embedded":false"#,
        ),
    ]
    .iter()
    .enumerate()
    {
        undo += &format!(
            "{{\"id\":{},\"undo\":{{\"kind\":\"{kind}\",\"url\":{url},\"proxy\":\"{proxy}\"{extra}}}}}\n",
            i + 1
        );
    }
    std::fs::write(dir.join("undo.jsonl"), &undo).unwrap();
    let all = || {
        let mut n: Vec<String> = c.all().unwrap().into_keys().collect();
        n.sort();
        n
    };
    let (code, said) = heal(&[dir.as_os_str()]);
    assert_eq!(code, Some(3), "{said}");
    for refused in ["\"victim\"", "\"lockjaw-deadbeef-w0-x\""] {
        assert!(
            said.contains(&format!("proxy {refused} is not this run's")),
            "{said}"
        );
    }
    assert_eq!(all(), ["lockjaw-deadbeef-w0-x", "victim"]);
    let victim = c.find_proxy("victim").unwrap();
    assert_eq!(victim.toxics().unwrap().len(), 1, "victim's toxic is kept");
    // A dry run now names the 4 refused records, and changes nothing.
    let log = std::fs::read_to_string(dir.join("undo.jsonl")).unwrap();
    let (code, said) = heal(&["--dry-run".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(3), "{said}");
    assert_eq!(said.matches("would refuse: ").count(), 4, "{said}");
    assert!(!said.contains("would: "), "{said}");
    assert_eq!(all(), ["lockjaw-deadbeef-w0-x", "victim"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("undo.jsonl")).unwrap(),
        log
    );
    drop(tox);
}

/// The run directories beneath `root` (those with a run.json), sorted.
fn run_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if p.join("run.json").exists() {
                    out.push(p);
                } else {
                    stack.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// Wait until `n` runs beneath `root` have workers recording ops.
fn wait_for_running(root: &Path, n: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    eventually(
        &format!("{n} runs to record ops"),
        Duration::from_secs(90),
        || {
            found = run_dirs(root)
                .into_iter()
                .filter(|d| history_has(d, &["\"invoke\""]))
                .collect();
            found.len() >= n
        },
    );
    found
}

/// The lockjaw process running `dir` (its controller.json).
fn controller(dir: &Path) -> ProcId {
    let text = std::fs::read_to_string(dir.join("controller.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Issue 29, defect 9: a `compare --jobs 2` SIGKILLed while two cells
/// run: each cell (a child `lockjaw run`) gets SIGTERM, stops and heals
/// itself (before, the cells ran on to their end). `heal` on the
/// comparison's directory then finds nothing left to heal.
#[test]
fn a_killed_compares_cells_stop_and_heal_themselves() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cmp");
    let mut g = Guard::spawn(
        lockjaw()
            .args(["compare", "--systems", "redis", "--nemesis", "pause-holder"])
            .args(["--runs", "2", "--jobs", "2", "--time-limit", "120"])
            .args(["--ttl-ms", "1000", "--out"])
            .arg(&out),
    );
    let runs = wait_for_running(&out, 2);
    let cells: Vec<ProcId> = runs.iter().map(|d| controller(d)).collect();
    g.signal(libc::SIGKILL);
    g.wait(Duration::from_secs(30));
    for (d, c) in runs.iter().zip(&cells) {
        eventually(
            &format!("the cell in {} to stop", d.display()),
            Duration::from_secs(60),
            || !c.is_alive(),
        );
        let outcome = json_file(&d.join("run.json"))["outcome"].clone();
        assert_eq!(outcome, "interrupted", "{}", d.display());
        assert_nothing_left(d);
    }
    let (code, said) = heal(&[out.as_os_str()]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("0 with something to heal"), "{said}");
}

/// Issue 29, defect 9: `heal` on a directory of runs (`run --runs 2
/// --jobs 2`, SIGKILLed with both runs going; no undo.jsonl at its top)
/// heals each run beneath it (before: exit 3, "no undo log").
#[test]
fn heal_of_a_directory_of_killed_runs_heals_each() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let mut g = Guard::spawn(
        lockjaw()
            .args(["run", "--system", "redis", "--workload", "fenced-counter"])
            .args(["--nemesis", "none", "--runs", "2", "--jobs", "2"])
            .args(["--time-limit", "60", "--no-progress", "--out"])
            .arg(&out),
    );
    let runs = wait_for_running(&out, 2);
    g.signal(libc::SIGKILL);
    g.wait(Duration::from_secs(30));
    for d in &runs {
        let pending = lockjaw::undo::read_pending(&d.join("undo.jsonl")).unwrap();
        assert!(!pending.is_empty(), "{}: nothing to heal", d.display());
    }
    let (code, said) = heal(&[out.as_os_str()]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("2 run(s) beneath, 2 with something"),
        "{said}"
    );
    for d in &runs {
        assert_nothing_left(d);
        let id = run_id_of(d).unwrap();
        if let Some(cg) = run_cgroup(&id) {
            assert!(!cg.exists(), "{} is left", cg.display());
        }
    }
}

/// The step runs a shrink of `dir` made (`dir/shrink/runs/step-N/run-I`)
/// whose workers record ops.
fn recording_step_runs(dir: &Path) -> Vec<PathBuf> {
    run_dirs(&dir.join("shrink/runs"))
        .into_iter()
        .filter(|d| history_has(d, &["\"invoke\""]))
        .collect()
}

/// Trust on the operator's hosts, part 3: `lockjaw shrink RUN_DIR`
/// SIGKILLed while a step runs, then `lockjaw heal RUN_DIR` (the run
/// itself has nothing pending): the step run beneath it is healed, and
/// nothing of it is left: no process, no cgroup. Before, heal said
/// "nothing to heal" and left the step run's servers and cgroup.
#[test]
fn heal_of_a_run_heals_a_killed_shrinks_step_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("orig");
    let r = crate::shrink::redlock_two_holders("shrink-killed", &dir);
    assert_eq!(r.code, 1, "the original run finds two holders");
    let mut g = Guard::spawn(lockjaw().arg("shrink").arg(&dir).args([
        "--runs",
        "1",
        "--confirm",
        "1",
        "--budget",
        "60s",
    ]));
    let mut steps = Vec::new();
    eventually("a step run to record ops", Duration::from_secs(60), || {
        steps = recording_step_runs(&dir);
        !steps.is_empty()
    });
    g.signal(libc::SIGKILL);
    g.wait(Duration::from_secs(30));
    let step = steps[0].clone();
    let pending = lockjaw::undo::read_pending(&step.join("undo.jsonl")).unwrap();
    assert!(!pending.is_empty(), "{}: nothing to heal", step.display());
    let id = run_id_of(&step).expect("the step run's run.json names its id");
    let (code, said) = heal(&[dir.as_os_str()]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&format!("{}: healed ", step.display())),
        "{said}"
    );
    assert!(said.contains("with something to heal"), "{said}");
    for d in run_dirs(&dir.join("shrink/runs")) {
        assert_nothing_left(&d);
    }
    if let Some(cg) = run_cgroup(&id) {
        assert!(!cg.exists(), "{} is left", cg.display());
    }
}
