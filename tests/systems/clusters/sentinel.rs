//! Redis with replicas under Sentinel: the client on the primary Sentinel
//! names, primary discovery, and following a failover.

use super::util::{self, Held};
use lockjaw::cluster::NodeRole;
use lockjaw::service::System;
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

#[tokio::test]
async fn sentinel_client_follows_a_failover() {
    let c = util::private(System::Sentinel, None, false);
    let primary = c.leader().await.unwrap().expect("a primary");
    assert_eq!(primary.name, "redis1");
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
