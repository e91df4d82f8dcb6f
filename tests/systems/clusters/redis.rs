//! Single Redis and the node handle: lock client, lease expiry bounds,
//! pause/resume, kill and restart with data, libfaketime clock jumps.

use super::util::{self, Held};
use crate::run_util::IptablesRule;
use lockjaw::cluster::{self};
use lockjaw::service::System;
use std::time::{Duration, Instant};

#[tokio::test]
async fn redis_acquire_release_and_fences() {
    let c = util::shared(System::Redis);
    util::acquire_release(System::Redis, &util::config(c), Duration::from_secs(5)).await;
}

#[tokio::test]
async fn redis_two_clients_never_hold_at_once() {
    let c = util::shared(System::Redis);
    util::mutual_exclusion(System::Redis, &util::config(c), 3, 20).await;
}

#[tokio::test]
async fn redis_holder_that_stops_renewing_is_replaced_after_its_lease() {
    let c = util::shared(System::Redis);
    let cfg = util::config(c);
    let mut a = util::connect(System::Redis, &cfg).await;
    let k = util::key("expiry");
    let refreshed_at = Instant::now();
    let grant = a
        .acquire(&k, Duration::from_millis(800), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert!(grant.acquire_sets_ttl);
    assert_eq!(grant.lease, Duration::from_millis(800));
    drop(a);
    util::expiry_bounds(
        System::Redis,
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
async fn redis_renew_extends_only_the_owners_lease() {
    let c = util::shared(System::Redis);
    let cfg = util::config(c);
    let mut a = util::connect(System::Redis, &cfg).await;
    let k = util::key("renew");
    let g = a
        .acquire(&k, Duration::from_secs(5), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert!(a.renew(&g).await.unwrap());
    let mut forged = g.clone();
    forged.owner = "someone-else".into();
    assert!(!a.renew(&forged).await.unwrap(), "renew by a non-owner");
    assert!(!a.release(&forged).await.unwrap(), "release by a non-owner");
    assert!(a.release(&g).await.unwrap());
    assert!(!a.renew(&g).await.unwrap(), "renew after release");
}

#[tokio::test]
async fn redis_node_pause_resume_kill_restart_keeps_data() {
    let c = util::private(System::Redis, None, false);
    let n = &c.nodes()[0];
    assert!(
        n.cgroup.as_ref().map_or(true, |g| g.dir.exists()),
        "node runs in its cgroup"
    );
    let mut cl = util::connect(System::Redis, &util::config(&c)).await;
    let k = util::key("restart");
    let g = cl
        .acquire(&k, Duration::from_secs(60), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    n.pause().unwrap();
    assert!(n.is_paused());
    let t = Duration::from_millis(300);
    assert!(
        lockjaw::client::redis_query::ping(&n.addr, t)
            .await
            .is_err(),
        "a paused node answers"
    );
    n.resume().unwrap();
    assert!(!n.is_paused());
    lockjaw::client::redis_query::ping(&n.addr, Duration::from_secs(2))
        .await
        .unwrap();
    let old = n.proc_id().unwrap();
    n.kill().unwrap();
    assert!(!old.is_alive());
    assert!(
        lockjaw::client::redis_query::ping(&n.addr, t)
            .await
            .is_err(),
        "a killed node answers"
    );
    c.restart(n, Duration::from_secs(20)).await.unwrap();
    assert_ne!(n.proc_id().unwrap(), old);
    // The key survived the restart (AOF), so the lock is still held.
    let mut other = util::connect(System::Redis, &util::config(&c)).await;
    assert!(other
        .acquire(&k, Duration::from_secs(5), Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    let mut again = util::connect(System::Redis, &util::config(&c)).await;
    assert!(
        again.release(&g).await.unwrap(),
        "the grant is still valid after restart"
    );
    assert_eq!(
        c.leader().await.unwrap().map(|n| n.name.clone()),
        Some(n.name.clone())
    );
    c.close().unwrap();
    assert!(!n.is_alive());
}

#[tokio::test]
async fn redis_clock_jump_expires_a_lease_early_and_restores() {
    let c = util::private(System::Redis, None, true);
    let n = &c.nodes()[0];
    let cfg = util::config(&c);
    let mut a = util::connect(System::Redis, &cfg).await;
    let mut b = util::connect(System::Redis, &cfg).await;
    let k = util::key("clock");
    let g = a
        .acquire(&k, Duration::from_secs(60), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert!(b
        .acquire(&k, Duration::from_secs(60), Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    n.set_clock_offset("+120s").unwrap();
    // The node now believes 120 s passed: the 60 s lease is gone.
    let g2 = b
        .acquire(&k, Duration::from_secs(60), Duration::from_secs(5))
        .await
        .unwrap();
    let g2 = g2.expect("granted after the clock jump");
    assert!(g2.fence > g.fence);
    n.restore_clock().unwrap();
    assert!(
        n.set_clock_offset("soon").is_err(),
        "a bad offset is refused"
    );
    let shared = util::shared(System::Redis);
    let err = shared.nodes()[0].set_clock_offset("+1s").unwrap_err();
    assert!(err.to_string().contains("--faketime"), "{err}");
}

#[tokio::test]
async fn endpoints_mode_clients_work_and_process_faults_are_errors() {
    let shared = util::shared(System::Redis);
    let c = cluster::Cluster::from_endpoints(System::Redis.servers(), &shared.client_endpoints())
        .unwrap();
    util::acquire_release(System::Redis, &util::config(&c), Duration::from_secs(5)).await;
    assert!(c.version().await.unwrap().starts_with("redis "));
    let n = &c.nodes()[0];
    for err in [
        n.pause().unwrap_err(),
        n.kill().unwrap_err(),
        n.set_clock_offset("+5s").unwrap_err(),
    ] {
        assert!(err.to_string().contains("--endpoints"), "{err}");
    }
    c.close().unwrap();
    lockjaw::client::redis_query::ping(&shared.nodes()[0].addr, Duration::from_secs(2))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_node_cgroup_lets_iptables_cut_it_off() {
    let c = util::private(System::Redis, None, false);
    let n = &c.nodes()[0];
    let Some(cg) = &n.cgroup else {
        eprintln!("skipped: this host has no writable cgroup v2");
        return;
    };
    let procs = std::fs::read_to_string(cg.dir.join("cgroup.procs")).unwrap();
    let pid = n.proc_id().unwrap().pid.to_string();
    assert!(procs.lines().any(|l| l == pid), "pid {pid} not in {procs}");
    let t = Duration::from_millis(500);
    lockjaw::client::redis_query::ping(&n.addr, t)
        .await
        .unwrap();
    {
        let _r = IptablesRule::add(&[
            "OUTPUT",
            "-m",
            "cgroup",
            "--path",
            &cg.iptables_path,
            "-j",
            "DROP",
        ]);
        assert!(
            lockjaw::client::redis_query::ping(&n.addr, t)
                .await
                .is_err(),
            "the node still answers"
        );
    }
    lockjaw::client::redis_query::ping(&n.addr, Duration::from_secs(5))
        .await
        .unwrap();
}
