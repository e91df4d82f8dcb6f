//! Shared helpers: one shared cluster per system (ports 40000-40099, stopped
//! by an atexit hook and by the parent-death signal if the binary dies),
//! unique keys, lease refreshes recorded (`crate::recording`), and a Toxiproxy proxy for
//! cutting one client off (API and proxy ports 40100-40999).

pub use crate::recording::{recording, VecSink};
use crate::shared_clusters::{temp_dir, SharedSet};
use lockjaw::client::ClientConfig;
use lockjaw::cluster::{Cluster, ClusterSpec};
use lockjaw::history::OpType;
use lockjaw::service::System;
use lockjaw::toxiproxy::{NewProxy, ProxyUpdate, ServerHandle, ToxiproxyApi};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The binary's shared cluster of `system`, started on first use (from a
/// thread of its own: tests run inside a runtime).
pub fn shared(system: System) -> &'static Cluster {
    static SET: SharedSet = SharedSet::new("clientx", 40000);
    SET.get(system)
}

/// A private cluster the test owns (closed when dropped), ports from 40200.
pub fn private(system: System) -> Cluster {
    static NEXT: AtomicU16 = AtomicU16::new(40200);
    let base = NEXT.fetch_add(20, Ordering::SeqCst);
    assert!(base < 40400, "private cluster port range exhausted");
    let mut spec = ClusterSpec::new(
        system.servers(),
        temp_dir(&format!("clientx-{}", system.name())),
    );
    spec.base_port = Some(base);
    spec.health_timeout = Duration::from_secs(60);
    start(spec)
}

fn start(spec: ClusterSpec) -> Cluster {
    crate::shared_clusters::start_blocking(spec).expect("cluster starts")
}

pub fn config(c: &Cluster) -> ClientConfig {
    ClientConfig::new(c.client_endpoints())
}

/// A unique key or election name for one test.
pub fn key(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "lockjaw-clientx/{tag}/{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// The invoke instant of the latest ok renew of `owner` in `sink`.
pub fn last_refresh(sink: &VecSink, t0: Instant, owner: &str) -> Option<Instant> {
    let ops = sink.ops.lock().unwrap();
    ops.windows(2)
        .filter(|w| {
            w[0].kind == OpType::Invoke
                && w[1].kind == OpType::Ok
                && w[0].f == "renew"
                && w[0].owner.as_deref() == Some(owner)
        })
        .map(|w| t0 + Duration::from_nanos(w[0].time))
        .next_back()
}

fn next_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(40100);
    let p = NEXT.fetch_add(1, Ordering::SeqCst);
    assert!(p < 41000, "test proxy port range exhausted");
    p
}

fn proxy_name(upstream: &str) -> String {
    upstream.replace([':', '.'], "_")
}

/// An embedded Toxiproxy with proxies of ours (named after their
/// upstream), on ports of ours.
pub struct Cut {
    server: ServerHandle,
    pub listen: String,
}

impl Cut {
    /// A server with one proxy to `upstream`.
    pub async fn new(upstream: &str) -> Cut {
        let api = std::net::SocketAddr::from(([127, 0, 0, 1], next_port()));
        let server = lockjaw::toxiproxy::spawn(api)
            .await
            .expect("toxiproxy starts");
        let mut cut = Cut {
            server,
            listen: String::new(),
        };
        cut.listen = cut.add(upstream).await;
        cut
    }

    /// One more proxy to `upstream`; its listen address.
    /// A port another process holds (the range overlaps the ephemeral
    /// ports when they are not reserved) is skipped for the next one.
    pub async fn add(&self, upstream: &str) -> String {
        let client = self.server.client().unwrap();
        let mut tries = 0;
        loop {
            let listen = format!("127.0.0.1:{}", next_port());
            let new = NewProxy::new(proxy_name(upstream), &listen, upstream);
            match client.create_proxy(&new).await {
                Ok(_) => return listen,
                Err(lockjaw::toxiproxy::ClientError::PortInUse { .. }) if tries < 20 => tries += 1,
                Err(e) => panic!("proxy created: {e:?}"),
            }
        }
    }

    /// Open connections through the proxy to `upstream`.
    pub async fn connections(&self, upstream: &str) -> usize {
        self.server
            .connections(&proxy_name(upstream))
            .await
            .unwrap_or(0)
    }

    /// Close the first proxy's connections and refuse new ones.
    pub async fn cut(&self) {
        let name = self.first().await;
        self.server
            .client()
            .unwrap()
            .update_proxy(&name, &ProxyUpdate::enabled(false))
            .await
            .expect("proxy disabled");
    }

    async fn first(&self) -> String {
        let proxies = self.server.client().unwrap().proxies().await.unwrap();
        proxies
            .into_values()
            .find(|p| p.listen == self.listen)
            .expect("the first proxy")
            .name
    }

    pub async fn shutdown(mut self) {
        self.server.shutdown().await;
    }
}
