//! Issue 40 on real servers lockjaw did not start (`make test-long`):
//! etcd attached on a test bed with TLS client certificates, and with an
//! etcd user, stays valid under `pause-node`; an attached Redis, and
//! MariaDB and PostgreSQL through `--endpoints`, keep no object of the
//! run after it ends, nor after a run SIGKILLed mid-run and `lockjaw
//! heal`. Loopback ports 33100–33299 (PostgreSQL 33100–33199, MariaDB
//! 33200–33299); the bed's servers listen on its hosts' addresses.

use crate::attach_util::{BedCluster, Control};
use crate::run_util::{self, free_base, lockjaw};
use lockjaw::cluster::{Cluster, ClusterSpec};
use lockjaw::service::System;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// `lockjaw run ARGS --out DIR` until `started` says the clients created
/// their objects, then SIGKILL (the run's own process, which this test
/// started), then `lockjaw heal DIR` (with `env`): its exit code and
/// output.
async fn killed_then_healed<F, Fut>(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    started: F,
) -> String
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut run = lockjaw();
    run.arg("run").args(args).arg("--out").arg(dir);
    run.args(["--no-progress", "--time-limit", "60"]);
    for (k, v) in env {
        run.env(k, v);
    }
    let mut child = run
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(45);
    while !started().await {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its clients created anything"
        );
        assert!(Instant::now() < deadline, "no object of the run appeared");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let mut heal = lockjaw();
    heal.arg("heal").arg(dir);
    for (k, v) in env {
        heal.env(k, v);
    }
    let out = heal.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "heal: {text}");
    run_util::assert_nothing_left(dir);
    text
}

fn attach_args<'a>(hosts: &'a Path, system: &'a str, nemesis: &'a str) -> Vec<&'a str> {
    let h = hosts.to_str().unwrap();
    vec![
        "--system",
        system,
        "--hosts",
        h,
        "--attach",
        "--nemesis",
        nemesis,
    ]
}

/// `lockjaw run` on the attached etcd `c` with `auth`, under pause-node:
/// valid, and none of the run's keys left.
async fn attached_etcd_valid(c: &BedCluster, dir: &Path, auth: &Path) {
    let mut a = attach_args(&c.hosts_file, "etcd", "pause-node");
    a.extend(["--ttl-ms", "2000", "--time-limit", "5", "--auth"]);
    a.push(auth.to_str().unwrap());
    let r = run_util::run("etcd-auth", dir, &a);
    assert_eq!(r.code, 0, "valid: {}", r.stderr);
    // The run's keys were deleted at its end, as its user: no undo error.
    assert!(!r.stderr.contains("error:"), "{}", r.stderr);
    assert!(r.run_json()["counts"]["worker_grants"].as_u64().unwrap() > 0);
    let key = run_util::meta_json(&r)["lock_key"]
        .as_str()
        .unwrap()
        .to_string();
    let t = Duration::from_secs(2);
    let left = lockjaw::cluster::etcd::count_prefix(&c.nodes()[0].client, &key, &c.auth, t).await;
    assert_eq!(left, Ok(0), "{key}");
    c.all_answer().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: attached etcd with TLS client certificates under pause-node, a 3-host bed (~25 s)"]
async fn attached_etcd_with_client_certificates_is_valid_under_pause_node() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    crate::auth_tls::certificates(dir, "etcd.test", false);
    let auth = lockjaw::auth::load(&dir.join("auth.toml")).unwrap();
    let f = |n: &str| dir.join(n).display().to_string();
    let tls = [
        "--client-cert-auth".to_string(),
        format!("--trusted-ca-file={}", f("ca.pem")),
        format!("--cert-file={}", f("server.pem")),
        format!("--key-file={}", f("server.key")),
    ];
    let c = BedCluster::etcd_with(Control::Pidfile, "https", &tls, auth).await;
    attached_etcd_valid(&c, &dir.join("run"), &dir.join("auth.toml")).await;
    c.down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: attached etcd with a user (authentication on) under pause-node, a 3-host bed (~25 s)"]
async fn attached_etcd_with_a_user_is_valid_under_pause_node() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let mut c = BedCluster::etcd(Control::Pidfile).await;
    let pw = "pw-etcd-user-40";
    let addr = format!("http://{}", c.nodes()[0].client);
    let mut e = etcd_client::Client::connect([addr], None).await.unwrap();
    e.user_add("root", pw, None).await.unwrap();
    e.user_grant_role("root", "root").await.unwrap();
    e.auth_enable().await.unwrap();
    std::fs::write(dir.join("password"), pw).unwrap();
    let mode = std::fs::Permissions::from_mode(0o600);
    std::fs::set_permissions(dir.join("password"), mode).unwrap();
    let file = dir.join("auth.toml");
    std::fs::write(
        &file,
        "[user]\nname = \"root\"\npassword_file = \"password\"\n",
    )
    .unwrap();
    c.auth = lockjaw::auth::load(&file).unwrap();
    attached_etcd_valid(&c, &dir.join("run"), &file).await;
    c.down().await;
}

/// Every key of the Redis server at `addr`.
async fn redis_keys(addr: &str) -> Vec<String> {
    let t = Duration::from_secs(2);
    let mut c = lockjaw::client::redis_query::connect(addr, t)
        .await
        .unwrap();
    redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut c)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: an attached Redis on a 1-host bed, a run and a killed run's heal (~25 s)"]
async fn attached_redis_keeps_no_key_after_a_run_and_after_heal() {
    let c = BedCluster::redis(Control::Pidfile).await;
    let t = tempfile::tempdir().unwrap();
    let addr = c.nodes()[0].client.clone();
    let mut a = attach_args(&c.hosts_file, "redis", "none");
    a.extend(["--time-limit", "3"]);
    let r = run_util::run("redis-attached", &t.path().join("run"), &a);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.run_json()["counts"]["worker_grants"].as_u64().unwrap() > 0);
    assert_eq!(redis_keys(&addr).await, Vec::<String>::new());
    let a = attach_args(&c.hosts_file, "redis", "none");
    let fence = || async {
        redis_keys(&addr)
            .await
            .iter()
            .any(|k| k.ends_with(":fence"))
    };
    killed_then_healed(&t.path().join("killed"), &a, &[], fence).await;
    assert_eq!(redis_keys(&addr).await, Vec::<String>::new());
    c.down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: PostgreSQL through --endpoints, a run and a killed run's heal (~15 s)"]
async fn postgres_endpoints_keep_no_table_after_a_run_and_after_heal() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_base(33100);
    let server = lockjaw::service::postgres::Server::start(&tmp.path().join("db"), "pg-left", port)
        .await
        .unwrap();
    let ep = server.addr();
    let a = [
        "--system",
        "postgres",
        "--endpoints",
        &ep,
        "--nemesis",
        "none",
    ];
    let mut once = a.to_vec();
    once.extend(["--time-limit", "2"]);
    let r = run_util::run("pg-endpoints", &tmp.path().join("run"), &once);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let url = server.url();
    assert_eq!(run_util::lockjaw_objects_left(&url).await, 0, "after a run");
    let made = || async { run_util::lockjaw_objects_left(&url).await > 0 };
    killed_then_healed(&tmp.path().join("killed"), &a, &[], made).await;
    assert_eq!(run_util::lockjaw_objects_left(&url).await, 0, "after heal");
    server.close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: MariaDB through --endpoints as a user, a run and a killed run's heal (~20 s)"]
async fn mariadb_endpoints_keep_no_table_after_a_run_and_after_heal() {
    use mysql_async::prelude::Queryable;
    let tmp = tempfile::tempdir().unwrap();
    let mut spec = ClusterSpec::new(System::Mariadb.servers(), tmp.path().join("c"));
    spec.base_port = Some(free_base(33200));
    let c = Cluster::start(&spec).await.unwrap();
    let addr = c.nodes()[0].addr.clone();
    let socket = c.nodes()[0].data_dir.join("mysqld.sock");
    let root = mysql_async::OptsBuilder::default()
        .socket(Some(socket.display().to_string()))
        .user(Some("root"));
    let admin = std::sync::Arc::new(tokio::sync::Mutex::new(
        mysql_async::Conn::new(root).await.unwrap(),
    ));
    admin
        .lock()
        .await
        .query_drop(
            "CREATE USER app@'%' IDENTIFIED BY 'pw-my-40'; CREATE DATABASE appdb; \
             GRANT ALL ON appdb.* TO app@'%'",
        )
        .await
        .unwrap();
    let url_file = tmp.path().join("url");
    std::fs::write(&url_file, format!("mysql://app:pw-my-40@{addr}/appdb\n")).unwrap();
    let tables = || {
        let admin = admin.clone();
        async move {
            let q = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'appdb'";
            let t: Vec<String> = admin.lock().await.query(q).await.unwrap();
            t
        }
    };
    let env = [("LOCKJAW_MARIADB_URL_FILE", url_file.as_path())];
    let a = [
        "--system",
        "mariadb",
        "--endpoints",
        &addr,
        "--nemesis",
        "none",
    ];
    let out = lockjaw()
        .env(env[0].0, env[0].1)
        .arg("run")
        .args(a)
        .args(["--time-limit", "2", "--no-progress", "--out"])
        .arg(tmp.path().join("run"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(tables().await, Vec::<String>::new(), "after a run");
    let made = || async { !tables().await.is_empty() };
    killed_then_healed(&tmp.path().join("killed"), &a, &env, made).await;
    assert_eq!(tables().await, Vec::<String>::new(), "after heal");
    c.close().unwrap();
}

/// The znodes under `/locks`, `/election` and `/registers` of the
/// ZooKeeper ensemble at `connect` whose names start with `lockjaw-`.
async fn znodes(connect: &str) -> Vec<String> {
    let t = Duration::from_secs(4);
    let (c, _bridge) = lockjaw::client::zookeeper::open_session(connect, t, t, &Default::default())
        .await
        .unwrap();
    let mut all = Vec::new();
    for root in ["/locks", "/election", "/registers"] {
        let kids = c.list_children(root).await.unwrap_or_default();
        all.extend(
            kids.into_iter()
                .filter(|k| k.starts_with("lockjaw-"))
                .map(|k| format!("{root}/{k}")),
        );
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: an attached ZooKeeper ensemble on a 3-host bed, a run and a killed run's heal (~40 s)"]
async fn attached_zookeeper_keeps_no_znode_after_a_run_and_after_heal() {
    let c = BedCluster::zookeeper(Control::Pidfile).await;
    let t = tempfile::tempdir().unwrap();
    let connect: Vec<String> = c.nodes().iter().map(|n| n.client.clone()).collect();
    let connect = connect.join(",");
    let mut a = attach_args(&c.hosts_file, "zookeeper", "none");
    a.extend(["--time-limit", "3"]);
    let r = run_util::run("zk-attached", &t.path().join("run"), &a);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.run_json()["counts"]["worker_grants"].as_u64().unwrap() > 0);
    assert_eq!(znodes(&connect).await, Vec::<String>::new());
    let a = attach_args(&c.hosts_file, "zookeeper", "none");
    let made = || async { !znodes(&connect).await.is_empty() };
    killed_then_healed(&t.path().join("killed"), &a, &[], made).await;
    assert_eq!(znodes(&connect).await, Vec::<String>::new());
    c.down().await;
}
