//! The embedded Toxiproxy server's HTTP API, endpoint by endpoint, with raw
//! HTTP: status codes, JSON shapes and error bodies as Shopify's server
//! gives them; the independent `toxiproxy_rust` client against it; lockjaw's
//! own client's typed errors; and the `lockjaw toxiproxy` command.

use lockjaw::toxiproxy::{self, ClientError, NewProxy, Stream, Toxic, ToxicKind, ToxiproxyApi};
use serde_json::{json, Value};
use std::time::Duration;

/// Raw HTTP: method, path, optional body -> (status, JSON or null, raw text).
async fn call(base: &str, method: &str, path: &str, body: Option<&str>) -> (u16, Value, String) {
    let a = crate::toxiproxy_common::http(base, method, path, body).await;
    (a.status, a.json(), a.text)
}

fn err(msg: &str, status: u16) -> Value {
    json!({"error": msg, "status": status})
}

/// An address nothing listens on (bound then released).
fn dead_addr() -> String {
    // On 127.0.0.3: a proxy listening on 127.0.0.1:0 may be given the port
    // just freed here, and 127.0.0.1 would then be its own upstream.
    let l = std::net::TcpListener::bind("127.0.0.3:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_and_browser_guard() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let (status, v, _) = call(&server.url(), "GET", "/version", None).await;
    assert_eq!(status, 200);
    assert!(v["version"].as_str().unwrap().starts_with("2."), "{v}");
    let resp = reqwest::Client::new()
        .get(format!("{}/proxies", server.url()))
        .header("User-Agent", "Mozilla/5.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_endpoints() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let up = dead_addr();
    assert_eq!(call(&base, "GET", "/proxies", None).await.1, json!({}));

    let body = json!({"name": "p1", "listen": "127.0.0.1:0", "upstream": up}).to_string();
    let (status, p, _) = call(&base, "POST", "/proxies", Some(&body)).await;
    assert_eq!(status, 201);
    let listen = p["listen"].as_str().unwrap().to_string();
    assert!(
        listen.starts_with("127.0.0.1:") && !listen.ends_with(":0"),
        "{p}"
    );
    assert_eq!(
        p,
        json!({"name": "p1", "listen": listen, "upstream": up, "enabled": true, "toxics": []})
    );

    let (status, v, _) = call(&base, "POST", "/proxies", Some(&body)).await;
    assert_eq!((status, v), (409, err("proxy already exists", 409)));
    let (status, v, _) = call(&base, "POST", "/proxies", Some(r#"{"upstream":"x:1"}"#)).await;
    assert_eq!((status, v), (400, err("missing required field: name", 400)));
    let (status, v, _) = call(&base, "POST", "/proxies", Some(r#"{"name":"x"}"#)).await;
    assert_eq!(
        (status, v),
        (400, err("missing required field: upstream", 400))
    );
    let (status, v, _) = call(&base, "POST", "/proxies", Some("{not json")).await;
    assert_eq!(status, 400);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("bad request body: "),
        "{v}"
    );
    assert_eq!(v["status"], 400);

    let (status, v, _) = call(&base, "GET", "/proxies/p1", None).await;
    assert_eq!((status, v["name"].as_str()), (200, Some("p1")));
    let (status, v, _) = call(&base, "GET", "/proxies/nope", None).await;
    assert_eq!((status, v), (404, err("proxy not found", 404)));
    let listing = call(&base, "GET", "/proxies", None).await.1;
    assert_eq!(listing["p1"]["listen"], json!(listen));

    // Update with PATCH and with POST.
    let (status, v, _) = call(&base, "PATCH", "/proxies/p1", Some(r#"{"enabled":false}"#)).await;
    assert_eq!((status, v["enabled"].as_bool()), (200, Some(false)));
    let (status, v, _) = call(&base, "POST", "/proxies/p1", Some(r#"{"enabled":true}"#)).await;
    assert_eq!((status, v["enabled"].as_bool()), (200, Some(true)), "{v}");
    let new_up = dead_addr();
    let patch = json!({"upstream": new_up}).to_string();
    let (status, v, _) = call(&base, "PATCH", "/proxies/p1", Some(&patch)).await;
    assert_eq!(
        (status, v["upstream"].as_str(), v["enabled"].as_bool()),
        (200, Some(new_up.as_str()), Some(true))
    );
    let (status, _, _) = call(&base, "PATCH", "/proxies/p1", Some(r#"{"enabled":"yes"}"#)).await;
    assert_eq!(status, 400);
    let (status, v, _) = call(&base, "PATCH", "/proxies/nope", Some(r#"{"enabled":true}"#)).await;
    assert_eq!((status, v), (404, err("proxy not found", 404)));

    let (status, _, text) = call(&base, "DELETE", "/proxies/p1", None).await;
    assert_eq!((status, text.as_str()), (204, ""));
    let (status, v, _) = call(&base, "DELETE", "/proxies/p1", None).await;
    assert_eq!((status, v), (404, err("proxy not found", 404)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxic_endpoints() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let body = json!({"name": "p", "listen": "127.0.0.1:0", "upstream": dead_addr()}).to_string();
    assert_eq!(call(&base, "POST", "/proxies", Some(&body)).await.0, 201);

    let (status, t, _) = call(
        &base,
        "POST",
        "/proxies/p/toxics",
        Some(r#"{"type":"latency","attributes":{"latency":100}}"#),
    )
    .await;
    assert_eq!(status, 200);
    let want = json!({"attributes": {"latency": 100, "jitter": 0}, "name": "latency_downstream",
                      "type": "latency", "stream": "downstream", "toxicity": 1.0});
    assert_eq!(t, want);
    let (status, v, _) = call(
        &base,
        "POST",
        "/proxies/p/toxics",
        Some(r#"{"type":"latency"}"#),
    )
    .await;
    assert_eq!((status, v), (409, err("toxic already exists", 409)));
    let (status, v, _) = call(
        &base,
        "POST",
        "/proxies/p/toxics",
        Some(r#"{"type":"latency","stream":"sideways"}"#),
    )
    .await;
    assert_eq!(
        (status, v),
        (
            400,
            err(
                "stream was invalid, can be either upstream or downstream",
                400
            )
        )
    );
    let (status, v, _) = call(
        &base,
        "POST",
        "/proxies/p/toxics",
        Some(r#"{"type":"frobnicate"}"#),
    )
    .await;
    assert_eq!((status, v), (400, err("invalid toxic type", 400)));
    let (status, v, _) = call(
        &base,
        "POST",
        "/proxies/p/toxics",
        Some(r#"{"name":"x","type":"latency","attributes":{"latency":"slow"}}"#),
    )
    .await;
    assert_eq!((status, v["status"].as_u64()), (400, Some(400)));
    let (status, _, _) = call(&base, "POST", "/proxies/p/toxics", Some("[")).await;
    assert_eq!(status, 400);
    let (status, v, _) = call(
        &base,
        "POST",
        "/proxies/nope/toxics",
        Some(r#"{"type":"latency"}"#),
    )
    .await;
    assert_eq!((status, v), (404, err("proxy not found", 404)));

    // Every kind is accepted and echoes its full attribute set.
    let kinds = [
        ("bandwidth", json!({"rate": 100})),
        ("slow_close", json!({"delay": 10})),
        ("timeout", json!({"timeout": 0})),
        ("reset_peer", json!({"timeout": 5})),
        (
            "slicer",
            json!({"average_size": 10, "size_variation": 2, "delay": 3}),
        ),
        ("limit_data", json!({"bytes": 1000})),
    ];
    for (kind, attrs) in &kinds {
        let b = json!({"type": kind, "stream": "upstream", "toxicity": 0.5, "attributes": attrs})
            .to_string();
        let (status, t, _) = call(&base, "POST", "/proxies/p/toxics", Some(&b)).await;
        assert_eq!(status, 200, "{kind}: {t}");
        assert_eq!(t["name"], json!(format!("{kind}_upstream")));
        assert_eq!(
            (&t["attributes"], &t["toxicity"], &t["stream"]),
            (attrs, &json!(0.5), &json!("upstream"))
        );
    }
    let (status, list, _) = call(&base, "GET", "/proxies/p/toxics", None).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 7);
    assert_eq!(
        names.last(),
        Some(&"latency_downstream"),
        "upstream toxics are listed first"
    );
    assert_eq!(
        call(&base, "GET", "/proxies/p", None).await.1["toxics"],
        list
    );

    let (status, t, _) = call(&base, "GET", "/proxies/p/toxics/latency_downstream", None).await;
    assert_eq!((status, t), (200, want));
    let (status, v, _) = call(&base, "GET", "/proxies/p/toxics/nope", None).await;
    assert_eq!((status, v), (404, err("toxic not found", 404)));
    let (status, v, _) = call(&base, "GET", "/proxies/nope/toxics/x", None).await;
    assert_eq!((status, v), (404, err("proxy not found", 404)));

    let (status, t, _) = call(
        &base,
        "PATCH",
        "/proxies/p/toxics/latency_downstream",
        Some(r#"{"attributes":{"jitter":7}}"#),
    )
    .await;
    assert_eq!(
        (status, &t["attributes"]),
        (200, &json!({"latency": 100, "jitter": 7}))
    );
    let (status, t, _) = call(
        &base,
        "POST",
        "/proxies/p/toxics/latency_downstream",
        Some(r#"{"toxicity":0.25}"#),
    )
    .await;
    assert_eq!(
        (status, &t["toxicity"], &t["attributes"]["jitter"]),
        (200, &json!(0.25), &json!(7))
    );
    let (status, v, _) = call(&base, "PATCH", "/proxies/p/toxics/nope", Some("{}")).await;
    assert_eq!((status, v), (404, err("toxic not found", 404)));
    let (status, _, _) = call(
        &base,
        "PATCH",
        "/proxies/p/toxics/latency_downstream",
        Some("nope"),
    )
    .await;
    assert_eq!(status, 400);

    let (status, _, text) = call(
        &base,
        "DELETE",
        "/proxies/p/toxics/latency_downstream",
        None,
    )
    .await;
    assert_eq!((status, text.as_str()), (204, ""));
    let (status, v, _) = call(
        &base,
        "DELETE",
        "/proxies/p/toxics/latency_downstream",
        None,
    )
    .await;
    assert_eq!((status, v), (404, err("toxic not found", 404)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn populate_and_reset() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let base = server.url();
    let (a, b) = (dead_addr(), dead_addr());
    let body = json!([{"name": "a", "listen": "127.0.0.1:0", "upstream": a},
                      {"name": "b", "listen": "127.0.0.1:0", "upstream": b, "enabled": false}]);
    let (status, v, _) = call(&base, "POST", "/populate", Some(&body.to_string())).await;
    assert_eq!(status, 201);
    let proxies = v["proxies"].as_array().unwrap();
    assert_eq!(
        (proxies[0]["name"].as_str(), proxies[0]["enabled"].as_bool()),
        (Some("a"), Some(true))
    );
    assert_eq!(
        (proxies[1]["name"].as_str(), proxies[1]["enabled"].as_bool()),
        (Some("b"), Some(false))
    );

    // Same listen and upstream: left as it is (same port, still disabled).
    let a_listen = proxies[0]["listen"].clone();
    let again = json!([{"name": "a", "listen": a_listen, "upstream": a}]);
    let (status, v, _) = call(&base, "POST", "/populate", Some(&again.to_string())).await;
    assert_eq!((status, &v["proxies"][0]["listen"]), (201, &a_listen));

    let bad = json!([{"name": "c", "upstream": a}, {"upstream": b}]);
    let (status, v, _) = call(&base, "POST", "/populate", Some(&bad.to_string())).await;
    assert_eq!(
        (status, &v["error"], &v["status"]),
        (
            400,
            &json!("missing required field: name at proxy 2"),
            &json!(400)
        )
    );
    assert_eq!(
        call(&base, "GET", "/proxies/c", None).await.0,
        404,
        "nothing applied on a bad request"
    );
    assert_eq!(call(&base, "POST", "/populate", Some("{}")).await.0, 400);

    let t = r#"{"type":"timeout","attributes":{"timeout":0}}"#;
    assert_eq!(
        call(&base, "POST", "/proxies/a/toxics", Some(t)).await.0,
        200
    );
    let (status, _, text) = call(&base, "POST", "/reset", None).await;
    assert_eq!((status, text.as_str()), (204, ""));
    let listing = call(&base, "GET", "/proxies", None).await.1;
    for name in ["a", "b"] {
        assert_eq!(listing[name]["enabled"], json!(true), "{listing}");
        assert_eq!(listing[name]["toxics"], json!([]), "{listing}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_in_use_is_a_500_and_a_typed_client_error() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let body = json!({"name": "p", "listen": listen, "upstream": dead_addr()}).to_string();
    let (status, v, _) = call(&server.url(), "POST", "/proxies", Some(&body)).await;
    assert_eq!((status, &v["status"]), (500, &json!(500)));
    assert!(v["error"].as_str().unwrap().contains("in use"), "{v}");
    assert_eq!(call(&server.url(), "GET", "/proxies/p", None).await.0, 404);

    let client = server.client().unwrap();
    let e = client
        .create_proxy(&NewProxy::new("p", listen, dead_addr()))
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::PortInUse { .. }), "{e:?}");
    assert!(e.to_string().contains("hint:"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_errors_are_typed_with_hints() {
    let dead = format!("http://{}", dead_addr());
    let e = toxiproxy::HttpClient::new(&dead)
        .unwrap()
        .proxies()
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Unreachable { .. }), "{e:?}");
    assert!(
        e.to_string().contains(&dead) && e.to_string().contains("hint:"),
        "{e}"
    );

    let server = toxiproxy::spawn_loopback().await.unwrap();
    let c = server.client().unwrap();
    assert!(c.version().await.unwrap().starts_with("2."));
    let e = c.proxy("ghost").await.unwrap_err();
    assert!(
        matches!(e, ClientError::ProxyNotFound { ref proxy, .. } if proxy == "ghost"),
        "{e:?}"
    );
    assert!(e.is_not_found());
    let e = c.remove_toxic("ghost", "t").await.unwrap_err();
    assert!(matches!(e, ClientError::ProxyNotFound { .. }), "{e:?}");

    let p = c
        .create_proxy(&NewProxy::new("p", "127.0.0.1:0", dead_addr()))
        .await
        .unwrap();
    assert!(p.enabled);
    let e = c
        .create_proxy(&NewProxy::new("p", "127.0.0.1:0", dead_addr()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::ProxyExists { .. }) && e.is_conflict(),
        "{e:?}"
    );
    let e = c.remove_toxic("p", "t").await.unwrap_err();
    assert!(
        matches!(e, ClientError::ToxicNotFound { ref toxic, .. } if toxic == "t"),
        "{e:?}"
    );
    let lag = Toxic::new(
        "lag",
        Stream::Upstream,
        ToxicKind::Latency {
            latency: 10,
            jitter: 0,
        },
    );
    assert_eq!(c.add_toxic("p", &lag).await.unwrap(), lag);
    let e = c.add_toxic("p", &lag).await.unwrap_err();
    assert!(matches!(e, ClientError::ToxicExists { .. }), "{e:?}");
    let weird = Toxic {
        kind: "frobnicate".into(),
        ..lag.clone()
    };
    let e = c.add_toxic("p", &weird).await.unwrap_err();
    assert!(matches!(e, ClientError::Api { status: 400, .. }), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toxiproxy_rust_client_works_against_the_embedded_server() {
    let server = toxiproxy::spawn_loopback().await.unwrap();
    let addr = server.addr();
    let upstream = dead_addr();
    // toxiproxy_rust is blocking (and panics on errors): keep it off the runtime.
    let listed = tokio::task::spawn_blocking(move || {
        use toxiproxy_rust::{client::Client, proxy::ProxyPack};
        let c = Client::new(addr);
        assert!(c.is_running());
        assert!(c.version().unwrap().contains("2."));
        let made = c
            .populate(vec![ProxyPack::new(
                "rs".into(),
                "127.0.0.1:0".into(),
                upstream,
            )])
            .unwrap();
        assert_eq!(made.len(), 1);
        let proxy = c.find_proxy("rs").unwrap();
        proxy
            .with_latency("upstream".into(), 100, 10, 1.0)
            .with_timeout("downstream".into(), 0, 0.5);
        let toxics = proxy.toxics().unwrap();
        let names: Vec<String> = toxics.iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, ["latency_upstream", "timeout_downstream"]);
        assert_eq!(toxics[0].attributes["latency"], 100);
        proxy.disable().unwrap();
        assert!(!c.all().unwrap()["rs"].proxy_pack.enabled);
        c.reset().unwrap();
        let all = c.all().unwrap();
        let after_reset = (
            all["rs"].proxy_pack.enabled,
            all["rs"].proxy_pack.toxics.len(),
        );
        // The other toxic helpers, then find_and_reset_proxy (removes every
        // toxic one by one and enables), and delete.
        proxy
            .with_bandwidth("downstream".into(), 64, 1.0)
            .with_slow_close("downstream".into(), 10, 1.0)
            .with_slicer("upstream".into(), 64, 8, 5, 1.0)
            .with_limit_data("upstream".into(), 1000, 1.0);
        assert_eq!(proxy.toxics().unwrap().len(), 4);
        proxy.disable().unwrap();
        let again = c.find_and_reset_proxy("rs").unwrap();
        assert!(again.toxics().unwrap().is_empty());
        assert!(c.all().unwrap()["rs"].proxy_pack.enabled);
        again.delete().unwrap();
        assert!(c.all().unwrap().is_empty());
        after_reset
    })
    .await
    .expect("toxiproxy_rust calls");
    assert_eq!(listed, (true, 0));
}

#[test]
fn cli_serves_the_api_and_reports_a_taken_port() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let exe = env!("CARGO_BIN_EXE_lockjaw");

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = Command::new(exe)
        .args(["toxiproxy", "--port", &port])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot listen on 127.0.0.1:") && stderr.contains("hint:"),
        "{stderr}"
    );

    let mut child = Command::new(exe)
        .args(["toxiproxy", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let version = rt.block_on(async { toxiproxy::HttpClient::new(&url).unwrap().version().await });
    // SIGTERM our own child, then reap it.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_with_deadline(&mut child, Duration::from_secs(20));
    assert!(version.unwrap().starts_with("2."), "{url}");
    assert_eq!(status, Some(0), "lockjaw toxiproxy exits 0 on SIGTERM");
}

fn wait_with_deadline(child: &mut std::process::Child, within: Duration) -> Option<i32> {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
