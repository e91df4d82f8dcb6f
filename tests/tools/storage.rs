//! Integration tests of the protected storage over real TCP on 127.0.0.1
//! (ephemeral ports only): the fence rule, request numbering, concurrency,
//! malformed input, late delivery, shutdown, and history recording.

use lockjaw::history::clock::RunClock;
use lockjaw::history::{Op, OpType, Process, Sink};
use lockjaw::storage::record::{read_op, write_op};
use lockjaw::storage::{
    spawn, CallError, ClientConfig, Fencing, Reply, StorageClient, StorageConfig, StorageHandle,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

fn start(fencing: Fencing) -> StorageHandle {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let config = StorageConfig::new(fencing)
        .with_initial("counter", json!(7))
        .with_initial("set", json!([]));
    spawn(any, config).expect("storage starts on an ephemeral port")
}

async fn client(h: &StorageHandle) -> StorageClient {
    StorageClient::connect(h.addr()).await.expect("connects")
}

fn ok(r: Result<Reply, CallError>) -> (Value, u64) {
    match r {
        Ok(Reply::Ok { value, seq, .. }) => (value, seq),
        other => panic!("expected ok, got {other:?}"),
    }
}

fn rejected(r: Result<Reply, CallError>) -> (u64, u64) {
    match r {
        Ok(Reply::Rejected { seq, highest }) => (seq, highest),
        other => panic!("expected a stale-fence rejection, got {other:?}"),
    }
}

/// Poll `cond` until it holds or a generous deadline passes.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A raw line-oriented connection, for sending bytes the client never would.
struct Raw {
    rd: BufReader<tokio::net::tcp::OwnedReadHalf>,
    wr: tokio::net::tcp::OwnedWriteHalf,
}

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        let (rd, wr) = TcpStream::connect(addr).await.unwrap().into_split();
        Raw {
            rd: BufReader::new(rd),
            wr,
        }
    }
    async fn send(&mut self, bytes: &[u8]) {
        self.wr.write_all(bytes).await.unwrap();
    }
    async fn answer(&mut self) -> Value {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(10), self.rd.read_line(&mut line))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(n > 0, "connection closed instead of answering");
        serde_json::from_str(&line).unwrap()
    }
    /// True once the server has closed the connection (EOF).
    async fn closed(&mut self) -> bool {
        let mut buf = Vec::new();
        let read = self.rd.read_to_end(&mut buf);
        matches!(
            tokio::time::timeout(Duration::from_secs(10), read).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

#[derive(Default)]
struct VecSink(Mutex<Vec<Op>>);

impl Sink for VecSink {
    fn record(&self, op: Op) {
        self.0.lock().unwrap().push(op);
    }
}

#[tokio::test]
async fn fencing_on_rejects_lower_fences_and_accepts_equal_higher_unfenced() {
    let h = start(Fencing::On);
    let mut c = client(&h).await;
    assert_eq!(ok(c.read("counter", Some(34)).await).0, json!(7));
    let (s1, hi) = rejected(c.read("counter", Some(33)).await);
    assert_eq!(hi, 34);
    let (s2, hi) = rejected(c.write("counter", json!(8), Some(33)).await);
    assert_eq!(hi, 34);
    assert!(s2 > s1);
    assert_eq!(
        h.value("counter"),
        json!(7),
        "a rejected write changed nothing"
    );
    ok(c.write("counter", json!(8), Some(34)).await);
    ok(c.read("counter", Some(40)).await);
    ok(c.write("counter", json!(9), None).await);
    assert_eq!(ok(c.read("counter", None).await).0, json!(9));
    // Fences are per key: a low fence on another key passes.
    ok(c.write("set", json!([1]), Some(1)).await);
    let stats = h.stats();
    assert_eq!((stats.accepted, stats.rejected), (6, 2));
    assert_eq!(h.snapshot().highest_fence["counter"], 40);
}

#[tokio::test]
async fn fencing_off_accepts_everything_but_numbers_it() {
    let h = start(Fencing::Off);
    let mut c = client(&h).await;
    let (_, s1) = ok(c.read("counter", Some(34)).await);
    let (_, s2) = ok(c.write("counter", json!(8), Some(33)).await);
    let (v, s3) = ok(c.read("counter", Some(1)).await);
    assert_eq!(v, json!(8));
    assert!(s1 < s2 && s2 < s3);
    assert_eq!(h.stats().rejected, 0);
}

/// The read-modify-write race from the runner issue: A (fence 33) reads 7
/// and pauses; B (fence 34) reads 7; A writes 8. Fencing on bounces A's
/// write; fencing off lets it land. Recorded through `storage::record`.
async fn rmw_race(fencing: Fencing) -> Vec<Op> {
    let h = start(fencing);
    let sink = VecSink::default();
    let clock = RunClock::start();
    let (a, b) = (Process::Num(1), Process::Num(2));
    let mut ca = client(&h).await;
    let mut cb = client(&h).await;
    let ra = read_op(&mut ca, &sink, &clock, a.clone(), "counter", Some(33)).await;
    assert_eq!(ok(ra).0, json!(7));
    let rb = read_op(&mut cb, &sink, &clock, b.clone(), "counter", Some(34)).await;
    assert_eq!(ok(rb).0, json!(7));
    let _ = write_op(&mut ca, &sink, &clock, a, "counter", json!(8), Some(33)).await;
    let _ = write_op(&mut cb, &sink, &clock, b, "counter", json!(8), Some(34)).await;
    let ops = sink.0.into_inner().unwrap();
    assert_eq!(ops.len(), 8);
    for pair in ops.chunks(2) {
        assert_eq!(pair[0].kind, OpType::Invoke);
        assert!(pair[0].time <= pair[1].time);
        assert_eq!(
            (&pair[0].f, &pair[0].key, pair[0].fence),
            (&pair[1].f, &pair[1].key, pair[1].fence)
        );
    }
    ops
}

#[tokio::test]
async fn rmw_race_fencing_on_rejects_the_stale_write() {
    let ops = rmw_race(Fencing::On).await;
    let a_write = &ops[5];
    assert_eq!(
        (a_write.kind, a_write.error.as_deref()),
        (OpType::Fail, Some("stale-fence"))
    );
    assert_eq!(a_write.value, json!(8));
    assert!(
        a_write.seq.unwrap() > ops[3].seq.unwrap(),
        "numbered after B's read"
    );
    assert_eq!(ops[7].kind, OpType::Ok);
}

#[tokio::test]
async fn rmw_race_fencing_off_accepts_the_stale_write() {
    let ops = rmw_race(Fencing::Off).await;
    assert_eq!((ops[5].kind, ops[7].kind), (OpType::Ok, OpType::Ok));
    assert!(ops[5].seq.unwrap() < ops[7].seq.unwrap());
}

/// Many clients, random fences on one key: replayed in `seq` order, every
/// answer obeys the fence rule, and seqs are unique, per-client increasing
/// and without gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_unique_increasing_seqs_that_obey_the_rule() {
    let h = start(Fencing::On);
    let mut tasks = Vec::new();
    for c in 0..8u64 {
        let addr = h.addr();
        tasks.push(tokio::spawn(async move {
            let mut cl = StorageClient::connect(addr).await.unwrap();
            let mut seen = Vec::new();
            for i in 0..150u64 {
                let fence = (c * 7919 + i * 104_729) % 1000;
                let key = if i % 3 == 0 { "other" } else { "counter" };
                let r = if i % 2 == 0 {
                    cl.read(key, Some(fence)).await
                } else {
                    cl.write(key, json!(i), Some(fence)).await
                };
                seen.push((key, fence, r.unwrap()));
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let seen = t.await.unwrap();
        let seqs: Vec<u64> = seen.iter().map(|(_, _, r)| r.seq()).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "per-client seqs increase"
        );
        all.extend(seen);
    }
    all.sort_by_key(|(_, _, r)| r.seq());
    let seqs: Vec<u64> = all.iter().map(|(_, _, r)| r.seq()).collect();
    assert_eq!(
        seqs,
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "unique, no gaps"
    );
    let mut highest = std::collections::HashMap::new();
    for (key, fence, r) in &all {
        let h = highest.entry(*key).or_insert(0u64);
        match r {
            Reply::Ok { .. } => {
                assert!(*fence >= *h, "accepted fence {fence} below {h}");
                *h = *fence;
            }
            Reply::Rejected { highest, .. } => {
                assert!(
                    *fence < *h && *highest == *h,
                    "rejected {fence} vs {h}/{highest}"
                );
            }
            Reply::Conflict { .. } => panic!("no conditional write was sent: {r:?}"),
        }
    }
    let stats = h.stats();
    assert_eq!(stats.accepted + stats.rejected, all.len() as u64);
    assert!(stats.rejected > 0, "random fences produce rejections");
}

/// Conditional writes over the wire: clients that read the counter and its
/// version, then write +1 at that version and retry on a conflict, lose no
/// increment, and the conflicts really happened (the writes raced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_increments_from_racing_clients_lose_nothing() {
    let h = start(Fencing::Off);
    let (clients, each) = (6u64, 40u64);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let addr = h.addr();
        tasks.push(tokio::spawn(async move {
            let mut cl = StorageClient::connect(addr).await.unwrap();
            let mut conflicts = 0u64;
            for _ in 0..each {
                loop {
                    let Reply::Ok { value, version, .. } = cl.read("counter", None).await.unwrap()
                    else {
                        panic!("an unfenced read is never refused");
                    };
                    tokio::task::yield_now().await;
                    let next = json!(value.as_i64().unwrap() + 1);
                    match cl.write_if("counter", next, None, version).await.unwrap() {
                        Reply::Ok { version: v, .. } => {
                            assert_eq!(v, version + 1, "an applied write moves the version by one");
                            break;
                        }
                        Reply::Conflict { version: now, .. } => {
                            assert!(now > version, "a conflict means the version moved on");
                            conflicts += 1;
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    let mut c = client(&h).await;
    let (value, _) = ok(c.read("counter", None).await);
    assert_eq!(value, json!(7 + clients * each), "no increment lost");
    let snap = h.snapshot();
    assert_eq!(snap.conflicts, conflicts);
    assert!(
        conflicts > 0,
        "six racing clients never conflicted: the test proves nothing"
    );
    let mut raw = Raw::connect(h.addr()).await;
    raw.send(b"{\"id\":4,\"op\":\"write\",\"key\":\"counter\",\"value\":0,\"version\":0}\n")
        .await;
    let a = raw.answer().await;
    assert_eq!(a["status"], "version-conflict", "{a}");
    assert_eq!(a["version"], json!(clients * each), "{a}");
    assert!(a["seq"].as_u64().is_some(), "{a}");
}

#[tokio::test]
async fn malformed_requests_get_an_error_and_harm_nobody() {
    let h = start(Fencing::On);
    let mut other = client(&h).await;
    let mut raw = Raw::connect(h.addr()).await;
    raw.send(b"this is not json\n").await;
    let a = raw.answer().await;
    assert_eq!(a["status"], "bad-request");
    assert!(a.get("seq").is_none(), "nothing numbered: {a}");
    raw.send(b"{\"id\":5,\"op\":\"write\",\"key\":\"counter\",\"fencing\":1,\"value\":2}\n")
        .await;
    let a = raw.answer().await;
    assert_eq!(
        (a["status"].as_str(), a["id"].as_u64()),
        (Some("bad-request"), Some(5))
    );
    raw.send(b"\n  \n{\"id\":6,\"op\":\"read\",\"key\":\"counter\"}\n")
        .await;
    let a = raw.answer().await;
    assert_eq!(
        (a["status"].as_str(), a["value"].as_i64()),
        (Some("ok"), Some(7))
    );
    assert_eq!(ok(other.read("counter", Some(3)).await).0, json!(7));
    assert_eq!(h.stats().malformed, 2);
    assert_eq!(h.value("counter"), json!(7));
}

#[tokio::test]
async fn an_overlong_line_is_refused_and_its_connection_closed() {
    let h = start(Fencing::On);
    let mut raw = Raw::connect(h.addr()).await;
    // Exactly one byte over the limit, so the server consumes everything
    // sent and closes cleanly (no reset over unread bytes).
    let huge = vec![b'x'; lockjaw::storage::protocol::MAX_LINE + 1];
    raw.send(&huge).await;
    assert_eq!(raw.answer().await["status"], "bad-request");
    assert!(raw.closed().await);
    assert_eq!(ok(client(&h).await.read("counter", None).await).0, json!(7));
}

#[tokio::test]
async fn unfinished_lines_of_all_connections_share_one_bound() {
    let mut config = StorageConfig::new(Fencing::On).with_initial("counter", json!(7));
    config.max_partial_bytes = 64 * 1024;
    let h = spawn("127.0.0.1:0".parse().unwrap(), config).unwrap();
    // Leading blanks are part of a request line; each connection holds
    // 20,000 bytes of one, unfinished.
    let blanks = vec![b' '; 20_000];
    let mut conns = Vec::new();
    for i in 1..=3 {
        let mut c = Raw::connect(h.addr()).await;
        c.send(&blanks).await;
        eventually("the server holds the bytes", || {
            h.partial_bytes() == 20_000 * i
        })
        .await;
        conns.push(c);
    }
    // A fourth would pass 64 KiB over all connections: refused, closed.
    let mut fourth = Raw::connect(h.addr()).await;
    fourth.send(&blanks).await;
    let a = fourth.answer().await;
    assert_eq!(a["status"], "bad-request", "{a}");
    assert!(
        a["message"].as_str().unwrap().contains("65536 bytes"),
        "{a}"
    );
    assert!(fourth.closed().await);
    eventually("the refused bytes are given back", || {
        h.partial_bytes() == 60_000
    })
    .await;
    // The others finish their lines and are answered; their bytes are
    // given back.
    for c in &mut conns {
        c.send(b"{\"op\":\"read\",\"key\":\"counter\"}\n").await;
        let a = c.answer().await;
        assert_eq!(
            (a["status"].as_str(), a["value"].as_i64()),
            (Some("ok"), Some(7))
        );
    }
    assert_eq!(h.partial_bytes(), 0);
    assert_eq!(h.stats().malformed, 1);
}

#[test]
fn the_help_says_there_is_no_authentication() {
    for flag in ["-h", "--help"] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_lockjaw"))
            .args(["storage", flag])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(
            help.contains("no authentication") && help.contains("loopback or a private network"),
            "{help}"
        );
    }
    let doc = include_str!("../../docs/storage.md");
    assert!(doc.contains("It has no authentication"), "docs/storage.md");
}

#[tokio::test]
async fn a_partial_request_at_eof_is_never_applied() {
    let h = start(Fencing::Off);
    let mut raw = Raw::connect(h.addr()).await;
    raw.send(br#"{"op":"write","key":"counter","value":99}"#)
        .await;
    raw.wr.shutdown().await.unwrap();
    assert!(raw.closed().await);
    eventually("connection gone", || h.open_connections() == 0).await;
    assert_eq!(h.value("counter"), json!(7));
    assert_eq!(h.stats().last_seq, 0);
}

/// A paused client's write that arrives late (its line completes after
/// another client's request) is numbered and judged when it lands.
async fn late_write(fencing: Fencing) -> (Value, Value) {
    let h = start(fencing);
    let mut a = Raw::connect(h.addr()).await;
    a.send(br#"{"id":1,"op":"write","key":"counter","value":8,"fe"#)
        .await;
    let mut b = client(&h).await;
    let (_, b_seq) = ok(b.read("counter", Some(34)).await);
    a.send(b"nce\":33}\n").await;
    let answer = a.answer().await;
    assert!(
        answer["seq"].as_u64().unwrap() > b_seq,
        "numbered on arrival: {answer}"
    );
    (answer, h.value("counter"))
}

#[tokio::test]
async fn a_late_write_is_judged_when_it_lands() {
    let (answer, value) = late_write(Fencing::On).await;
    assert_eq!(
        (answer["status"].as_str(), answer["highest"].as_u64()),
        (Some("stale-fence"), Some(34))
    );
    assert_eq!(value, json!(7));
    let (answer, value) = late_write(Fencing::Off).await;
    assert_eq!(answer["status"], "ok");
    assert_eq!(value, json!(8));
}

#[tokio::test]
async fn shutdown_closes_every_connection_and_stops_listening() {
    let mut h = start(Fencing::On);
    let addr = h.addr();
    let mut c = client(&h).await;
    let mut raw = Raw::connect(addr).await;
    ok(c.read("counter", None).await);
    eventually("both connections open", || h.open_connections() == 2).await;
    h.shutdown();
    h.shutdown(); // idempotent
    assert_eq!(h.open_connections(), 0);
    assert!(raw.closed().await, "raw connection closed by the server");
    let err = c.read("counter", None).await.unwrap_err();
    assert!(
        err.is_indeterminate(),
        "a call on a closed connection: {err}"
    );
    let err = c.read("counter", None).await.unwrap_err();
    assert!(
        matches!(err, CallError::Connect { .. }),
        "no listener after shutdown: {err}"
    );
}

#[tokio::test]
async fn disconnect_all_closes_old_connections_and_clients_reconnect() {
    let h = start(Fencing::On);
    let mut c = client(&h).await;
    ok(c.write("counter", json!(1), Some(5)).await);
    h.disconnect_all();
    assert_eq!(h.open_connections(), 0);
    let err = c.read("counter", Some(5)).await.unwrap_err();
    assert!(err.is_indeterminate(), "{err}");
    assert!(!c.is_connected());
    let (v, _) = ok(c.read("counter", Some(5)).await);
    assert_eq!(
        v,
        json!(1),
        "state survives disconnects; the client reconnected"
    );
    assert_eq!(h.snapshot().highest_fence["counter"], 5);
}

#[tokio::test]
async fn a_silent_peer_times_out_as_info_and_the_client_reconnects() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s); // accept, never answer
        }
    });
    let config = ClientConfig {
        timeout: Duration::from_millis(200),
    };
    let mut c = StorageClient::connect_with(addr, config).await.unwrap();
    let sink = VecSink::default();
    let clock = RunClock::start();
    let r = write_op(
        &mut c,
        &sink,
        &clock,
        Process::Num(4),
        "counter",
        json!(3),
        Some(2),
    )
    .await;
    assert!(matches!(r, Err(CallError::Timeout(_))), "{r:?}");
    let ops = sink.0.into_inner().unwrap();
    assert_eq!(
        (ops[1].kind, ops[1].error.as_deref()),
        (OpType::Info, Some("timeout"))
    );
    assert!(
        ops[1].time - ops[0].time >= 200_000_000,
        "completion after the deadline"
    );
    assert!(!c.is_connected(), "the abandoned stream is dropped");
    hold.abort();
}

#[tokio::test]
async fn connecting_to_nothing_is_a_definite_failure() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = StorageClient::connect(port)
        .await
        .err()
        .expect("nobody listens");
    assert!(!err.is_indeterminate(), "{err}");
}

/// Connections accepted but not yet served when the server stops are
/// counted and closed too (regression: the count leaked for tasks aborted
/// before their first poll).
#[tokio::test]
async fn shutdown_right_after_many_connects_leaves_none_open() {
    for _ in 0..5 {
        let mut h = start(Fencing::On);
        let mut raws = Vec::new();
        for _ in 0..20 {
            raws.push(Raw::connect(h.addr()).await);
        }
        h.shutdown();
        assert_eq!(h.open_connections(), 0);
        for raw in &mut raws {
            assert!(raw.closed().await);
        }
    }
}
