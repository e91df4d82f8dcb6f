//! Unit tests of the steps with an in-memory fake lock client and the real
//! storage server on an ephemeral loopback port.

use super::*;
use crate::storage::{spawn, Fencing, StorageClient, StorageConfig};
use async_trait::async_trait;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A lease lock in memory: one holder per key until release or expiry.
#[derive(Default)]
struct FakeService {
    held: HashMap<String, (String, Instant)>,
    fence: u64,
    next_owner: u64,
    /// Make the next acquire fail ambiguously.
    fail_next: bool,
    /// Probe leases (as an adapter does); the first probe fails ambiguously.
    probe_info_once: Option<bool>,
    /// How every renew goes wrong, if it does.
    renew_fault: Option<RenewFault>,
}

/// A renew that goes wrong.
#[derive(Clone, Copy, Debug)]
enum RenewFault {
    /// The service answers that the lease is gone.
    Gone,
    /// No answer in time (`info`).
    Timeout,
    /// It answers "held", but only after this long.
    Slow(Duration),
}

struct FakeLock(Arc<Mutex<FakeService>>);

#[async_trait]
impl LockClient for FakeLock {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        _wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let mut s = self.0.lock().unwrap();
        if std::mem::take(&mut s.fail_next) {
            return Err(ClientError::Indeterminate("timeout".into()));
        }
        if let Some((_, until)) = s.held.get(key) {
            if *until > Instant::now() {
                return Ok(None);
            }
        }
        s.fence += 1;
        s.next_owner += 1;
        let owner = format!("o{}", s.next_owner);
        s.held
            .insert(key.to_string(), (owner.clone(), Instant::now() + ttl));
        Ok(Some(Grant {
            key: key.to_string(),
            owner,
            fence: Some(s.fence),
            lease: ttl,
            acquire_sets_ttl: true,
        }))
    }

    async fn renew(&mut self, g: &Grant) -> Result<bool, ClientError> {
        let fault = self.0.lock().unwrap().renew_fault;
        match fault {
            Some(RenewFault::Gone) => return Ok(false),
            Some(RenewFault::Timeout) => return Err(ClientError::Indeterminate("timeout".into())),
            Some(RenewFault::Slow(d)) => tokio::time::sleep(d).await,
            None => {}
        }
        let mut s = self.0.lock().unwrap();
        match s.held.get_mut(&g.key) {
            Some((o, until)) if *o == g.owner => {
                *until = Instant::now() + g.lease;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&mut self, g: &Grant) -> Result<bool, ClientError> {
        let mut s = self.0.lock().unwrap();
        if s.held.get(&g.key).is_some_and(|(o, _)| *o == g.owner) {
            s.held.remove(&g.key);
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn can_probe(&self) -> bool {
        self.0.lock().unwrap().probe_info_once.is_some()
    }

    async fn probe(&mut self, g: &Grant) -> Result<Option<Duration>, ClientError> {
        let mut s = self.0.lock().unwrap();
        if s.probe_info_once.replace(false) == Some(true) {
            return Err(ClientError::Indeterminate("timeout".into()));
        }
        Ok(Some(g.lease))
    }
}

#[derive(Default)]
pub(crate) struct VecSink(pub(crate) Mutex<Vec<Op>>);

impl Sink for VecSink {
    fn record(&self, op: Op) {
        self.0.lock().unwrap().push(op);
    }
}

#[derive(Default)]
pub(crate) struct Phases(pub(crate) Mutex<Vec<Phase>>);

impl Notify for Phases {
    fn state(&self, ev: StateEvent) {
        self.0.lock().unwrap().push(ev.phase);
    }
}

fn workload(kind: Kind, renew: bool) -> Workload {
    let name = kind.name();
    let mut w = crate::workload::load(name, &Default::default()).unwrap();
    w.hold_ms = 20;
    w.think_ms = 1;
    w.ttl_ms = 1000;
    w.renew = renew;
    w
}

async fn stepper(
    svc: &Arc<Mutex<FakeService>>,
    kind: Kind,
    storage: std::net::SocketAddr,
    p: i64,
) -> Stepper {
    let sc = StorageClient::connect(storage).await.unwrap();
    Stepper::new(
        workload(kind, false),
        Box::new(FakeLock(svc.clone())),
        Some(Box::new(sc)),
        Procs {
            current: p,
            stride: 2,
        },
        true,
    )
}

fn completions(ops: &[Op], f: &str, kind: OpType) -> usize {
    ops.iter().filter(|o| o.f == f && o.kind == kind).count()
}

#[tokio::test]
async fn two_fenced_counter_workers_count_every_acknowledged_write() {
    let h = spawn(
        "127.0.0.1:0".parse().unwrap(),
        StorageConfig::new(Fencing::On).with_initial("counter", json!(0)),
    )
    .unwrap();
    let svc = Arc::new(Mutex::new(FakeService::default()));
    let sink = VecSink::default();
    let phases = Phases::default();
    let env = Env {
        clock: RunClock::start(),
        sink: &sink,
        notify: &phases,
    };
    let mut a = stepper(&svc, Kind::FencedCounter, h.addr(), 0).await;
    let mut b = stepper(&svc, Kind::FencedCounter, h.addr(), 1).await;
    let mut wrote = 0;
    for _ in 0..6 {
        let (x, y) = tokio::join!(a.step(&env), b.step(&env));
        wrote += x.wrote as usize + y.wrote as usize;
    }
    let ops = sink.0.lock().unwrap().clone();
    assert!(wrote >= 6, "each round one worker at least gets the lock");
    assert_eq!(completions(&ops, "write", OpType::Ok), wrote);
    // Every invocation has exactly one completion from the same process.
    let inv = ops.iter().filter(|o| o.kind == OpType::Invoke).count();
    assert_eq!(inv * 2, ops.len());
    let mut c = StorageClient::connect(h.addr()).await.unwrap();
    match c.read("counter", None).await.unwrap() {
        Reply::Ok { value, .. } => assert_eq!(value, json!(wrote)),
        r => panic!("{r:?}"),
    }
    let p = phases.0.lock().unwrap().clone();
    let pos = |ph| p.iter().position(|x| *x == ph).unwrap();
    assert!(pos(Phase::Granted) < pos(Phase::Holding));
    assert!(pos(Phase::Holding) < pos(Phase::Writing));
    assert!(pos(Phase::Writing) < pos(Phase::Releasing));
}

#[tokio::test]
async fn lock_set_adds_a_new_element_each_step() {
    let h = spawn(
        "127.0.0.1:0".parse().unwrap(),
        StorageConfig::new(Fencing::On).with_initial("set", json!([])),
    )
    .unwrap();
    let svc = Arc::new(Mutex::new(FakeService::default()));
    let sink = VecSink::default();
    let env = Env {
        clock: RunClock::start(),
        sink: &sink,
        notify: &NoNotify,
    };
    let mut a = stepper(&svc, Kind::LockSet, h.addr(), 0).await;
    for _ in 0..3 {
        assert!(a.step(&env).await.wrote);
    }
    let mut c = StorageClient::connect(h.addr()).await.unwrap();
    let Reply::Ok { value, .. } = c.read("set", None).await.unwrap() else {
        panic!()
    };
    let set = value.as_array().unwrap();
    assert_eq!(set.len(), 3);
    let mut uniq = set.clone();
    uniq.dedup();
    assert_eq!(uniq.len(), 3);
}

#[tokio::test]
async fn an_ambiguous_acquire_is_info_and_moves_to_the_next_process() {
    let svc = Arc::new(Mutex::new(FakeService {
        fail_next: true,
        ..FakeService::default()
    }));
    let sink = VecSink::default();
    let env = Env {
        clock: RunClock::start(),
        sink: &sink,
        notify: &NoNotify,
    };
    let mut s = Stepper::new(
        workload(Kind::Lock, true),
        Box::new(FakeLock(svc.clone())),
        None,
        Procs {
            current: 3,
            stride: 5,
        },
        false,
    );
    s.step(&env).await;
    s.step(&env).await;
    let ops = sink.0.lock().unwrap().clone();
    assert_eq!(
        (ops[1].kind, ops[1].process.clone()),
        (OpType::Info, Process::Num(3))
    );
    assert_eq!(ops[2].process, Process::Num(8));
    assert_eq!(completions(&ops, "acquire", OpType::Ok), 1);
    assert_eq!(completions(&ops, "release", OpType::Ok), 1);
}

#[tokio::test]
async fn renewals_during_the_hold_go_under_the_lease_process() {
    let svc = Arc::new(Mutex::new(FakeService::default()));
    let sink = VecSink::default();
    let env = Env {
        clock: RunClock::start(),
        sink: &sink,
        notify: &NoNotify,
    };
    let mut w = workload(Kind::Lock, true);
    w.ttl_ms = 300;
    w.hold_ms = 150;
    let mut s = Stepper::new(
        w,
        Box::new(FakeLock(svc)),
        None,
        Procs {
            current: 4,
            stride: 5,
        },
        true,
    );
    s.step(&env).await;
    let ops = sink.0.lock().unwrap().clone();
    let renews: Vec<&Op> = ops.iter().filter(|o| o.f == "renew").collect();
    assert!(!renews.is_empty(), "a 150 ms hold renews a 300 ms lease");
    assert!(renews
        .iter()
        .all(|o| o.process == Process::Named("4-lease".into())));
    assert!(renews
        .iter()
        .any(|o| o.kind == OpType::Ok && o.lease_ms == Some(300)));
}

#[tokio::test]
async fn after_a_probe_ends_in_info_the_lease_process_never_invokes_again() {
    let svc = Arc::new(Mutex::new(FakeService {
        probe_info_once: Some(true),
        ..FakeService::default()
    }));
    let sink = VecSink::default();
    let env = Env {
        clock: RunClock::start(),
        sink: &sink,
        notify: &NoNotify,
    };
    let mut s = Stepper::new(
        workload(Kind::Lock, false),
        Box::new(FakeLock(svc)),
        None,
        Procs {
            current: 2,
            stride: 5,
        },
        true,
    );
    s.step(&env).await;
    s.step(&env).await;
    let ops = sink.0.lock().unwrap().clone();
    let info = ops
        .iter()
        .position(|o| o.f == "renew" && o.kind == OpType::Info)
        .expect("the first probe is info");
    assert_eq!(ops[info].process, Process::Named("2-lease".into()));
    assert!(
        ops[info + 1..]
            .iter()
            .all(|o| o.process != Process::Named("2-lease".into())),
        "{ops:?}"
    );
    assert!(ops[info + 1..].iter().any(|o| o.f == "renew"
        && o.kind == OpType::Ok
        && o.process == Process::Named("7-lease".into())));
}

/// One fenced-counter step with a 300 ms lease renewed through a 900 ms
/// hold (3 × ttl), the lease guard `on` or off, and every renew going
/// wrong as `fault` says: (the step's ops, what it achieved, writes
/// abandoned).
async fn renewing_step(on: bool, fault: Option<RenewFault>) -> (Vec<Op>, StepOutcome, u64) {
    let h = spawn(
        "127.0.0.1:0".parse().unwrap(),
        StorageConfig::new(Fencing::Off).with_initial("counter", json!(0)),
    )
    .unwrap();
    let svc = Arc::new(Mutex::new(FakeService {
        renew_fault: fault,
        ..FakeService::default()
    }));
    let sink = VecSink::default();
    let env = Env {
        clock: RunClock::start(),
        sink: &sink,
        notify: &NoNotify,
    };
    let mut w = workload(Kind::FencedCounter, true);
    (w.ttl_ms, w.hold_ms, w.op_timeout_ms) = (300, 900, 50);
    w.lease_guard = if on {
        crate::workload::LeaseGuard::On
    } else {
        crate::workload::LeaseGuard::Off
    };
    let sc = StorageClient::connect(h.addr()).await.unwrap();
    let procs = Procs {
        current: 1,
        stride: 5,
    };
    let mut s = Stepper::new(w, Box::new(FakeLock(svc)), Some(Box::new(sc)), procs, true);
    let out = s.step(&env).await;
    let ops = sink.0.lock().unwrap().clone();
    (ops, out, s.abandoned)
}

/// Milliseconds from the acquire's completion to the release's invocation.
fn held_ms(ops: &[Op]) -> u64 {
    let at = |f: &str, k: OpType| ops.iter().find(|o| o.f == f && o.kind == k).unwrap().time;
    (at("release", OpType::Invoke) - at("acquire", OpType::Ok)) / 1_000_000
}

#[tokio::test]
async fn with_the_guard_a_failed_renew_cancels_the_critical_section() {
    let slow = RenewFault::Slow(Duration::from_millis(350));
    for fault in [RenewFault::Gone, RenewFault::Timeout, slow] {
        let (ops, out, abandoned) = renewing_step(true, Some(fault)).await;
        // Safety: the write is never sent.
        assert_eq!(
            completions(&ops, "write", OpType::Ok),
            0,
            "{fault:?}: {ops:?}"
        );
        assert!(ops.iter().all(|o| o.f != "write"), "{fault:?}: {ops:?}");
        assert!(!out.wrote && out.acquired, "{fault:?}");
        assert_eq!(abandoned, 1, "{fault:?}");
        // One renew decides, and the hold ends then, not after 900 ms.
        assert_eq!(
            ops.iter()
                .filter(|o| o.f == "renew" && o.kind == OpType::Invoke)
                .count(),
            1,
            "{fault:?}: {ops:?}"
        );
        let held = held_ms(&ops);
        assert!(held < 800, "{fault:?}: held {held} ms of a 900 ms hold");
        // The worker still releases.
        assert_eq!(completions(&ops, "release", OpType::Ok), 1, "{fault:?}");
    }
}

#[tokio::test]
async fn without_the_guard_or_a_failed_renew_the_hold_runs_and_writes() {
    // Off: fail-open, the renew failures change nothing.
    let (ops, out, abandoned) = renewing_step(false, Some(RenewFault::Gone)).await;
    assert!(out.wrote, "{ops:?}");
    assert_eq!(abandoned, 0);
    assert!(held_ms(&ops) >= 900, "{ops:?}");
    assert!(completions(&ops, "renew", OpType::Fail) >= 2, "{ops:?}");
    // On, with renewals that work: a hold of 3 leases is not cut short.
    let (ops, out, abandoned) = renewing_step(true, None).await;
    assert!(out.wrote, "{ops:?}");
    assert_eq!(abandoned, 0);
    assert!(held_ms(&ops) >= 900, "{ops:?}");
    assert!(completions(&ops, "renew", OpType::Ok) >= 2, "{ops:?}");
}

/// A controller in memory: watches one moment, answers after `delay`,
/// and keeps what the worker said.
struct Watcher {
    moment: Moment,
    delay: Duration,
    armed: bool,
    said: Mutex<Vec<String>>,
}

impl Notify for Watcher {
    fn state(&self, _ev: StateEvent) {}

    fn moment(&self, m: Moment, ev: StateEvent) -> Option<MomentWait> {
        if m != self.moment || !self.said.lock().unwrap().is_empty() {
            return None;
        }
        self.said
            .lock()
            .unwrap()
            .push(format!("moment {} {:?}", m.as_str(), ev.owner.is_some()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (delay, armed) = (self.delay, self.armed);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(armed);
        });
        Some(MomentWait { id: 7, rx })
    }

    fn passed(&self, id: u64, armed: bool) {
        self.said
            .lock()
            .unwrap()
            .push(format!("passed {id} {armed}"));
    }

    fn outcome(&self, id: u64, done: &Op) {
        let said = format!("outcome {id} {} {:?}", done.f, done.kind);
        self.said.lock().unwrap().push(said);
    }
}

/// One lock step under `w`: its ops and how long it took.
async fn watched_step(w: &Watcher) -> (Vec<Op>, Duration) {
    let svc = Arc::new(Mutex::new(FakeService::default()));
    let sink = VecSink::default();
    let env = Env {
        clock: RunClock::start(),
        sink: &sink,
        notify: w,
    };
    let h = spawn(
        "127.0.0.1:0".parse().unwrap(),
        StorageConfig::new(Fencing::On),
    )
    .unwrap();
    let mut s = stepper(&svc, Kind::Lock, h.addr(), 0).await;
    let t = Instant::now();
    s.step(&env).await;
    let took = t.elapsed();
    let ops = sink.0.lock().unwrap().clone();
    (ops, took)
}

fn watcher(moment: Moment, delay: Duration) -> Watcher {
    Watcher {
        moment,
        delay,
        armed: true,
        said: Mutex::default(),
    }
}

#[tokio::test]
async fn an_announced_request_waits_for_the_answer_and_reports_how_it_ended() {
    for (moment, f) in [(Moment::Acquire, "acquire"), (Moment::Release, "release")] {
        let w = watcher(moment, Duration::from_millis(30));
        let (ops, took) = watched_step(&w).await;
        assert!(took >= Duration::from_millis(30), "it waited");
        let said = w.said.lock().unwrap().clone();
        let has_grant = moment != Moment::Acquire;
        assert_eq!(
            said,
            vec![
                format!("moment {f} {has_grant}"),
                "passed 7 true".to_string(),
                format!("outcome 7 {f} Ok"),
            ]
        );
        // The request is invoked only after the answer: the history's
        // invocation is not stretched by the wait.
        let inv = ops.iter().find(|o| o.f == f).unwrap();
        let done = ops.iter().rfind(|o| o.f == f).unwrap();
        assert!(done.time - inv.time < 30_000_000, "{inv:?} {done:?}");
    }
}

#[tokio::test]
async fn a_late_answer_lets_the_request_go_unarmed_after_the_wait() {
    let w = watcher(Moment::Acquire, moment::ARM_WAIT * 3);
    let (_, took) = watched_step(&w).await;
    assert!(took >= moment::ARM_WAIT);
    assert!(
        took < moment::ARM_WAIT * 3,
        "it did not wait for the late answer"
    );
    assert_eq!(w.said.lock().unwrap()[1], "passed 7 false");
}
