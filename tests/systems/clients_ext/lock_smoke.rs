//! The lock clients whose connection setup is now shared with the register
//! and election clients (sentinel discovery, etcd connect, ZooKeeper
//! session and queue) still lock: grant, exclusion, release, higher fence.

use super::util;
use lockjaw::service::connect;
use lockjaw::service::System;
use std::time::Duration;

async fn lock_cycle(system: System) {
    let cfg = util::config(util::shared(system));
    let k = util::key("lock");
    let mut a = connect(system, &cfg).await.unwrap();
    let mut b = connect(system, &cfg).await.unwrap();
    let ttl = Duration::from_secs(2);
    let g1 = a
        .acquire(&k, ttl, Duration::ZERO)
        .await
        .unwrap()
        .expect("free");
    let none = b
        .acquire(&k, ttl, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(none.is_none(), "granted twice: {none:?}");
    assert!(a.release(&g1).await.unwrap());
    let g2 = b
        .acquire(&k, ttl, Duration::from_secs(2))
        .await
        .unwrap()
        .expect("released lock granted");
    assert!(g2.fence > g1.fence, "{:?} then {:?}", g1.fence, g2.fence);
    assert!(b.release(&g2).await.unwrap());
}

#[tokio::test]
async fn sentinel_lock_client_still_locks() {
    lock_cycle(System::Sentinel).await;
}

#[tokio::test]
async fn etcd_lock_client_still_locks() {
    lock_cycle(System::Etcd).await;
}

#[tokio::test]
async fn zookeeper_lock_client_still_locks() {
    lock_cycle(System::Zookeeper).await;
}
