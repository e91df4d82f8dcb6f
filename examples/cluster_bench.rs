//! Measures, per lock service, on real local clusters: time from start to
//! healthy, uncontended acquire+release latency (p50/p99), and the smallest
//! lease each grants as configured.
//!
//! `cargo run --release --example cluster_bench [SYSTEM...] [--iters N]`
//! (ports 28000-28499; the clusters are stopped at the end).

use lockjaw::client::ClientConfig;
use lockjaw::cluster::{Cluster, ClusterSpec};
use lockjaw::service::System;
use std::time::{Duration, Instant};

const ALL: [System; 5] = [
    System::Redis,
    System::Redlock,
    System::Sentinel,
    System::Etcd,
    System::Zookeeper,
];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iters = args
        .iter()
        .position(|a| a == "--iters")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(200usize);
    let chosen: Vec<System> = ALL
        .into_iter()
        .filter(|s| args.is_empty() || args.iter().any(|a| a == s.name()))
        .collect();
    let chosen = if chosen.is_empty() {
        ALL.to_vec()
    } else {
        chosen
    };
    println!("| system | nodes | up→healthy | acquire+release p50 | p99 | smallest lease |");
    println!("|---|---|---|---|---|---|");
    for (i, system) in ALL.into_iter().enumerate() {
        if !chosen.contains(&system) {
            continue;
        }
        let dir = tempfile::Builder::new()
            .prefix("lockjaw-bench-")
            .tempdir()?;
        let mut spec = ClusterSpec::new(system.servers(), dir.path());
        spec.base_port = Some(28000 + 100 * i as u16);
        spec.health_timeout = Duration::from_secs(60);
        let t0 = Instant::now();
        let c = Cluster::start(&spec).await?;
        let up = t0.elapsed();
        let cfg = ClientConfig::new(c.client_endpoints());
        let (p50, p99) = latency(system, &cfg, iters).await?;
        let min = smallest_lease(system, &cfg).await?;
        println!(
            "| {system} | {} | {:.2} s | {:.2} ms | {:.2} ms | {} |",
            c.nodes().len(),
            up.as_secs_f64(),
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            min
        );
        c.close()?;
    }
    Ok(())
}

async fn latency(
    system: System,
    cfg: &ClientConfig,
    iters: usize,
) -> anyhow::Result<(Duration, Duration)> {
    let mut cl = lockjaw::service::connect(system, cfg).await?;
    let ttl = Duration::from_secs(5);
    let mut lat = Vec::with_capacity(iters);
    for i in 0..iters + 10 {
        let k = format!("bench-{i}");
        let t = Instant::now();
        let g = cl
            .acquire(&k, ttl, Duration::from_secs(1))
            .await?
            .ok_or_else(|| anyhow::anyhow!("{k} not granted"))?;
        cl.release(&g).await?;
        if i >= 10 {
            lat.push(t.elapsed());
        }
    }
    lat.sort();
    let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    Ok((at(0.50), at(0.99)))
}

/// Request ever longer ttls from 1 ms until one is granted; report what
/// the server granted for it.
async fn smallest_lease(system: System, cfg: &ClientConfig) -> anyhow::Result<String> {
    let mut cl = lockjaw::service::connect(system, cfg).await?;
    let mut ttl = Duration::from_millis(1);
    while ttl < Duration::from_secs(30) {
        if let Some(g) = cl
            .acquire(
                &format!("bench-min-{}", ttl.as_millis()),
                ttl,
                Duration::from_secs(1),
            )
            .await?
        {
            let _ = cl.release(&g).await;
            return Ok(format!(
                "asked {} ms → granted {} ms",
                ttl.as_millis(),
                g.lease.as_millis()
            ));
        }
        ttl *= 2;
    }
    Ok("none below 30 s".into())
}
