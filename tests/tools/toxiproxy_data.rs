//! The data path of the embedded Toxiproxy server through a real
//! redis-server: bytes pass unchanged, each toxic does what it says (timing
//! asserted as a strict lower bound, a loose upper bound), disabling cuts
//! and refuses connections, and `/reset` restores everything.
//!
//! Each test starts its own redis-server on its own port (31001–31020).

use crate::toxiproxy_common::*;
use lockjaw::toxiproxy::{
    self, HttpClient, NewProxy, ServerHandle, Stream, Toxic, ToxicKind, ToxiproxyApi,
};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

const LOOSE: Duration = Duration::from_secs(10);

/// The embedded server with one proxy `name` in front of `redis`.
async fn setup(redis: &Redis, name: &str) -> (ServerHandle, HttpClient, String) {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let client = server.client().unwrap();
    let p = client
        .create_proxy(&NewProxy::new(name, "127.0.0.1:0", redis.addr()))
        .await
        .unwrap();
    (server, client, p.listen)
}

fn toxic(name: &str, stream: Stream, kind: ToxicKind) -> Toxic {
    Toxic::new(name, stream, kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_toxic_passes_bytes_unchanged() {
    let redis = Redis::start(31001);
    let (_server, _c, listen) = setup(&redis, "r").await;
    let value = noise(1 << 20, 7);
    let mut via = connect(&listen).await;
    let got = roundtrip(&mut via, &resp(&[b"SET", b"k", &value]), b"+OK\r\n", LOOSE)
        .await
        .unwrap();
    assert_eq!(got, b"+OK\r\n");
    let mut direct = connect(&redis.addr()).await;
    let want = bulk(&value);
    assert_eq!(
        roundtrip(&mut direct, &resp(&[b"GET", b"k"]), &want, LOOSE)
            .await
            .unwrap(),
        want
    );
    assert_eq!(
        roundtrip(&mut via, &resp(&[b"GET", b"k"]), &want, LOOSE)
            .await
            .unwrap(),
        want
    );
    // Pipelined commands come back complete and in order.
    let pings = b"PING\r\n".repeat(500);
    let pongs = b"+PONG\r\n".repeat(500);
    assert_eq!(
        roundtrip(&mut via, &pings, &pongs, LOOSE).await.unwrap(),
        pongs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_adds_at_least_the_requested_delay() {
    let redis = Redis::start(31002);
    let (_server, c, listen) = setup(&redis, "r").await;
    let lag = |ms| ToxicKind::Latency {
        latency: ms,
        jitter: 0,
    };
    c.add_toxic("r", &toxic("down", Stream::Downstream, lag(150)))
        .await
        .unwrap();
    let mut s = connect(&listen).await;
    let rtt = ping(&mut s).await;
    assert!(rtt >= Duration::from_millis(150), "{rtt:?}");
    assert!(rtt < Duration::from_millis(150) + LOOSE, "{rtt:?}");

    c.add_toxic("r", &toxic("up", Stream::Upstream, lag(100)))
        .await
        .unwrap();
    let rtt = ping(&mut s).await;
    assert!(
        rtt >= Duration::from_millis(250),
        "both directions add up: {rtt:?}"
    );

    // Jitter stays within latency ± jitter.
    c.remove_toxic("r", "up").await.unwrap();
    let jittery = ToxicKind::Latency {
        latency: 100,
        jitter: 50,
    };
    let update = lockjaw::toxiproxy::ToxicUpdate {
        attributes: jittery.attributes(),
        toxicity: None,
    };
    c.update_toxic("r", "down", &update).await.unwrap();
    for _ in 0..3 {
        let rtt = ping(&mut s).await;
        assert!(rtt >= Duration::from_millis(50), "{rtt:?}");
    }
    // A toxic applied to no connection (toxicity 0) adds nothing.
    c.remove_toxic("r", "down").await.unwrap();
    c.add_toxic(
        "r",
        &toxic("never", Stream::Downstream, lag(60_000)).with_toxicity(0.0),
    )
    .await
    .unwrap();
    assert!(ping(&mut connect(&listen).await).await < Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_latency_flushes_held_bytes_instead_of_dropping_them() {
    let redis = Redis::start(31003);
    let (_server, c, listen) = setup(&redis, "r").await;
    let slow = ToxicKind::Latency {
        latency: 20_000,
        jitter: 0,
    };
    c.add_toxic("r", &toxic("slow", Stream::Downstream, slow))
        .await
        .unwrap();
    let mut s = connect(&listen).await;
    let t = Instant::now();
    s.write_all(b"PING\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.remove_toxic("r", "slow").await.unwrap();
    let got = roundtrip(&mut s, b"", b"+PONG\r\n", LOOSE).await.unwrap();
    assert_eq!(got, b"+PONG\r\n");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "flushed on removal, not after 20 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_zero_blackholes_until_removed() {
    let redis = Redis::start(31004);
    let (_server, c, listen) = setup(&redis, "r").await;
    let mut old = connect(&listen).await;
    ping(&mut old).await;
    c.add_toxic(
        "r",
        &toxic("hole", Stream::Upstream, ToxicKind::Timeout { timeout: 0 }),
    )
    .await
    .unwrap();
    old.write_all(b"SET hole 1\r\n").await.unwrap();
    let (closed, seen) = wait_closed(&mut old, Duration::from_millis(700)).await;
    assert_eq!(
        (closed, seen),
        (Closed::StillOpen, vec![]),
        "no reply and no close"
    );
    let mut direct = connect(&redis.addr()).await;
    let nil = b"$-1\r\n";
    assert_eq!(
        roundtrip(&mut direct, b"GET hole\r\n", nil, LOOSE)
            .await
            .unwrap(),
        nil,
        "write never landed"
    );

    c.remove_toxic("r", "hole").await.unwrap();
    // Like Shopify's server: the blackholed connection is closed (its stream
    // has a hole); new connections work again.
    let (closed, _) = wait_closed(&mut old, LOOSE).await;
    assert_eq!(closed, Closed::Eof);
    ping(&mut connect(&listen).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_closes_after_the_given_time_without_data() {
    let redis = Redis::start(31005);
    let (_server, c, listen) = setup(&redis, "r").await;
    c.add_toxic(
        "r",
        &toxic("t", Stream::Downstream, ToxicKind::Timeout { timeout: 300 }),
    )
    .await
    .unwrap();
    let mut s = connect(&listen).await;
    let t = Instant::now();
    let (closed, seen) = wait_closed(&mut s, LOOSE).await;
    assert_eq!((closed, seen), (Closed::Eof, vec![]));
    assert!(
        t.elapsed() >= Duration::from_millis(290),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_proxy_cuts_and_refuses_connections() {
    let redis = Redis::start(31006);
    let (server, c, listen) = setup(&redis, "r").await;
    let mut s = connect(&listen).await;
    ping(&mut s).await;
    // A write held by a latency toxic must never land once the proxy is
    // disabled (the runner relies on this to fence off delayed writes).
    let lag = ToxicKind::Latency {
        latency: 400,
        jitter: 0,
    };
    c.add_toxic("r", &toxic("lag", Stream::Upstream, lag))
        .await
        .unwrap();
    s.write_all(b"SET late 1\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let p = c.set_enabled("r", false).await.unwrap();
    assert!(!p.enabled);
    assert_eq!(server.connections("r").await, Some(0));
    let (closed, _) = wait_closed(&mut s, LOOSE).await;
    assert!(matches!(closed, Closed::Eof | Closed::Reset), "{closed:?}");
    let e = tokio::net::TcpStream::connect(&listen).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    // The port stays reserved while disabled: a plain bind (as an outgoing
    // connection's ephemeral port would need) cannot take it.
    let addr: std::net::SocketAddr = listen.parse().unwrap();
    let plain = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let e = plain.bind(&addr.into()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut direct = connect(&redis.addr()).await;
    let nil = b"$-1\r\n";
    assert_eq!(
        roundtrip(&mut direct, b"GET late\r\n", nil, LOOSE)
            .await
            .unwrap(),
        nil
    );

    c.remove_toxic("r", "lag").await.unwrap();
    let p = c.set_enabled("r", true).await.unwrap();
    assert_eq!(p.listen, listen, "re-enabled on the same address");
    ping(&mut connect(&listen).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_peer_resets_the_connection() {
    let redis = Redis::start(31007);
    let (_server, c, listen) = setup(&redis, "r").await;
    c.add_toxic(
        "r",
        &toxic("rst", Stream::Upstream, ToxicKind::ResetPeer { timeout: 0 }),
    )
    .await
    .unwrap();
    let mut s = connect(&listen).await;
    s.write_all(b"PING\r\n").await.unwrap();
    assert_eq!(wait_closed(&mut s, LOOSE).await, (Closed::Reset, vec![]));

    c.update_toxic(
        "r",
        "rst",
        &toxiproxy::ToxicUpdate {
            attributes: ToxicKind::ResetPeer { timeout: 300 }.attributes(),
            toxicity: None,
        },
    )
    .await
    .unwrap();
    let mut s = connect(&listen).await;
    let t = Instant::now();
    s.write_all(b"PING\r\n").await.unwrap();
    assert_eq!(wait_closed(&mut s, LOOSE).await, (Closed::Reset, vec![]));
    assert!(
        t.elapsed() >= Duration::from_millis(290),
        "{:?}",
        t.elapsed()
    );

    c.remove_toxic("r", "rst").await.unwrap();
    ping(&mut connect(&listen).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_data_slicer_bandwidth_and_slow_close() {
    let redis = Redis::start(31008);
    let (_server, c, listen) = setup(&redis, "r").await;

    c.add_toxic(
        "r",
        &toxic(
            "lim",
            Stream::Downstream,
            ToxicKind::LimitData { bytes: 10 },
        ),
    )
    .await
    .unwrap();
    let mut s = connect(&listen).await;
    s.write_all(b"PING\r\nPING\r\n").await.unwrap();
    assert_eq!(
        wait_closed(&mut s, LOOSE).await,
        (Closed::Eof, b"+PONG\r\n+PO".to_vec())
    );
    c.remove_toxic("r", "lim").await.unwrap();

    let value = noise(64 * 1024, 3);
    let slicer = ToxicKind::Slicer {
        average_size: 100,
        size_variation: 50,
        delay: 0,
    };
    c.add_toxic("r", &toxic("sl", Stream::Upstream, slicer))
        .await
        .unwrap();
    c.add_toxic("r", &toxic("sl2", Stream::Downstream, slicer))
        .await
        .unwrap();
    let mut s = connect(&listen).await;
    assert_eq!(
        roundtrip(&mut s, &resp(&[b"SET", b"v", &value]), b"+OK\r\n", LOOSE)
            .await
            .unwrap(),
        b"+OK\r\n"
    );
    let want = bulk(&value);
    assert_eq!(
        roundtrip(&mut s, &resp(&[b"GET", b"v"]), &want, LOOSE)
            .await
            .unwrap(),
        want
    );
    c.reset().await.unwrap();

    // 50 000 bytes at 100 KB/s take at least 500 ms.
    let value = noise(50_000, 5);
    let mut direct = connect(&redis.addr()).await;
    roundtrip(
        &mut direct,
        &resp(&[b"SET", b"b", &value]),
        b"+OK\r\n",
        LOOSE,
    )
    .await
    .unwrap();
    c.add_toxic(
        "r",
        &toxic("bw", Stream::Downstream, ToxicKind::Bandwidth { rate: 100 }),
    )
    .await
    .unwrap();
    let mut s = connect(&listen).await;
    let t = Instant::now();
    let want = bulk(&value);
    assert_eq!(
        roundtrip(&mut s, &resp(&[b"GET", b"b"]), &want, LOOSE)
            .await
            .unwrap(),
        want
    );
    assert!(
        t.elapsed() >= Duration::from_millis(499),
        "{:?}",
        t.elapsed()
    );
    c.reset().await.unwrap();

    // The server closes (QUIT); the client sees the close 300 ms late.
    c.add_toxic(
        "r",
        &toxic(
            "sc",
            Stream::Downstream,
            ToxicKind::SlowClose { delay: 300 },
        ),
    )
    .await
    .unwrap();
    let mut s = connect(&listen).await;
    let t = Instant::now();
    s.write_all(b"QUIT\r\n").await.unwrap();
    assert_eq!(
        wait_closed(&mut s, LOOSE).await,
        (Closed::Eof, b"+OK\r\n".to_vec())
    );
    assert!(
        t.elapsed() >= Duration::from_millis(299),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_endpoint_removes_toxics_and_enables_proxies() {
    let redis = Redis::start(31009);
    let (_server, c, a) = setup(&redis, "a").await;
    let b = c
        .create_proxy(&NewProxy::new("b", "127.0.0.1:0", redis.addr()))
        .await
        .unwrap()
        .listen;
    c.add_toxic(
        "a",
        &toxic("hole", Stream::Upstream, ToxicKind::Timeout { timeout: 0 }),
    )
    .await
    .unwrap();
    c.set_enabled("b", false).await.unwrap();
    let mut sa = connect(&a).await;
    sa.write_all(b"PING\r\n").await.unwrap();
    assert_eq!(
        wait_closed(&mut sa, Duration::from_millis(300)).await.0,
        Closed::StillOpen
    );
    assert!(tokio::net::TcpStream::connect(&b).await.is_err());

    c.reset().await.unwrap();
    for p in c.proxies().await.unwrap().values() {
        assert!(p.enabled && p.toxics.is_empty(), "{p:?}");
    }
    ping(&mut connect(&a).await).await;
    ping(&mut connect(&b).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_proxies_cut_reliably() {
    let redis = Redis::start(31010);
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let c = server.client().unwrap();
    let specs: Vec<NewProxy> = (0..50)
        .map(|i| NewProxy::new(format!("w{i}"), "127.0.0.1:0", redis.addr()))
        .collect();
    let proxies = c.populate(&specs).await.unwrap();
    assert_eq!(proxies.len(), 50);
    let mut conns = Vec::new();
    for p in &proxies {
        let mut s = connect(&p.listen).await;
        ping(&mut s).await;
        conns.push(s);
    }
    let cuts = proxies.iter().map(|p| c.cut_connections(&p.name));
    for r in futures::future::join_all(cuts).await {
        r.unwrap();
    }
    for (s, p) in conns.iter_mut().zip(&proxies) {
        let (closed, _) = wait_closed(s, LOOSE).await;
        assert!(
            matches!(closed, Closed::Eof | Closed::Reset),
            "{}: {closed:?}",
            p.name
        );
        ping(&mut connect(&p.listen).await).await;
    }
    let all = c.proxies().await.unwrap();
    assert!(all.values().all(|p| p.enabled) && all.len() == 50);
    assert!(
        eventually(LOOSE, || async {
            server.connections("w0").await == Some(0)
        })
        .await,
        "closed clients leave no connection behind"
    );
}
