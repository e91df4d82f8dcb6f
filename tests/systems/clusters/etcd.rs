//! etcd: lease + Lock API client, recorded keep-alives, the granted lease,
//! expiry bounds, and granting on after the leader is paused.

use super::util::{self, Held};
use lockjaw::cluster::{self};
use lockjaw::service::System;
use std::time::{Duration, Instant};

#[tokio::test]
async fn etcd_acquire_release_and_fences() {
    let c = util::shared(System::Etcd);
    assert!(c.version().await.unwrap().starts_with("etcd 3."));
    util::acquire_release(System::Etcd, &util::config(c), Duration::from_secs(5)).await;
}

#[tokio::test]
async fn etcd_two_clients_never_hold_at_once() {
    let c = util::shared(System::Etcd);
    util::mutual_exclusion(System::Etcd, &util::config(c), 3, 8).await;
}

#[tokio::test]
async fn etcd_reports_the_granted_lease_and_records_keep_alives() {
    let c = util::shared(System::Etcd);
    let (cfg, sink, t0) = util::recording(util::config(c));
    let mut a = util::connect(System::Etcd, &cfg).await;
    let k = util::key("etcd-lease");
    let g = a
        .acquire(&k, Duration::from_millis(100), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        g.lease,
        cluster::etcd::min_lease(),
        "etcd raises a 100 ms request to its minimum"
    );
    assert!(!g.acquire_sets_ttl);
    // The grant itself and at least one keep-alive are recorded.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sink.ops.lock().unwrap().len() < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(util::last_refresh(&sink, t0, &g.owner).is_some());
    let ops = sink.ops.lock().unwrap().clone();
    assert!(ops.len() >= 4, "grant + a keep-alive, got {ops:?}");
    assert!(ops
        .iter()
        .all(|o| o.process.to_string() == "0-lease" && o.key.as_deref() == Some(k.as_str())));
    assert!(a.renew(&g).await.unwrap());
    assert!(a.release(&g).await.unwrap());
    assert!(!a.renew(&g).await.unwrap(), "renew after release");
}

#[tokio::test]
async fn etcd_keep_alive_of_a_revoked_lease_fails() {
    let c = util::shared(System::Etcd);
    let cfg = util::config(c);
    let mut a = util::connect(System::Etcd, &cfg).await;
    let g = a
        .acquire(
            &util::key("revoked"),
            Duration::from_secs(5),
            Duration::ZERO,
        )
        .await
        .unwrap()
        .unwrap();
    let mut admin =
        etcd_client::Client::connect([format!("http://{}", c.client_endpoints()[0])], None)
            .await
            .unwrap();
    admin.lease_revoke(g.owner.parse().unwrap()).await.unwrap();
    assert!(!a.renew(&g).await.unwrap(), "TTL 0 means the lease is gone");
    assert!(!a.release(&g).await.unwrap());
}

#[tokio::test]
async fn etcd_holder_that_stops_renewing_is_replaced_after_its_lease() {
    let c = util::shared(System::Etcd);
    let (cfg, sink, t0) = util::recording(util::config(c));
    let mut a = util::connect(System::Etcd, &cfg).await;
    let grant = a
        .acquire(
            &util::key("etcd-expiry"),
            Duration::from_secs(1),
            Duration::ZERO,
        )
        .await
        .unwrap()
        .unwrap();
    drop(a); // its keep-alive stops
    let refreshed_at = util::last_refresh(&sink, t0, &grant.owner).expect("the grant is recorded");
    let plain = util::config(c);
    util::expiry_bounds(
        System::Etcd,
        &plain,
        Held {
            grant,
            refreshed_at,
        },
        Duration::from_secs(10),
    )
    .await;
}

#[tokio::test]
async fn etcd_keeps_granting_after_its_leader_is_paused() {
    let c = util::private(System::Etcd, None, false);
    let leader = c.leader().await.unwrap().expect("a leader");
    leader.pause().unwrap();
    let k = util::key("etcd-failover");
    let got =
        util::acquire_eventually(System::Etcd, &util::config(&c), &k, Duration::from_secs(60))
            .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let new = loop {
        if let Ok(Some(n)) = c.leader().await {
            if n.name != leader.name {
                break Some(n.name.clone());
            }
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // A client that connects now leaves the paused member out, so none of
    // its requests waits on it (tonic would count that member as ready).
    let mut fresh = None;
    if new.is_some() {
        let mut cl = util::connect(System::Etcd, &util::config(&c)).await;
        let mut r = Vec::new();
        for i in 0..3 {
            let k = format!("{k}-fresh-{i}");
            r.push(
                match cl.acquire(&k, Duration::from_secs(5), Duration::ZERO).await {
                    Ok(Some(g)) => cl.release(&g).await.map(|_| "granted"),
                    Ok(None) => Ok("not granted"),
                    Err(e) => Err(e),
                },
            );
        }
        fresh = Some(r);
    }
    leader.resume().unwrap();
    let (mut cl, g) = got.expect("granted with the leader paused");
    assert!(new.is_some(), "a new leader was elected");
    let fresh = fresh.unwrap();
    assert!(
        fresh.iter().all(|r| matches!(r, Ok("granted"))),
        "a fresh client's acquires with the old leader paused: {fresh:?}"
    );
    // Clean-up only: right after the old leader resumes, a revoke can time
    // out on a loaded machine; the lease then expires by itself.
    let _ = cl.release(&g).await;
    // Restart the old leader on its data: it rejoins and serves again.
    let old = leader.proc_id().unwrap();
    c.restart(leader, Duration::from_secs(30)).await.unwrap();
    assert_ne!(leader.proc_id().unwrap(), old);
    c.probe(leader).await.unwrap();
}

/// Trust on the operator's hosts, part 7: a leader lookup hears each
/// member: one says it leads, the others whom they follow, all in one term
/// (what a lookup that finds no leader lists, node by node).
#[tokio::test]
async fn etcd_leader_poll_hears_each_member() {
    let c = util::shared(System::Etcd);
    let poll = c.system.poll_leader(c, "lockjaw").await.unwrap();
    let leader = c.leader().await.unwrap().expect("a leader").addr.clone();
    assert_eq!(poll.leader.as_deref(), Some(leader.as_str()), "{poll:?}");
    let servers: Vec<String> = c.servers().map(|n| n.addr.clone()).collect();
    let asked: Vec<String> = poll.answers.iter().map(|(a, _)| a.clone()).collect();
    assert_eq!(asked, servers);
    let said: Vec<&str> = poll
        .answers
        .iter()
        .map(|(_, r)| r.as_deref().unwrap())
        .collect();
    let term = said[0].rsplit_once(", term ").expect("a term").1;
    for (addr, s) in servers.iter().zip(&said) {
        let role = if *addr == leader {
            "leader"
        } else {
            "follower of "
        };
        assert!(s.starts_with(role), "{addr}: {s}");
        assert!(s.ends_with(&format!(", term {term}")), "{said:?}");
    }
}
