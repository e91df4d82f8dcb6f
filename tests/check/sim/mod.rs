//! A small discrete-event simulator of lease locks, for generated tests
//! and benchmarks: workers acquire a lock, work on a protected counter or
//! set, renew in the background, pause past their lease (as under
//! SIGSTOP), and record a history exactly as lockjaw's runner would
//! (invocation before the request is sent, completion after the reply,
//! lines of a paused worker reaching the file late). The servers (see
//! `server`) are correct unless bugs are injected, and report the
//! ground truth the checks are compared with.
//!
//! Test-only: a module of the `check` test binary, also compiled into
//! `benches/lock_check.rs` (`#[path]`); each uses a part of it.

#![allow(dead_code)]

use lockjaw::history::{Meta, Op};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
pub use server::Bugs as SimBugs;
use server::{Bugs, LockServer, ServerTruth, Storage};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// What the workers do with the protected storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimWorkload {
    Lock,
    Counter,
    Set,
}

/// A simulation's parameters.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub workers: usize,
    pub lock_keys: usize,
    /// Critical sections per worker.
    pub steps: usize,
    pub lease_ms: u64,
    /// Redis style (the acquire sets the TTL) or etcd style (keep-alives).
    pub sets_ttl: bool,
    /// Redis style only: renew the key while holding it.
    pub renew: bool,
    /// The service hands out fences and the workers send them.
    pub fences: bool,
    /// The storage rejects stale fences.
    pub fencing: bool,
    pub workload: SimWorkload,
    /// Chance a holder pauses past its lease inside its critical section.
    pub pause_prob: f64,
    /// Chance a pause also delays the worker's last line (out of order).
    pub late_prob: f64,
    /// Chance an acquire's reply is lost (recorded as `info`).
    pub info_prob: f64,
    pub bugs: Bugs,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            workers: 4,
            lock_keys: 1,
            steps: 20,
            lease_ms: 200,
            sets_ttl: true,
            renew: true,
            fences: true,
            fencing: true,
            workload: SimWorkload::Counter,
            pause_prob: 0.1,
            late_prob: 0.5,
            info_prob: 0.02,
            bugs: Bugs::default(),
        }
    }
}

/// The ground truth of a simulated run, by op index.
#[derive(Clone, Debug, Default)]
pub struct SimTruth {
    /// (earlier owner, later acquire's completion index).
    pub double_grants: Vec<(String, u64)>,
    /// Acquire completions whose fence was not above every earlier one.
    pub fence_regressions: Vec<u64>,
    /// Completions of stale fenced writes the storage accepted.
    pub stale_writes: Vec<u64>,
    pub stale_reads: u64,
    pub dropped_writes: u64,
    pub pauses: u64,
}

const MS: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Idle,
    Acquiring,
    Reading,
    Writing,
    Holding,
    Releasing,
    NewLease,
    Done,
}

struct Worker {
    proc_num: i64,
    step: Step,
    steps_left: usize,
    key: usize,
    owner: String,
    lease: String,
    lease_epoch: u64,
    fence: Option<u64>,
    read: Value,
    paused_until: u64,
    holding: bool,
    renewing: bool,
    ticking: bool,
    /// The worker's latest line while it has not reached the file.
    last_slot: Option<u64>,
}

#[derive(Clone, Debug)]
enum Ev {
    Act(usize),
    Reply(usize, bool, Call, Answer),
    Tick(usize),
    Arrive(usize, bool, Call),
}

/// A scheduled event, ordered by time then scheduling order.
struct Timed {
    t: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

#[derive(Clone, Debug)]
struct Call {
    id: u64,
    f: &'static str,
    key: usize,
    owner: String,
    fence: Option<u64>,
    value: Value,
    inv_index: u64,
    lost_reply: bool,
}

#[derive(Clone, Debug, Default)]
struct Answer {
    ok: bool,
    fence: Option<u64>,
    seq: Option<u64>,
    value: Value,
    stale: bool,
}

struct Sim<'a> {
    cfg: SimConfig,
    rng: StdRng,
    now: u64,
    seqno: u64,
    events: BinaryHeap<Reverse<Timed>>,
    workers: Vec<Worker>,
    lock: LockServer,
    store: Storage,
    truth: ServerTruth,
    index: u64,
    call_done: HashMap<u64, u64>,
    out: BinaryHeap<Reverse<(u64, u64)>>,
    out_ops: HashMap<u64, Op>,
    sink: &'a mut dyn FnMut(Op),
    next_call: u64,
    elem: u64,
    pauses: u64,
}

/// Run a simulation, handing each op to `sink` in file order; returns the
/// history's meta record and the ground truth.
pub fn simulate(cfg: &SimConfig, sink: &mut dyn FnMut(Op)) -> (Meta, SimTruth) {
    let initial = match cfg.workload {
        SimWorkload::Set => json!([]),
        _ => json!(0),
    };
    let mut sim = Sim {
        cfg: cfg.clone(),
        rng: StdRng::seed_from_u64(cfg.seed),
        now: 0,
        seqno: 0,
        events: BinaryHeap::new(),
        workers: Vec::new(),
        lock: LockServer::new(cfg.sets_ttl, cfg.lease_ms * MS),
        store: Storage::new(cfg.fencing, initial.clone()),
        truth: ServerTruth::default(),
        index: 0,
        call_done: HashMap::new(),
        out: BinaryHeap::new(),
        out_ops: HashMap::new(),
        sink,
        next_call: 0,
        elem: 0,
        pauses: 0,
    };
    sim.run();
    let meta = sim_meta(cfg);
    let t = &sim.truth;
    let idx = |c: &u64| sim.call_done.get(c).copied();
    let truth = SimTruth {
        double_grants: t
            .double_grants
            .iter()
            .filter_map(|(o, c)| idx(c).map(|i| (o.clone(), i)))
            .collect(),
        fence_regressions: t.fence_regressions.iter().filter_map(idx).collect(),
        stale_writes: t.stale_writes.iter().filter_map(idx).collect(),
        stale_reads: t.stale_reads,
        dropped_writes: t.dropped_writes,
        pauses: sim.pauses,
    };
    (meta, truth)
}

/// [`simulate`] into memory.
pub fn simulate_vec(cfg: &SimConfig) -> (Meta, Vec<Op>, SimTruth) {
    let mut ops = Vec::new();
    let (m, t) = simulate(cfg, &mut |op| ops.push(op));
    (m, ops, t)
}

/// The meta record of a simulated history.
pub fn sim_meta(cfg: &SimConfig) -> Meta {
    let initial = match cfg.workload {
        SimWorkload::Set => json!([]),
        _ => json!(0),
    };
    let workload = match cfg.workload {
        SimWorkload::Lock => "lock",
        SimWorkload::Counter => "fenced-counter",
        SimWorkload::Set => "lock-set",
    };
    let v = json!({
        "checkers": ["lock"],
        "workload": workload,
        "acquire_sets_ttl": cfg.sets_ttl,
        "initial": initial,
        "seed": cfg.seed,
    });
    serde_json::from_value(v).expect("valid meta")
}

impl Sim<'_> {
    fn run(&mut self) {
        for w in 0..self.cfg.workers {
            self.workers.push(Worker {
                proc_num: w as i64,
                step: Step::Idle,
                steps_left: self.cfg.steps,
                key: w % self.cfg.lock_keys.max(1),
                owner: String::new(),
                lease: String::new(),
                lease_epoch: 0,
                fence: None,
                read: Value::Null,
                paused_until: 0,
                holding: false,
                renewing: false,
                ticking: false,
                last_slot: None,
            });
            let t = self.rng.gen_range(0..5 * MS);
            if !self.cfg.sets_ttl {
                self.workers[w].step = Step::NewLease;
            }
            self.at(t, Ev::Act(w));
        }
        while let Some(Reverse(Timed { t, ev, .. })) = self.events.pop() {
            self.now = t;
            self.handle(ev);
            self.flush(false);
        }
        self.final_reads();
        self.flush(true);
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seqno += 1;
        self.events.push(Reverse(Timed {
            t,
            seq: self.seqno,
            ev,
        }));
    }

    fn delay(&mut self) -> u64 {
        if self.rng.gen_bool(0.05) {
            self.rng.gen_range(10 * MS..40 * MS)
        } else {
            self.rng.gen_range(MS / 10..3 * MS)
        }
    }

    /// Whose event this is, if it belongs to a worker that is paused.
    fn worker_of(ev: &Ev) -> Option<usize> {
        match ev {
            Ev::Act(w) | Ev::Reply(w, _, _, _) | Ev::Tick(w) => Some(*w),
            Ev::Arrive(..) => None,
        }
    }

    fn handle(&mut self, ev: Ev) {
        if let Some(w) = Self::worker_of(&ev) {
            let until = self.workers[w].paused_until;
            if until > self.now {
                let t = until + self.rng.gen_range(0..MS);
                self.at(t, ev);
                return;
            }
        }
        match ev {
            Ev::Act(w) => self.act(w),
            Ev::Tick(w) => self.tick(w),
            Ev::Arrive(w, lease, call) => self.serve(w, lease, call),
            Ev::Reply(w, lease, call, ans) => self.reply(w, lease, call, ans),
        }
    }
}

mod run;
mod server;
