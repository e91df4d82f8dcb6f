//! A library that renews its own leases (an adapter whose `hello_ok` says
//! `renewals = "all"`): the worker sends it no `renew` request even when
//! the workload renews and the hold is longer than half the lease, and the
//! adapter's `renewed` events are what extend the lease for the checker.
//! Two workers, each a fake adapter process (a Python script) sharing one
//! lock file, and the real storage server on a loopback port.

use super::tests::{Phases, VecSink};
use super::*;
use crate::client::adapter::{AdapterClient, AdapterConfig, Hello, LeaseStart, Offer, Renewals};
use crate::client::LeaseRecorder;
use crate::storage::{spawn, Fencing, StorageClient, StorageConfig};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// The fake library: a grant creates the lock file (`fail` `held` when it
/// exists) and starts a thread that renews every 100 ms and reports each
/// renewal as a `renewed` event; a release stops it and removes the file.
/// It logs every request's type; a probe fails (this library cannot prove
/// a lease), so nothing but the events extends one.
const FAKE: &str = r#"#!/usr/bin/python3
import json, os, sys, threading, time
out = threading.Lock()
def send(m):
    with out:
        sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
hello = json.loads(sys.stdin.readline())
send({"type": "hello_ok", "library": "fake-renewing", "version": "1", "fence": False,
      "lease": "acquire", "renewals": "all"})
lock, log = os.environ["FAKE_LOCK"], os.environ["FAKE_LOG"]
stop = None
def renew(owner, ev):
    while not ev.wait(0.1):
        t = time.monotonic_ns()
        send({"type": "renewed", "owner": owner, "lease_ms": 300, "sent_ns": t,
              "done_ns": time.monotonic_ns()})
for line in sys.stdin:
    q = json.loads(line)
    with open(log, "a") as f:
        f.write(q["type"] + "\n")
    if q["type"] == "acquire":
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            send({"type": "fail", "id": q["id"], "error": "held"}); continue
        owner = "w%d-%d" % (hello["worker"], time.monotonic_ns())
        stop = threading.Event()
        threading.Thread(target=renew, args=(owner, stop), daemon=True).start()
        send({"type": "ok", "id": q["id"], "owner": owner, "lease_ms": 300})
    elif q["type"] == "release":
        stop.set()
        os.unlink(lock)
        send({"type": "ok", "id": q["id"]})
    else:
        send({"type": "fail", "id": q["id"], "error": "cannot " + q["type"]})
"#;

fn fake(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("fake-renewing");
    std::fs::write(&p, FAKE).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A fenced-counter workload that renews, holding 700 ms of a 300 ms
/// lease (the half-lease rule waived, as for such a library).
fn long_hold() -> Workload {
    let mut w = crate::workload::load("fenced-counter", &Default::default()).unwrap();
    (w.hold_ms, w.ttl_ms, w.think_ms, w.renew) = (700, 300, 5, true);
    w
}

async fn worker(
    dir: &Path,
    slot: usize,
    sink: &Arc<VecSink>,
    clock: RunClock,
    storage: std::net::SocketAddr,
) -> Stepper {
    let mut hello = Hello::new("redis", vec!["127.0.0.1:1".into()], "lockjaw", 300);
    hello.clock_origin_ns = clock.start_raw_ns();
    hello.worker = slot;
    let cfg = AdapterConfig {
        path: fake(dir),
        env: vec![
            (
                "FAKE_LOCK".into(),
                Some(dir.join("lock").display().to_string()),
            ),
            (
                "FAKE_LOG".into(),
                Some(dir.join(format!("log-{slot}")).display().to_string()),
            ),
        ],
        hello,
        op_timeout: Duration::from_secs(2),
        offer: Offer {
            library: "fake-renewing".into(),
            version: "1".into(),
            fence: false,
            lease: LeaseStart::Acquire,
            renewals: Renewals::All,
            auth: false,
            promises: Default::default(),
        },
        events: Some(LeaseRecorder::new(
            sink.clone(),
            Process::Named(format!("{slot}-adapter")),
            clock,
        )),
        reported_only: false,
        fatal: Arc::new(|m| panic!("{m}")),
    };
    let lock = AdapterClient::start(cfg).await.unwrap();
    let sc = StorageClient::connect(storage).await.unwrap();
    let procs = Procs {
        current: slot as i64,
        stride: 2,
    };
    Stepper::new(long_hold(), Box::new(lock), Some(Box::new(sc)), procs, true)
}

/// Step until granted once (at most 200 tries).
async fn until_granted(s: &mut Stepper, env: &Env<'_>) {
    for _ in 0..200 {
        if s.step(env).await.acquired {
            return;
        }
    }
    panic!("never granted");
}

fn check(ops: &[Op]) -> crate::check::lock::LockReport {
    let meta: crate::history::Meta = serde_json::from_value(json!({
        "checkers": ["lock"], "workload": "fenced-counter", "acquire_sets_ttl": true,
        "ttl_ms": 300, "fencing": "off", "initial": 0, "op_timeout_ms": 2000,
        "client": {"renewals": "all"}
    }))
    .unwrap();
    let mut ops = ops.to_vec();
    for (i, o) in ops.iter_mut().enumerate() {
        o.index = i as u64;
    }
    crate::check::lock::check_ops(&meta, ops.into_iter().map(Ok)).unwrap()
}

#[tokio::test]
async fn a_library_that_renews_is_not_renewed_by_lockjaw_and_its_events_extend_the_lease() {
    let d = tempfile::tempdir().unwrap();
    let h = spawn(
        "127.0.0.1:0".parse().unwrap(),
        StorageConfig::new(Fencing::Off).with_initial("counter", json!(0)),
    )
    .unwrap();
    let sink = Arc::new(VecSink::default());
    let phases = Phases::default();
    let clock = RunClock::start();
    let env = Env {
        clock,
        sink: sink.as_ref(),
        notify: &phases,
    };
    let mut a = worker(d.path(), 0, &sink, clock, h.addr()).await;
    let mut b = worker(d.path(), 1, &sink, clock, h.addr()).await;
    tokio::join!(until_granted(&mut a, &env), until_granted(&mut b, &env));
    let ops = sink.0.lock().unwrap().clone();
    // No renew request reached either library.
    for slot in 0..2 {
        let log = std::fs::read_to_string(d.path().join(format!("log-{slot}"))).unwrap();
        assert!(!log.lines().any(|l| l == "renew"), "worker {slot}: {log}");
        assert!(log.lines().any(|l| l == "release"), "worker {slot}: {log}");
    }
    // lockjaw's "-lease" ops are its probes (which this library fails),
    // none a success; the library's renewals are the adapter's events.
    let ok_renews = |suffix: &str| {
        ops.iter()
            .filter(|o| {
                o.f == "renew"
                    && o.kind == OpType::Ok
                    && matches!(&o.process, Process::Named(n) if n.ends_with(suffix))
            })
            .count()
    };
    assert_eq!(ok_renews("-lease"), 0, "{ops:?}");
    assert!(ok_renews("-adapter") >= 8, "{ops:?}");
    let writes =
        |r: &crate::check::lock::LockReport| r.unprotected_writes.as_ref().unwrap().after_lease_end;
    let r = check(&ops);
    // The service's checks (the history has no final read for the
    // resource's).
    assert_eq!(r.service.valid, crate::check::Validity::True, "{r:?}");
    assert_eq!(r.stale_holders.stale, 0);
    // Each write came 700 ms into a 300 ms lease the events kept alive.
    assert_eq!(writes(&r), Some(0), "{:?}", r.unprotected_writes);
    // Without the events the same writes are past their leases' end:
    // the events, nothing else, extended them.
    let without: Vec<Op> = ops
        .iter()
        .filter(|o| !matches!(&o.process, Process::Named(n) if n.ends_with("-adapter")))
        .cloned()
        .collect();
    assert_eq!(writes(&check(&without)), Some(2));
}
