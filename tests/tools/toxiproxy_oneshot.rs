//! lockjaw's one-shot toxics (`hold_next`, `reset_next`) in the embedded
//! Toxiproxy server, through a real redis-server: exactly the first chunk
//! after the toxic was added (pings aside: they pass) is held or reset, on whichever connection gets
//! there first; everything else passes; `fired` shows it; toxicity other
//! than 1 is refused. Timing: a held reply is never early (strict), and
//! comes within a loose bound after.
//!
//! Each test starts its own redis-server on its own port (31021–31030).

use crate::toxiproxy_common::*;
use lockjaw::toxiproxy::{
    self, HttpClient, NewProxy, ServerHandle, Stream, Toxic, ToxicKind, ToxiproxyApi,
};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LOOSE: Duration = Duration::from_secs(10);
const HOLD_MS: i64 = 500;
const HOLD: Duration = Duration::from_millis(HOLD_MS as u64);

/// The embedded server with one proxy `r` in front of `redis`.
async fn setup(redis: &Redis) -> (ServerHandle, HttpClient, String) {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let client = server.client().unwrap();
    let p = client
        .create_proxy(&NewProxy::new("r", "127.0.0.1:0", redis.addr()))
        .await
        .unwrap();
    (server, client, p.listen)
}

/// A round trip of `ECHO x` (not a `PING`: one-shots pass over pings on a
/// framed Redis connection).
async fn echo(s: &mut tokio::net::TcpStream) -> Duration {
    let t = Instant::now();
    let got = roundtrip(s, &resp(&[b"ECHO", b"x"]), b"$1\r\nx\r\n", LOOSE)
        .await
        .expect("ECHO through the proxy");
    assert_eq!(got, b"$1\r\nx\r\n");
    t.elapsed()
}

async fn fired(c: &HttpClient, toxic: &str) -> Option<bool> {
    c.toxic("r", toxic).await.unwrap().fired()
}

/// Add a `reset_next` named `rst` on `stream`, send `SET k v` through the
/// proxy and wait until the connection ends: how, and what came back.
async fn set_through_reset_next(c: &HttpClient, listen: &str, stream: Stream) -> (Closed, Vec<u8>) {
    c.add_toxic("r", &Toxic::new("rst", stream, ToxicKind::ResetNext))
        .await
        .unwrap();
    assert_eq!(fired(c, "rst").await, Some(false));
    let mut s = connect(listen).await;
    s.write_all(&resp(&[b"SET", b"k", b"v"])).await.unwrap();
    let end = wait_closed(&mut s, LOOSE).await;
    assert_eq!(fired(c, "rst").await, Some(true));
    end
}

/// GET `key` straight from redis (not through the proxy).
async fn direct_get(redis: &Redis, key: &[u8], expect: &[u8]) -> Vec<u8> {
    let mut s = connect(&redis.addr()).await;
    roundtrip(&mut s, &resp(&[b"GET", key]), expect, LOOSE)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_next_holds_only_the_first_reply() {
    let redis = Redis::start(31021);
    let (_server, c, listen) = setup(&redis).await;
    // A connection opened before the toxic is a connection like any other.
    let mut s = connect(&listen).await;
    ping(&mut s).await;
    let hold = ToxicKind::HoldNext { hold: HOLD_MS };
    c.add_toxic("r", &Toxic::new("hold", Stream::Downstream, hold))
        .await
        .unwrap();
    assert_eq!(fired(&c, "hold").await, Some(false));

    let rtt = ping(&mut s).await;
    assert!(rtt < HOLD, "a ping took the shot: {rtt:?}");
    let rtt = echo(&mut s).await;
    assert!(rtt >= HOLD, "the held reply came early: {rtt:?}");
    assert!(rtt < HOLD + LOOSE, "{rtt:?}");
    assert_eq!(fired(&c, "hold").await, Some(true));
    let listed = c.toxics("r").await.unwrap();
    assert_eq!(listed[0].fired(), Some(true), "the list shows it too");
    assert_eq!(
        listed[0].struck().as_deref(),
        Some("ECHO"),
        "what it struck"
    );

    // Spent: the next reply on this connection and on a new one pass.
    let rtt = echo(&mut s).await;
    assert!(rtt < HOLD, "second reply held too: {rtt:?}");
    let rtt = echo(&mut connect(&listen).await).await;
    assert!(rtt < HOLD, "a later connection was held: {rtt:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_zero_holds_until_removed_and_removal_flushes() {
    let redis = Redis::start(31022);
    let (_server, c, listen) = setup(&redis).await;
    c.add_toxic(
        "r",
        &Toxic::new("hold", Stream::Downstream, ToxicKind::HoldNext { hold: 0 }),
    )
    .await
    .unwrap();
    let mut s = connect(&listen).await;
    s.write_all(b"ECHO held\r\n").await.unwrap();
    let mut buf = [0u8; 7];
    let early = tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await;
    assert!(early.is_err(), "the reply passed a hold of 0: {early:?}");
    assert_eq!(fired(&c, "hold").await, Some(true));
    c.remove_toxic("r", "hold").await.unwrap();
    let got = roundtrip(&mut s, b"", b"$4\r\nheld\r\n", LOOSE)
        .await
        .unwrap();
    assert_eq!(got, b"$4\r\nheld\r\n", "removal delivers the held reply");
    ping(&mut s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_connections_get_one_chunk_held() {
    let redis = Redis::start(31023);
    let (_server, c, listen) = setup(&redis).await;
    let (mut a, mut b) = (connect(&listen).await, connect(&listen).await);
    let hold = ToxicKind::HoldNext { hold: HOLD_MS };
    c.add_toxic("r", &Toxic::new("hold", Stream::Upstream, hold))
        .await
        .unwrap();
    let (ra, rb) = tokio::join!(echo(&mut a), echo(&mut b));
    let held = [ra, rb].iter().filter(|t| **t >= HOLD).count();
    assert_eq!(held, 1, "exactly one request held: {ra:?} {rb:?}");
    assert_eq!(fired(&c, "hold").await, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_next_upstream_never_reaches_the_server() {
    let redis = Redis::start(31024);
    let (_server, c, listen) = setup(&redis).await;
    assert_eq!(
        set_through_reset_next(&c, &listen, Stream::Upstream).await,
        (Closed::Reset, vec![])
    );
    assert_eq!(direct_get(&redis, b"k", b"$-1\r\n").await, b"$-1\r\n");

    // Later connections are not touched (the toxic is still listed).
    let mut s = connect(&listen).await;
    let set = resp(&[b"SET", b"k", b"w"]);
    assert_eq!(
        roundtrip(&mut s, &set, b"+OK\r\n", LOOSE).await.unwrap(),
        b"+OK\r\n"
    );
    ping(&mut s).await;
    assert_eq!(direct_get(&redis, b"k", &bulk(b"w")).await, bulk(b"w"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_next_downstream_applies_the_request_and_loses_the_reply() {
    let redis = Redis::start(31025);
    let (_server, c, listen) = setup(&redis).await;
    assert_eq!(
        set_through_reset_next(&c, &listen, Stream::Downstream).await,
        (Closed::Reset, vec![]),
        "the client gets a reset and not the reply"
    );
    assert_eq!(direct_get(&redis, b"k", &bulk(b"v")).await, bulk(b"v"));
    let t = Instant::now();
    ping(&mut connect(&listen).await).await;
    assert!(t.elapsed() < LOOSE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shots_refuse_a_toxicity_other_than_1() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let proxy = r#"{"name":"r","listen":"127.0.0.1:0","upstream":"127.0.0.1:1"}"#;
    assert_eq!(
        http(&base, "POST", "/proxies", Some(proxy)).await.status,
        201
    );
    for kind in ["hold_next", "reset_next"] {
        let body = format!(r#"{{"type":"{kind}","toxicity":0.5}}"#);
        let a = http(&base, "POST", "/proxies/r/toxics", Some(&body)).await;
        assert_eq!(a.status, 400, "{}", a.text);
        let msg = a.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(
            msg.starts_with(&format!("toxicity must be 1 for {kind}")),
            "{msg}"
        );
    }
    let c = server.client().unwrap();
    let half =
        Toxic::new("h", Stream::Downstream, ToxicKind::HoldNext { hold: 1 }).with_toxicity(0.5);
    assert!(c.add_toxic("r", &half).await.is_err());
    assert!(c.toxics("r").await.unwrap().is_empty());
}
