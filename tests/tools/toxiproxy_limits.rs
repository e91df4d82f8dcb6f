//! Issue 29: what the embedded Toxiproxy refuses so that no request can
//! take it down: an upstream that leads back into the server (two proxies
//! pointing at each other dialled themselves until ~18,000 sockets were
//! open and the API stalled), a loop it cannot see (through another
//! server) stopped by the bound on each proxy's connections, and toxic
//! values out of range. Driven over raw HTTP (reqwest) as any client would.

use crate::toxiproxy_common::http as call;
use lockjaw::toxiproxy::{self, MAX_CONNECTIONS};
use serde_json::{json, Value};
use std::time::Duration;

/// A loopback port held (bound with SO_REUSEADDR, not listening) so no
/// outgoing connection takes it, yet a proxy can listen on it.
fn held_port() -> (socket2::Socket, String) {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    s.bind(&any.into()).unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap();
    (s, addr.to_string())
}

/// POST or PATCH `body` to `path`; the status and the error message.
async fn send(base: &str, method: &str, path: &str, body: Value) -> (u16, String) {
    let a = call(base, method, path, Some(&body.to_string())).await;
    let msg = a.json()["error"].as_str().unwrap_or("").to_string();
    (a.status, msg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_pointing_at_each_other_or_at_the_api_are_refused() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let ((_ha, la), (_hb, lb), (_hc, lc)) = (held_port(), held_port(), held_port());
    let pa = la.rsplit(':').next().unwrap();
    // A → B's address, where nothing listens yet: a chain, not a loop.
    let a = json!({"name": "a", "listen": la, "upstream": lb});
    assert_eq!(send(&base, "POST", "/proxies", a).await.0, 201);
    // B → A closes the loop: refused at create ...
    let b = json!({"name": "b", "listen": lb, "upstream": format!("localhost:{pa}")});
    let (status, msg) = send(&base, "POST", "/proxies", b.clone()).await;
    assert_eq!(status, 400, "{msg}");
    assert!(msg.contains("where proxy a listens"), "{msg}");
    // ... at populate ...
    let (status, msg) = send(&base, "POST", "/populate", json!([b])).await;
    assert_eq!(status, 400, "{msg}");
    let both = json!([
        {"name": "c", "listen": lc, "upstream": lb},
        {"name": "b", "listen": lb, "upstream": lc},
    ]);
    let (status, msg) = send(&base, "POST", "/populate", both).await;
    assert_eq!(status, 400, "a loop inside one populate: {msg}");
    assert_eq!(call(&base, "GET", "/proxies/b", None).await.status, 404);
    // ... and at update.
    let b = json!({"name": "b", "listen": lb, "upstream": "127.0.0.1:1"});
    assert_eq!(send(&base, "POST", "/proxies", b).await.0, 201);
    let (status, msg) = send(&base, "PATCH", "/proxies/b", json!({"upstream": la})).await;
    assert_eq!(status, 400, "{msg}");
    let shown = call(&base, "GET", "/proxies/b", None).await.json();
    assert_eq!(shown["upstream"], json!("127.0.0.1:1"), "left as it was");
    // The API's own port, by address or by name.
    let api = server.addr().port();
    for up in [format!("127.0.0.1:{api}"), format!("localhost:{api}")] {
        let e = json!({"name": "e", "listen": "127.0.0.1:0", "upstream": up});
        let (status, msg) = send(&base, "POST", "/proxies", e).await;
        assert_eq!(status, 400, "{up}: {msg}");
        assert!(msg.contains("where its API listens"), "{msg}");
    }
    assert_eq!(call(&base, "GET", "/proxies/e", None).await.status, 404);
}

/// A loop through a second server: each sees only an upstream elsewhere.
/// One client connection makes them dial each other; the bound stops it,
/// the chain unwinds, and both APIs answer. The bound is the default
/// [`MAX_CONNECTIONS`] on one server and a small one on the other, which
/// stops the loop first: fewer sockets, so the ephemeral ports other
/// tests pick stay free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_through_another_server_stops_at_the_connection_bound() {
    const SMALL: usize = 64;
    let loopback = "127.0.0.1:0".parse().unwrap();
    let one = toxiproxy::spawn_loopback().await.unwrap();
    let two = toxiproxy::spawn_bounded(loopback, SMALL).await.unwrap();
    let a = json!({"name": "a", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"});
    let (status, _) = send(&one.url(), "POST", "/proxies", a).await;
    assert_eq!(status, 201);
    let la = call(&one.url(), "GET", "/proxies/a", None).await.json()["listen"]
        .as_str()
        .unwrap()
        .to_string();
    let b = json!({"name": "b", "listen": "127.0.0.1:0", "upstream": la});
    let created = call(&two.url(), "POST", "/proxies", Some(&b.to_string())).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let lb = created.json()["listen"].as_str().unwrap().to_string();
    let (status, msg) = send(&one.url(), "PATCH", "/proxies/a", json!({"upstream": lb})).await;
    assert_eq!(status, 200, "{msg}");

    let _client = tokio::net::TcpStream::connect(&la).await.unwrap();
    let mut most = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (ca, cb) = (
            one.connections("a").await.unwrap(),
            two.connections("b").await.unwrap(),
        );
        most = most.max(ca).max(cb);
        let refused = one.refused_connections("a").await.unwrap()
            + two.refused_connections("b").await.unwrap();
        if refused > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the loop never reached the bound ({ca} and {cb} connections)"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Each hop of the chain holds one connection on each server.
    assert!(most <= SMALL + 1, "{most} connections on one proxy");
    const { assert!(SMALL < MAX_CONNECTIONS) };
    // The refused hop unwinds the chain: the loop is over.
    let over = tokio::time::Instant::now() + Duration::from_secs(30);
    while one.connections("a").await.unwrap() + two.connections("b").await.unwrap() > 0 {
        assert!(tokio::time::Instant::now() < over, "the loop goes on");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for server in [&one, &two] {
        let v = tokio::time::timeout(
            Duration::from_secs(30),
            call(&server.url(), "GET", "/version", None),
        )
        .await
        .expect("the API answers while the loop is bounded");
        assert_eq!(v.status, 200);
    }
    for (server, name) in [(&one, "a"), (&two, "b")] {
        let path = format!("/proxies/{name}");
        let d = tokio::time::timeout(
            Duration::from_secs(30),
            call(&server.url(), "DELETE", &path, None),
        )
        .await
        .expect("a DELETE answers");
        assert_eq!(d.status, 204);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxic_values_out_of_range_are_refused_naming_the_field() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let p = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"});
    assert_eq!(send(&base, "POST", "/proxies", p).await.0, 201);
    for (toxic, field) in [
        (
            json!({"type": "latency", "attributes": {"latency": -100}}),
            "attribute latency",
        ),
        (
            json!({"type": "latency", "attributes": {"jitter": -1}}),
            "attribute jitter",
        ),
        (
            json!({"type": "bandwidth", "attributes": {"rate": -1}}),
            "attribute rate",
        ),
        (
            json!({"type": "timeout", "attributes": {"timeout": -1}}),
            "attribute timeout",
        ),
        (
            json!({"type": "limit_data", "attributes": {"bytes": -1}}),
            "attribute bytes",
        ),
        (
            json!({"type": "hold_next", "attributes": {"hold": -1}}),
            "attribute hold",
        ),
        (
            json!({"type": "latency", "toxicity": 1.5}),
            "toxicity must be from 0 to 1",
        ),
        (
            json!({"type": "latency", "toxicity": -0.1}),
            "toxicity must be from 0 to 1",
        ),
    ] {
        let (status, msg) = send(&base, "POST", "/proxies/p/toxics", toxic.clone()).await;
        assert_eq!(status, 400, "{toxic}: {msg}");
        assert!(msg.contains(field), "{toxic}: {msg}");
    }
    assert_eq!(
        call(&base, "GET", "/proxies/p/toxics", None).await.json(),
        json!([]),
        "nothing was added"
    );
    let t = json!({"name": "lag", "type": "latency", "toxicity": 0, "attributes": {"latency": 5}});
    assert_eq!(send(&base, "POST", "/proxies/p/toxics", t).await.0, 200);
    let patch = json!({"attributes": {"latency": -5}});
    let (status, msg) = send(&base, "PATCH", "/proxies/p/toxics/lag", patch).await;
    assert_eq!(status, 400, "{msg}");
    let lag = call(&base, "GET", "/proxies/p/toxics/lag", None)
        .await
        .json();
    assert_eq!(lag["attributes"]["latency"], json!(5), "left as it was");
}
