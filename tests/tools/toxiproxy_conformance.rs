//! Where the embedded Toxiproxy server must answer exactly as Shopify's
//! server does, over raw HTTP (status, headers, body byte for byte):
//! populate that keeps consistent proxies, `X-Toxiproxy-Request-Id`, the
//! `noop` toxic, the fixed error texts; and the two lockjaw extensions
//! (bounded names, a proxy that would dial itself).

use crate::toxiproxy_common::{http as call, Answer};
use lockjaw::toxiproxy;
use serde_json::json;
use std::collections::HashSet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Shopify's error: Go's `http.Error` with the JSON body, a newline,
/// text/plain.
#[track_caller]
fn assert_go_error(a: &Answer, status: u16, message: &str) {
    let want = format!("{}\n", json!({"error": message, "status": status}));
    assert_eq!((a.status, a.text.as_str()), (status, want.as_str()));
    assert_eq!(a.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(a.header("x-content-type-options"), "nosniff");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn populate_leaves_consistent_proxies_and_their_toxics_alone() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let upstream = echo_server().await;
    for host in ["localhost", "127.0.0.1"] {
        let port = free_port();
        let body = json!([{"name": "p", "listen": format!("{host}:{port}"), "upstream": upstream}])
            .to_string();
        let first = call(&base, "POST", "/populate", Some(&body)).await;
        assert_eq!(first.status, 201, "{}", first.text);
        assert_eq!(
            first.json()["proxies"][0]["listen"],
            json!(format!("127.0.0.1:{port}")),
            "listen is reported resolved"
        );
        let t = r#"{"name":"lag","type":"latency","attributes":{"latency":1}}"#;
        assert_eq!(
            call(&base, "POST", "/proxies/p/toxics", Some(t))
                .await
                .status,
            200
        );
        // A client connected through the proxy must survive the second call.
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let mut live = 0;
        for _ in 0..200 {
            live = server.connections("p").await.unwrap();
            if live == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(live, 1, "{host}: the connection is accepted");

        let again = call(&base, "POST", "/populate", Some(&body)).await;
        assert_eq!(again.status, 201, "{host}: {}", again.text);
        let p = &again.json()["proxies"][0];
        assert_eq!(
            p["toxics"][0]["name"],
            json!("lag"),
            "{host}: toxic kept: {p}"
        );
        assert_eq!(
            server.connections("p").await,
            Some(1),
            "{host}: not restarted"
        );
        assert_eq!(conn.write(b"x").await.unwrap(), 1);

        // The other spelling of the same address is consistent too.
        let other = if host == "localhost" {
            "127.0.0.1"
        } else {
            "localhost"
        };
        let body2 =
            json!([{"name": "p", "listen": format!("{other}:{port}"), "upstream": upstream}])
                .to_string();
        let third = call(&base, "POST", "/populate", Some(&body2)).await;
        assert_eq!(
            third.json()["proxies"][0]["toxics"][0]["name"],
            json!("lag")
        );

        // A different upstream (compared literally) replaces the proxy.
        let moved = json!([{"name": "p", "listen": format!("{host}:{port}"),
                            "upstream": format!("localhost:{}", free_port())}])
        .to_string();
        let replaced = call(&base, "POST", "/populate", Some(&moved)).await;
        assert_eq!(replaced.status, 201, "{}", replaced.text);
        assert_eq!(replaced.json()["proxies"][0]["toxics"], json!([]));
        assert_eq!(call(&base, "DELETE", "/proxies/p", None).await.status, 204);
        drop(conn);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_a_fresh_request_id() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}).to_string();
    let answers = vec![
        call(&base, "GET", "/version", None).await,
        call(&base, "POST", "/proxies", Some(&body)).await,
        call(&base, "POST", "/proxies", Some(&body)).await,
        call(&base, "GET", "/proxies", None).await,
        call(&base, "GET", "/proxies/nope", None).await,
        call(&base, "POST", "/proxies/p/toxics", Some("{")).await,
        call(&base, "POST", "/reset", None).await,
        call(&base, "DELETE", "/proxies/p", None).await,
        call(&base, "GET", "/no/such/path", None).await,
    ];
    let browser = reqwest::Client::new()
        .get(format!("{base}/proxies"))
        .header("User-Agent", "Mozilla/5.0")
        .send()
        .await
        .unwrap();
    assert_eq!(browser.status().as_u16(), 403);
    let mut ids: Vec<String> = answers
        .iter()
        .map(|a| a.header("x-toxiproxy-request-id").to_string())
        .collect();
    ids.push(
        browser.headers()["x-toxiproxy-request-id"]
            .to_str()
            .unwrap()
            .to_string(),
    );
    for id in &ids {
        // An xid: 20 characters of base32hex, as Shopify's server sends.
        assert!(
            id.len() == 20 && id.chars().all(|c| matches!(c, '0'..='9' | 'a'..='v')),
            "{ids:?}"
        );
    }
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        ids.len(),
        "{ids:?}"
    );
    let unknown = answers.last().unwrap();
    assert_eq!(
        (unknown.status, unknown.text.as_str()),
        (404, "404 page not found\n")
    );
}

/// A loopback echo server for the rest of the test; its address.
async fn echo_server() -> String {
    let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = echo.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noop_toxic_is_accepted_and_passes_bytes_through() {
    let upstream = echo_server().await;
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": upstream}).to_string();
    let created = call(&base, "POST", "/proxies", Some(&body)).await;
    let listen = created.json()["listen"].as_str().unwrap().to_string();
    let t = call(
        &base,
        "POST",
        "/proxies/p/toxics",
        Some(r#"{"type":"noop"}"#),
    )
    .await;
    assert_eq!(t.status, 200, "{}", t.text);
    assert_eq!(
        t.json(),
        json!({"attributes": {}, "name": "noop_downstream", "type": "noop",
               "stream": "downstream", "toxicity": 1.0})
    );
    let up = r#"{"name":"n2","type":"noop","stream":"upstream","toxicity":0.5}"#;
    assert_eq!(
        call(&base, "POST", "/proxies/p/toxics", Some(up))
            .await
            .status,
        200
    );

    let mut conn = tokio::net::TcpStream::connect(&listen).await.unwrap();
    let data: Vec<u8> = (0..64 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    let (mut r, mut w) = conn.split();
    let send = async {
        w.write_all(&data).await.unwrap();
    };
    let mut back = vec![0u8; data.len()];
    let recv = async {
        r.read_exact(&mut back).await.unwrap();
    };
    tokio::join!(send, recv);
    assert!(back == data, "bytes through two noop toxics are unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_bodies_are_shopifys_texts() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}).to_string();
    assert_eq!(
        call(&base, "POST", "/proxies", Some(&body)).await.status,
        201
    );

    let cases: Vec<(&str, String, Option<&str>, u16, &str)> = vec![
        ("GET", "/proxies/nope".into(), None, 404, "proxy not found"),
        (
            "DELETE",
            "/proxies/nope".into(),
            None,
            404,
            "proxy not found",
        ),
        (
            "GET",
            "/proxies/p/toxics/nope".into(),
            None,
            404,
            "toxic not found",
        ),
        (
            "DELETE",
            "/proxies/p/toxics/nope".into(),
            None,
            404,
            "toxic not found",
        ),
        (
            "POST",
            "/proxies".into(),
            Some(&body),
            409,
            "proxy already exists",
        ),
        (
            "POST",
            "/proxies".into(),
            Some(r#"{"upstream":"x:1"}"#),
            400,
            "missing required field: name",
        ),
        (
            "POST",
            "/proxies".into(),
            Some(r#"{"name":"x"}"#),
            400,
            "missing required field: upstream",
        ),
        (
            "POST",
            "/proxies/p/toxics".into(),
            Some(r#"{"type":"nope"}"#),
            400,
            "invalid toxic type",
        ),
        (
            "POST",
            "/proxies/p/toxics".into(),
            Some(r#"{"type":"latency","stream":"sideways"}"#),
            400,
            "stream was invalid, can be either upstream or downstream",
        ),
    ];
    for (method, path, body, status, message) in &cases {
        let a = call(&base, method, path, *body).await;
        assert_go_error(&a, *status, message);
    }
    let lag = r#"{"name":"lag","type":"latency"}"#;
    assert_eq!(
        call(&base, "POST", "/proxies/p/toxics", Some(lag))
            .await
            .status,
        200
    );
    let dup = call(&base, "POST", "/proxies/p/toxics", Some(lag)).await;
    assert_go_error(&dup, 409, "toxic already exists");

    // Bad JSON: Shopify's prefix, then the decoder's own words.
    for (method, path) in [
        ("POST", "/proxies"),
        ("POST", "/proxies/p/toxics"),
        ("PATCH", "/proxies/p"),
    ] {
        let a = call(&base, method, path, Some("{nope")).await;
        let v = a.json();
        assert_eq!(
            (a.status, &v["status"]),
            (400, &json!(400)),
            "{method} {path}"
        );
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .starts_with("bad request body: "),
            "{v}"
        );
    }

    // Populate: missing fields name the proxy by its place in the list;
    // the body is JSON with the proxies applied (none).
    let a = call(
        &base,
        "POST",
        "/populate",
        Some(r#"[{"name":"a","upstream":"x:1"},{"name":"b"}]"#),
    )
    .await;
    assert_eq!(
        (a.status, a.text.as_str()),
        (
            400,
            r#"{"error":"missing required field: upstream at proxy 2","status":400,"proxies":[]}"#
        )
    );
    assert_eq!(a.header("content-type"), "application/json");

    // A taken port: Go's wording, with the address resolved.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let b = json!({"name": "q", "listen": format!("localhost:{port}"), "upstream": "127.0.0.1:1"})
        .to_string();
    let a = call(&base, "POST", "/proxies", Some(&b)).await;
    assert_go_error(
        &a,
        500,
        &format!("listen tcp 127.0.0.1:{port}: bind: address already in use"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_proxy_that_can_be_created_can_be_removed() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let max = toxiproxy::MAX_NAME_BYTES;
    // The worst case for a path: every byte percent-encoded.
    let name = "%".repeat(max);
    let path = format!("/proxies/{}", "%25".repeat(max));
    let body =
        json!({"name": name, "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}).to_string();
    assert_eq!(
        call(&base, "POST", "/proxies", Some(&body)).await.status,
        201
    );
    let toxic = json!({"name": name, "type": "noop"}).to_string();
    assert_eq!(
        call(&base, "POST", &format!("{path}/toxics"), Some(&toxic))
            .await
            .status,
        200
    );
    let toxic_path = format!("{path}/toxics/{}", "%25".repeat(max));
    assert_eq!(call(&base, "GET", &toxic_path, None).await.status, 200);
    assert_eq!(call(&base, "DELETE", &toxic_path, None).await.status, 204);
    let shown = call(&base, "GET", &path, None).await;
    assert_eq!(shown.json()["name"], json!(name));
    assert_eq!(call(&base, "DELETE", &path, None).await.status, 204);

    // One byte longer is refused up front, with the limit in the message.
    let long = "x".repeat(max + 1);
    for (path, body) in [
        (
            "/proxies".to_string(),
            json!({"name": long, "upstream": "127.0.0.1:1"}),
        ),
        (
            "/populate".to_string(),
            json!([{"name": long, "upstream": "127.0.0.1:1"}]),
        ),
    ] {
        let a = call(&base, "POST", &path, Some(&body.to_string())).await;
        assert_eq!(a.status, 400, "{path}: {}", a.text);
        assert!(
            a.json()["error"]
                .as_str()
                .unwrap()
                .contains(&max.to_string()),
            "{}",
            a.text
        );
    }
    let b = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}).to_string();
    assert_eq!(call(&base, "POST", "/proxies", Some(&b)).await.status, 201);
    let t = json!({"name": long, "type": "noop"}).to_string();
    assert_eq!(
        call(&base, "POST", "/proxies/p/toxics", Some(&t))
            .await
            .status,
        400
    );
    assert_eq!(
        call(&base, "GET", "/proxies", None)
            .await
            .json()
            .as_object()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_would_dial_itself_is_refused() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let port = free_port();
    let own = format!("127.0.0.1:{port}");
    for listen in [own.clone(), format!("localhost:{port}")] {
        let body = json!({"name": "loop", "listen": listen, "upstream": own}).to_string();
        let a = call(&base, "POST", "/proxies", Some(&body)).await;
        assert_eq!(a.status, 400, "{listen}: {}", a.text);
        assert!(
            a.json()["error"]
                .as_str()
                .unwrap()
                .contains("connect to itself"),
            "{}",
            a.text
        );
        let pop = json!([{"name": "loop", "listen": listen, "upstream": own}]).to_string();
        assert_eq!(
            call(&base, "POST", "/populate", Some(&pop)).await.status,
            400
        );
    }
    assert_eq!(call(&base, "GET", "/proxies/loop", None).await.status, 404);
    assert!(
        std::net::TcpListener::bind(&own).is_ok(),
        "nothing was left listening on the refused address"
    );

    // Pointing an existing proxy at itself is refused too; it keeps working.
    let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}).to_string();
    let created = call(&base, "POST", "/proxies", Some(&body)).await;
    let listen = created.json()["listen"].as_str().unwrap().to_string();
    let patch = json!({"upstream": listen}).to_string();
    let a = call(&base, "PATCH", "/proxies/p", Some(&patch)).await;
    assert_eq!(a.status, 400, "{}", a.text);
    let p = call(&base, "GET", "/proxies/p", None).await.json();
    assert_eq!(
        (&p["upstream"], &p["enabled"]),
        (&json!("127.0.0.1:1"), &json!(true))
    );
}
