//! MariaDB named locks: lockjaw's own server (started as the `mysql`
//! user, data in the temporary directory, in the node's cgroup),
//! `--system mariadb` end to end, and the faults PostgreSQL's advisory
//! locks are measured under (the helpers that read fault windows are
//! PostgreSQL's). Ports 44500–44799 (one 100-port block per test, a free
//! base found first).

use super::run_postgres::{
    assert_fences_grow, assert_run_and_data_gone, assert_session_lease_grants, kill_gaps_ms,
    takeovers, walk,
};
use super::run_util::{self, free_base};
use lockjaw::cluster::{Cluster, ClusterSpec};
use lockjaw::service::System;
use std::time::{Duration, Instant};

/// `lockjaw run --system mariadb` with `extra` arguments, in the 100-port
/// block `block`.
fn mariadb_run(name: &str, tmp: &std::path::Path, block: u16, extra: &[&str]) -> run_util::Run {
    let mut args = vec![
        "--system",
        "mariadb",
        "--workload",
        "fenced-counter",
        "--ttl-ms",
        "1000",
        "--seed",
        "16",
    ];
    args.extend_from_slice(extra);
    run_util::run_local(name, tmp, block, &args)
}

/// The lifecycle `cluster up`, the runner and `heal` rely on: start (as
/// the `mysql` user, data in the temporary directory), answer with the
/// version and the commit durability, freeze and thaw through the cgroup,
/// kill and restart on the data, stop with the data directory removed and
/// nothing listening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "6 s; make test-long (mariadb_none_is_clean covers start and stop)"]
async fn a_local_server_starts_is_paused_killed_restarted_and_leaves_nothing() {
    use mysql_async::prelude::Queryable;
    let tmp = tempfile::tempdir().unwrap();
    let port = free_base(44500);
    let mut spec = ClusterSpec::new(System::Mariadb.servers(), tmp.path().join("c"));
    spec.base_port = Some(port);
    let begun = Instant::now();
    let c = Cluster::start(&spec).await.unwrap();
    eprintln!(
        "[mariadb] install + start until it answers: {:.2} s",
        begun.elapsed().as_secs_f64()
    );
    let node = &c.nodes()[0];
    let v = c.version().await.unwrap();
    assert!(
        v.starts_with("MariaDB 10.") && v.contains("innodb_flush_log_at_trx_commit=2"),
        "{v}"
    );
    use std::os::unix::fs::MetadataExt;
    let data = node.data_dir.clone();
    assert!(data.starts_with(std::env::temp_dir()), "{}", data.display());
    assert_ne!(std::fs::metadata(&data).unwrap().uid(), 0, "owned by mysql");

    let login = lockjaw::client::mariadb_conn::login_for(&node.addr).unwrap();
    let opts = lockjaw::client::mariadb_conn::opts(&node.addr, &login).unwrap();
    let t = Duration::from_secs(5);
    let mut conn = lockjaw::client::mariadb_conn::connect(opts.clone(), t)
        .await
        .unwrap();
    let socket: String = conn.query_first("SELECT @@socket").await.unwrap().unwrap();
    assert!(socket.starts_with(&data.display().to_string()), "{socket}");
    conn.query_drop("CREATE TABLE kept (x INT) ENGINE=InnoDB; INSERT INTO kept VALUES (7)")
        .await
        .unwrap();

    node.pause().unwrap();
    let frozen =
        tokio::time::timeout(Duration::from_millis(500), conn.query_drop("SELECT 1")).await;
    assert!(frozen.is_err(), "a frozen server answered");
    node.resume().unwrap();
    drop(conn);

    node.kill().unwrap();
    c.restart(node, Duration::from_secs(30)).await.unwrap();
    let mut conn = lockjaw::client::mariadb_conn::connect(opts, t)
        .await
        .unwrap();
    let x: Option<i32> = conn.query_first("SELECT x FROM kept").await.unwrap();
    assert_eq!(x, Some(7), "restarted on its data");
    drop(conn);

    let cg = node.cgroup.clone().map(|g| g.dir);
    c.close().unwrap();
    assert!(!data.exists(), "the data directory is removed");
    assert!(
        cg.is_none_or(|d| !d.exists()),
        "the node's cgroup is removed"
    );
    assert!(!run_util::listening(port));
}

/// Fault-free: valid, every grant a session lease (`lease_ms` 0) with an
/// owner of its own per session and a fence above every earlier one,
/// statements on the holding session recorded as renews, the version and
/// commit durability in run.json, nothing left behind.
#[test]
fn mariadb_none_is_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let r = mariadb_run(
        "mariadb-none",
        tmp.path(),
        44600,
        &["--nemesis", "none", "--time-limit", "3"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = r.results();
    assert_eq!(res["valid"], true, "{res}");
    let (meta, ops) = r.history();
    assert_eq!(run_util::meta_param(&meta, "acquire_sets_ttl"), false);
    assert_session_lease_grants(&ops);
    let v = r.run_json()["server_version"].as_str().unwrap().to_string();
    assert!(v.contains("innodb_flush_log_at_trx_commit="), "{v}");
    assert_run_and_data_gone(&r, "my1");
}

/// partition-holder (the proxy disabled: both connections close): the
/// server ends the holder's session at once and frees the lock, another
/// worker takes it during the partition, and the cut-off holder's write
/// lands late: without fencing, lost updates (exit 1); the service stays
/// valid.
#[test]
fn mariadb_partition_holder_without_fencing_loses_updates() {
    let tmp = tempfile::tempdir().unwrap();
    let r = mariadb_run(
        "mariadb-partition",
        tmp.path(),
        44700,
        &[
            "--nemesis",
            "partition-holder",
            "--fencing",
            "off",
            "--hold-ms",
            "500",
            "--time-limit",
            "4",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.lock()["service"]["valid"], true, "{}", r.lock());
    assert_eq!(r.lock()["resource"]["valid"], false, "{}", r.lock());
    assert!(takeovers(&r) > 0, "{}", r.nemesis());
    run_util::assert_nothing_left(&r.dir);
}

fn fault_run(nemesis: &str, fencing: &str) -> (tempfile::TempDir, run_util::Run) {
    let tmp = tempfile::tempdir().unwrap();
    let r = mariadb_run(
        &format!("mariadb-{nemesis}-{fencing}"),
        tmp.path(),
        44700,
        &[
            "--nemesis",
            nemesis,
            "--fencing",
            fencing,
            "--hold-ms",
            "500",
            "--time-limit",
            "10",
        ],
    );
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    assert_eq!(r.lock()["service"]["valid"], true, "{}", r.lock());
    run_util::assert_nothing_left(&r.dir);
    (tmp, r)
}

/// pause-holder: the paused holder's idle session keeps the lock, so
/// nobody else gets it while it sleeps, and its late write is still the
/// holder's: valid, even without fencing.
#[test]
#[ignore = "10 s; make test-long"]
fn mariadb_pause_holder_keeps_the_lock_and_everything_valid() {
    let (_t, r) = fault_run("pause-holder", "off");
    assert_eq!(takeovers(&r), 0);
    assert_eq!(r.results()["valid"], true, "{}", r.lock());
}

/// partition-holder with fencing on: the late writes bounce.
#[test]
#[ignore = "10 s; make test-long"]
fn mariadb_partition_holder_with_fencing_rejects_the_late_write() {
    let (_t, r) = fault_run("partition-holder", "on");
    assert!(takeovers(&r) > 0, "{}", r.nemesis());
    assert_eq!(r.results()["valid"], true, "{}", r.lock());
}

/// partition-holder-blackhole: nothing closes, the server keeps the idle
/// session and its lock, nobody else gets it while the blackhole lasts.
#[test]
#[ignore = "10 s; make test-long"]
fn mariadb_partition_holder_blackhole_keeps_the_lock_from_everyone() {
    let (_t, r) = fault_run("partition-holder-blackhole", "off");
    assert_eq!(takeovers(&r), 0, "{}", r.nemesis());
}

/// kill-holder: the kernel closes the killed worker's connection, the
/// server frees its lock, the others go on: valid.
#[test]
#[ignore = "10 s; make test-long"]
fn mariadb_kill_holder_frees_the_lock() {
    let (_t, r) = fault_run("kill-holder", "on");
    assert_eq!(r.results()["valid"], true, "{}", r.lock());
    let gaps = kill_gaps_ms(&r);
    eprintln!("[mariadb kill-holder] gaps to the next grant (ms): {gaps:?}");
    assert!(!gaps.is_empty(), "{}", r.nemesis());
    assert!(gaps.iter().all(|g| *g < 1000.0), "{gaps:?}");
}

/// pause-node freezes the server, kill-node kills it and restarts it on
/// its data: the service stays valid and the fences keep growing across
/// the restart (commits reach the kernel before they are acknowledged).
#[test]
#[ignore = "20 s; make test-long"]
fn mariadb_node_faults_keep_the_service_valid_and_fences_growing() {
    for nemesis in ["pause-node", "kill-node"] {
        let (_t, r) = fault_run(nemesis, "on");
        assert_fences_grow(&r, nemesis);
    }
}

/// `--endpoints` with the login in `LOCKJAW_MARIADB_URL_FILE` (a user
/// with a password on a server lockjaw did not start for the run): the
/// run is valid, its fence table is dropped from the URL's database at
/// the end, and the password is in no file of the run directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "5 s; make test-long"]
async fn a_users_server_takes_the_login_from_the_environment_and_keeps_the_password_out() {
    use mysql_async::prelude::Queryable;
    let tmp = tempfile::tempdir().unwrap();
    let port = free_base(44500);
    let mut spec = ClusterSpec::new(System::Mariadb.servers(), tmp.path().join("c"));
    spec.base_port = Some(port);
    let c = Cluster::start(&spec).await.unwrap();
    let addr = c.nodes()[0].addr.clone();
    let socket = c.nodes()[0].data_dir.join("mysqld.sock");
    // The `lockjaw` user cannot grant; root can, over the unix socket.
    let root = mysql_async::OptsBuilder::default()
        .socket(Some(socket.display().to_string()))
        .user(Some("root"));
    let mut admin = mysql_async::Conn::new(root).await.unwrap();
    admin
        .query_drop(
            "CREATE USER app@'%' IDENTIFIED BY 'pw-s3cret'; CREATE DATABASE appdb; \
             GRANT ALL ON appdb.* TO app@'%'",
        )
        .await
        .unwrap();
    let url_file = tmp.path().join("url");
    std::fs::write(&url_file, format!("mysql://app:pw-s3cret@{addr}/appdb\n")).unwrap();
    let dir = tmp.path().join("run");
    let out = run_util::lockjaw()
        .env("LOCKJAW_MARIADB_URL_FILE", &url_file)
        .args(["run", "--system", "mariadb", "--endpoints", &addr])
        .args(["--time-limit", "2", "--no-progress", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tables: Vec<String> = admin
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'appdb'")
        .await
        .unwrap();
    // The fence table was there (leftovers_long sees it mid-run) and is
    // dropped at the run's end.
    assert!(tables.is_empty(), "{tables:?}");
    for f in walk(&dir) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(
            !text.contains("pw-s3cret"),
            "{} holds the password",
            f.display()
        );
    }
    drop(admin);
    c.close().unwrap();
}
