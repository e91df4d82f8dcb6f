//! Benchmark of the embedded Toxiproxy server's data path and API:
//! round-trip latency added by a proxy without toxics (median and p99, vs
//! direct loopback), throughput through the proxy vs direct, and how long
//! cutting every connection of 50 proxies takes through the HTTP API.
//!
//! Run: `cargo run --release --example toxiproxy_bench -- [ROUNDS] [PINGS] [MIB]
//! [--resp | --tap]` (defaults 5 rounds, 20000 pings, 256 MiB). Direct and
//! proxied runs alternate within each round; the report gives the median
//! over rounds. `--resp`: each ping is a 64-byte RESP request (echoed back,
//! a RESP reply), so the proxy frames both ways; `--tap`: the same with the
//! wire tap on (`lockjaw run --tap-wire`), writing to a file in $TMPDIR.

use lockjaw::toxiproxy::{self, NewProxy, ToxiproxyApi};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const MSG: usize = 64;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = *args.first().unwrap_or(&5) as usize;
    let pings = *args.get(1).unwrap_or(&20_000) as usize;
    let mib = *args.get(2).unwrap_or(&256) as usize;
    let flag = |f: &str| std::env::args().any(|a| a == f);
    let tap_on = flag("--tap");
    let msg = message(tap_on || flag("--resp"));

    let echo = serve(echo_conn);
    let sink = serve(sink_conn);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(toxiproxy::spawn_loopback()).unwrap();
    let wire =
        std::env::temp_dir().join(format!("lockjaw-bench-wire-{}.jsonl", std::process::id()));
    let tap = tap_on.then(|| {
        let clock = lockjaw::history::clock::RunClock::start();
        let t = toxiproxy::tap::Tap::open(&wire, clock).unwrap();
        rt.block_on(server.set_tap(Some(t.clone())));
        t
    });
    let client = server.client().unwrap();
    let via_echo =
        rt.block_on(client.create_proxy(&NewProxy::new("echo", "127.0.0.1:0", echo.to_string())));
    let via_sink =
        rt.block_on(client.create_proxy(&NewProxy::new("sink", "127.0.0.1:0", sink.to_string())));
    let via_echo: SocketAddr = via_echo.unwrap().listen.parse().unwrap();
    let via_sink: SocketAddr = via_sink.unwrap().listen.parse().unwrap();

    let (mut lat, mut thr) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let d = rtts(echo, pings, &msg);
        let p = rtts(via_echo, pings, &msg);
        let (td, tp) = (throughput(sink, mib), throughput(via_sink, mib));
        eprintln!(
            "round {round}: rtt median direct {:.1} µs proxied {:.1} µs; p99 {:.1} / {:.1} µs; {:.0} / {:.0} MiB/s",
            d.0, p.0, d.1, p.1, td, tp
        );
        lat.push((d, p));
        thr.push((td, tp));
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let md = med(lat.iter().map(|(d, _)| d.0).collect());
    let mp = med(lat.iter().map(|(_, p)| p.0).collect());
    let added = med(lat.iter().map(|(d, p)| p.0 - d.0).collect());
    let pd = med(lat.iter().map(|(d, _)| d.1).collect());
    let pp = med(lat.iter().map(|(_, p)| p.1).collect());
    let added99 = med(lat.iter().map(|(d, p)| p.1 - d.1).collect());
    let td = med(thr.iter().map(|t| t.0).collect());
    let tp = med(thr.iter().map(|t| t.1).collect());
    println!("round trip, {MSG}-byte messages, {pings} per run, median of {rounds} rounds:");
    println!("  direct   median {md:8.1} µs   p99 {pd:8.1} µs");
    println!("  proxied  median {mp:8.1} µs   p99 {pp:8.1} µs");
    println!("  added    median {added:8.1} µs   p99 {added99:8.1} µs");
    println!(
        "throughput, {mib} MiB one way: direct {td:.0} MiB/s, proxied {tp:.0} MiB/s ({:.0}%)",
        100.0 * tp / td
    );

    let cut = rt.block_on(cut_fifty(&client, echo));
    println!("cut all connections of 50 proxies (disable+enable each, concurrently): {cut:.1} ms");
    rt.block_on(async move {
        let mut server = server;
        server.shutdown().await;
    });
    if let Some(t) = tap {
        let w = t.close().unwrap();
        let bytes = std::fs::metadata(&wire).map_or(0, |m| m.len());
        println!(
            "wire tap: {} records ({} MiB), {} dropped",
            w.records,
            bytes >> 20,
            w.dropped
        );
        let _ = std::fs::remove_file(&wire);
    }
}

/// A ping: `MSG` bytes of 7s, or a RESP request of `MSG` bytes.
fn message(resp: bool) -> [u8; MSG] {
    let mut m = [7u8; MSG];
    if resp {
        let head = format!("*1\r\n${}\r\n", MSG - 11);
        m[..head.len()].copy_from_slice(head.as_bytes());
        m[MSG - 2..].copy_from_slice(b"\r\n");
    }
    m
}

/// Accept connections on a free loopback port, one thread each.
fn serve(handler: fn(TcpStream)) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            s.set_nodelay(true).unwrap();
            std::thread::spawn(move || handler(s));
        }
    });
    addr
}

fn echo_conn(mut s: TcpStream) {
    let mut buf = [0u8; 65536];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 || s.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// Read an 8-byte length, then that many bytes, then answer one byte.
fn sink_conn(mut s: TcpStream) {
    let mut len = [0u8; 8];
    if s.read_exact(&mut len).is_err() {
        return;
    }
    let mut left = u64::from_le_bytes(len);
    let mut buf = vec![0u8; 1 << 16];
    while left > 0 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => left -= n as u64,
        }
    }
    let _ = s.write_all(b"!");
}

/// Median and p99 round trip in µs over `n` ping-pongs (after a warm-up).
fn rtts(addr: SocketAddr, n: usize, msg: &[u8; MSG]) -> (f64, f64) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut back = [0u8; MSG];
    let mut v = Vec::with_capacity(n);
    for i in 0..n + 1000 {
        let t = Instant::now();
        s.write_all(msg).unwrap();
        s.read_exact(&mut back).unwrap();
        if i >= 1000 {
            v.push(t.elapsed());
        }
    }
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(v[n / 2]), us(v[n * 99 / 100]))
}

/// MiB/s sending `mib` MiB to the sink until it acknowledges.
fn throughput(addr: SocketAddr, mib: usize) -> f64 {
    let mut s = TcpStream::connect(addr).unwrap();
    let total = (mib as u64) << 20;
    let block = vec![1u8; 1 << 16];
    let t = Instant::now();
    s.write_all(&total.to_le_bytes()).unwrap();
    for _ in 0..total / block.len() as u64 {
        s.write_all(&block).unwrap();
    }
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack).unwrap();
    mib as f64 / t.elapsed().as_secs_f64()
}

/// Time to cut the connections of 50 proxies, each with one open client.
async fn cut_fifty(client: &toxiproxy::HttpClient, upstream: SocketAddr) -> f64 {
    let specs: Vec<NewProxy> = (0..50)
        .map(|i| NewProxy::new(format!("w{i}"), "127.0.0.1:0", upstream.to_string()))
        .collect();
    let proxies = client.populate(&specs).await.unwrap();
    let conns: Vec<TcpStream> = proxies
        .iter()
        .map(|p| TcpStream::connect(p.listen.as_str()).unwrap())
        .collect();
    let t = Instant::now();
    let cuts = proxies.iter().map(|p| client.cut_connections(&p.name));
    for r in futures::future::join_all(cuts).await {
        r.unwrap();
    }
    let ms = t.elapsed().as_secs_f64() * 1e3;
    drop(conns);
    ms
}
