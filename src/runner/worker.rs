//! The worker process (`lockjaw worker --spec FILE`): one client of a run.
//!
//! Workers are separate OS processes so that SIGSTOP pauses a real client,
//! its lease renewals included, as a GC pause would. A worker reads its
//! [`WorkerSpec`], connects its lock client and storage client through its
//! own proxies, reports `ready`, and runs workload steps until SIGTERM; then
//! it finishes the step it is in (so it releases what it holds) and exits.
//! Everything it records goes to stdout as [`Message`] lines (see
//! [`super::protocol`]); diagnostics go to stderr (the worker's log).

use super::protocol::{AdapterSpec, Command, Message, WorkerSpec};
use crate::client::adapter::{AdapterClient, AdapterConfig, Hello};
use crate::client::register::RegisterClient;
use crate::client::{pace, ClientConfig, LeaseRecorder, LockClient};
use crate::exit::Exit;
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use crate::service;
use crate::storage::{self, Resource, StorageClient};
use crate::workload::cas::CasStepper;
use crate::workload::leader::LeaderStepper;
use crate::workload::register;
use crate::workload::step::{Env, Moment, MomentWait, Notify, Procs, StateEvent, Stepper};
use crate::workload::Kind;
use std::collections::HashMap;
use std::io::{BufWriter, Stdout, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a worker keeps trying to connect before it gives up.
const CONNECT_PATIENCE: Duration = Duration::from_secs(15);

/// The worker's stdout: op and state lines, flushed before every request;
/// and the moments the controller asked it to announce (its stdin).
pub struct Out {
    w: Mutex<BufWriter<Stdout>>,
    record: bool,
    /// Watched moments: (watch id, moment), from `watch` commands.
    watches: Mutex<Vec<(u64, Moment)>>,
    /// Announced moments waiting for their `go`.
    pending: Mutex<HashMap<u64, oneshot::Sender<bool>>>,
    /// Whether the first step waits for the controller's `start`, and
    /// whether it came.
    gated: AtomicBool,
    started: AtomicBool,
    start: tokio::sync::Notify,
}

impl Out {
    pub fn stdout(record: bool) -> Out {
        Out {
            w: Mutex::new(BufWriter::with_capacity(1 << 16, std::io::stdout())),
            record,
            watches: Mutex::default(),
            pending: Mutex::default(),
            gated: AtomicBool::new(false),
            started: AtomicBool::new(false),
            start: tokio::sync::Notify::new(),
        }
    }

    /// Until `start` comes (or SIGTERM), when the first step is gated.
    async fn until_started(&self, stop: &AtomicBool) {
        if !self.gated.load(Ordering::SeqCst) {
            return;
        }
        loop {
            let woken = self.start.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.started.load(Ordering::SeqCst) || stop.load(Ordering::SeqCst) {
                return;
            }
            // SIGTERM sets `stop` without waking us: look again soon.
            let _ = tokio::time::timeout(Duration::from_millis(50), woken).await;
        }
    }

    /// Obey one command from the controller.
    fn command(&self, c: Command) {
        match c {
            Command::Watch { id, moment } => lock(&self.watches).push((id, moment)),
            Command::Unwatch { id } => lock(&self.watches).retain(|(w, _)| *w != id),
            Command::Go { id, armed } => {
                if let Some(tx) = lock(&self.pending).remove(&id) {
                    let _ = tx.send(armed);
                }
            }
            Command::Start => {
                self.started.store(true, Ordering::SeqCst);
                self.start.notify_waiters();
            }
        }
    }

    pub fn send(&self, m: &Message, flush: bool) {
        let mut w = self.w.lock().unwrap_or_else(|e| e.into_inner());
        let r = serde_json::to_writer(&mut *w, m)
            .map_err(std::io::Error::from)
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| if flush { w.flush() } else { Ok(()) });
        if r.is_err() {
            // The controller is gone: nobody records what we do any more.
            std::process::exit(Exit::Error.code() as i32);
        }
    }

    pub fn flush(&self) {
        let mut w = self.w.lock().unwrap_or_else(|e| e.into_inner());
        if w.flush().is_err() {
            std::process::exit(Exit::Error.code() as i32);
        }
    }
}

impl Sink for Out {
    fn record(&self, op: Op) {
        if self.record {
            let flush = op.kind == OpType::Invoke;
            self.send(&Message::Op(op), flush);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Notify for Out {
    fn state(&self, ev: StateEvent) {
        self.send(&Message::State(ev), true);
    }

    fn abandoned(&self, ev: StateEvent) {
        self.send(&Message::Abandoned(ev), true);
    }

    fn moment(&self, moment: Moment, state: StateEvent) -> Option<MomentWait> {
        let id = {
            let mut w = lock(&self.watches);
            let i = w.iter().position(|(_, m)| *m == moment)?;
            w.remove(i).0
        };
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        self.send(&Message::Moment { id, moment, state }, true);
        Some(MomentWait { id, rx })
    }

    fn passed(&self, id: u64, armed: bool) {
        lock(&self.pending).remove(&id);
        self.send(&Message::Passed { id, armed }, true);
    }

    fn outcome(&self, id: u64, done: &Op) {
        let m = Message::Outcome {
            id,
            kind: done.kind,
            error: done.error.clone(),
        };
        self.send(&m, true);
    }
}

/// Read the controller's commands from stdin until it closes, on a thread
/// of its own (a blocked read in the runtime's pool would hold up the
/// worker's exit).
fn listen(out: Arc<Out>) {
    use std::io::BufRead;
    let r = std::thread::Builder::new()
        .name("commands".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                match Command::parse(&line) {
                    Some(c) => out.command(c),
                    None => eprintln!("worker: unreadable command {line:?}"),
                }
            }
        });
    if let Err(e) = r {
        eprintln!("worker: cannot read commands: {e}");
    }
}

/// Entry point of `lockjaw worker --spec FILE`.
pub fn main(spec_path: &Path) -> Exit {
    let spec = match WorkerSpec::read(spec_path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    let out = Arc::new(Out::stdout(spec.record));
    // The run's own workers start together; one started again goes on.
    out.gated.store(spec.incarnation == 0, Ordering::SeqCst);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            out.send(
                &Message::Fatal(format!("cannot start a runtime: {e}")),
                true,
            );
            return Exit::Error;
        }
    };
    match rt.block_on(run(spec, out.clone())) {
        Ok(()) => {
            out.flush();
            Exit::Valid
        }
        Err(e) => {
            eprintln!("error: {e}");
            out.send(&Message::Fatal(e), true);
            Exit::Error
        }
    }
}

/// Set once SIGTERM arrived: finish the step and exit.
fn stop_flag() -> Result<Arc<AtomicBool>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot catch SIGTERM: {e}"))?;
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    tokio::spawn(async move {
        term.recv().await;
        f.store(true, Ordering::SeqCst);
        // A waiting acquire gives up now, as when its wait runs out.
        crate::client::wind_down::begin();
    });
    Ok(flag)
}

async fn run(spec: WorkerSpec, out: Arc<Out>) -> Result<(), String> {
    let stop = stop_flag()?;
    listen(out.clone());
    let clock = RunClock::from_raw(spec.clock_origin_ns);
    let procs = Procs {
        current: spec.first_process,
        stride: spec.stride,
    };
    let w = &spec.workload;
    if let Some(rate) = spec.max_rate {
        let pacer = pace::Pacer::new(clock, spec.slot, w.concurrency, rate);
        pace::install(pacer);
    }
    let cfg = client_config(&spec, out.clone(), clock);
    if w.kind == Kind::Register {
        let client = retry_connect("the lock service's store", &stop, || {
            let cfg = cfg.clone();
            async move {
                service::connect_register(spec.system, &cfg)
                    .await
                    .map_err(|e| e.to_string())
            }
        })
        .await?;
        let gen = register::Generator::new(w, spec.seed ^ spec.slot as u64, procs);
        return step_until_stopped(&mut RegisterSteps { gen, client }, &out, clock, &stop).await;
    }
    if w.kind == Kind::Leader {
        let election = retry_connect("the election service", &stop, || {
            let cfg = cfg.clone();
            async move {
                service::connect_election(spec.system, &cfg)
                    .await
                    .map_err(|e| e.to_string())
            }
        })
        .await?;
        let Some(addr) = &spec.storage else {
            return Err("the leader workload needs the storage, but no address was given".into());
        };
        let storage = connect_storage(addr, &spec, &stop).await?;
        let try_once = w.acquire_once.unwrap_or(spec.system.facts().acquire_once);
        let mut stepper = LeaderStepper::new(w.clone(), election, storage, procs, try_once);
        return step_until_stopped(&mut stepper, &out, clock, &stop).await;
    }
    if !spec.system.facts().lock.is_yes() {
        // No lock (`cas`): conditional writes on the storage.
        let Some(addr) = &spec.storage else {
            return Err("the workload needs the storage, but no address was given".into());
        };
        let storage = connect_storage(addr, &spec, &stop).await?;
        let mut stepper = CasStepper::new(w.clone(), storage, procs);
        return step_until_stopped(&mut stepper, &out, clock, &stop).await;
    }
    let lock: Box<dyn LockClient> = match &spec.adapter {
        Some(a) => Box::new(AdapterClient::start(adapter_config(&spec, a, &out, clock)).await?),
        None => {
            retry_connect("the lock service", &stop, || {
                let cfg = cfg.clone();
                async move {
                    service::connect(spec.system, &cfg)
                        .await
                        .map_err(|e| e.to_string())
                }
            })
            .await?
        }
    };
    let storage = match (&spec.storage, w.kind.uses_storage()) {
        (Some(addr), true) => Some(connect_storage(addr, &spec, &stop).await?),
        (None, true) => {
            return Err("the workload needs the storage, but no address was given".into())
        }
        _ => None,
    };
    let once = w.acquire_once.unwrap_or(spec.system.facts().acquire_once);
    let mut stepper = Stepper::new(w.clone(), lock, storage, procs, once);
    step_until_stopped(&mut stepper, &out, clock, &stop).await
}

/// What a worker does per step, whatever the workload.
trait Steps {
    /// One step; true when it was granted the lock (or won the campaign).
    async fn step(&mut self, env: &Env<'_>) -> bool;
    /// After the last step (a leader resigns).
    async fn finish(&mut self, _env: &Env<'_>) {}
}

impl Steps for Stepper {
    async fn step(&mut self, env: &Env<'_>) -> bool {
        Stepper::step(self, env).await.acquired
    }
}

impl Steps for LeaderStepper {
    async fn step(&mut self, env: &Env<'_>) -> bool {
        LeaderStepper::step(self, env).await.acquired
    }

    async fn finish(&mut self, env: &Env<'_>) {
        LeaderStepper::finish(self, env).await
    }
}

impl Steps for CasStepper {
    async fn step(&mut self, env: &Env<'_>) -> bool {
        CasStepper::step(self, env).await.acquired
    }
}

/// The register workload: the op generator and its store's client.
struct RegisterSteps {
    gen: register::Generator,
    client: Box<dyn RegisterClient>,
}

impl Steps for RegisterSteps {
    async fn step(&mut self, env: &Env<'_>) -> bool {
        pace::pace().await;
        self.gen
            .step(self.client.as_mut(), &env.clock, env.sink)
            .await;
        false
    }
}

/// Report `ready`, step until SIGTERM (flushing after every step), finish,
/// and report `done` with the counts.
async fn step_until_stopped(
    steps: &mut impl Steps,
    out: &Arc<Out>,
    clock: RunClock,
    stop: &AtomicBool,
) -> Result<(), String> {
    out.send(
        &Message::Ready {
            pid: std::process::id(),
        },
        true,
    );
    out.until_started(stop).await;
    super::stallmeter::start(out.clone(), clock);
    let env = Env {
        clock,
        sink: out.as_ref(),
        notify: out.as_ref(),
    };
    let (mut n, mut grants) = (0, 0);
    while !stop.load(Ordering::SeqCst) {
        grants += steps.step(&env).await as u64;
        n += 1;
        out.flush();
    }
    steps.finish(&env).await;
    out.send(&Message::Done { steps: n, grants }, true);
    Ok(())
}

fn dial(spec: &WorkerSpec) -> std::collections::HashMap<String, String> {
    spec.dial.clone().into_iter().collect()
}

fn op_timeout(spec: &WorkerSpec) -> Duration {
    Duration::from_millis(spec.workload.op_timeout_ms)
}

/// `--postgres-url`, from the run directory's private file.
fn user_url(spec: &WorkerSpec) -> Option<String> {
    spec.postgres_url_file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|u| u.trim().to_string())
}

/// `--auth`, read again from the user's file (checked by the controller;
/// a file changed since is a fatal error of this worker).
fn auth(spec: &WorkerSpec) -> Arc<crate::auth::Auth> {
    let Some(f) = &spec.auth_file else {
        return Arc::default();
    };
    match crate::auth::load(f) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("worker {}: --auth: {e}", spec.slot);
            std::process::exit(3)
        }
    }
}

fn client_config(spec: &WorkerSpec, out: Arc<Out>, clock: RunClock) -> ClientConfig {
    let mut cfg = ClientConfig::new(spec.endpoints.clone());
    cfg.dial = dial(spec);
    cfg.op_timeout = op_timeout(spec);
    cfg.sentinel_master = spec.sentinel_master.clone();
    cfg.run_id = spec.run_id.clone();
    cfg.postgres_url = user_url(spec);
    cfg.auth = auth(spec);
    // The client's own background refreshes (etcd keep-alives, ZooKeeper
    // session requests) go under a process of their own: the stepper's
    // renewals (`renew = true`) use `"<p>-lease"`, and the two may be in
    // flight at once.
    let lease = Process::Named(format!("{}-keepalive", spec.first_process));
    cfg.recorder = Some(LeaseRecorder::new(out, lease, clock));
    cfg
}

/// How the worker runs its client adapter: the hello names this worker's
/// proxies; `renewed` and `lost` events go under `"<first>-adapter"`; a
/// protocol error stops the worker with a fatal message.
fn adapter_config(
    spec: &WorkerSpec,
    a: &AdapterSpec,
    out: &Arc<Out>,
    clock: RunClock,
) -> AdapterConfig {
    let w = &spec.workload;
    // What the library dials: this worker's proxies in front of the
    // endpoints, so network faults reach its own connections.
    let endpoints = spec
        .endpoints
        .iter()
        .map(|e| spec.dial.get(e).unwrap_or(e).clone())
        .collect();
    let mut hello = Hello::new(spec.system.name(), endpoints, &w.lock_key, w.ttl_ms);
    hello.dial = spec.dial.clone();
    hello.sentinel_master = spec.sentinel_master.clone();
    hello.op_timeout_ms = w.op_timeout_ms;
    hello.clock_origin_ns = spec.clock_origin_ns;
    hello.worker = spec.slot;
    hello.auth = crate::client::adapter::Credentials::of(&auth(spec));
    let events = Process::Named(format!("{}-adapter", spec.first_process));
    let o = out.clone();
    AdapterConfig {
        path: a.path.clone(),
        env: a.env.clone(),
        hello,
        op_timeout: op_timeout(spec),
        offer: a.offer.clone(),
        events: Some(LeaseRecorder::new(out.clone(), events, clock)),
        reported_only: spec.wire_leases,
        fatal: Arc::new(move |msg: String| {
            eprintln!("error: {msg}");
            o.send(&Message::Fatal(msg), true);
            std::process::exit(Exit::Error.code() as i32);
        }),
    }
}

async fn connect_storage(
    addr: &str,
    spec: &WorkerSpec,
    stop: &AtomicBool,
) -> Result<Box<dyn Resource>, String> {
    let timeout = Duration::from_millis(spec.storage_timeout_ms);
    if let Some(run_id) = &spec.storage_pg {
        let pg = crate::service::postgres_storage::worker_resource(
            run_id,
            user_url(spec).as_deref(),
            &auth(spec),
            addr,
            timeout,
        )?;
        return Ok(Box::new(pg));
    }
    if let Some(run_id) = &spec.storage_my {
        let my = crate::service::mariadb_storage::worker_resource(run_id, addr, timeout)?;
        return Ok(Box::new(my));
    }
    let addr: std::net::SocketAddr = addr
        .parse()
        .map_err(|e| format!("bad storage address {addr}: {e}"))?;
    let cfg = storage::ClientConfig { timeout };
    retry_connect("the storage", stop, || async move {
        StorageClient::connect_with(addr, cfg)
            .await
            .map(|c| Box::new(c) as Box<dyn Resource>)
            .map_err(|e| e.to_string())
    })
    .await
}

/// Try `connect` until it works, SIGTERM arrives, or [`CONNECT_PATIENCE`]
/// passes (servers may still be settling right after start-up).
async fn retry_connect<T, F, Fut>(
    what: &str,
    stop: &AtomicBool,
    mut connect: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + CONNECT_PATIENCE;
    loop {
        match connect().await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= deadline || stop.load(Ordering::SeqCst) => {
                return Err(format!("cannot connect to {what}: {e}"))
            }
            Err(e) => {
                eprintln!("connecting to {what}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
