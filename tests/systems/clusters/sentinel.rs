//! Redis with replicas under Sentinel: the client on the primary Sentinel
//! names, primary discovery, and following a failover; the sentinels'
//! view of the replicas and of each other, when ready and after it.

use super::util::{self, Held};
use lockjaw::client::redis_query;
use lockjaw::cluster::NodeRole;
use lockjaw::service::System;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[tokio::test]
async fn sentinel_acquire_release_and_fences() {
    let c = util::shared(System::Sentinel);
    assert_eq!(c.servers().count(), 3);
    assert_eq!(
        c.nodes()
            .iter()
            .filter(|n| n.role == NodeRole::Sentinel)
            .count(),
        3
    );
    util::acquire_release(System::Sentinel, &util::config(c), Duration::from_secs(5)).await;
}

#[tokio::test]
async fn sentinel_two_clients_never_hold_at_once() {
    let c = util::shared(System::Sentinel);
    util::mutual_exclusion(System::Sentinel, &util::config(c), 3, 10).await;
}

type Entry = HashMap<String, String>;

/// What the sentinel at `addr` says of lockjaw's master: its port, and
/// the replicas (port, link up and seen up) and other sentinels (linked).
async fn view(addr: &str) -> (String, Vec<(String, bool)>, usize) {
    let mut c = redis_query::connect(addr, Duration::from_secs(2))
        .await
        .unwrap();
    let ask = |what: &str| redis::cmd("SENTINEL").arg(what).arg("lockjaw").clone();
    let master: Entry = ask("MASTER").query_async(&mut c).await.unwrap();
    let replicas: Vec<Entry> = ask("REPLICAS").query_async(&mut c).await.unwrap();
    let sentinels: Vec<Entry> = ask("SENTINELS").query_async(&mut c).await.unwrap();
    let up = |e: &Entry| {
        let flags = &e["flags"];
        !flags.contains("disconnected") && !flags.contains("s_down")
    };
    let replicas = replicas
        .iter()
        .map(|r| (r["port"].clone(), up(r) && r["master-link-status"] == "ok"))
        .collect();
    (
        master["port"].clone(),
        replicas,
        sentinels.iter().filter(|s| up(s)).count(),
    )
}

/// Every sentinel's view, until each has `primary` with the live
/// `replicas` (ports) and both other sentinels linked, or 30 s.
async fn every_sentinel_sees(c: &lockjaw::cluster::Cluster, primary: &str, replicas: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for s in c.nodes().iter().filter(|n| n.role == NodeRole::Sentinel) {
        loop {
            let (p, r, others) = view(&s.addr).await;
            let live: Vec<&str> = r.iter().filter(|r| r.1).map(|r| r.0.as_str()).collect();
            if p == primary && replicas.iter().all(|x| live.contains(x)) && others == 2 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} sees primary {p}, replicas {r:?}, {others} other sentinels linked; \
                 wanted {primary} with {replicas:?} and 2",
                s.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn port(n: &lockjaw::cluster::Node) -> String {
    n.addr.rsplit_once(':').unwrap().1.to_string()
}

#[tokio::test]
async fn sentinel_client_follows_a_failover() {
    let c = util::private(System::Sentinel, None, false);
    let primary = c.leader().await.unwrap().expect("a primary");
    assert_eq!(primary.name, "redis1");
    // Ready means every sentinel is linked to both replicas, whose links
    // are up, and to the other sentinels: at once, no waiting here.
    let servers: Vec<String> = c.servers().map(port).collect();
    for s in c.nodes().iter().filter(|n| n.role == NodeRole::Sentinel) {
        let (p, r, others) = view(&s.addr).await;
        let mut live: Vec<&String> = r.iter().filter(|r| r.1).map(|r| &r.0).collect();
        live.sort();
        assert_eq!(p, servers[0], "{}", s.name);
        assert_eq!(
            live,
            servers[1..].iter().collect::<Vec<_>>(),
            "{}: {r:?}",
            s.name
        );
        assert_eq!(others, 2, "{}", s.name);
    }
    let cfg = util::config(&c);
    let mut a = util::connect(System::Sentinel, &cfg).await;
    let k = util::key("failover");
    let _held = a
        .acquire(&k, Duration::from_secs(2), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    primary.kill().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let new = loop {
        if let Ok(Some(n)) = c.leader().await {
            if n.name != primary.name {
                break n.name.clone();
            }
        }
        assert!(Instant::now() < deadline, "no failover within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The same client object reaches the new primary.
    let mut got = None;
    while got.is_none() && Instant::now() < deadline {
        if let Ok(Some(g2)) = a
            .acquire(
                &util::key("after-failover"),
                Duration::from_secs(5),
                Duration::ZERO,
            )
            .await
        {
            got = Some(g2);
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let g2 = got.expect("granted on the new primary");
    assert!(a.release(&g2).await.unwrap());
    assert_ne!(new, "redis1");
    // The sentinels' view follows: the new primary, the other replica
    // streaming from it, the sentinels still linked.
    let new_port = port(c.node(&new).unwrap());
    let other: Vec<String> = servers[1..]
        .iter()
        .filter(|p| **p != new_port)
        .cloned()
        .collect();
    every_sentinel_sees(&c, &new_port, &[other[0].as_str()]).await;
}

#[tokio::test]
async fn sentinel_holder_that_stops_renewing_is_replaced_after_its_lease() {
    let c = util::shared(System::Sentinel);
    let cfg = util::config(c);
    let mut a = util::connect(System::Sentinel, &cfg).await;
    let refreshed_at = Instant::now();
    let k = util::key("sentinel-expiry");
    let grant = a
        .acquire(&k, Duration::from_millis(800), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    drop(a);
    let held = Held {
        grant,
        refreshed_at,
    };
    util::expiry_bounds(System::Sentinel, &cfg, held, Duration::from_secs(5)).await;
}
