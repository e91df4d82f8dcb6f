//! Unit tests of the schedule and two faults with a fake worker pool (a
//! real `sleep` process stands in for a worker) and the embedded Toxiproxy.

use super::*;
use crate::cluster::Cluster;
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Sink};
use crate::process::{self, Child};
use crate::service::System;
use crate::toxiproxy::{NewProxy, ToxiproxyApi};
use crate::undo::{Heal, Scope, Trust, Undo, UndoLog};
use crate::workload::step::{Moment, Phase};
use rand::SeedableRng;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

pub(super) struct FakePool {
    pub(super) child: Child,
    pub(super) last: Mutex<Option<StateEvent>>,
    pub(super) events: broadcast::Sender<WorkerEvent>,
}

#[async_trait]
impl WorkerPool for FakePool {
    fn slots(&self) -> usize {
        1
    }
    fn view(&self, slot: usize) -> WorkerView {
        WorkerView {
            slot,
            incarnation: 0,
            proc: Some(self.child.id()),
            last: self.last.lock().unwrap().clone(),
            alive: self.child.is_alive(),
        }
    }
    fn subscribe(&self) -> broadcast::Receiver<WorkerEvent> {
        self.events.subscribe()
    }
    async fn kill(&self, _slot: usize) -> Result<(), String> {
        self.child.kill().map_err(|e| e.to_string())
    }
    async fn respawn(&self, _slot: usize) -> Result<(), String> {
        Ok(())
    }
}

#[derive(Default)]
pub(super) struct VecSink(pub(super) Mutex<Vec<Op>>);

impl Sink for VecSink {
    fn record(&self, op: Op) {
        self.0.lock().unwrap().push(op);
    }
}

/// Takes back what these faults apply (a SIGSTOP, a toxic); the runner's
/// undo executor, above the nemeses, takes back every kind.
struct TestHealer;

#[async_trait::async_trait]
impl Heal for TestHealer {
    async fn heal(&self, u: &Undo, _: &Scope, _: Trust, _: Duration) -> Result<(), String> {
        match u {
            Undo::Paused { proc, .. } => proc
                .signal_group(process::Signal::Cont)
                .map(drop)
                .map_err(|e| e.to_string()),
            Undo::Toxic {
                url, proxy, toxic, ..
            } => crate::toxiproxy::HttpClient::new(url)
                .map_err(|e| e.to_string())?
                .remove_toxic(proxy, toxic)
                .await
                .map_err(|e| e.to_string()),
            other => Err(format!("not a fault of these tests: {}", other.describe())),
        }
    }
}

pub(super) struct Fixture {
    pub(super) ctx: Ctx,
    pub(super) pool: Arc<FakePool>,
    pub(super) history: Arc<VecSink>,
    pub(super) undo: Arc<UndoLog>,
    pub(super) stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
    _tox: crate::toxiproxy::ServerHandle,
}

pub(super) async fn fixture(fault: &str, links: Links) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let undo =
        Arc::new(UndoLog::open(&dir.path().join("undo.jsonl"), Arc::new(TestHealer)).unwrap());
    let tox = crate::toxiproxy::spawn_loopback().await.unwrap();
    let api = tox.client().unwrap();
    for p in links.all() {
        api.create_proxy(&NewProxy::new(p, "127.0.0.1:0", "127.0.0.1:1"))
            .await
            .unwrap();
    }
    let pool = Arc::new(FakePool {
        child: process::spawn(&process::Spec::new("sleep").arg("30")).unwrap(),
        last: Mutex::new(None),
        events: broadcast::channel(64).0,
    });
    let history = Arc::new(VecSink::default());
    let mut spec = spec::load(fault).unwrap();
    spec.first_delay_ms = 0;
    spec.interval_ms = 50;
    spec.duration_ms = Some(300);
    spec.duration_leases = None;
    spec.latency_ms = 100;
    let (stop, stopping) = watch::channel(false);
    let cluster =
        Cluster::from_endpoints(System::Redis.servers(), &["127.0.0.1:1".to_string()]).unwrap();
    let ctx = Ctx::new(
        System::Redis,
        Arc::new(cluster),
        pool.clone(),
        Arc::new(api),
        true,
        Arc::new(links),
        undo.clone(),
        history.clone(),
        RunClock::start(),
        rand::rngs::StdRng::seed_from_u64(1),
        Duration::from_millis(200),
        Duration::from_secs(1),
        spec,
        stopping,
    );
    Fixture {
        ctx,
        pool,
        history,
        undo,
        stop,
        _dir: dir,
        _tox: tox,
    }
}

#[path = "mixed_tests.rs"]
mod mixed_sequence;

pub(super) async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Worker 7 reports `holding` now (lease 200 ms, fence 3).
pub(super) fn holding_granted(ctx: &Ctx) -> StateEvent {
    StateEvent {
        phase: Phase::Holding,
        process: 7,
        time: ctx.clock.now(),
        key: Some("k".into()),
        owner: Some("o7".into()),
        fence: Some(3),
        lease_ms: Some(200),
    }
}

#[tokio::test]
async fn pause_holder_stops_the_holder_records_landing_and_continues_it() {
    let f = fixture("pause-holder", Links::default()).await;
    let (pool, history, undo, stop) = (f.pool.clone(), f.history.clone(), f.undo.clone(), f.stop);
    let mut ctx = f.ctx;
    let holding = holding_granted(&ctx);
    *pool.last.lock().unwrap() = Some(holding.clone());
    let task = tokio::spawn(async move {
        let faults = AtomicU64::new(0);
        registry::find("pause-holder").unwrap();
        schedule::run(Box::new(holder::PauseHolder), &mut ctx, &faults).await
    });
    let id = pool.child.id();
    announce_until_stopped(&pool, &holding).await;
    assert_eq!(
        undo.pending().len(),
        1,
        "the SIGCONT was written down first"
    );
    until("continued", || !id.is_stopped()).await;
    stop.send(true).unwrap();
    let sum = task.await.unwrap();
    assert_eq!(sum.injections[0].detail["landed_inside"], true);
    assert_eq!(sum.landed_inside(), Some((1, 1)));
    assert!(undo.pending().is_empty());
    let ops = history.0.lock().unwrap().clone();
    let kinds: Vec<(String, OpType)> = ops.iter().take(4).map(|o| (o.f.clone(), o.kind)).collect();
    assert_eq!(
        kinds,
        [
            ("start", OpType::Invoke),
            ("start", OpType::Info),
            ("stop", OpType::Invoke),
            ("stop", OpType::Info)
        ]
        .map(|(f, k)| (f.to_string(), k))
    );
    assert!(ops.iter().all(|o| o.process.is_nemesis()));
    assert_eq!(ops[3].value["fault"], "pause-holder");
    assert_eq!(ops[3].value["owner"], "o7");
    pool.child.kill().unwrap();
}

/// A holding event of process 1 (no grant details).
fn holding_now(ctx: &Ctx) -> StateEvent {
    StateEvent {
        phase: Phase::Holding,
        process: 1,
        time: ctx.clock.now(),
        key: None,
        owner: None,
        fence: None,
        lease_ms: None,
    }
}

/// Announce `ev` from the fake worker every 5 ms until it is stopped
/// (at most 10 s).
pub(super) async fn announce_until_stopped(pool: &FakePool, ev: &StateEvent) {
    let id = pool.child.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !id.is_stopped() {
        assert!(std::time::Instant::now() < deadline, "never paused");
        let _ = pool.events.send(WorkerEvent {
            slot: 0,
            incarnation: 0,
            state: ev.clone(),
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Run pause-holder in the background and announce `ev` until the fake
/// worker is stopped.
async fn paused_holder(
    pool: &Arc<FakePool>,
    mut ctx: Ctx,
    ev: &StateEvent,
) -> tokio::task::JoinHandle<NemesisSummary> {
    let task = tokio::spawn(async move {
        let faults = AtomicU64::new(0);
        schedule::run(Box::new(holder::PauseHolder), &mut ctx, &faults).await
    });
    announce_until_stopped(pool, ev).await;
    task
}

#[tokio::test]
async fn a_pause_after_the_write_began_is_not_counted_inside() {
    let f = fixture("pause-holder", Links::default()).await;
    let (pool, stop) = (f.pool.clone(), f.stop);
    let mut ev = holding_now(&f.ctx);
    let task = paused_holder(&pool, f.ctx, &ev).await;
    let id = pool.child.id();
    // The worker had already told us it was writing when it stopped.
    ev.phase = Phase::Writing;
    *pool.last.lock().unwrap() = Some(ev);
    until("continued", || !id.is_stopped()).await;
    stop.send(true).unwrap();
    let sum = task.await.unwrap();
    assert_eq!(sum.injections[0].detail["landed_inside"], false);
    pool.child.kill().unwrap();
}

#[tokio::test]
async fn a_pause_the_run_end_cuts_short_is_not_judged() {
    let f = fixture("pause-holder", Links::default()).await;
    let (pool, stop) = (f.pool.clone(), f.stop);
    let ev = holding_now(&f.ctx);
    *pool.last.lock().unwrap() = Some(ev.clone());
    let task = paused_holder(&pool, f.ctx, &ev).await;
    let id = pool.child.id();
    // The run ends while the holder is paused (the fault lasts 300 ms).
    stop.send(true).unwrap();
    let sum = task.await.unwrap();
    assert!(!id.is_stopped(), "continued at the end");
    assert_eq!(sum.injections[0].detail["cut_short"], true);
    assert!(sum.injections[0].detail.get("landed_inside").is_none());
    assert_eq!(sum.landed_inside(), None);
    pool.child.kill().unwrap();
}

#[tokio::test]
async fn latency_puts_a_toxic_on_every_node_link_and_takes_it_away() {
    let mut links = Links::default();
    links
        .node
        .entry(0)
        .or_default()
        .insert("n1".into(), "w0-n1".into());
    links
        .node
        .entry(0)
        .or_default()
        .insert("n2".into(), "w0-n2".into());
    links.storage.insert(0, "w0-storage".into());
    let f = fixture("latency", links).await;
    let api = f.ctx.toxiproxy.clone();
    let (undo, stop) = (f.undo.clone(), f.stop);
    let mut ctx = f.ctx;
    let task = tokio::spawn(async move {
        let faults = AtomicU64::new(0);
        schedule::run(Box::new(network::Latency), &mut ctx, &faults).await
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n1 = api.toxics("w0-n1").await.unwrap().len();
        let n2 = api.toxics("w0-n2").await.unwrap().len();
        if n1 == 1 && n2 == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no toxics");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        api.toxics("w0-storage").await.unwrap().is_empty(),
        "storage links untouched"
    );
    stop.send(true).unwrap();
    let sum = task.await.unwrap();
    assert!(!sum.injections.is_empty());
    for p in ["w0-n1", "w0-n2"] {
        assert!(api.toxics(p).await.unwrap().is_empty(), "{p} healed");
    }
    assert!(undo.pending().is_empty());
    f.pool.child.kill().unwrap();
}

/// Workers that can be watched; they announce only what a test sends.
#[derive(Default)]
struct MomentPool {
    /// Live watches: (slot, id).
    watched: Mutex<Vec<(usize, u64)>>,
    next: AtomicU64,
    moments: Option<broadcast::Sender<MomentEvent>>,
}

#[async_trait]
impl WorkerPool for MomentPool {
    fn slots(&self) -> usize {
        2
    }
    fn view(&self, slot: usize) -> WorkerView {
        WorkerView {
            slot,
            incarnation: 0,
            proc: None,
            last: None,
            alive: true,
        }
    }
    fn subscribe(&self) -> broadcast::Receiver<WorkerEvent> {
        broadcast::channel(1).1
    }
    async fn kill(&self, _slot: usize) -> Result<(), String> {
        Ok(())
    }
    async fn respawn(&self, _slot: usize) -> Result<(), String> {
        Ok(())
    }
    fn watch(&self, slot: usize, _moment: Moment) -> Result<u64, String> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.watched.lock().unwrap().push((slot, id));
        Ok(id)
    }
    fn unwatch(&self, _slot: usize, id: u64) {
        self.watched.lock().unwrap().retain(|w| w.1 != id);
    }
    fn moments(&self) -> Option<broadcast::Receiver<MomentEvent>> {
        self.moments.as_ref().map(|m| m.subscribe())
    }
}

/// The failover's wait for a release: at its limit it gives up (not
/// stopping) and withdraws every watch; an announcement before it is
/// returned and the other watches withdrawn.
#[tokio::test]
async fn next_moment_until_gives_up_at_its_limit_and_withdraws_its_watches() {
    let f = fixture("pause-holder", Links::default()).await;
    let pool = Arc::new(MomentPool {
        moments: Some(broadcast::channel(16).0),
        ..MomentPool::default()
    });
    let mut ctx = f.ctx;
    ctx.workers = pool.clone();
    let began = tokio::time::Instant::now();
    let limit = Duration::from_millis(100);
    let ann = ctx
        .next_moment_until("failover", &[0, 1], Moment::Release, Some(began + limit))
        .await
        .unwrap();
    assert!(ann.is_none() && !ctx.is_stopping());
    assert!(began.elapsed() >= limit);
    assert!(pool.watched.lock().unwrap().is_empty(), "watches withdrawn");

    let p = pool.clone();
    let announcer = tokio::spawn(async move {
        until("two watches", || p.watched.lock().unwrap().len() == 2).await;
        let (slot, id) = p.watched.lock().unwrap()[1];
        let state = StateEvent {
            phase: Phase::Releasing,
            process: 1,
            time: 1,
            key: None,
            owner: None,
            fence: None,
            lease_ms: None,
        };
        let note = MomentNote::Announced {
            moment: Moment::Release,
            state,
        };
        let ev = MomentEvent {
            slot,
            incarnation: 0,
            id,
            note,
        };
        p.moments.as_ref().unwrap().send(ev).unwrap();
        (slot, id)
    });
    let far = tokio::time::Instant::now() + Duration::from_secs(10);
    let ann = ctx
        .next_moment_until("failover", &[0, 1], Moment::Release, Some(far))
        .await
        .unwrap()
        .expect("announced");
    let (slot, id) = announcer.await.unwrap();
    assert_eq!((ann.slot, ann.id), (slot, id));
    assert_eq!(
        *pool.watched.lock().unwrap(),
        [(slot, id)],
        "the other withdrawn"
    );
    f.pool.child.kill().unwrap();
}

/// `strike_after_ms` is a parameter of the holder faults only; elsewhere
/// it is refused naming its line and field.
#[test]
fn strike_after_ms_belongs_to_the_holder_faults() {
    use crate::toml_file::Source;
    let src = |fault: &str| Source {
        name: "nemesis/x.toml".into(),
        text: format!("name = \"x\"\nfault = \"{fault}\"\nstrike_after_ms = 1500\n"),
    };
    for fault in ["kill-holder", "pause-holder"] {
        let s = spec::from_source(&src(fault)).unwrap();
        assert_eq!(s.strike_after_ms, 1500);
    }
    let e = spec::from_source(&src("kill-node")).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (3, Some("strike_after_ms")),
        "{e}"
    );
    assert!(
        e.to_string().contains("pause-holder and kill-holder"),
        "{e}"
    );
    assert_eq!(NemesisSpec::of("kill-holder").unwrap().strike_after_ms, 0);
}

/// A fault whose first start fails while the run goes on (due, and
/// failed), and whose later starts wait like a leader lookup that finds
/// no leader, until the run's end cuts them off.
struct LateLookup {
    starts: u32,
}

#[async_trait]
impl Nemesis for LateLookup {
    fn name(&self) -> &'static str {
        "late-lookup"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        self.starts += 1;
        if self.starts == 1 {
            return Err(NemesisError::new(self.name(), "no target in reach"));
        }
        while ctx.sleep(Duration::from_millis(5)).await {}
        Err(NemesisError::new(self.name(), "no leader after 15s"))
    }
}

/// Trust on the operator's hosts, part 7: only a start that was due
/// within the run and failed is an error; one the run's end cut off is
/// recorded as not started, with its reason.
#[tokio::test]
async fn a_start_the_run_end_cuts_off_is_not_started_not_an_error() {
    let f = fixture("pause-holder", Links::default()).await;
    let (stop, mut ctx) = (f.stop, f.ctx);
    let task = tokio::spawn(async move {
        let faults = AtomicU64::new(0);
        let sum = schedule::run(Box::new(LateLookup { starts: 0 }), &mut ctx, &faults).await;
        (sum, ctx)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(true).unwrap();
    let (sum, _ctx) = task.await.unwrap();
    assert_eq!(
        sum.errors,
        ["nemesis late-lookup: no target in reach"],
        "{sum:?}"
    );
    assert_eq!(sum.not_started.len(), 1, "{sum:?}");
    let reason = &sum.not_started[0].reason;
    assert!(
        reason.starts_with("the run ended while it was starting: nemesis late-lookup"),
        "{reason}"
    );
    assert!(sum.injections.is_empty());
    let json = serde_json::to_value(&sum).unwrap();
    assert_eq!(json["not_started"][0]["reason"], reason.as_str());
    f.pool.child.kill().unwrap();
}

/// The leader lookup of the node faults, on an etcd cluster none of whose
/// members answers: cut off by the run's end, it says so and names each
/// member asked with its answer; the schedule records it as not started.
#[tokio::test]
async fn a_leader_lookup_names_each_node_asked_and_the_run_end_cuts_it_off() {
    let mut f = fixture("partition-node", Links::default()).await;
    let eps = ["127.0.0.1:1".to_string(), "127.0.0.2:1".to_string()];
    f.ctx.system = System::Etcd;
    f.ctx.cluster = Arc::new(Cluster::from_endpoints(System::Etcd.servers(), &eps).unwrap());
    let names: Vec<String> = f
        .ctx
        .cluster
        .nodes()
        .iter()
        .map(|n| n.name.clone())
        .collect();
    let (stop, mut ctx) = (f.stop, f.ctx);
    let task = tokio::spawn(async move {
        let e = node::leader(&mut ctx, "partition-node").await.unwrap_err();
        (e, ctx)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(true).unwrap();
    let (e, ctx) = task.await.unwrap();
    let text = e.to_string();
    eprintln!("{text}");
    assert!(
        text.contains("the run ended before a leader was found"),
        "{text}"
    );
    assert!(text.contains("no node answered; asked "), "{text}");
    for (name, addr) in names.iter().zip(&eps) {
        let said = format!("{name} ({addr}): connection refused");
        assert!(text.contains(&said), "{text}");
    }
    assert!(ctx.is_stopping());
    f.pool.child.kill().unwrap();
}
