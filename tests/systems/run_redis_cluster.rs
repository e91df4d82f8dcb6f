//! `lockjaw run --system redis-cluster` on a local Redis Cluster (3
//! primaries, 3 replicas, bus ports in the run's block): the baseline is
//! valid and leaves nothing, a paused holder damages an unfenced resource
//! (any lease lock allows it). Short runs; the failovers measured in
//! docs/running.md are #[ignore] (make test-long).
//! Ports: one 100-port block per test in 29000-29499 (below the ephemeral
//! ports, which the proxies of parallel runs take).

use crate::run_util::*;

fn args<'a>(limit: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--system",
        "redis-cluster",
        "--workload",
        "fenced-counter",
        "--time-limit",
        limit,
        "--seed",
        "41",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn redis_cluster_none_is_valid_records_its_settings_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "redis-cluster-none",
        tmp.path(),
        29000,
        &args("3", &["--nemesis", "none", "--ttl-ms", "2000"]),
    );
    let res = r.results();
    assert_eq!(res["valid"], true, "{res}");
    assert_eq!(r.code, 0);
    let (acked, info, stale, last) = storage_facts(&r.history().1);
    assert!(acked > 3, "the workers made progress");
    assert_eq!((stale, info, last), (0, 0, Some(acked as i64)));
    let run = r.run_json();
    assert_eq!(run["system"], "redis-cluster");
    assert_eq!(run["nodes"].as_array().map(Vec::len), Some(6), "{run}");
    assert!(
        run["server_version"]
            .as_str()
            .unwrap_or("")
            .starts_with("redis 7"),
        "{run}"
    );
    assert_eq!(
        run["server_settings"]["cluster-node-timeout"], "1000",
        "{run}"
    );
    assert_eq!(run["server_settings"]["appendfsync"], "everysec", "{run}");
    assert_nothing_left(&r.dir);
}

#[test]
fn redis_cluster_pause_holder_without_fencing_damages_the_resource() {
    let tmp = tempfile::tempdir().unwrap();
    let r = run_local(
        "redis-cluster-pause-off",
        tmp.path(),
        29100,
        &args(
            "6",
            &[
                "--nemesis",
                "pause-holder",
                "--fencing",
                "off",
                "--ttl-ms",
                "1000",
            ],
        ),
    );
    assert_resource_damaged_service_valid(&r, "the key's primary honours its leases");
}

/// The failovers on the replica of the key's primary: the forced ones
/// lose a grant the holder still relies on (the fence key too), the
/// coordinated one loses nothing. Every fault must land and heal (the old
/// primary back as a replica).
fn failover_run(tmp: &std::path::Path, fault: &str, block: u16) -> Run {
    let r = run_local(
        &format!("redis-cluster-{fault}"),
        tmp,
        block,
        &args("15", &["--nemesis", fault]),
    );
    let (_, ops) = r.history();
    let stops: Vec<_> = ops
        .iter()
        .filter(|o| o.f == "stop" && o.process.to_string() == "nemesis")
        .map(|o| &o.value)
        .filter(|v| v.get("old_primary").is_some() && v["run_ending"] != true)
        .collect();
    assert!(!stops.is_empty(), "{fault}: no fault stopped");
    for v in stops {
        assert_eq!(v["rejoined"], "replica", "{fault}: {v}");
    }
    assert!(landed_count(&r.dir) >= 2, "{fault}: faults landed");
    assert_nothing_left(&r.dir);
    r
}

#[test]
#[ignore = "make test-long: 3 runs of 15 s"]
fn redis_cluster_forced_failovers_lose_grants_and_the_coordinated_one_does_not() {
    let tmp = tempfile::tempdir().unwrap();
    for (fault, block) in [("failover", 29200), ("failover-takeover", 29300)] {
        let r = failover_run(tmp.path(), fault, block);
        let res = r.lock();
        assert_eq!(res["service"]["valid"], false, "{fault}: {res}");
        assert_eq!(r.code, 1, "{fault}");
    }
    let r = failover_run(tmp.path(), "failover-coordinated", 29200);
    assert_eq!(r.results()["valid"], true, "{}", r.results());
    assert_eq!(r.code, 0);
}

/// The client follows the cluster inside one op: after a coordinated
/// failover its cached primary answers `MOVED` (it is a replica now), and
/// the same acquire is sent on to the new primary and granted, with the
/// fence the old primary's counter reached; a migrating slot answers
/// `ASK`, and the release goes on to the importing node after `ASKING`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_and_ask_are_followed_within_one_op() {
    use lockjaw::client::redis_cluster::RedisClusterClient;
    use lockjaw::client::redis_slots as rs;
    use lockjaw::client::{ClientConfig, LockClient};
    use lockjaw::cluster::{Cluster, ClusterSpec};
    use lockjaw::service::System;
    use std::time::Duration;

    let tmp = tempfile::tempdir().unwrap();
    let mut spec = ClusterSpec::new(System::RedisCluster.servers(), tmp.path().join("c"));
    spec.base_port = Some(free_base(29400));
    let c = Cluster::start(&spec).await.unwrap();
    let t = Duration::from_secs(2);
    let mut cfg = ClientConfig::new(c.client_endpoints());
    cfg.op_timeout = Duration::from_secs(5);
    let mut client = RedisClusterClient::connect(&cfg).await.unwrap();
    let ttl = Duration::from_millis(300);
    let g = client
        .acquire("k", ttl, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let old = client.server().unwrap().to_string();
    assert!(client.release(&g).await.unwrap());

    // The replica of the key's primary takes over, caught up.
    let lines = rs::nodes(&old, t).await.unwrap();
    let me = lines.iter().find(|l| l.myself).unwrap().id.clone();
    let replica = lines
        .iter()
        .find(|l| l.master.as_ref() == Some(&me))
        .unwrap();
    assert_eq!(rs::failover(&replica.addr, "", t).await.unwrap(), "OK");
    let began = std::time::Instant::now();
    while !rs::replication(&replica.addr, t)
        .await
        .is_ok_and(|r| r.get("role").map(String::as_str) == Some("master"))
    {
        assert!(began.elapsed() < Duration::from_secs(10), "no promotion");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let g2 = client
        .acquire("k", ttl, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        client.server(),
        Some(replica.addr.as_str()),
        "followed MOVED"
    );
    assert_eq!(g2.fence, Some(g.fence.unwrap() + 1), "the fence went on");

    // Slot of `{k}` migrating from the new primary to another primary.
    let slot = rs::key_slot("{k}");
    let dest = rs::nodes(&replica.addr, t)
        .await
        .unwrap()
        .into_iter()
        .find(|l| l.primary && !l.slots.is_empty() && l.addr != replica.addr && l.addr != old)
        .unwrap();
    let src_id = rs::nodes(&replica.addr, t)
        .await
        .unwrap()
        .into_iter()
        .find(|l| l.myself)
        .unwrap()
        .id;
    let setslot = |addr: String, how: &'static str, id: String| async move {
        let mut conn = lockjaw::client::redis_query::connect(&addr, t)
            .await
            .unwrap();
        redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(how)
            .arg(id)
            .query_async::<()>(&mut conn)
            .await
            .unwrap();
    };
    // Once the destination has heard of the promotion.
    let began = std::time::Instant::now();
    while !rs::nodes(&dest.addr, t)
        .await
        .is_ok_and(|ns| ns.iter().any(|l| l.id == src_id && l.primary))
    {
        assert!(began.elapsed() < Duration::from_secs(10), "no gossip");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    setslot(dest.addr.clone(), "IMPORTING", src_id).await;
    setslot(replica.addr.clone(), "MIGRATING", dest.id.clone()).await;
    // The key expired (300 ms lease), so the source sends the release on.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let asked = |addr: String| async move {
        let mut conn = lockjaw::client::redis_query::connect(&addr, t)
            .await
            .unwrap();
        let s: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .unwrap();
        s.lines().any(|l| l.starts_with("cmdstat_asking:"))
    };
    assert!(!asked(dest.addr.clone()).await);
    assert!(
        !client.release(&g2).await.unwrap(),
        "expired, released nothing"
    );
    assert!(
        asked(dest.addr.clone()).await,
        "ASKING reached the importing node"
    );
    c.close().unwrap();
}
