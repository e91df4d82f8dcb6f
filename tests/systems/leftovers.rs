//! What a run leaves on a user's server, the short cases (`make test`, on
//! loopback, ports 33000–33019): etcd's leftover-key count asked with the
//! run's user (an etcd with authentication on refuses it without), and
//! `lockjaw heal` deleting a run's Redis keys, its fence counter too, as
//! the run's ACL user read again from its `--auth` file, and nothing
//! else. The runs on a bed and through `--endpoints` are in
//! `leftovers_long.rs`.

use crate::run_util::lockjaw;
use lockjaw::process::{ProcId, Signal};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const PASSWORD: &str = "pw-leftovers-Q7";

/// A server the test started: SIGKILLed (by its recorded identity) when
/// dropped.
pub(crate) struct Started(Option<ProcId>);

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = p.signal(Signal::Kill);
        }
    }
}

pub(crate) fn spawn(cmd: &mut Command) -> Started {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = ProcId::of(child.id() as i32).unwrap();
    // Reaped by its own thread, so a kill leaves no zombie.
    std::thread::spawn(move || {
        let mut c = child;
        let _ = c.wait();
    });
    Started(Some(id))
}

/// A one-member etcd in `dir` on 127.0.0.1:`client` (peer port `peer`),
/// answering: its address and its guard.
pub(crate) fn start_etcd(dir: &Path, client: u16, peer: u16) -> (String, Started) {
    let addr = format!("127.0.0.1:{client}");
    let etcd = spawn(Command::new("etcd").current_dir(dir).args([
        "--name=a".to_string(),
        format!("--data-dir={}", dir.join("data").display()),
        format!("--listen-client-urls=http://{addr}"),
        format!("--advertise-client-urls=http://{addr}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-cluster=a=http://127.0.0.1:{peer}"),
    ]));
    wait_port(&addr);
    (addr, etcd)
}

pub(crate) fn wait_port(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{addr} never opened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An auth file with user `name` (password in an owner-only file).
pub(crate) fn user_auth(dir: &Path, name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let pw = dir.join("password");
    std::fs::write(&pw, PASSWORD).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = dir.join("auth.toml");
    std::fs::write(
        &file,
        format!("[user]\nname = \"{name}\"\npassword_file = \"password\"\n"),
    )
    .unwrap();
    file
}

/// Issue 40, item 1: `--attach`'s check for leftover keys connected
/// without the run's credentials. An etcd with authentication on: the
/// count under the run's user sees the key; without a user it is refused.
#[tokio::test]
async fn etcd_leftover_keys_are_counted_as_the_runs_user() {
    let d = tempfile::tempdir().unwrap();
    let (addr, _etcd) = start_etcd(d.path(), 33000, 33001);
    let mut c = etcd_client::Client::connect([format!("http://{addr}")], None)
        .await
        .unwrap();
    c.user_add("root", PASSWORD, None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.auth_enable().await.unwrap();
    let opts = etcd_client::ConnectOptions::new().with_user("root", PASSWORD);
    let mut root = etcd_client::Client::connect([format!("http://{addr}")], Some(opts))
        .await
        .unwrap();
    root.put("lockjaw-run9/1", "x", None).await.unwrap();
    let auth = lockjaw::auth::load(&user_auth(d.path(), "root")).unwrap();
    let t = Duration::from_secs(2);
    let count = lockjaw::cluster::etcd::count_prefix(&addr, "lockjaw-run9", &auth, t).await;
    assert_eq!(count, Ok(1));
    let no_user = lockjaw::auth::Auth::default();
    let none = lockjaw::cluster::etcd::count_prefix(&addr, "lockjaw-run9", &no_user, t).await;
    assert!(
        none.is_err(),
        "etcd answered a count without a user: {none:?}"
    );
}

/// Issue 40, item 2: heal deletes a run's Redis keys (lock keys and their
/// fence counters, which have no expiry) on a server that wants the
/// run's ACL user, read again from the `--auth` file; a key that is not
/// the run's stays, and an entry naming one is refused.
#[tokio::test]
async fn heal_deletes_the_runs_redis_keys_as_its_user() {
    let d = tempfile::tempdir().unwrap();
    let port = 33010;
    let addr = format!("127.0.0.1:{port}");
    let _redis = spawn(Command::new("redis-server").current_dir(d.path()).args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--user",
        "default",
        "off",
        "--user",
        "locker",
        "on",
        &format!(">{PASSWORD}"),
        "~*",
        "&*",
        "+@all",
    ]));
    wait_port(&addr);
    let file = user_auth(d.path(), "locker");
    let auth = lockjaw::auth::load(&file).unwrap();
    let t = Duration::from_secs(2);
    let mut c = lockjaw::client::redis_query::connect_as(&addr, &auth, t)
        .await
        .unwrap();
    let id = format!("{:08x}", rand::random::<u32>());
    let ours = [format!("lockjaw-{id}"), format!("lockjaw-{id}:fence")];
    for k in ours.iter().chain([&"users-key".to_string()]) {
        let () = redis::cmd("SET")
            .arg(k)
            .arg(1)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let run = d.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("run.json"), format!("{{\"run_id\": \"{id}\"}}")).unwrap();
    let entry = |keys: &[String]| {
        serde_json::json!({"id": 1, "undo": {"kind": "server-objects", "system": "redis",
            "servers": [addr], "keys": keys, "auth_file": file}})
        .to_string()
    };
    // Not the run's: refused, nothing deleted.
    std::fs::write(run.join("undo.jsonl"), entry(&["users-key".into()]) + "\n").unwrap();
    let out = lockjaw().arg("heal").arg(&run).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("does not end in this run's id"), "{text}");
    std::fs::write(run.join("undo.jsonl"), entry(&ours) + "\n").unwrap();
    let out = lockjaw().arg("heal").arg(&run).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(keys, ["users-key"]);
    assert!(!text.contains(PASSWORD));
}

/// `--endpoints` on a user's Redis: the run's keys carry its id and the
/// run deletes them, its fence counter too, which has no expiry (before:
/// the bare `lockjaw` key's counter `lockjaw:fence` stayed after every
/// run). The user's own key stays. Redis on 33020, the run's proxies in
/// 33300–33399.
#[tokio::test]
async fn an_endpoints_run_on_redis_leaves_no_key_of_its_own() {
    let d = tempfile::tempdir().unwrap();
    let addr = "127.0.0.1:33020";
    let _redis = spawn(Command::new("redis-server").current_dir(d.path()).args([
        "--bind",
        "127.0.0.1",
        "--port",
        "33020",
        "--save",
        "",
    ]));
    wait_port(addr);
    let t = Duration::from_secs(2);
    let mut c = lockjaw::client::redis_query::connect_as(addr, &Default::default(), t)
        .await
        .unwrap();
    let () = redis::cmd("SET")
        .arg("users-key")
        .arg(1)
        .query_async(&mut c)
        .await
        .unwrap();
    let base = crate::run_util::free_base(33300).to_string();
    let out_dir = d.path().join("run");
    let out = lockjaw()
        .args(["run", "--system", "redis", "--endpoints", addr])
        .args(["--time-limit", "1", "--ttl-ms", "1000", "--no-progress"])
        .args(["--base-port", &base, "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    // The run did take the lock (so it did create its keys).
    let history = std::fs::read_to_string(out_dir.join("history.jsonl")).unwrap();
    let granted = history
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|v| v["type"] == "ok" && v["f"] == "acquire");
    assert!(granted, "no grant in the history");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(keys, ["users-key"], "{text}");
}
