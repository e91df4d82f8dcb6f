//! Tests of `learn` on small hand-written run directories: a history (two
//! workers, a grant, a protected write, an adapter's renewal, releases),
//! its wire.jsonl, run.json, and results.json as `lockjaw check` writes it.

use super::*;
use serde_json::{json, Value};

const MS: u64 = 1_000_000;
const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// One op: (process, type, f, time in ms, extra fields).
fn op(p: Value, kind: &str, f: &str, ms: u64, extra: Value) -> Value {
    let mut o = json!({"process": p, "type": kind, "f": f, "time": ms * MS});
    if let (Some(o), Some(x)) = (o.as_object_mut(), extra.as_object()) {
        o.extend(x.clone());
    }
    o
}

fn lock(owner: &str) -> Value {
    json!({"key": "lock", "owner": owner})
}

/// Worker 0: granted at 10 ms (`tok-a`), reads and writes the counter,
/// its adapter reports a renewal (40–45 ms), releases 60–70 ms. Worker 1:
/// refused at 5–8 ms, asks again 5 ms before `w1_grant` ms and is granted
/// then (`tok-b`), releases
/// 150–160 ms.
fn history(w1_grant: u64) -> Vec<Value> {
    let granted = |o: &str| json!({"key": "lock", "owner": o, "lease_ms": 1000});
    let mut ops = vec![
        op(json!(0), "invoke", "acquire", 0, json!({"key": "lock"})),
        op(json!(1), "invoke", "acquire", 5, json!({"key": "lock"})),
        op(json!(1), "fail", "acquire", 8, json!({"key": "lock"})),
        op(json!(0), "ok", "acquire", 10, granted("tok-a")),
        op(json!(0), "invoke", "read", 20, json!({"key": "counter"})),
        op(
            json!(0),
            "ok",
            "read",
            22,
            json!({"key": "counter", "value": 0, "seq": 1}),
        ),
        op(
            json!(0),
            "invoke",
            "write",
            24,
            json!({"key": "counter", "value": 1}),
        ),
        op(
            json!(0),
            "ok",
            "write",
            30,
            json!({"key": "counter", "value": 1, "seq": 2}),
        ),
        op(json!("0-adapter"), "invoke", "renew", 40, lock("tok-a")),
        op(json!("0-adapter"), "ok", "renew", 45, lock("tok-a")),
        op(json!(0), "invoke", "release", 60, lock("tok-a")),
        op(json!(0), "ok", "release", 70, lock("tok-a")),
    ];
    ops.push(op(
        json!(1),
        "invoke",
        "acquire",
        w1_grant - 5,
        json!({"key": "lock"}),
    ));
    ops.push(op(json!(1), "ok", "acquire", w1_grant, granted("tok-b")));
    ops.push(op(json!(1), "invoke", "release", 150, lock("tok-b")));
    ops.push(op(json!(1), "ok", "release", 160, lock("tok-b")));
    ops.sort_by_key(|o| o["time"].as_u64());
    for (i, o) in ops.iter_mut().enumerate() {
        o["index"] = json!(i);
    }
    ops
}

/// A wire record: request or reply on worker `w`'s proxy to `n1`.
fn wire(w: u64, dir: &str, name: &str, seq: u64, ms: u64, extra: Value) -> Value {
    let mut r = json!({"t_ns": ms * MS, "proxy": format!("lockjaw-r-w{w}-n1"), "conn": 0,
        "dir": dir, "proto": "redis", "name": name, "seq": seq});
    if let (Some(o), Some(x)) = (r.as_object_mut(), extra.as_object()) {
        o.extend(x.clone());
    }
    r
}

fn wire_lines() -> Vec<Value> {
    let renew = json!({"sha1": A, "token": true});
    let release =
        json!({"sha1": B, "words": "if redis.call('get', KEYS[1]) == ARGV[1]", "token": true});
    let int1 = json!({"reply": "int:1"});
    vec![
        wire(0, "request", "SET", 1, 2, json!({})),
        wire(0, "reply", "SET", 1, 9, json!({"reply": "ok"})),
        wire(1, "request", "SET", 1, 6, json!({})),
        wire(1, "reply", "SET", 1, 7, json!({"reply": "nil"})),
        wire(0, "request", "PING", 2, 35, json!({"keepalive": true})),
        wire(0, "request", "GET", 3, 35, json!({})),
        wire(0, "request", "EVALSHA", 4, 41, renew.clone()),
        wire(0, "reply", "EVALSHA", 4, 44, int1.clone()),
        // A renewal the adapter did not report: the token, in the hold.
        wire(0, "request", "EVALSHA", 5, 50, renew),
        wire(0, "reply", "EVALSHA", 5, 52, int1.clone()),
        wire(0, "request", "EVALSHA", 6, 62, release.clone()),
        wire(0, "reply", "EVALSHA", 6, 66, json!({"reply": "error"})),
        wire(1, "request", "SET", 2, 106, json!({})),
        wire(1, "reply", "SET", 2, 108, json!({"reply": "ok"})),
        wire(1, "request", "EVALSHA", 3, 151, release),
        wire(1, "reply", "EVALSHA", 3, 155, int1),
        wire(1, "request", "GET", 4, 200, json!({})),
        json!({"t_ns": 3 * MS, "proxy": "lockjaw-r-w0-storage", "conn": 0, "dir": "request",
            "proto": "opaque", "name": "JSON lines (lockjaw's storage)", "seq": 0}),
    ]
}

fn lines(v: &[Value]) -> String {
    v.iter().map(|l| format!("{l}\n")).collect()
}

/// A run directory as `lockjaw run --tap-wire` leaves it.
fn run_dir(root: &Path, name: &str, w1_grant: u64) -> PathBuf {
    let d = root.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let meta = json!({"type": "meta", "checkers": ["lock"], "workload": "fenced-counter",
        "acquire_sets_ttl": true, "initial": 0, "ttl_ms": 1000});
    let mut h = vec![meta];
    h.extend(history(w1_grant));
    let hist = d.join(crate::report::rundir::HISTORY);
    std::fs::write(&hist, lines(&h)).unwrap();
    let run = json!({"system": "redis", "ttl_ms": 1000, "duration_s": 1.5,
        "workload": {"name": "fenced-counter", "concurrency": 2, "ttl_ms": 1000}});
    std::fs::write(d.join(crate::report::rundir::RUN), run.to_string()).unwrap();
    let r = crate::check::check_history(&hist, &Default::default()).unwrap();
    let results = serde_json::to_string(&r).unwrap();
    std::fs::write(d.join(crate::report::rundir::RESULTS), results).unwrap();
    std::fs::write(d.join(tap::FILE), lines(&wire_lines())).unwrap();
    d
}

fn kind<'a>(l: &'a Learned, command: &str, sha1: Option<&str>) -> &'a RequestKind {
    l.kinds
        .iter()
        .find(|k| k.command == command && k.sha1.as_deref() == sha1)
        .unwrap_or_else(|| panic!("no {command} {sha1:?} in {:?}", l.kinds))
}

fn set(p: &[Phase]) -> BTreeSet<Phase> {
    p.iter().copied().collect()
}

#[test]
fn each_request_gets_its_worker_phase_and_kind() {
    let d = tempfile::tempdir().unwrap();
    let run = run_dir(d.path(), "a", 110);
    let l = learn(std::slice::from_ref(&run)).unwrap();
    let set_ = kind(&l, "SET", None);
    assert_eq!((set_.count, set_.errors), (3, 0));
    assert_eq!(set_.phases, set(&[Phase::Acquire]));
    let renew = kind(&l, "EVALSHA", Some(A));
    assert_eq!(renew.phases, set(&[Phase::Renew, Phase::Hold]));
    let release = kind(&l, "EVALSHA", Some(B));
    assert_eq!((release.count, release.errors), (2, 1));
    assert_eq!(release.phases, set(&[Phase::Release]));
    assert_eq!(
        release.label(),
        "EVALSHA bbbbbbbb (if redis.call('get', KEYS[1]) == ARGV[1])"
    );
    assert_eq!(
        kind(&l, "GET", None).phases,
        set(&[Phase::Hold, Phase::Idle])
    );
    assert!(
        l.kinds.iter().all(|k| k.command != "PING"),
        "keep-alives are no kind"
    );
    assert!(l.kinds.iter().all(|k| k.link == LinkKind::Lock));
    // The adapter's renewal, and the one only the wire showed.
    assert_eq!((l.wire_renewals, l.adapter_renewals), (2, 1));
    assert_eq!(
        l.opaque,
        [OpaqueLink {
            link: LinkKind::Storage,
            node: "storage".into(),
            why: "JSON lines (lockjaw's storage)".into()
        }]
    );
    // Round trips of the lock link: 1, 2, 2, 3, 4, 4, 7 ms.
    assert_eq!(l.rtt_ms, (3.0, 7.0));
    assert_eq!((l.lease_ms, l.run_secs), (1000, 1.5));
    assert!(l.anomalies.is_empty(), "{:?}", l.anomalies);
    assert_eq!(l.runs, [run]);
}

#[test]
fn runs_merge_and_an_anomaly_of_a_learn_run_is_kept() {
    let d = tempfile::tempdir().unwrap();
    let clean = run_dir(d.path(), "clean", 110);
    // Worker 1 granted at 20 ms while worker 0 holds until 60 ms.
    let two = run_dir(d.path(), "two", 20);
    let l = learn(&[clean, two.clone()]).unwrap();
    assert_eq!(kind(&l, "SET", None).count, 6);
    assert_eq!(l.wire_renewals, 4);
    assert_eq!(l.anomalies, [(two, "two-holders".to_string(), 1)]);
}

#[test]
fn what_is_missing_is_named() {
    let d = tempfile::tempdir().unwrap();
    let run = run_dir(d.path(), "a", 110);
    assert!(learn(&[]).unwrap_err().contains("no learn run"));
    std::fs::remove_file(run.join(tap::FILE)).unwrap();
    let e = learn(std::slice::from_ref(&run)).unwrap_err();
    assert!(
        e.contains("wire.jsonl: missing") && e.contains("--tap-wire"),
        "{e}"
    );
    std::fs::write(run.join(tap::FILE), "").unwrap();
    assert!(learn(std::slice::from_ref(&run))
        .unwrap_err()
        .contains("no record"));
    let bad = json!({"t_ns": 1, "proxy": "someone-else", "conn": 0, "dir": "request",
        "proto": "redis", "name": "GET", "seq": 1});
    std::fs::write(run.join(tap::FILE), lines(&[bad])).unwrap();
    let e = learn(std::slice::from_ref(&run)).unwrap_err();
    assert!(
        e.contains("proxy `someone-else` is not a worker's link"),
        "{e}"
    );
    std::fs::remove_file(run.join(crate::report::rundir::RESULTS)).unwrap();
    let e = learn(&[run]).unwrap_err();
    assert!(e.contains("results.json: missing"), "{e}");
}

#[test]
fn percentiles_and_success() {
    assert_eq!(percentile(&[], 0.5), 0);
    assert_eq!(percentile(&[1, 2, 3, 4], 0.5), 2);
    assert_eq!(percentile(&[1, 2, 3, 4], 0.99), 4);
    assert!(succeeded("ok") && succeeded("int:1") && succeeded("other"));
    assert!(!succeeded("int:0") && !succeeded("nil") && !succeeded("error"));
}

#[test]
fn a_library_that_renews_by_itself_has_its_wire_renewals_checked_against_its_events() {
    let d = tempfile::tempdir().unwrap();
    // lockjaw's own renewals are not checked: not the library's.
    let plain = run_dir(d.path(), "plain", 110);
    let l = learn(std::slice::from_ref(&plain)).unwrap();
    assert!(l.renewal_checks.is_empty(), "{:?}", l.renewal_checks);
    let run = run_dir(d.path(), "lib", 110);
    let hist = run.join(crate::report::rundir::HISTORY);
    let text = std::fs::read_to_string(&hist).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut meta: Value = serde_json::from_str(first).unwrap();
    meta["client"] = json!({"adapter": "x", "renewals": "all"});
    std::fs::write(&hist, format!("{meta}\n{rest}")).unwrap();
    let l = learn(std::slice::from_ref(&run)).unwrap();
    let [(dir, c)] = l.renewal_checks.as_slice() else {
        panic!("one check: {:?}", l.renewal_checks)
    };
    assert_eq!(dir, &run);
    // The adapter reported one of the two renewals the wire carried.
    assert_eq!((c.wire, c.events), (2, 1));
    assert!(c.events_unseen.is_empty(), "{c:?}");
    assert_eq!(c.wire_unreported.len(), 1, "{c:?}");
    assert!(c.disagrees());
    // On etcd the wire (gRPC) shows no renewal at all: nothing to check
    // the events against, so no check (not a "disagree").
    let run_json = run.join(crate::report::rundir::RUN);
    let text = std::fs::read_to_string(&run_json).unwrap();
    std::fs::write(&run_json, text.replace("\"redis\"", "\"etcd\"")).unwrap();
    let l = learn(std::slice::from_ref(&run)).unwrap();
    assert!(l.renewal_checks.is_empty(), "{:?}", l.renewal_checks);
}
