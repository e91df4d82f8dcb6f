//! PostgreSQL: lockjaw's own server (started as the `postgres` user, data
//! in the temporary directory, in the run's cgroup; pause and kill reach
//! its backends through the cgroup), `--system postgres` end to end, and
//! the bad-input refusals. Ports 48000–48399 (one 100-port block per test,
//! a free base found first).

use super::run_util::{self, free_base};
use lockjaw::process::{cgroup, proc_stat};
use lockjaw::service::postgres::Server;
use std::time::{Duration, Instant};

async fn backend_pid(c: &tokio_postgres::Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0)
}

/// The lifecycle the runner and `--storage postgres` rely on: start,
/// answer, a backend outside the postmaster's process group but inside
/// its cgroup, freeze and thaw, kill and restart with the data, stop with
/// the data directory removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_server_starts_answers_is_paused_and_killed_through_its_cgroup_and_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_base(48000);
    let begun = Instant::now();
    let server = Server::start(tmp.path(), "pgtest-lifecycle", port)
        .await
        .unwrap();
    eprintln!(
        "[postgres] initdb + start until it answers: {:.2} s",
        begun.elapsed().as_secs_f64()
    );
    let node = &server.cluster.nodes()[0];
    assert_eq!(server.addr(), format!("127.0.0.1:{port}"));
    let v = server.cluster.version().await.unwrap();
    assert!(v.starts_with("PostgreSQL 15"), "{v}");

    // Data in the temporary directory, owned by the postgres user.
    use std::os::unix::fs::MetadataExt;
    let data = node.data_dir.clone();
    assert!(data.starts_with(std::env::temp_dir()), "{}", data.display());
    let owner = std::fs::metadata(&data).unwrap().uid();
    assert_ne!(owner, 0, "the data directory belongs to the postgres user");

    let c = lockjaw::cluster::postgres::connect(&server.url(), Duration::from_secs(5))
        .await
        .unwrap();
    c.batch_execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")
        .await
        .unwrap();
    let backend = backend_pid(&c).await;
    let postmaster = node.proc_id().unwrap().pid;
    let cg = node
        .cgroup
        .clone()
        .expect("a cgroup (root and cgroup v2 needed)");
    assert_ne!(
        proc_stat(backend).unwrap().pgrp,
        postmaster,
        "a backend leaves the postmaster's process group (setsid)"
    );
    assert_eq!(
        cgroup::of_pid(backend).unwrap(),
        format!("/{}", cg.iptables_path),
        "the backend is in the node's cgroup"
    );

    // Pause: the whole cgroup freezes, so the backend does not answer.
    node.pause().unwrap();
    assert!(node.is_paused());
    let frozen = tokio::time::timeout(Duration::from_millis(500), c.simple_query("SELECT 1")).await;
    assert!(frozen.is_err(), "a frozen backend answered");
    node.resume().unwrap();
    assert!(!node.is_paused());
    // The query sent while frozen completes now; the session lives on.
    assert_eq!(backend_pid(&c).await, backend);

    // Kill: everything in the cgroup dies, the backend included.
    node.kill().unwrap();
    assert!(!cgroup::populated(&cg.dir));
    assert!(
        proc_stat(backend).is_none_or(|s| s.state == 'Z'),
        "the backend survived"
    );
    server
        .cluster
        .restart(node, Duration::from_secs(30))
        .await
        .unwrap();
    let c = lockjaw::cluster::postgres::connect(&server.url(), Duration::from_secs(5))
        .await
        .unwrap();
    let x: i32 = c.query_one("SELECT x FROM kept", &[]).await.unwrap().get(0);
    assert_eq!(x, 7, "restarted on its data");
    drop(c);

    let stopped = Instant::now();
    server.close().unwrap();
    eprintln!("[postgres] stop: {:.2} s", stopped.elapsed().as_secs_f64());
    assert!(!data.exists(), "the data directory is removed");
    assert!(!cg.dir.exists(), "the node's cgroup is removed");
    assert!(!run_util::listening(port));
}
