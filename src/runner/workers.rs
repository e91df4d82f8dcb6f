//! The controller's side of the workers: spawning `lockjaw worker`
//! processes, reading their stdout, forwarding their ops to the history,
//! tracking who holds what, killing, respawning and stopping them.
//!
//! Each worker is a supervised child (`crate::process`: own process group,
//! parent-death signal, a cgroup leaf of the run's group) with its stdout piped to a reader thread here and
//! its stderr appended to `logs/worker-N.log`. Its PID + start time goes
//! into the undo log right after the spawn. A worker that exits when nobody
//! asked it to is reported on the `deaths` channel; the run then ends.

use super::protocol::{Command, Message, WorkerSpec};
use crate::history::{Process, Sink};
use crate::nemesis::{MomentEvent, MomentNote, WorkerEvent, WorkerPool, WorkerView};
use crate::process::{self, Child, Signal};
use crate::undo::{Undo, UndoLog};
use crate::workload::step::{Moment, StateEvent};
use async_trait::async_trait;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;

/// Threads that spawn a run's workers side by side.
const SPAWN_LANES: usize = 4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a worker stopped without being asked to.
#[derive(Clone, Debug)]
pub struct Death {
    pub slot: usize,
    pub msg: String,
}

/// A worker's process handle and its stdout reader thread.
type Handles = (Option<Arc<Child>>, Option<JoinHandle<()>>);

struct Slot {
    spec: WorkerSpec,
    child: Option<Arc<Child>>,
    /// Its stdin: the controller's commands ([`Command`]).
    stdin: Option<std::process::ChildStdin>,
    undo_id: Option<u64>,
    reader: Option<JoinHandle<()>>,
    last: Option<StateEvent>,
    max_process: i64,
    ready: bool,
    /// The controller killed or is stopping it: its exit is no death.
    expected_exit: bool,
    fatal: Option<String>,
}

/// The worker processes of one run.
pub struct Pool {
    me: Weak<Pool>,
    exe: PathBuf,
    dir: PathBuf,
    /// The run's cgroup group (`lockjaw/<run-id>`): each worker
    /// incarnation runs in a leaf of its own, `worker-SLOT.INCARNATION`.
    group: Option<String>,
    slots: Mutex<Vec<Slot>>,
    events: broadcast::Sender<WorkerEvent>,
    /// Watched protocol moments: announcements and passes.
    moments: broadcast::Sender<MomentEvent>,
    /// Watch ids a fault still waits for; an announcement of any other id
    /// is answered "go, unarmed" at once.
    wanted: Mutex<HashSet<u64>>,
    next_watch: AtomicU64,
    sink: Arc<dyn Sink>,
    undo: Arc<UndoLog>,
    deaths: mpsc::UnboundedSender<Death>,
    /// Workers started (incarnations included).
    pub started: AtomicU64,
    /// Steps and grants the workers reported when they exited.
    pub steps: AtomicU64,
    pub grants: AtomicU64,
    /// Protected writes the workers' lease guards abandoned.
    pub abandoned: AtomicU64,
    /// The workers' stall meters' reports.
    pub stalls: Mutex<Vec<crate::report::stalls::Stall>>,
}

impl Pool {
    /// A pool for these specs (one per slot); nothing starts yet.
    pub fn new(
        exe: PathBuf,
        dir: PathBuf,
        group: Option<String>,
        specs: Vec<WorkerSpec>,
        sink: Arc<dyn Sink>,
        undo: Arc<UndoLog>,
    ) -> (Arc<Pool>, mpsc::UnboundedReceiver<Death>) {
        let (deaths, rx) = mpsc::unbounded_channel();
        let slots = specs
            .into_iter()
            .map(|spec| Slot {
                max_process: spec.first_process,
                spec,
                child: None,
                stdin: None,
                undo_id: None,
                reader: None,
                last: None,
                ready: false,
                expected_exit: false,
                fatal: None,
            })
            .collect();
        let pool = Arc::new_cyclic(|me| Pool {
            me: me.clone(),
            exe,
            dir,
            group,
            slots: Mutex::new(slots),
            events: broadcast::channel(4096).0,
            moments: broadcast::channel(256).0,
            wanted: Mutex::default(),
            next_watch: AtomicU64::new(1),
            sink,
            undo,
            deaths,
            started: Default::default(),
            steps: Default::default(),
            grants: Default::default(),
            abandoned: Default::default(),
            stalls: Default::default(),
        });
        (pool, rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        lock(&self.slots)
    }

    /// The log file of a slot's worker.
    pub fn log_path(&self, slot: usize) -> PathBuf {
        self.dir.join("logs").join(format!("worker-{slot}.log"))
    }

    /// The libfaketime control file of a slot's worker (client clock
    /// faults).
    fn clock_path(&self, slot: usize) -> PathBuf {
        self.dir
            .join("faketime")
            .join(format!("worker-{slot}.offset"))
    }

    /// Start every slot's worker.
    pub fn spawn_all(&self) -> Result<(), String> {
        let n = self.lock().len();
        // Side by side (a spawn waits for its child's exec): 250 workers
        // one after another took seconds. The first error is returned;
        // a worker spawned meanwhile is in the undo log like the others.
        let lanes = n.clamp(1, SPAWN_LANES);
        std::thread::scope(|sc| {
            let lanes: Vec<_> = (0..lanes)
                .map(|lane| {
                    sc.spawn(move || {
                        (lane..n)
                            .step_by(SPAWN_LANES)
                            .try_for_each(|slot| self.spawn(slot))
                    })
                })
                .collect();
            lanes
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect::<Result<Vec<()>, String>>()
                .map(drop)
        })
    }

    /// Start the worker of `slot` (its current spec).
    pub fn spawn(&self, slot: usize) -> Result<(), String> {
        let spec = self.lock()[slot].spec.clone();
        let spec_path = self
            .dir
            .join("workers")
            .join(format!("worker-{slot}.{}.json", spec.incarnation));
        let text = serde_json::to_string_pretty(&spec).expect("a spec serialises");
        std::fs::create_dir_all(spec_path.parent().expect("has a parent"))
            .and_then(|()| std::fs::write(&spec_path, text))
            .map_err(|e| format!("{}: {e}", spec_path.display()))?;
        let mut ps = process::Spec::new(self.exe.display().to_string())
            .arg("worker")
            .arg("--spec")
            .arg(spec_path.display().to_string());
        ps.log = Some(self.log_path(slot));
        ps.die_with_parent = true;
        ps.cgroup = self.group.as_ref().and_then(|g| {
            let leaf = format!("{g}/worker-{slot}.{}", spec.incarnation);
            Some(crate::process::Cgroup::under_root(&leaf)?.dir)
        });
        ps.pipe_stdout = true;
        ps.pipe_stdin = true;
        if spec.client_faketime {
            // Its own wall clock, for it and its adapter; a respawned
            // incarnation keeps the slot's file (a fault's undo resets it).
            let f = self.clock_path(slot);
            let made = std::fs::create_dir_all(f.parent().expect("has a parent")).and_then(|()| {
                match f.exists() {
                    true => Ok(()),
                    false => std::fs::write(&f, "+0\n"),
                }
            });
            made.map_err(|e| format!("{}: {e}", f.display()))?;
            ps.env.extend(crate::nemesis::client_clock::worker_env(&f));
        }
        let child = process::spawn(&ps).map_err(|e| format!("worker {slot}: {e}"))?;
        let undo_id = self
            .undo
            .push(Undo::Process {
                what: format!("worker {slot}"),
                proc: child.id(),
            })
            .map_err(|e| format!("cannot write the undo log: {e}"))?;
        let stdout = child
            .take_stdout()
            .ok_or_else(|| format!("worker {slot}: no stdout pipe"))?;
        let stdin = child.take_stdin();
        let child = Arc::new(child);
        {
            // Reset the slot before the reader starts: its `ready` may
            // arrive at once.
            let mut g = self.lock();
            let s = &mut g[slot];
            s.child = Some(child);
            s.stdin = stdin;
            s.undo_id = Some(undo_id);
            s.last = None;
            s.ready = false;
            s.expected_exit = false;
            s.fatal = None;
        }
        let me = self
            .me
            .upgrade()
            .expect("the pool is alive while it spawns");
        let inc = spec.incarnation;
        let reader = std::thread::Builder::new()
            .name(format!("lockjaw-worker-{slot}"))
            .spawn(move || me.read_loop(slot, inc, stdout))
            .map_err(|e| format!("cannot start a reader thread: {e}"))?;
        self.started.fetch_add(1, Ordering::Relaxed);
        self.lock()[slot].reader = Some(reader);
        Ok(())
    }

    fn read_loop(&self, slot: usize, inc: u32, stdout: std::process::ChildStdout) {
        for line in BufReader::with_capacity(1 << 16, stdout).lines() {
            let Ok(line) = line else { break };
            match Message::parse(&line) {
                Some(Message::Op(op)) => {
                    if let Process::Num(p) = op.process {
                        let mut g = self.lock();
                        g[slot].max_process = g[slot].max_process.max(p);
                    }
                    self.sink.record(op);
                }
                Some(Message::State(state)) => {
                    self.lock()[slot].last = Some(state.clone());
                    let _ = self.events.send(WorkerEvent {
                        slot,
                        incarnation: inc,
                        state,
                    });
                }
                Some(Message::Ready { .. }) => self.lock()[slot].ready = true,
                Some(Message::Fatal(msg)) => self.lock()[slot].fatal = Some(msg),
                Some(Message::Abandoned(_)) => {
                    self.abandoned.fetch_add(1, Ordering::Relaxed);
                }
                Some(Message::Stall {
                    start_ns,
                    end_ns,
                    late_ms,
                }) => {
                    let s = crate::report::stalls::Stall {
                        slot,
                        start_ns,
                        end_ns,
                        late_ms,
                    };
                    (self.stalls.lock().unwrap_or_else(|e| e.into_inner())).push(s);
                }
                Some(Message::Moment { id, moment, state }) => {
                    if lock(&self.wanted).remove(&id) {
                        let note = MomentNote::Announced { moment, state };
                        self.note_moment(slot, inc, id, note);
                    } else {
                        self.command(slot, &Command::Go { id, armed: false });
                    }
                }
                Some(Message::Passed { id, armed }) => {
                    self.note_moment(slot, inc, id, MomentNote::Passed { armed });
                }
                Some(Message::Outcome { id, kind, error }) => {
                    self.note_moment(slot, inc, id, MomentNote::Outcome { kind, error });
                }
                Some(Message::Done { steps, grants }) => {
                    self.steps.fetch_add(steps, Ordering::Relaxed);
                    self.grants.fetch_add(grants, Ordering::Relaxed);
                }
                None => tracing::warn!("worker {slot}: unreadable line {line:?}"),
            }
        }
        self.exited(slot, inc);
    }

    fn note_moment(&self, slot: usize, incarnation: u32, id: u64, note: MomentNote) {
        let _ = self.moments.send(MomentEvent {
            slot,
            incarnation,
            id,
            note,
        });
    }

    /// Write one command to the worker of `slot` (lost if it is gone).
    fn command(&self, slot: usize, c: &Command) {
        use std::io::Write;
        let mut g = self.lock();
        if let Some(stdin) = g[slot].stdin.as_mut() {
            if stdin.write_all(c.line().as_bytes()).is_err() {
                g[slot].stdin = None;
            }
        }
    }

    /// The worker's stdout closed: it exited (or is about to).
    fn exited(&self, slot: usize, inc: u32) {
        let (child, undo_id, expected, fatal) = {
            let g = self.lock();
            let s = &g[slot];
            if s.spec.incarnation != inc {
                return;
            }
            (s.child.clone(), s.undo_id, s.expected_exit, s.fatal.clone())
        };
        let status = child
            .as_ref()
            .and_then(|c| c.wait_timeout(Duration::from_secs(5)))
            .map(|s| s.to_string())
            .unwrap_or_else(|| "still running".into());
        if let Some(id) = undo_id {
            if child.as_ref().is_some_and(|c| !c.is_alive()) {
                self.undo.forget(id);
            }
        }
        if !expected {
            let why = fatal.unwrap_or_else(|| format!("exited ({status})"));
            let _ = self.deaths.send(Death {
                slot,
                msg: format!(
                    "worker {slot} stopped unexpectedly: {why}; see {}",
                    self.log_path(slot).display()
                ),
            });
        }
    }

    /// Wait until every worker said `ready`; fails on a worker that gave up.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let g = self.lock();
                if let Some((i, s)) = g.iter().enumerate().find(|(_, s)| s.fatal.is_some()) {
                    return Err(format!(
                        "worker {i}: {} (see {})",
                        s.fatal.clone().unwrap_or_default(),
                        self.log_path(i).display()
                    ));
                }
                if g.iter().all(|s| s.ready) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                let late: Vec<String> = {
                    let g = self.lock();
                    (0..g.len())
                        .filter(|i| !g[*i].ready)
                        .map(|i| self.log_path(i).display().to_string())
                        .collect()
                };
                return Err(format!(
                    "{} workers were not ready after {timeout:?} (see {})",
                    late.len(),
                    late.join(", ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Let every worker take its first step (they wait for it once ready).
    pub fn start_all(&self) {
        for slot in 0..self.slots() {
            self.command(slot, &Command::Start);
        }
    }

    /// Stop every worker: SIGTERM (each finishes its step and releases),
    /// up to `grace`, then SIGKILL; then wait until every op they wrote has
    /// been forwarded to the history.
    pub async fn stop_all(&self, grace: Duration) {
        let children: Vec<Handles> = {
            let mut g = self.lock();
            g.iter_mut()
                .map(|s| {
                    s.expected_exit = true;
                    (s.child.clone(), s.reader.take())
                })
                .collect()
        };
        // SIGTERM to the worker only: a client adapter in its group must
        // live on to release what the worker holds (it exits when the
        // worker closes its stdin, or dies with the worker).
        for (c, _) in &children {
            if let Some(c) = c {
                let _ = c.id().signal_group(Signal::Cont);
                let _ = c.id().signal(Signal::Term);
            }
        }
        let deadline = Instant::now() + grace;
        for (c, _) in &children {
            if let Some(c) = c.clone() {
                let left = deadline.saturating_duration_since(Instant::now());
                let _ = tokio::task::spawn_blocking(move || {
                    if c.wait_timeout(left).is_none() {
                        let _ = c.kill();
                    }
                })
                .await;
            }
        }
        for (_, r) in children {
            if let Some(r) = r {
                let _ = tokio::task::spawn_blocking(move || r.join()).await;
            }
        }
        let ids: Vec<u64> = self.lock().iter().filter_map(|s| s.undo_id).collect();
        for id in ids {
            self.undo.forget(id);
        }
    }
}

#[async_trait]
impl WorkerPool for Pool {
    fn slots(&self) -> usize {
        self.lock().len()
    }

    fn view(&self, slot: usize) -> WorkerView {
        let g = self.lock();
        let s = &g[slot];
        let proc = s.child.as_ref().map(|c| c.id());
        WorkerView {
            slot,
            incarnation: s.spec.incarnation,
            proc,
            last: s.last.clone(),
            alive: proc.is_some_and(|p| p.is_alive()),
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<WorkerEvent> {
        self.events.subscribe()
    }

    async fn kill(&self, slot: usize) -> Result<(), String> {
        let (child, undo_id) = {
            let mut g = self.lock();
            g[slot].expected_exit = true;
            (g[slot].child.clone(), g[slot].undo_id)
        };
        let Some(c) = child else {
            return Err(format!("worker {slot} is not running"));
        };
        tokio::task::spawn_blocking(move || c.kill())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("worker {slot}: {e}"))?;
        if let Some(id) = undo_id {
            self.undo.forget(id);
        }
        Ok(())
    }

    fn watch(&self, slot: usize, moment: Moment) -> Result<u64, String> {
        if self.lock()[slot].stdin.is_none() {
            return Err(format!("worker {slot} is not running"));
        }
        let id = self.next_watch.fetch_add(1, Ordering::Relaxed);
        lock(&self.wanted).insert(id);
        self.command(slot, &Command::Watch { id, moment });
        Ok(id)
    }

    fn unwatch(&self, slot: usize, id: u64) {
        lock(&self.wanted).remove(&id);
        self.command(slot, &Command::Unwatch { id });
    }

    fn go(&self, slot: usize, id: u64, armed: bool) {
        self.command(slot, &Command::Go { id, armed });
    }

    fn moments(&self) -> Option<broadcast::Receiver<MomentEvent>> {
        Some(self.moments.subscribe())
    }

    fn clock_file(&self, slot: usize) -> Option<PathBuf> {
        let on = self.lock().get(slot)?.spec.client_faketime;
        on.then(|| self.clock_path(slot))
    }

    async fn respawn(&self, slot: usize) -> Result<(), String> {
        let old = {
            let mut g = self.lock();
            let s = &mut g[slot];
            let stride = s.spec.stride;
            s.spec.incarnation += 1;
            s.spec.first_process = s.max_process.max(s.spec.first_process) + stride;
            s.max_process = s.spec.first_process;
            s.reader.take()
        };
        if let Some(old) = old {
            let _ = tokio::task::spawn_blocking(move || old.join()).await;
        }
        self.spawn(slot)
    }
}
