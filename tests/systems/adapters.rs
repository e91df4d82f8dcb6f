//! `lockjaw run --client`: the example adapter from docs/adapters.md on a
//! real Redis (valid, every worker granted, its probes recorded as renews,
//! the library named everywhere), and bad adapters: each error names the
//! adapter and the offending line, exits 3, and leaves nothing behind; an
//! adapter that does not answer a request is replaced and the run goes on.
//! The adapters are Python (Debian's python3-redis, run by /usr/bin/python3).
//! Ports: one 100-port block per test in 47800–47999 (run_util::run_local).

use crate::run_util::*;
use lockjaw::history::{OpType, Process};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const EXAMPLE: &str = "clients/example-redis/adapter";

fn base<'a>(client: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--system",
        "redis",
        "--client",
        client,
        "--workload",
        "fenced-counter",
        "--time-limit",
        "3",
        "--ttl-ms",
        "2000",
        "--concurrency",
        "3",
        "--seed",
        "5",
    ];
    v.extend_from_slice(extra);
    v
}

/// An executable script in `dir`.
fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The example adapter with `patch` inserted at the top of its request
/// loop (where `q` is the request and `hello` the handshake).
fn patched_example(dir: &Path, name: &str, prelude: &str, patch: &str) -> PathBuf {
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let anchor = "    q = json.loads(line); reply = {\"id\": q[\"id\"]}\n";
    assert!(
        text.contains(anchor),
        "the example adapter changed its loop"
    );
    let text = text
        .replacen(
            "hello = json.loads(sys.stdin.readline())\n",
            &format!("hello = json.loads(sys.stdin.readline())\n{prelude}"),
            1,
        )
        .replacen(anchor, &format!("{anchor}{patch}"), 1);
    script(dir, name, &text)
}

#[test]
fn the_example_adapter_runs_valid_with_every_worker_granted_and_its_leases_probed() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "adapter-example",
        tmp.path(),
        47800,
        &base("example-redis", &["--nemesis", "none"]),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.lock()["valid"], true);
    assert!(
        r.stdout.contains("with example-redis 1 (example-redis)"),
        "{}",
        r.stdout
    );
    let run = r.run_json();
    assert_eq!(run["client"], "example-redis");
    assert_eq!(run["client_library"], "example-redis 1");
    let summary = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
    assert!(summary.contains("example-redis 1"), "{summary}");
    assert!(summary.contains("--client example-redis"), "{summary}");
    let (meta, ops) = r.history();
    let client = meta_param(&meta, "client");
    assert_eq!(client["library"], "example-redis");
    assert_eq!(client["lease"], "acquire");
    assert_eq!(meta_param(&meta, "acquire_sets_ttl"), true);
    let granted: BTreeSet<i64> = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == OpType::Ok)
        .filter_map(|o| match o.process {
            Process::Num(p) => Some(p % 3),
            _ => None,
        })
        .collect();
    assert_eq!(granted.len(), 3, "every worker was granted the lock");
    // Each grant is proved once after the grant and once before the write.
    let grants = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == OpType::Ok)
        .count();
    let probes: Vec<_> = ops
        .iter()
        .filter(|o| o.f == "renew" && o.kind == OpType::Ok)
        .collect();
    assert!(probes.len() >= 2 * grants - 3, "{} probes", probes.len());
    assert!(probes
        .iter()
        .all(|o| o.lease_ms.is_some_and(|l| l > 0 && l <= 2000)));
    assert_nothing_left(&r.dir);
}

#[test]
fn bad_adapters_are_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cases: Vec<(PathBuf, &str, &str)> = vec![
        (
            {
                let p = script(d, "not-exec", "#!/bin/sh\n");
                std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644))
                    .unwrap();
                p
            },
            "redis",
            "not executable",
        ),
        (
            script(d, "dies", "#!/bin/sh\nexit 4\n"),
            "redis",
            "exited during the handshake (exit status: 4)",
        ),
        (
            script(d, "chatty", "#!/bin/sh\necho 'Loading library...'\n"),
            "redis",
            "stdout line 1: not JSON",
        ),
        (
            std::fs::canonicalize(EXAMPLE).unwrap(),
            "etcd",
            "declares --system etcd unsupported: this lock speaks to one Redis server",
        ),
    ];
    for (path, system, want) in cases {
        let out_dir = d.join(format!(
            "run-{}",
            path.file_name().unwrap().to_string_lossy()
        ));
        let p = path.to_str().unwrap();
        let r = run(
            "bad-adapter",
            &out_dir,
            &["--system", system, "--client", p],
        );
        assert_eq!(r.code, 3, "{p}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("adapter {p}"))
                || r.stderr.contains(&format!("--client {p}")),
            "the error names the adapter: {}",
            r.stderr
        );
        assert!(r.stderr.contains(want), "{p}: {}", r.stderr);
        assert!(!out_dir.exists(), "nothing started: {}", out_dir.display());
    }
}

#[test]
fn protocol_errors_in_a_run_stop_it_naming_the_adapter_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let garbage = patched_example(
        d,
        "garbage",
        "",
        "    if q[\"type\"] == \"release\": print(\"released!\"); sys.stdout.flush()\n",
    );
    let stray = patched_example(
        d,
        "stray",
        "",
        "    if q[\"type\"] == \"release\": reply[\"id\"] = q[\"id\"] + 1000\n",
    );
    let leaseless = patched_example(
        d,
        "leaseless",
        "",
        "    if q[\"type\"] == \"acquire\": send({\"type\": \"ok\", \"id\": q[\"id\"], \"owner\": \"x\"}); continue\n",
    );
    let cases = [
        (garbage, "not JSON (", "\"released!\""),
        (stray, "a reply to id ", "which it was never sent"),
        (leaseless, "its reply to acquire", "no `lease_ms`"),
    ];
    for (i, (path, want1, want2)) in cases.into_iter().enumerate() {
        let p = path.to_str().unwrap().to_string();
        let r = run_local(
            &format!("adapter-protocol-error-{i}"),
            d,
            47900,
            &base(&p, &["--nemesis", "none"]),
        );
        assert_eq!(r.code, 3, "case {i}: {}", r.stderr);
        let name = format!("adapter {p} (worker ");
        let said = format!("{}{}", r.stdout, r.stderr);
        assert!(
            said.contains(&name) && said.contains(want1) && said.contains(want2),
            "case {i}: {said}"
        );
        if i < 2 {
            assert!(said.contains(": stdout line "), "{said}");
        }
        // Issue 29: the error is the first line of stderr (not stdout, and
        // not after the log's warnings).
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(&name),
            "case {i}: the first line of stderr: {}",
            r.stderr
        );
        assert!(r.dir.join("history.jsonl").exists());
        assert_nothing_left(&r.dir);
        assert!(check_exit(&r.dir) < 3, "the history it left is checkable");
    }
}

#[test]
fn an_adapter_that_does_not_answer_is_replaced_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let marks = d.join("marks");
    std::fs::create_dir(&marks).unwrap();
    // The first process of each worker that gets a request swallows its
    // first acquire (the handshake before the run sends no request).
    let prelude = format!(
        "import os\nmark = os.path.join({m:?}, str(hello['worker']))\nfirst = None\nopen(mark + '.endpoints', 'w').write(' '.join(hello['endpoints']))\n",
        m = marks.display().to_string()
    );
    let silent = patched_example(
        d,
        "silent-once",
        &prelude,
        concat!(
            "    if first is None:\n",
            "        first = not os.path.exists(mark)\n",
            "        open(mark, 'a').write(str(os.getpid()) + '\\n')\n",
            "        if first and q['type'] == 'acquire': continue\n",
        ),
    );
    let p = silent.to_str().unwrap();
    let workload = d.join("fast-timeout.toml");
    let text = std::fs::read_to_string("workloads/fenced-counter.toml").unwrap();
    std::fs::write(&workload, format!("{text}\nop_timeout_ms = 500\n")).unwrap();
    let mut args = base(p, &["--nemesis", "none"]);
    let wl = workload.to_str().unwrap();
    let i = args.iter().position(|a| *a == "fenced-counter").unwrap();
    args[i] = wl;
    let r = run_local("adapter-silent", d, 47850, &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (_, ops) = r.history();
    let infos: Vec<_> = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == OpType::Info)
        .collect();
    assert_eq!(
        infos.len(),
        3,
        "one unanswered acquire per worker: {infos:?}"
    );
    assert!(
        infos
            .iter()
            .all(|o| o.error.as_deref().is_some_and(|e| e.contains("no reply"))),
        "{infos:?}"
    );
    // Every worker's adapter dials its own proxy, never the server.
    let server = r.run_json()["nodes"][0]["addr"]
        .as_str()
        .unwrap()
        .to_string();
    let mut proxies = BTreeSet::new();
    for w in 0..3 {
        let eps = std::fs::read_to_string(marks.join(format!("{w}.endpoints"))).unwrap();
        assert!(
            eps.starts_with("127.0.0.1:") && eps != server,
            "{eps} vs {server}"
        );
        proxies.insert(eps);
    }
    assert_eq!(proxies.len(), 3, "{proxies:?}");
    for w in 0..3 {
        let pids = std::fs::read_to_string(marks.join(w.to_string())).unwrap();
        assert!(pids.lines().count() >= 2, "worker {w} got a fresh adapter");
        let log = std::fs::read_to_string(r.dir.join(format!("logs/worker-{w}.log"))).unwrap();
        assert!(log.contains("replacing the adapter process"), "{log}");
    }
    let grants = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == OpType::Ok)
        .count();
    assert!(grants >= 3, "the fresh adapters were granted the lock");
    assert_nothing_left(&r.dir);
}
