//! Measures, on real local clusters: register op latency (read, write, cas;
//! p50/p99) per store, and election failover time per mechanism after a
//! leader stops renewing (its client dropped: no refresh, no resign):
//! from the drop to the successor's election, and from the end of the old
//! lease (last refresh sent + lease) to it (median, max over the trials).
//!
//! `cargo run --release --example clientx_bench [SYSTEM...] [--iters N] [--trials T]`
//! (ports 44000-44499; the clusters are stopped at the end).

use lockjaw::client::{ClientConfig, LeaseRecorder};
use lockjaw::cluster::{Cluster, ClusterSpec};
use lockjaw::history::{clock::RunClock, Op, OpType, Process, Sink};
use lockjaw::service::System;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ALL: [System; 4] = [
    System::Redis,
    System::Sentinel,
    System::Etcd,
    System::Zookeeper,
];

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iters = arg(&args, "--iters", 300);
    let trials = arg(&args, "--trials", 5);
    let chosen: Vec<System> = ALL
        .into_iter()
        .filter(|s| {
            !args.iter().any(|a| ALL.iter().any(|x| x.name() == a))
                || args.contains(&s.name().to_string())
        })
        .collect();
    let mut reg_rows = Vec::new();
    let mut ele_rows = Vec::new();
    for (i, system) in ALL.into_iter().enumerate() {
        if !chosen.contains(&system) {
            continue;
        }
        let dir = tempfile::Builder::new()
            .prefix("lockjaw-clientx-bench-")
            .tempdir()?;
        let mut spec = ClusterSpec::new(system.servers(), dir.path());
        spec.base_port = Some(44000 + 100 * i as u16);
        spec.health_timeout = Duration::from_secs(60);
        let c = Cluster::start(&spec).await?;
        let cfg = ClientConfig::new(c.client_endpoints());
        reg_rows.push(register_latency(system, &cfg, iters).await?);
        if system != System::Sentinel {
            ele_rows.push(failover(system, &cfg, trials).await?);
        }
        c.close()?;
    }
    println!("register op latency ({iters} ops of each kind, one client, no faults)\n");
    println!("| system | read p50 | read p99 | write p50 | write p99 | cas p50 | cas p99 |");
    println!("|---|---|---|---|---|---|---|");
    for r in reg_rows {
        println!("{r}");
    }
    println!("\nelection failover after the leader stops renewing ({trials} trials, requested lease 1 s)\n");
    println!(
        "| system | granted lease | drop→elected median | max | lease end→elected median | max |"
    );
    println!("|---|---|---|---|---|---|");
    for r in ele_rows {
        println!("{r}");
    }
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

async fn register_latency(system: System, cfg: &ClientConfig, n: usize) -> anyhow::Result<String> {
    let mut c = lockjaw::service::connect_register(system, cfg).await?;
    let k = format!("bench-register-{}", std::process::id());
    c.write(&k, 0).await?;
    let (mut r, mut w, mut x) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n as i64 {
        let t = Instant::now();
        c.read(&k).await?;
        r.push(t.elapsed());
        let t = Instant::now();
        c.write(&k, 2 * i).await?;
        w.push(t.elapsed());
        let t = Instant::now();
        // Succeeds on even i, fails (wrong expected value) on odd i.
        c.cas(&k, 2 * i - (i % 2), 2 * i + 1).await?;
        x.push(t.elapsed());
    }
    Ok(format!(
        "| {system} | {} | {} | {} | {} | {} | {} |",
        ms(pct(&mut r, 0.5)),
        ms(pct(&mut r, 0.99)),
        ms(pct(&mut w, 0.5)),
        ms(pct(&mut w, 0.99)),
        ms(pct(&mut x, 0.5)),
        ms(pct(&mut x, 0.99)),
    ))
}

#[derive(Default)]
struct Ops(Mutex<Vec<Op>>);

impl Sink for Ops {
    fn record(&self, op: Op) {
        self.0.lock().unwrap().push(op);
    }
}

/// The invoke instant of the latest ok renew of `owner`.
fn last_refresh(ops: &Ops, t0: Instant, owner: &str) -> Option<Instant> {
    let ops = ops.0.lock().unwrap();
    ops.windows(2)
        .filter(|w| {
            w[0].kind == OpType::Invoke
                && w[1].kind == OpType::Ok
                && w[0].owner.as_deref() == Some(owner)
        })
        .map(|w| t0 + Duration::from_nanos(w[0].time))
        .next_back()
}

async fn failover(system: System, plain: &ClientConfig, trials: usize) -> anyhow::Result<String> {
    let (mut from_drop, mut from_end) = (Vec::new(), Vec::new());
    let mut lease = Duration::ZERO;
    for trial in 0..trials {
        let ops = Arc::new(Ops::default());
        let t0 = Instant::now();
        let mut cfg = plain.clone();
        cfg.recorder = Some(LeaseRecorder::new(
            ops.clone(),
            Process::Named("0-lease".into()),
            RunClock::start(),
        ));
        let name = format!("bench-election-{}-{trial}", std::process::id());
        let mut a = lockjaw::service::connect_election(system, &cfg).await?;
        let mut b = lockjaw::service::connect_election(system, plain).await?;
        let invoked = Instant::now();
        let ta = a
            .campaign(&name, Duration::from_secs(1), Duration::ZERO)
            .await?
            .ok_or_else(|| anyhow::anyhow!("{system}: a fresh election was not won"))?;
        lease = ta.lease;
        // Lead for a while (some background refreshes), then stop.
        tokio::time::sleep(ta.lease.mul_f64(0.8)).await;
        let dropped = Instant::now();
        drop(a);
        let start = match last_refresh(&ops, t0, &ta.owner) {
            Some(r) if r > invoked => r,
            _ => invoked,
        };
        let tb = b
            .campaign(&name, Duration::from_secs(1), Duration::from_secs(30))
            .await?
            .ok_or_else(|| anyhow::anyhow!("{system}: no successor within 30 s"))?;
        let elected = Instant::now();
        from_drop.push(elected - dropped);
        from_end.push(elected.saturating_duration_since(start + ta.lease));
        b.resign(&tb).await?;
    }
    Ok(format!(
        "| {system} | {} | {} | {} | {} | {} |",
        ms(lease),
        ms(pct(&mut from_drop, 0.5)),
        ms(pct(&mut from_drop, 1.0)),
        ms(pct(&mut from_end, 0.5)),
        ms(pct(&mut from_end, 1.0)),
    ))
}
