//! The adapter machinery against small fake adapters (Python scripts in a
//! temporary directory); the real libraries' adapters are tested end to end
//! in `tests/systems/`.

use super::*;
use crate::history::clock::RunClock;
use crate::history::{Op, Process, Sink};
use std::path::Path;
use std::sync::Mutex;

#[derive(Default)]
struct Ops(Mutex<Vec<Op>>);

impl Sink for Ops {
    fn record(&self, op: Op) {
        self.0.lock().unwrap().push(op);
    }
}

const PRELUDE: &str = r#"#!/usr/bin/python3
import json, os, sys, time
def send(m): sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def offer(**kw):
    m = {"type": "hello_ok", "library": "fake", "version": "0.1", "fence": False,
         "lease": "acquire", "renewals": "none"}
    m.update(kw); send(m)
hello = json.loads(sys.stdin.readline())
"#;

fn fake(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("{PRELUDE}{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn hello() -> Hello {
    Hello::new("redis", vec!["127.0.0.1:1".into()], "k", 2000)
}

fn offer() -> Offer {
    Offer {
        library: "fake".into(),
        version: "0.1".into(),
        fence: false,
        lease: LeaseStart::Acquire,
        renewals: Renewals::None,
        auth: false,
        promises: Default::default(),
    }
}

struct Harness {
    ops: Arc<Ops>,
    fatal: Arc<Mutex<Vec<String>>>,
    cfg: AdapterConfig,
}

fn harness(path: PathBuf, op_timeout: Duration) -> Harness {
    let ops = Arc::new(Ops::default());
    let fatal = Arc::new(Mutex::new(Vec::new()));
    let f = fatal.clone();
    let h = hello();
    let clock = RunClock::from_raw(h.clock_origin_ns);
    let cfg = AdapterConfig {
        path,
        env: Vec::new(),
        hello: h,
        op_timeout,
        offer: offer(),
        events: Some(LeaseRecorder::new(
            ops.clone(),
            Process::Named("0-adapter".into()),
            clock,
        )),
        reported_only: false,
        fatal: Arc::new(move |m| f.lock().unwrap().push(m)),
    };
    Harness { ops, fatal, cfg }
}

#[tokio::test]
async fn a_pin_sets_and_removes_the_adapters_variables() {
    let d = tempfile::tempdir().unwrap();
    let echo = fake(
        d.path(),
        "echo",
        "e = os.environ\noffer(version=e.get('LOCKJAW_CLIENT_VERSION', '-') + ' ' + \
         e.get('LOCKJAW_CLIENT_ENV', '-') + ' ' + e.get('LOCKJAW_CLIENT_SOURCE', '-'))\n",
    );
    let vd = Path::new("/c/fake/versions/2.1");
    let env = version::env(&version::Pin::Version("2.1".into()), Some(vd));
    let Answer::Offer(o) = query(&echo, &env, &hello()).await.unwrap() else {
        panic!("an offer expected")
    };
    assert_eq!(o.version, "2.1 /c/fake/versions/2.1 -");
    let env = version::env(&version::Pin::Source("/src/lib".into()), None);
    let Answer::Offer(o) = query(&echo, &env, &hello()).await.unwrap() else {
        panic!("an offer expected")
    };
    assert_eq!(o.version, "- - /src/lib");
}

#[tokio::test]
async fn the_handshake_answer_is_read_and_bad_answers_name_the_adapter() {
    let d = tempfile::tempdir().unwrap();
    let ok = fake(d.path(), "ok", "offer(fence=True)\n");
    let Answer::Offer(o) = query(&ok, &Vec::new(), &hello()).await.unwrap() else {
        panic!("an offer expected")
    };
    assert!(o.fence && o.title() == "fake 0.1");
    let no = fake(
        d.path(),
        "no",
        "send({'type': 'unsupported', 'reason': 'only ZooKeeper'})\n",
    );
    assert_eq!(
        query(&no, &Vec::new(), &hello()).await.unwrap(),
        Answer::Unsupported("only ZooKeeper".into())
    );
    let garbage = fake(
        d.path(),
        "garbage",
        "print('starting up...'); sys.stdout.flush()\n",
    );
    let e = query(&garbage, &Vec::new(), &hello()).await.unwrap_err();
    assert!(
        e.contains("adapter ") && e.contains("garbage: stdout line 1: not JSON"),
        "{e}"
    );
    assert!(e.contains("starting up"), "{e}");
    let dies = fake(d.path(), "dies", "sys.exit(7)\n");
    let e = query(&dies, &Vec::new(), &hello()).await.unwrap_err();
    assert!(
        e.contains("exited during the handshake") && e.contains('7'),
        "{e}"
    );
    let hangs = fake(d.path(), "hangs", "time.sleep(30)\n");
    let t = std::time::Instant::now();
    let e = query_within(&hangs, &hello(), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(e.contains("no answer to the handshake within 300ms"), "{e}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the hung adapter is killed"
    );
    let early = fake(d.path(), "early", "send({'type': 'ok', 'id': 1})\n");
    let e = query(&early, &Vec::new(), &hello()).await.unwrap_err();
    assert!(e.contains("answered the handshake with an ok reply"), "{e}");
}

#[tokio::test]
async fn requests_get_their_replies_and_events_become_ops() {
    let d = tempfile::tempdir().unwrap();
    let body = r#"offer()
for line in sys.stdin:
    q = json.loads(line)
    if q["type"] == "acquire":
        # The reply, then at once an event about the owner it granted.
        t = time.monotonic_ns()
        owner = "tok-" + str(q["ttl_ms"])
        send({"type": "ok", "id": q["id"], "owner": owner, "lease_ms": q["ttl_ms"]})
        send({"type": "renewed", "owner": owner, "lease_ms": 900, "sent_ns": t - 1000, "done_ns": t})
    elif q["type"] == "probe":
        send({"type": "ok", "id": q["id"], "lease_ms": 1500})
    elif q["type"] == "renew":
        send({"type": "lost", "owner": q["owner"], "reason": "expired"})
        send({"type": "fail", "id": q["id"], "error": "lease gone"})
    else:
        send({"type": "fail", "id": q["id"], "error": "not held"})
"#;
    let h = harness(fake(d.path(), "good", body), Duration::from_secs(5));
    let mut c = AdapterClient::start(h.cfg.clone()).await.unwrap();
    // In our process group, so pausing or killing the worker's group
    // reaches the library too.
    let pid = c.pid().unwrap() as i32;
    // SAFETY: getpgid only reads.
    assert_eq!(unsafe { libc::getpgid(pid) }, unsafe { libc::getpgid(0) });
    let g = c
        .acquire("k", Duration::from_millis(1234), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (g.owner.as_str(), g.lease, g.fence, g.acquire_sets_ttl),
        ("tok-1234", Duration::from_millis(1234), None, true)
    );
    assert!(c.can_probe());
    assert_eq!(
        c.probe(&g).await.unwrap(),
        Some(Duration::from_millis(1500))
    );
    assert!(!c.renew(&g).await.unwrap());
    assert!(!c.release(&g).await.unwrap());
    assert!(h.fatal.lock().unwrap().is_empty());
    let ops = h.ops.0.lock().unwrap();
    let renew: Vec<&Op> = ops.iter().filter(|o| o.f == "renew").collect();
    assert_eq!(renew.len(), 2, "{ops:?}");
    assert_eq!(renew[1].time - renew[0].time, 1000);
    assert_eq!(renew[1].lease_ms, Some(900));
    assert_eq!(renew[1].owner.as_deref(), Some("tok-1234"));
    let lost: Vec<&Op> = ops.iter().filter(|o| o.f == LOST).collect();
    assert_eq!(lost.len(), 2);
    assert_eq!(lost[1].owner.as_deref(), Some("tok-1234"));
    assert_eq!(lost[1].value, Value::String("expired".into()));
}

#[tokio::test]
async fn a_grant_without_its_lease_and_a_reply_to_an_unsent_id_are_fatal() {
    let d = tempfile::tempdir().unwrap();
    let body = r#"offer()
for line in sys.stdin:
    q = json.loads(line)
    if q["type"] == "acquire":
        send({"type": "ok", "id": q["id"], "owner": "t"})
    else:
        send({"type": "ok", "id": q["id"] + 100})
"#;
    let h = harness(fake(d.path(), "leaseless", body), Duration::from_secs(5));
    let mut c = AdapterClient::start(h.cfg.clone()).await.unwrap();
    let e = c
        .acquire("k", Duration::from_secs(2), Duration::ZERO)
        .await
        .unwrap_err();
    assert!(!e.is_definite());
    {
        let f = h.fatal.lock().unwrap();
        assert!(
            f[0].contains("leaseless (worker 0): its reply to acquire")
                && f[0].contains("no `lease_ms`"),
            "{f:?}"
        );
    }
    let g = Grant {
        key: "k".into(),
        owner: "t".into(),
        fence: None,
        lease: Duration::from_secs(2),
        acquire_sets_ttl: true,
    };
    // The reader reports the stray reply; the request itself times out.
    let mut c = AdapterClient::start(AdapterConfig {
        op_timeout: Duration::from_millis(300),
        ..h.cfg.clone()
    })
    .await
    .unwrap();
    assert!(c.release(&g).await.is_err());
    let f = h.fatal.lock().unwrap();
    assert!(
        f.iter()
            .any(|m| m.contains("stdout line 2: a reply to id 101, which it was never sent")),
        "{f:?}"
    );
}

#[tokio::test]
async fn no_reply_is_info_and_the_adapter_is_replaced() {
    let d = tempfile::tempdir().unwrap();
    // The first process never answers an acquire; its successor does.
    let marker = d.path().join("started");
    let body = format!(
        r#"offer()
first = not os.path.exists({m:?})
open({m:?}, "a").write(str(os.getpid()) + "\n")
for line in sys.stdin:
    q = json.loads(line)
    if first:
        continue
    send({{"type": "ok", "id": q["id"], "owner": str(os.getpid()), "lease_ms": 1000}})
"#,
        m = marker.display().to_string()
    );
    let h = harness(fake(d.path(), "slow", &body), Duration::from_millis(300));
    let mut c = AdapterClient::start(h.cfg.clone()).await.unwrap();
    let e = c
        .acquire("k", Duration::from_secs(1), Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        !e.is_definite() && e.to_string().contains("no reply"),
        "{e}"
    );
    let g = c
        .acquire("k", Duration::from_secs(1), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let pids = std::fs::read_to_string(&marker).unwrap();
    let pids: Vec<&str> = pids.lines().collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert_eq!(g.owner, pids[1]);
    // The first process is gone.
    let first: i32 = pids[0].parse().unwrap();
    assert!(crate::process::ProcId::of(first).is_none_or(|p| !p.is_alive()));
    assert!(h.fatal.lock().unwrap().is_empty());
}

/// Issue 29: a lease that overflows the checks' arithmetic, a zero lease
/// from an adapter whose acquire starts the lease, and a `renewed` event
/// for an owner never granted are each refused, naming the adapter and the
/// line.
#[tokio::test]
async fn impossible_leases_and_renewals_of_strangers_are_fatal() {
    let d = tempfile::tempdir().unwrap();
    let body = r#"offer()
for line in sys.stdin:
    q = json.loads(line)
    ttl = q.get("ttl_ms")
    if ttl == 1:
        send({"type": "ok", "id": q["id"], "owner": "t1", "lease_ms": 2**63 + 5})
    elif ttl == 2:
        send({"type": "ok", "id": q["id"], "owner": "t2", "lease_ms": 0})
    elif q["type"] == "acquire":
        send({"type": "ok", "id": q["id"], "owner": "t3", "lease_ms": 1000})
    elif q["type"] == "probe":
        send({"type": "ok", "id": q["id"], "lease_ms": 2**63 + 5})
    else:
        t = time.monotonic_ns()
        send({"type": "renewed", "owner": "ghost", "lease_ms": 900, "sent_ns": t - 1000, "done_ns": t})
        send({"type": "ok", "id": q["id"]})
"#;
    let h = harness(fake(d.path(), "liar", body), Duration::from_secs(1));
    let mut c = AdapterClient::start(h.cfg.clone()).await.unwrap();
    for ms in [1, 2] {
        let e = c
            .acquire("k", Duration::from_millis(ms), Duration::ZERO)
            .await
            .unwrap_err();
        assert!(!e.is_definite(), "{e}");
    }
    let g = c
        .acquire("k", Duration::from_millis(3), Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    assert!(c.probe(&g).await.is_err());
    // The reader stops at the stranger's renewal: the renew gets no reply.
    assert!(c.renew(&g).await.is_err());
    let f = h.fatal.lock().unwrap().clone();
    let has = |what: &str| {
        f.iter()
            .any(|m| m.contains("liar (worker 0)") && m.contains(what))
    };
    assert!(has("its reply to acquire {\"type\": \"ok\", \"id\": 1, \"owner\": \"t1\", \"lease_ms\": 9223372036854775813} is refused: `lease_ms` 9223372036854775813 is longer than a day"), "{f:#?}");
    assert!(has("\"owner\": \"t2\", \"lease_ms\": 0} is refused: `lease_ms` 0, though its handshake said the acquire starts the lease"), "{f:#?}");
    assert!(
        has("stdout line 6: renewed event refused: `owner` was never granted"),
        "{f:#?}"
    );
    assert!(has("its reply to probe"), "{f:#?}");
    // Nothing of the stranger's renewal reached the history.
    assert!(h
        .ops
        .0
        .lock()
        .unwrap()
        .iter()
        .all(|o| o.owner.as_deref() != Some("ghost")));
}

#[test]
fn the_hello_carries_credentials_that_debug_never_shows() {
    use crate::auth::{Auth, Secret, SecretSource, User};
    let auth = Auth {
        user: Some(User {
            name: "locker".into(),
            password: Secret::new("pw-in-hello"),
            source: SecretSource::Env("X".into()),
        }),
        zookeeper_digest: Some(Secret::new("u:zk-in-hello")),
        ..Auth::default()
    };
    let mut hello = Hello::new("redis", vec!["127.0.0.1:1".into()], "lock", 2000);
    hello.auth = Credentials::of(&auth);
    let line = serde_json::to_string(&hello).unwrap();
    assert!(
        line.contains(r#""user":{"name":"locker","password":"pw-in-hello"}"#),
        "{line}"
    );
    assert!(
        line.contains(r#""zookeeper_digest":"u:zk-in-hello""#),
        "{line}"
    );
    let shown = format!("{hello:?}");
    assert!(!shown.contains("in-hello"), "{shown}");
    hello.auth = hello.auth.map(Credentials::without_secrets);
    let line = serde_json::to_string(&hello).unwrap();
    assert!(
        !line.contains("in-hello") && line.contains(r#""name":"locker""#),
        "{line}"
    );
    assert!(Credentials::of(&Auth::default()).is_none());
}
