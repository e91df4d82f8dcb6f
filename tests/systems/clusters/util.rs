//! Shared helpers of the cluster tests: one shared cluster per system per
//! test binary (stopped by an atexit hook, and by the parent-death signal
//! if the binary dies), private port ranges, and generic lock checks that
//! every system's tests run against real servers.

use crate::shared_clusters::SharedSet;
use lockjaw::client::{ClientConfig, Grant, LockClient};
use lockjaw::cluster::{Cluster, ClusterSpec};
use lockjaw::service::System;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A fresh range of 20 ports for a test's private cluster.
pub fn private_base() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(20100);
    let b = NEXT.fetch_add(20, Ordering::SeqCst);
    assert!(b < 29900, "test port range exhausted");
    b
}

pub use crate::recording::{recording, VecSink};
pub use crate::shared_clusters::{start_blocking, temp_dir};

/// The binary's shared cluster of `system`, started on first use.
pub fn shared(system: System) -> &'static Cluster {
    static SET: SharedSet = SharedSet::new("cluster", 20000);
    SET.get(system)
}

/// A private cluster that the test owns (closed when dropped).
pub fn private(system: System, nodes: Option<usize>, faketime: bool) -> Cluster {
    let mut spec = ClusterSpec::new(system.servers(), temp_dir(system.name()));
    spec.base_port = Some(private_base());
    spec.nodes = nodes;
    spec.faketime = faketime;
    spec.health_timeout = Duration::from_secs(60);
    start_blocking(spec).expect("private cluster starts")
}

pub fn config(c: &Cluster) -> ClientConfig {
    ClientConfig::new(c.client_endpoints())
}

/// A connected client; retried for up to 60 s (a loaded machine can make
/// a JVM or a fresh cluster slow to take a session).
pub async fn connect(system: System, cfg: &ClientConfig) -> Box<dyn LockClient> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match lockjaw::service::connect(system, cfg).await {
            Ok(c) => return c,
            Err(e) if Instant::now() >= deadline => panic!("client connects: {e:?}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// A unique lock key for one test.
pub fn key(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "lockjaw-test/{tag}/{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Acquire, see that a second client cannot, release, acquire again with a
/// higher fence (where the system has fences).
pub async fn acquire_release(system: System, cfg: &ClientConfig, ttl: Duration) {
    let k = key("acquire-release");
    let mut a = connect(system, cfg).await;
    let mut b = connect(system, cfg).await;
    let g1 = a
        .acquire(&k, ttl, Duration::ZERO)
        .await
        .unwrap()
        .expect("free lock is granted");
    assert_eq!(g1.key, k);
    assert!(!g1.lease.is_zero());
    let none = b
        .acquire(&k, ttl, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(none.is_none(), "held lock granted twice: {none:?}");
    assert!(a.release(&g1).await.unwrap(), "release of a held lock");
    let g2 = b
        .acquire(&k, ttl, Duration::from_secs(2))
        .await
        .unwrap()
        .expect("released lock is granted");
    assert_ne!(g1.owner, g2.owner);
    if let (Some(f1), Some(f2)) = (g1.fence, g2.fence) {
        assert!(f2 > f1, "fence went from {f1} to {f2}");
    }
    assert!(b.release(&g2).await.unwrap());
    assert!(
        !b.release(&g2).await.unwrap(),
        "a second release says not held"
    );
}

/// `clients` clients take turns `rounds` times each; nobody observes another
/// holder inside its hold, and fences increase in grant order.
pub async fn mutual_exclusion(system: System, cfg: &ClientConfig, clients: usize, rounds: usize) {
    let k = key("mutex");
    let holders = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let mut c = connect(system, cfg).await;
        let (k, holders, fences) = (k.clone(), holders.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            let mut got = 0;
            let deadline = Instant::now() + Duration::from_secs(60);
            while got < rounds && Instant::now() < deadline {
                let Some(g) = c
                    .acquire(&k, Duration::from_secs(10), Duration::from_secs(5))
                    .await
                    .unwrap()
                else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let before = holders.fetch_add(1, Ordering::SeqCst);
                fences.lock().unwrap().push(g.fence);
                tokio::time::sleep(Duration::from_millis(5)).await;
                let after = holders.fetch_sub(1, Ordering::SeqCst);
                assert_eq!((before, after), (0, 1), "two holders at once");
                assert!(c.release(&g).await.unwrap());
                got += 1;
            }
            got
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), rounds, "a client starved");
    }
    let f = fences.lock().unwrap();
    assert_eq!(f.len(), clients * rounds);
    if f.iter().all(|x| x.is_some()) {
        let f: Vec<u64> = f.iter().map(|x| x.unwrap()).collect();
        assert!(
            f.windows(2).all(|w| w[1] > w[0]),
            "fences not increasing: {f:?}"
        );
    }
}

/// Where a lease check starts: the holder's grant and the instant of the
/// last request that started or refreshed its lease (taken before it was sent).
pub struct Held {
    pub grant: Grant,
    pub refreshed_at: Instant,
}

/// A holder stops renewing (`held`, its client gone); a second client must
/// not be granted before the lease has run out (strict), and must be within
/// `slack` after it (loose).
pub async fn expiry_bounds(system: System, cfg: &ClientConfig, held: Held, slack: Duration) {
    let lease_end =
        held.refreshed_at + held.grant.lease.mul_f64(1.0 - 1e-3) - Duration::from_millis(2);
    let mut b = connect(system, cfg).await;
    let wait = held.grant.lease + slack;
    let g = loop {
        if let Some(g) = b
            .acquire(&held.grant.key, Duration::from_secs(5), wait)
            .await
            .unwrap()
        {
            break g;
        }
        // One attempt per call for Redlock: pause as its retry would.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            Instant::now() < lease_end + slack,
            "not granted within {slack:?} after the lease ended"
        );
    };
    let granted_at = Instant::now();
    assert!(
        granted_at >= lease_end,
        "granted {:?} before the holder's lease ended",
        lease_end - granted_at
    );
    assert!(
        granted_at <= lease_end + slack,
        "granted {:?} after the lease ended",
        granted_at - lease_end
    );
    if let (Some(f1), Some(f2)) = (held.grant.fence, g.fence) {
        assert!(f2 > f1, "fence went from {f1} to {f2}");
    }
    b.release(&g).await.unwrap();
}

/// The invoke instant of the latest ok renew of `owner` in `sink`.
pub fn last_refresh(sink: &VecSink, t0: Instant, owner: &str) -> Option<Instant> {
    use lockjaw::history::OpType;
    let ops = sink.ops.lock().unwrap();
    let mut last = None;
    for w in ops.windows(2) {
        let (inv, done) = (&w[0], &w[1]);
        if inv.kind == OpType::Invoke
            && done.kind == OpType::Ok
            && inv.owner.as_deref() == Some(owner)
        {
            assert_eq!(inv.f, "renew");
            assert!(
                done.lease_ms.is_some_and(|l| l > 0),
                "an ok renew carries lease_ms"
            );
            last = Some(t0 + Duration::from_nanos(inv.time));
        }
    }
    last
}

/// Retry acquiring until granted or `limit` passes (errors are retried).
pub async fn acquire_eventually(
    system: System,
    cfg: &ClientConfig,
    k: &str,
    limit: Duration,
) -> Option<(Box<dyn LockClient>, Grant)> {
    let start = Instant::now();
    let deadline = start + limit;
    while Instant::now() < deadline {
        // Each failed attempt is printed: the test harness shows it when
        // the test fails, which says where the time went.
        match lockjaw::service::connect(system, cfg).await {
            Ok(mut c) => match c
                .acquire(k, Duration::from_secs(5), Duration::from_secs(2))
                .await
            {
                Ok(Some(g)) => return Some((c, g)),
                Ok(None) => println!("{:?}: acquire: not granted", start.elapsed()),
                Err(e) => println!("{:?}: acquire: {e:?}", start.elapsed()),
            },
            Err(e) => println!("{:?}: connect: {e:?}", start.elapsed()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
