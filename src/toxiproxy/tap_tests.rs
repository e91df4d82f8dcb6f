//! Tests of the wire tap: what a record says (reply kinds, script words,
//! why a link is opaque), `read`'s torn last line, and the tap on a live
//! proxy in front of a fake RESP server (every request and its reply, in
//! order, on the run clock, the owner's token marked).

use super::*;
use crate::toxiproxy::{NewProxy, ToxiproxyApi};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn msg(name: &str) -> Msg {
    super::super::frames::paired_msg(name, 1, false)
}

#[test]
fn replies_are_told_apart_by_their_first_line() {
    let m = msg("SET");
    for (bytes, want) in [
        (&b"+OK\r\n"[..], Reply::Ok),
        (b"+QUEUED\r\n", Reply::Other),
        (b"-ERR no\r\n", Reply::Error),
        (b"!3\r\nerr\r\n", Reply::Error),
        (b"$-1\r\n", Reply::Nil),
        (b"*-1\r\n", Reply::Nil),
        (b"_\r\n", Reply::Nil),
        (b":1\r\n", Reply::Int(1)),
        (b":-2\r\n", Reply::Int(-2)),
        (b"$3\r\nabc\r\n", Reply::Other),
    ] {
        assert_eq!(reply_of("redis", &m, bytes), want, "{bytes:?}");
    }
    // ZooKeeper: length, xid, zxid, then the error code.
    let mut ok = vec![0, 0, 0, 16, 0, 0, 0, 5];
    ok.extend([0; 8]);
    ok.extend(0i32.to_be_bytes());
    assert_eq!(reply_of("zookeeper", &msg("create"), &ok), Reply::Ok);
    let mut no_node = ok.clone();
    no_node[16..20].copy_from_slice(&(-101i32).to_be_bytes());
    assert_eq!(
        reply_of("zookeeper", &msg("delete"), &no_node),
        Reply::Error
    );
    assert_eq!(Reply::Int(3).text(), "int:3");
}

#[test]
fn script_words_are_collapsed_and_cut_at_60_bytes() {
    let w = words(b"if redis.call('get', KEYS[1]) == ARGV[1]\n\tthen\n  return redis.call('del', KEYS[1]) else return 0 end");
    assert!(
        w.starts_with("if redis.call('get', KEYS[1]) == ARGV[1] then return"),
        "{w}"
    );
    assert!(w.len() <= 60, "{} bytes", w.len());
    assert_eq!(words(b"  return   1 "), "return 1");
    // Never a cut inside a character.
    let long = "é".repeat(40);
    assert!(words(long.as_bytes()).len() <= 60);
}

#[test]
fn an_opaque_link_says_why() {
    assert_eq!(
        why_opaque(Stream::Upstream, b"PRI * HTTP/2.0\r\n\r\nSM"),
        "HTTP/2 (gRPC)"
    );
    assert_eq!(
        why_opaque(Stream::Upstream, &[0x16, 0x03, 0x01, 0, 5]),
        "TLS"
    );
    assert_eq!(
        why_opaque(Stream::Upstream, &[0, 0, 0, 8, 0, 3, 0, 0, b'u']),
        "PostgreSQL"
    );
    assert_eq!(
        why_opaque(Stream::Upstream, b"{\"op\":\"read\"}\n"),
        "JSON lines (lockjaw's storage)"
    );
    assert!(why_opaque(Stream::Downstream, b"J\0\0\0\n5.5").contains("spoke first"));
}

fn record(t_ns: u64) -> WireRecord {
    WireRecord {
        t_ns,
        proxy: "lockjaw-r1-w0-n1".into(),
        conn: 0,
        dir: Dir::Request,
        proto: "redis".into(),
        name: "SET".into(),
        seq: 1,
        sha1: None,
        words: None,
        keepalive: false,
        reply: None,
        token: false,
    }
}

#[test]
fn a_record_is_one_line_with_only_what_it_says() {
    let line = serde_json::to_string(&record(5)).unwrap();
    assert_eq!(
        line,
        r#"{"t_ns":5,"proxy":"lockjaw-r1-w0-n1","conn":0,"dir":"request","proto":"redis","name":"SET","seq":1}"#
    );
    let mut r = record(6);
    r.dir = Dir::Reply;
    r.reply = Some("int:1".into());
    r.token = true;
    r.sha1 = Some("ab".into());
    let line = serde_json::to_string(&r).unwrap();
    assert!(
        line.contains(r#""dir":"reply""#)
            && line.contains(r#""reply":"int:1""#)
            && line.contains(r#""token":true"#)
            && line.contains(r#""sha1":"ab""#),
        "{line}"
    );
    assert_eq!(serde_json::from_str::<WireRecord>(&line).unwrap(), r);
    assert_eq!(
        link_of("lockjaw-r1-w3-storage"),
        Some((3, "storage".into()))
    );
}

#[test]
fn read_skips_only_a_torn_last_line() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(FILE);
    let a = serde_json::to_string(&record(1)).unwrap();
    let b = serde_json::to_string(&record(2)).unwrap();
    std::fs::write(&p, format!("{a}\n{b}\n{}", &a[..20])).unwrap();
    let got = read(&p).unwrap();
    assert_eq!(got.len(), 2, "the torn last line is skipped");
    // A whole last line without its newline is still read.
    std::fs::write(&p, format!("{a}\n{b}")).unwrap();
    assert_eq!(read(&p).unwrap().len(), 2);
    // A bad line that is not the last one, or a bad last line that ended
    // with its newline, is an error naming the line.
    std::fs::write(&p, format!("{a}\n{}\n{b}\n", &a[..20])).unwrap();
    let e = read(&p).unwrap_err();
    assert!(e.contains("wire.jsonl:2: not a wire record"), "{e}");
    std::fs::write(&p, format!("{a}\n{}\n", &a[..20])).unwrap();
    assert!(read(&p).unwrap_err().contains(":2:"));
    let e = read(&d.path().join("none.jsonl")).unwrap_err();
    assert!(
        e.contains("none.jsonl: cannot read") && e.contains("--tap-wire"),
        "{e}"
    );
}

/// A fake RESP server: answers `+OK` to SET, `:1` to anything else, one
/// reply per request line group it can count (arrays of bulk strings).
async fn fake_resp() -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    // The test sends one request per write and waits.
                    let reply: &[u8] = if buf[..n].windows(3).any(|w| w == b"SET") {
                        b"+OK\r\n"
                    } else {
                        b":1\r\n"
                    };
                    if s.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn resp(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
    }
    v
}

#[tokio::test]
async fn a_tapped_proxy_writes_each_request_and_its_reply() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(FILE);
    let clock = RunClock::start();
    let tap = Tap::open(&path, clock).unwrap();
    let mut srv = crate::toxiproxy::spawn_loopback().await.unwrap();
    srv.set_tap(Some(tap.clone())).await;
    let upstream = fake_resp().await.to_string();
    let api = srv.client().unwrap();
    let p = api
        .create_proxy(&NewProxy::new("lockjaw-t-w1-n1", "127.0.0.1:0", &upstream))
        .await
        .unwrap();
    tap.set_token(1, "tok-123456");
    let mut c = tokio::net::TcpStream::connect(&p.listen).await.unwrap();
    let script = "return redis.call('del', KEYS[1])";
    for req in [
        resp(&["SET", "k", "tok-123456", "NX", "PX", "1000"]),
        resp(&["EVAL", script, "1", "k", "tok-123456"]),
        resp(&["GET", "k"]),
    ] {
        c.write_all(&req).await.unwrap();
        let mut b = [0u8; 16];
        let n = c.read(&mut b).await.unwrap();
        assert!(n > 0);
    }
    drop(c);
    srv.shutdown().await;
    let w = tap.close().unwrap();
    assert_eq!((w.records, w.dropped), (6, 0));
    let rs = read(&path).unwrap();
    let seen: Vec<(Dir, &str, u64, Option<&str>, bool)> = rs
        .iter()
        .map(|r| (r.dir, r.name.as_str(), r.seq, r.reply.as_deref(), r.token))
        .collect();
    assert_eq!(
        seen,
        [
            (Dir::Request, "SET", 1, None, true),
            (Dir::Reply, "SET", 1, Some("ok"), false),
            (Dir::Request, "EVAL", 2, None, true),
            (Dir::Reply, "EVAL", 2, Some("int:1"), false),
            (Dir::Request, "GET", 3, None, false),
            (Dir::Reply, "GET", 3, Some("int:1"), false),
        ]
    );
    assert!(rs.iter().all(|r| r.proto == "redis" && r.conn == 0));
    assert!(
        rs.windows(2).all(|w| w[0].t_ns <= w[1].t_ns),
        "run clock order"
    );
    assert!(rs[5].t_ns <= clock.now());
    assert_eq!(rs[2].words.as_deref(), Some(script));
    assert_eq!(
        rs[2].sha1.as_deref(),
        Some(sha1_smol::Sha1::from(script).digest().to_string().as_str())
    );
    assert_eq!(tap.close().unwrap(), Tapped::default(), "closing twice");
}
