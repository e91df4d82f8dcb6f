//! `--auth` on the Redis side beyond one server's clients, against real
//! servers on loopback that require an ACL user (`default` off): heal's
//! `CLIENT UNPAUSE` of a paused server with the run's credentials (read
//! again from the auth file `run.json` names), an attached Redis Cluster
//! (slot discovery, the probes and queries, the workers, and the
//! `node-redlock` and `python-redis-py` adapters), and the Node and Python
//! adapters on one server.
//! Ports: 34500–34599 (servers), 34600–34999 (the runs' own blocks).

use crate::run_util::lockjaw;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) const PASSWORD: &str = "pw-Acl-redis-side-7";

/// Redis servers the test started (`--daemonize`): each pidfile's pid,
/// if it still runs redis-server, is killed when dropped.
struct Servers(Vec<PathBuf>);

impl Drop for Servers {
    fn drop(&mut self) {
        for pidfile in &self.0 {
            let Some(pid) = std::fs::read_to_string(pidfile)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            else {
                continue;
            };
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let argv0 = String::from_utf8_lossy(&cmd)
                .split(['\0', ' '])
                .next()
                .map(str::to_string);
            if argv0.is_some_and(|a| a.rsplit('/').next() == Some("redis-server")) {
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// The auth file (`[user] locker`, its password in an owner-only file).
pub(crate) fn auth_file(dir: &Path) -> PathBuf {
    let pw = dir.join("password");
    std::fs::write(&pw, PASSWORD).unwrap();
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let f = dir.join("auth.toml");
    std::fs::write(
        &f,
        "[user]\nname = \"locker\"\npassword_file = \"password\"\n",
    )
    .unwrap();
    f
}

/// Start redis-server on 127.0.0.1:`port` with only the ACL user `locker`
/// (the default user off), and `extra` arguments; its pidfile.
fn start_redis(dir: &Path, port: u16, extra: &[String]) -> PathBuf {
    let pidfile = dir.join(format!("redis-{port}.pid"));
    let st = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "yes"])
        .args(["--user", "default", "off", "--user", "locker", "on"])
        .args([format!(">{PASSWORD}").as_str(), "~*", "&*", "+@all"])
        .arg("--dir")
        .arg(dir)
        .arg("--pidfile")
        .arg(&pidfile)
        .arg("--logfile")
        .arg(dir.join(format!("redis-{port}.log")))
        .args(extra)
        .status()
        .unwrap();
    assert!(st.success(), "redis-server on {port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "port {port} never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
    pidfile
}

/// Whether the server holds a `CLIENT PAUSE WRITE`: a PUBLISH (a command
/// a write pause holds) gets no answer within 100 ms; Err when it cannot
/// be asked.
pub(crate) async fn pause_of(addr: &str, auth: &lockjaw::auth::Auth) -> Result<bool, String> {
    let t = Duration::from_secs(1);
    let mut c = lockjaw::client::redis_query::open(addr, auth, t)
        .await
        .map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd("PUBLISH");
    cmd.arg("lockjaw-test").arg("x");
    let publish = cmd.query_async::<i64>(&mut c);
    match tokio::time::timeout(Duration::from_millis(100), publish).await {
        Err(_) => Ok(true),
        Ok(r) => r.map(|_| false).map_err(|e| e.to_string()),
    }
}

/// [`pause_of`] of a server that must answer.
pub(crate) async fn paused(addr: &str, auth: &lockjaw::auth::Auth) -> bool {
    pause_of(addr, auth).await.unwrap()
}

/// `make test` (about 1 s): a run directory whose undo log holds a
/// `CLIENT PAUSE` of an ACL-only server and whose `run.json` names the
/// run's auth file, as a run killed mid-pause leaves it. `lockjaw heal`
/// unpauses the server as the run's user, long before the pause's own
/// 5 s timeout; the undo log never held the password.
#[tokio::test]
async fn heal_unpauses_an_acl_redis_with_the_runs_credentials() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let port = 34500;
    let _servers = Servers(vec![start_redis(dir, port, &[])]);
    let addr = format!("127.0.0.1:{port}");
    let file = auth_file(dir);
    let auth = lockjaw::auth::load(&file).unwrap();
    let run = dir.join("run");
    std::fs::create_dir(&run).unwrap();
    let meta = serde_json::json!({
        "run_id": "0badcafe",
        "auth": { "file": file.display().to_string(), "user": "locker" },
    });
    std::fs::write(run.join("run.json"), meta.to_string()).unwrap();
    let entry = serde_json::json!({
        "id": 1,
        "undo": { "kind": "redis-client-pause", "addr": addr },
    });
    std::fs::write(run.join("undo.jsonl"), format!("{entry}\n")).unwrap();
    // The pause a failover fault holds (PAUSE_MS: 5 s), by the test.
    let mut c = lockjaw::client::redis_query::open(&addr, &auth, Duration::from_secs(1))
        .await
        .unwrap();
    let began = Instant::now();
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(5000)
        .arg("WRITE")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    assert!(paused(&addr, &auth).await, "the pause holds");
    let out = lockjaw().arg("heal").arg(&run).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("healed: CLIENT UNPAUSE on {addr}")),
        "{text}"
    );
    assert!(!paused(&addr, &auth).await, "heal unpaused it");
    // Strictly heal's doing: the pause itself would last until 5 s.
    assert!(
        began.elapsed() < Duration::from_millis(4500),
        "{:?}",
        began.elapsed()
    );
    let undo = std::fs::read_to_string(run.join("undo.jsonl")).unwrap();
    assert!(!undo.contains(PASSWORD) && !text.contains(PASSWORD));
}

/// `lockjaw run` with `--auth`; (exit code, stdout and stderr).
fn run_with(dir: &Path, out: &str, args: &[&str], auth: bool) -> (i32, String) {
    let mut c = lockjaw();
    c.arg("run")
        .args(args)
        .args(["--time-limit", "2", "--no-progress", "--out"])
        .arg(dir.join(out));
    if auth {
        c.arg("--auth").arg(dir.join("auth.toml"));
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// The run recorded the user, and no file of it holds the password.
fn recorded_without_the_password(run: &Path) {
    let info = std::fs::read_to_string(run.join("run.json")).unwrap();
    assert!(info.contains("\"user\": \"locker\""), "{info}");
    let mut stack = vec![run.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                let text = String::from_utf8_lossy(&b);
                assert!(!text.contains(PASSWORD), "{} holds it", p.display());
            }
        }
    }
}

/// A Redis Cluster of 6 ACL-only nodes (3 primaries with a replica each;
/// replicas authenticate to their primaries as `locker`), ports 34510-
/// 34515, bus ports 34520-34525, created by `redis-cli --cluster create`
/// as `locker`; returns once every node says `cluster_state:ok` with all
/// 16384 slots.
async fn acl_cluster(dir: &Path, auth: &lockjaw::auth::Auth) -> Servers {
    let mut pids = Vec::new();
    let ports: Vec<u16> = (34510..34516).collect();
    for p in &ports {
        let extra = [
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &(p + 10).to_string(),
            "--cluster-node-timeout",
            "1000",
            "--cluster-config-file",
            &dir.join(format!("nodes-{p}.conf")).display().to_string(),
            "--masteruser",
            "locker",
            "--masterauth",
            PASSWORD,
        ]
        .map(String::from);
        pids.push(start_redis(dir, *p, &extra));
    }
    let servers = Servers(pids);
    let st = Command::new("redis-cli")
        .args(["--user", "locker", "--cluster", "create"])
        .args(ports.iter().map(|p| format!("127.0.0.1:{p}")))
        .args(["--cluster-replicas", "1", "--cluster-yes"])
        .env("REDISCLI_AUTH", PASSWORD)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    'wait: loop {
        assert!(Instant::now() < deadline, "the cluster never became whole");
        for p in &ports {
            let i = lockjaw::client::redis_slots::info_as(
                &format!("127.0.0.1:{p}"),
                auth,
                Duration::from_secs(1),
            )
            .await
            .unwrap_or_default();
            if i.get("cluster_state").map(String::as_str) != Some("ok")
                || i.get("cluster_known_nodes").map(String::as_str) != Some("6")
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue 'wait;
            }
        }
        break servers;
    }
}

#[tokio::test]
#[ignore = "make test-long: an attached Redis Cluster of 6 ACL-only nodes, four short runs (~25 s)"]
async fn an_acl_redis_cluster_is_attached_with_auth() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let file = auth_file(dir);
    let auth = lockjaw::auth::load(&file).unwrap();
    let _servers = acl_cluster(dir, &auth).await;
    let a = [
        "--system",
        "redis-cluster",
        "--endpoints",
        "127.0.0.1:34510",
        "--base-port",
        "34600",
    ];
    let (code, err) = run_with(dir, "builtin", &a, true);
    assert_eq!(code, 0, "{err}");
    recorded_without_the_password(&dir.join("builtin"));
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("builtin/run.json")).unwrap()).unwrap();
    assert!(
        run["counts"]["worker_grants"].as_u64().unwrap_or(0) > 0,
        "{run}"
    );
    assert!(
        run["server_settings"]["cluster-node-timeout"] == "1000",
        "the settings were read as the user: {run}"
    );
    let (code, err) = run_with(dir, "plain", &a, false);
    assert_eq!(code, 3, "{err}");
    let node = [
        &a[..4],
        &["--client", "node-redlock", "--base-port", "34700"],
    ]
    .concat();
    let (code, err) = run_with(dir, "node", &node, true);
    assert_eq!(code, 0, "{err}");
    recorded_without_the_password(&dir.join("node"));
    let py = [
        &a[..4],
        &["--client", "python-redis-py", "--base-port", "34750"],
    ]
    .concat();
    let (code, err) = run_with(dir, "py", &py, true);
    assert_eq!(code, 0, "{err}");
    recorded_without_the_password(&dir.join("py"));
}

#[test]
#[ignore = "make test-long: a Node and a Python adapter on an ACL-only Redis, two short runs (~10 s)"]
fn node_and_python_adapters_use_the_acl_user() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    auth_file(dir);
    let _servers = Servers(vec![start_redis(dir, 34530, &[])]);
    for (i, client) in ["node-redis-semaphore", "python-sherlock"]
        .into_iter()
        .enumerate()
    {
        let base = (34800 + 100 * i).to_string();
        let a = [
            "--system",
            "redis",
            "--endpoints",
            "127.0.0.1:34530",
            "--client",
            client,
            "--base-port",
            &base,
        ];
        let (code, err) = run_with(dir, client, &a, true);
        assert_eq!(code, 0, "{client}: {err}");
        recorded_without_the_password(&dir.join(client));
        let run: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(client).join("run.json")).unwrap())
                .unwrap();
        let grants = run["counts"]["worker_grants"].as_u64().unwrap_or(0);
        assert!(grants > 0, "{client} was granted the lock: {run}");
    }
}
