//! Election clients on etcd, ZooKeeper and a Redis lease key (plus the
//! Sentinel-named primary): one leader at a time with hand-over on resign,
//! a leader that stops renewing replaced only after its lease, a follower's
//! observe naming the leader, and a deposed leader learning its loss (key
//! deleted behind its back; cut off by a proxy: the loss is dated no later
//! than its successor's election).

use super::util;
use lockjaw::client::election::{ElectionClient, LossKind, Term};
use lockjaw::client::ClientConfig;
use lockjaw::service::connect_election;
use lockjaw::service::System;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_secs(1);
/// Loose liveness bound (the machine is shared and noisy).
const SLACK: Duration = Duration::from_secs(10);

async fn client(system: System, cfg: &ClientConfig) -> Box<dyn ElectionClient> {
    connect_election(system, cfg).await.expect("connects")
}

/// 3 campaigners take turns, two terms each: never two leaders at once,
/// a follower's observe names the current leader, resign hands over, and
/// fences increase from term to term.
async fn one_leader_at_a_time(system: System) {
    let cfg = util::config(util::shared(system));
    let name = util::key("election");
    let leaders = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let mut c = client(system, &cfg).await;
        let mut follower = client(system, &cfg).await;
        let (name, leaders, fences) = (name.clone(), leaders.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            let mut terms = 0;
            let give_up = Instant::now() + Duration::from_secs(60);
            while terms < 2 && Instant::now() < give_up {
                let Some(t) = c.campaign(&name, LEASE, SLACK).await.unwrap() else {
                    continue;
                };
                let before = leaders.fetch_add(1, Ordering::SeqCst);
                fences.lock().unwrap().push(t.fence.unwrap());
                let seen = follower.observe(&name).await.unwrap().expect("a leader");
                assert_eq!(
                    (seen.owner.as_str(), seen.fence),
                    (t.owner.as_str(), t.fence)
                );
                assert!(
                    c.loss_watch(&t).unwrap().lost().is_none(),
                    "term ended early"
                );
                tokio::time::sleep(Duration::from_millis(30)).await;
                let after = leaders.fetch_sub(1, Ordering::SeqCst);
                assert_eq!((before, after), (0, 1), "two leaders at once");
                assert!(c.resign(&t).await.unwrap(), "resign of a live term");
                assert!(c.loss_watch(&t).is_none(), "a resigned term is forgotten");
                terms += 1;
            }
            terms
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 2, "a campaigner was never elected twice");
    }
    let f = fences.lock().unwrap().clone();
    assert_eq!(f.len(), 6);
    assert!(
        f.windows(2).all(|w| w[1] > w[0]),
        "fences not increasing: {f:?}"
    );
    let mut c = client(system, &cfg).await;
    assert_eq!(c.observe(&name).await.unwrap(), None, "everyone resigned");
}

/// A leader whose client is dropped (no more refreshes, no resign) is
/// replaced not before its lease ran out (strict) and soon after (loose).
/// Returns the time from the lease's end to the successor's election.
async fn stopped_leader_replaced_after_its_lease(system: System) -> Duration {
    let plain = util::config(util::shared(system));
    let (cfg, sink, t0) = util::recording(plain.clone());
    let name = util::key("stopped");
    let mut a = client(system, &cfg).await;
    let invoked = Instant::now();
    let ta = a
        .campaign(&name, LEASE, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    drop(a);
    // The lease runs from the last request that started or refreshed it:
    // the campaign itself (Redis) or the last recorded refresh.
    let start = match util::last_refresh(&sink, t0, &ta.owner) {
        Some(r) if !ta.acquire_sets_ttl => r,
        _ => invoked,
    };
    let lease_end = start + ta.lease.mul_f64(1.0 - 1e-3) - Duration::from_millis(2);
    let mut b = client(system, &plain).await;
    let tb = b
        .campaign(&name, LEASE, ta.lease + SLACK)
        .await
        .unwrap()
        .expect("elected after the old lease ran out");
    let elected = Instant::now();
    assert!(
        elected >= lease_end,
        "elected {:?} before the old leader's lease ended",
        lease_end - elected
    );
    assert!(
        elected <= lease_end + SLACK,
        "elected {:?} late",
        elected - lease_end
    );
    assert!(
        tb.fence > ta.fence,
        "fence went from {:?} to {:?}",
        ta.fence,
        tb.fence
    );
    assert_ne!(tb.owner, ta.owner);
    b.resign(&tb).await.unwrap();
    elected - lease_end
}

/// Delete the leader's key (etcd), node (ZooKeeper) or lease key (Redis)
/// behind its back.
async fn delete_leader_key(system: System, cfg: &ClientConfig, name: &str, term: &Term) {
    let ep = cfg.endpoints[0].clone();
    match system {
        System::Etcd => {
            let mut c = etcd_client::Client::connect([format!("http://{ep}")], None)
                .await
                .unwrap();
            let key = format!("{name}/{:x}", term.owner.parse::<i64>().unwrap());
            let r = c.delete(key, None).await.unwrap();
            assert_eq!(r.deleted(), 1, "the leader key is <name>/<lease hex>");
        }
        System::Zookeeper => {
            let c = zookeeper_client::Client::connect(&ep).await.unwrap();
            let dir = lockjaw::client::election::zookeeper::election_dir(name);
            for k in c.list_children(&dir).await.unwrap() {
                let p = format!("{dir}/{k}");
                if let Ok(Some(st)) = c.check_stat(&p).await {
                    if Some(st.czxid as u64) == term.fence {
                        c.delete(&p, None).await.unwrap();
                    }
                }
            }
        }
        _ => {
            let client = ::redis::Client::open(format!("redis://{ep}/")).unwrap();
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            let n: i64 = ::redis::cmd("DEL")
                .arg(name)
                .query_async(&mut c)
                .await
                .unwrap();
            assert_eq!(n, 1);
        }
    }
}

/// A follower names the leader; the leader whose key is deleted behind its
/// back learns it; a successor is elected with a higher fence and named.
async fn deleted_key_is_noticed(system: System) {
    let cfg = util::config(util::shared(system));
    let name = util::key("deleted");
    let mut a = client(system, &cfg).await;
    let mut follower = client(system, &cfg).await;
    assert_eq!(
        follower.observe(&name).await.unwrap(),
        None,
        "a new election"
    );
    let ta = a
        .campaign(&name, LEASE, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let seen = follower.observe(&name).await.unwrap();
    assert_eq!(
        seen.map(|l| (l.owner, l.fence)),
        Some((ta.owner.clone(), ta.fence))
    );
    let mut w = a.loss_watch(&ta).expect("a watch for a live term");
    let admin = match system {
        System::Sentinel => lockjaw::client::redis_target::RedisTarget::sentinel(&cfg),
        _ => lockjaw::client::redis_target::RedisTarget::fixed(&cfg),
    };
    let admin_cfg = match system {
        System::Sentinel => {
            let mut t = admin;
            t.conn().await.unwrap();
            ClientConfig::new(vec![t.server().unwrap().to_string()])
        }
        _ => cfg.clone(),
    };
    delete_leader_key(system, &admin_cfg, &name, &ta).await;
    let loss = tokio::time::timeout(SLACK, w.wait())
        .await
        .expect("loss noticed");
    let want = if system.facts().lease_starts_at_acquire {
        LossKind::LeaseExpired
    } else {
        LossKind::KeyDeleted
    };
    assert_eq!(loss.kind, want, "{loss:?}");
    let mut b = client(system, &cfg).await;
    let tb = b
        .campaign(&name, LEASE, SLACK)
        .await
        .unwrap()
        .expect("a successor");
    assert!(tb.fence > ta.fence);
    let seen = follower.observe(&name).await.unwrap();
    assert_eq!(
        seen.map(|l| (l.owner, l.fence)),
        Some((tb.owner.clone(), tb.fence))
    );
    b.resign(&tb).await.unwrap();
    // Only etcd's lease outlives its deleted key: its revoke still works.
    let r = a.resign(&ta).await.unwrap();
    assert_eq!(
        r,
        system == System::Etcd,
        "resign after the key was deleted"
    );
}

/// The leader is cut off from the service (its only link, a proxy, is
/// disabled) after at least one background refresh was answered: it
/// learns of its loss, dated no later than the instant its successor's
/// campaign returned (so the refresh really extended its belief, and only
/// as far as the server's lease went).
async fn cut_off_leader_learns_its_loss(system: System) {
    let c = util::shared(system);
    let plain = util::config(c);
    let cut = util::Cut::new(&c.client_endpoints()[0]).await;
    let (cfg, sink, t0) = util::recording(ClientConfig::new(vec![cut.listen.clone()]));
    let mut a = client(system, &cfg).await;
    let name = util::key("cut");
    let ta = a
        .campaign(&name, LEASE, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let won = Instant::now();
    let mut w = a.loss_watch(&ta).unwrap();
    let deadline = won + SLACK;
    let refreshed = loop {
        match util::last_refresh(&sink, t0, &ta.owner) {
            Some(r) if r > won => break r,
            _ if Instant::now() > deadline => panic!("no refresh recorded after the campaign"),
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    cut.cut().await;
    let mut b = client(system, &plain).await;
    let tb = b
        .campaign(&name, LEASE, ta.lease + SLACK)
        .await
        .unwrap()
        .expect("a successor once the cut-off leader's lease ran out");
    let elected = Instant::now();
    let loss = tokio::time::timeout(SLACK, w.wait())
        .await
        .expect("loss noticed");
    assert!(
        loss.at <= elected,
        "the old leader believed it led {:?} into its successor's term ({loss:?})",
        loss.at - elected
    );
    assert!(
        loss.at >= refreshed + ta.lease,
        "the loss ignores the refresh sent at {refreshed:?}: {loss:?}"
    );
    assert_eq!(loss.kind, LossKind::LeaseRanOut, "{loss:?}");
    assert!(tb.fence > ta.fence);
    b.resign(&tb).await.unwrap();
    drop(a);
    cut.shutdown().await;
}

macro_rules! election_tests {
    ($($name:ident => $system:expr),* $(,)?) => {$(
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn one_leader_at_a_time_and_resign_hands_over() {
                one_leader_at_a_time($system).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_leader_that_stops_renewing_is_replaced_after_its_lease() {
                stopped_leader_replaced_after_its_lease($system).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_follower_names_the_leader_and_a_deleted_key_is_noticed() {
                deleted_key_is_noticed($system).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_cut_off_leader_learns_its_loss_before_its_successor_is_elected() {
                cut_off_leader_learns_its_loss($system).await;
            }
        }
    )*};
}

election_tests! {
    etcd => System::Etcd,
    zookeeper => System::Zookeeper,
    redis => System::Redis,
}

/// The lease-key election also runs on the Sentinel-named primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_lease_key_election_hands_over() {
    one_leader_at_a_time(System::Sentinel).await;
}
