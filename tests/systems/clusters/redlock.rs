//! Redlock over independent Redis nodes: acquire/release without fences,
//! mutual exclusion, expiry bounds, and the quorum rule with nodes down.

use super::util::{self, Held};
use lockjaw::client::redlock;
use lockjaw::service::System;
use std::time::{Duration, Instant};

#[tokio::test]
async fn redlock_acquire_release_without_fences() {
    let c = util::shared(System::Redlock);
    assert_eq!(c.servers().count(), 5);
    let cfg = util::config(c);
    util::acquire_release(System::Redlock, &cfg, Duration::from_secs(5)).await;
    let mut a = util::connect(System::Redlock, &cfg).await;
    let ttl = Duration::from_secs(5);
    let g = a
        .acquire(&util::key("redlock-validity"), ttl, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g.fence, None, "Redlock has no fencing token");
    assert!(
        g.lease <= ttl - redlock::drift(ttl),
        "validity {:?} leaves room for drift",
        g.lease
    );
    assert!(a.renew(&g).await.unwrap());
    assert!(a.release(&g).await.unwrap());
}

#[tokio::test]
async fn redlock_two_clients_never_hold_at_once() {
    let c = util::shared(System::Redlock);
    util::mutual_exclusion(System::Redlock, &util::config(c), 3, 10).await;
}

#[tokio::test]
async fn redlock_holder_that_stops_renewing_is_replaced_after_its_lease() {
    let c = util::shared(System::Redlock);
    let cfg = util::config(c);
    let mut a = util::connect(System::Redlock, &cfg).await;
    let refreshed_at = Instant::now();
    let grant = a
        .acquire(
            &util::key("redlock-expiry"),
            Duration::from_millis(800),
            Duration::ZERO,
        )
        .await
        .unwrap()
        .unwrap();
    drop(a);
    util::expiry_bounds(
        System::Redlock,
        &cfg,
        Held {
            grant,
            refreshed_at,
        },
        Duration::from_secs(5),
    )
    .await;
}

#[tokio::test]
async fn redlock_needs_a_majority_of_nodes() {
    let c = util::private(System::Redlock, Some(3), false);
    let cfg = util::config(&c);
    let mut a = util::connect(System::Redlock, &cfg).await;
    let ttl = Duration::from_secs(5);
    c.nodes()[0].kill().unwrap();
    let g = a
        .acquire(&util::key("one-down"), ttl, Duration::ZERO)
        .await
        .unwrap();
    let g = g.expect("2 of 3 nodes are a majority");
    assert!(a.release(&g).await.unwrap());
    c.nodes()[1].pause().unwrap();
    let r = a.acquire(&util::key("two-down"), ttl, Duration::ZERO).await;
    c.nodes()[1].resume().unwrap();
    assert!(!matches!(r, Ok(Some(_))), "granted by a minority: {r:?}");
    let d = redlock::retry_delay(Duration::from_millis(100));
    assert!(d >= Duration::from_millis(50) && d <= Duration::from_millis(100));
}
