//! Throughput of the protected storage over loopback TCP: one client, and
//! ten concurrent clients, each with one request in flight.
//! Run: `cargo bench --bench storage` (criterion reports requests/s as
//! "elem/s").

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lockjaw::storage::{spawn, Fencing, StorageClient, StorageConfig};
use serde_json::json;
use std::time::{Duration, Instant};

const CLIENTS: u64 = 10;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn bench(c: &mut Criterion) {
    let config = StorageConfig::new(Fencing::On).with_initial("counter", json!(0));
    let server = spawn("127.0.0.1:0".parse().unwrap(), config).expect("storage starts");
    let addr = server.addr();
    let rt = runtime();
    let mut group = c.benchmark_group("storage");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    group.throughput(Throughput::Elements(1));
    let mut one = rt.block_on(StorageClient::connect(addr)).expect("connects");
    group.bench_function("1 client read+write", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for i in 0..iters {
                    if i % 2 == 0 {
                        one.read("counter", Some(1)).await.expect("read");
                    } else {
                        one.write("counter", json!(i), Some(1))
                            .await
                            .expect("write");
                    }
                }
                start.elapsed()
            })
        })
    });

    group.throughput(Throughput::Elements(CLIENTS));
    group.bench_function("10 clients read+write", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut clients = Vec::new();
                for _ in 0..CLIENTS {
                    clients.push(StorageClient::connect(addr).await.expect("connects"));
                }
                let start = Instant::now();
                let tasks: Vec<_> = clients
                    .into_iter()
                    .enumerate()
                    .map(|(c, mut cl)| {
                        tokio::spawn(async move {
                            let key = format!("k{c}");
                            for i in 0..iters {
                                if i % 2 == 0 {
                                    cl.read(&key, Some(1)).await.expect("read");
                                } else {
                                    cl.write(&key, json!(i), Some(1)).await.expect("write");
                                }
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.expect("client task");
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
