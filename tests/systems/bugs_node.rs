//! The Node adapters' bug rows replayed (bugs/redis-semaphore-175.toml,
//! bugs/redlock-169.toml): each side once, as the row says (system,
//! workload, nemesis, args, `--client NAME@VERSION`), the buggy side
//! showing the row's anomaly and the fixed side none of it. All
//! `#[ignore]` (make test-long; they need `--client NAME@VERSION`). Ports:
//! one 100-port block per run in 43000-43499. Also, with no server, each
//! Node adapter's hello answer per pinned environment.

use crate::bug_rows::{row, run_args};
use crate::run_util::*;
use lockjaw::history::{Op, OpType};
use std::path::Path;

/// One side of a row: the run `lockjaw bugs run ID --seed SEED` makes
/// (the row's inline parts written to files in `tmp`).
fn run_side(id: &str, side: &str, block: u16, seed: u64, tmp: &Path) -> Run {
    let args = run_args(&row(id), side, tmp, Some(seed), &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_local(&format!("{id}-{side}"), tmp, block, &args)
}

fn count(r: &Run, check: &str) -> u64 {
    r.lock()["checks"][check]["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no {check} count: {}", r.lock()))
}

/// Ok ops of `f` the adapters reported (`"<p>-adapter"`: `renewed`, `lost`).
fn adapter_oks(ops: &[Op], f: &str) -> usize {
    ops.iter()
        .filter(|o| o.f == f && o.kind == OpType::Ok)
        .filter(|o| o.process.to_string().ends_with("-adapter"))
        .count()
}

/// redis-semaphore 5.3.0: the paused holder's overdue refresh re-creates
/// its expired key after the other worker held and released it, and that
/// late renewal proves two holders. 5.3.1's refresh fails instead and the
/// library reports the lock lost.
#[test]
#[ignore = "make test-long: two 10 s runs with pauses: 24 s"]
fn redis_semaphore_175_refresh_revives_a_lost_lock_on_5_3_0_not_on_5_3_1() {
    let tmp = tempfile::tempdir().unwrap();
    let b = run_side("redis-semaphore-175", "buggy", 43000, 11, tmp.path());
    library_in_meta_version(&b, "redis-semaphore", "5.3.0");
    assert!(landed_count(&b.dir) > 0, "{}", b.stdout);
    assert!(count(&b, "safety") > 0, "{}", b.lock());
    assert!(adapter_oks(&b.history().1, "renew") > 0, "no renewed event");
    assert_eq!(b.code, 1);
    let f = run_side("redis-semaphore-175", "fixed", 43100, 11, tmp.path());
    library_in_meta_version(&f, "redis-semaphore", "5.3.1");
    assert!(landed_count(&f.dir) > 0, "{}", f.stdout);
    assert_eq!(count(&f, "safety"), 0, "{}", f.lock());
    assert!(adapter_oks(&f.history().1, "lost") > 0, "no lost event");
    assert_eq!(f.code, 0, "{}", f.stdout);
    assert_nothing_left(&b.dir);
    assert_nothing_left(&f.dir);
}

/// redlock 5.0.0-beta.2: an acquire that retried longer than the ttl gets
/// a lock whose first auto-extension fails at once ("already expired"): the
/// routine's signal aborts (`lost`), the key expires while the worker
/// works, and unfenced updates are lost. The fork extends it.
#[test]
#[ignore = "make test-long: two 15 s runs: 37 s"]
fn redlock_169_retried_acquire_breaks_auto_extension_not_in_the_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let b = run_side("redlock-169", "buggy", 43200, 21, tmp.path());
    library_in_meta_version(&b, "redlock", "5.0.0-beta.2");
    let ops = b.history().1;
    assert!(adapter_oks(&ops, "lost") > 0, "no lost event");
    assert!(count(&b, "lost_updates") > 0, "{}", b.lock());
    assert_eq!(b.code, 1);
    let f = run_side("redlock-169", "fixed", 43300, 21, tmp.path());
    library_in_meta_version(&f, "@sesamecare-oss/redlock", "1.4.0");
    let ops = f.history().1;
    assert_eq!(adapter_oks(&ops, "lost"), 0, "the fork gave a lock up");
    assert!(adapter_oks(&ops, "renew") > 0, "no auto-extension");
    assert_eq!(count(&f, "lost_updates"), 0, "{}", f.lock());
    assert_eq!(f.code, 0, "{}", f.stdout);
    assert_nothing_left(&b.dir);
    assert_nothing_left(&f.dir);
}

/// The meta record names the library and exactly this version.
fn library_in_meta_version(r: &Run, library: &str, version: &str) {
    let meta = serde_json::to_value(r.history().0.expect("a meta record")).unwrap();
    let c = &meta["client"];
    assert_eq!(
        (c["library"].as_str(), c["version"].as_str()),
        (Some(library), Some(version)),
        "{meta}"
    );
}

/// The hello answer of `clients/ADAPTER/adapter` for `system` with `env`.
fn hello_answer(adapter: &str, system: &str, env: &[(&str, String)]) -> serde_json::Value {
    use std::io::Write;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = std::process::Command::new(root.join("clients").join(adapter).join("adapter"));
    for k in [
        "LOCKJAW_CLIENT_VERSION",
        "LOCKJAW_CLIENT_ENV",
        "LOCKJAW_CLIENT_SOURCE",
    ] {
        cmd.env_remove(k);
    }
    let mut child = cmd
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let hello = serde_json::json!({"type": "hello", "protocol": 1, "system": system,
        "endpoints": ["127.0.0.1:1"], "dial": {}, "key": "k", "ttl_ms": 1000,
        "op_timeout_ms": 1000, "clock_origin_ns": 0, "worker": 0});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{hello}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().next();
    serde_json::from_str(line.unwrap_or_else(|| panic!("{adapter}: no answer; stderr: {log}")))
        .unwrap_or_else(|e| panic!("{adapter}: {e}: {text}; stderr: {log}"))
}

/// No server: each Node adapter answers with the version of the pinned
/// environment it was given (its default without one, a source tree's
/// own with LOCKJAW_CLIENT_SOURCE), and refuses systems it cannot serve.
#[test]
fn node_adapters_answer_with_the_version_of_their_environment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    let cases = [
        (
            "node-redis-semaphore",
            "redis-semaphore",
            "5.3.1",
            &["5.3.0", "5.3.1"][..],
        ),
        (
            "node-redlock5",
            "redlock",
            "5.0.0-beta.2",
            &["5.0.0-beta.2"][..],
        ),
        (
            "node-sesamecare-redlock",
            "@sesamecare-oss/redlock",
            "1.4.0",
            &["1.4.0"][..],
        ),
    ];
    for (adapter, library, default, versions) in cases {
        crate::adapters_node::require_installed(
            adapter,
            &format!("versions/{default}/node_modules/.package-lock.json"),
        );
        let a = hello_answer(adapter, "redis", &[]);
        assert_eq!(
            (a["type"].as_str(), a["library"].as_str()),
            (Some("hello_ok"), Some(library)),
            "{a}"
        );
        assert_eq!(a["version"], default, "{adapter}: {a}");
        for v in versions {
            let env = root.join(adapter).join("versions").join(v);
            let vars = [
                ("LOCKJAW_CLIENT_VERSION", v.to_string()),
                ("LOCKJAW_CLIENT_ENV", env.display().to_string()),
            ];
            let a = hello_answer(adapter, "redis", &vars);
            assert_eq!(a["version"], *v, "{adapter}@{v}: {a}");
        }
        let a = hello_answer(adapter, "zookeeper", &[]);
        assert_eq!(a["type"], "unsupported", "{adapter}: {a}");
    }
    // A source tree goes first: 5.3.0's package over the default 5.3.1 env.
    let tree = root.join("node-redis-semaphore/versions/5.3.0/node_modules/redis-semaphore");
    let a = hello_answer(
        "node-redis-semaphore",
        "redis",
        &[("LOCKJAW_CLIENT_SOURCE", tree.display().to_string())],
    );
    assert_eq!(a["version"], "5.3.0", "{a}");
}
