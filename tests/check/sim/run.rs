//! The simulator's event handlers: what a worker does next, what the
//! servers answer, and how lines are recorded and reach the file.

use super::{Answer, Call, Ev, Sim, SimWorkload, Step, MS};
use lockjaw::history::{Op, OpType, Process};
use rand::Rng;
use serde_json::{json, Value};
use std::cmp::Reverse;

impl Sim<'_> {
    pub(super) fn act(&mut self, w: usize) {
        let wk = &self.workers[w];
        let (key, owner, fence) = (wk.key, wk.owner.clone(), wk.fence);
        match wk.step {
            Step::NewLease => {
                let wk = &mut self.workers[w];
                wk.lease_epoch += 1;
                wk.lease = format!("L{w}.{}", wk.lease_epoch);
                let lease = wk.lease.clone();
                self.send(w, false, "renew", None, &lease, None, json!("grant"));
            }
            Step::Idle if wk.steps_left == 0 => self.workers[w].step = Step::Done,
            Step::Idle => {
                let owner = if self.cfg.sets_ttl {
                    self.next_call += 1;
                    format!("t{w}.{}", self.next_call)
                } else {
                    wk.lease.clone()
                };
                let wk = &mut self.workers[w];
                wk.owner = owner.clone();
                wk.step = Step::Acquiring;
                self.send(w, false, "acquire", Some(key), &owner, None, Value::Null);
            }
            Step::Reading => {
                self.send(w, false, "read", Some(key), &owner, fence, Value::Null);
            }
            Step::Writing => {
                let v = match (&self.cfg.workload, &self.workers[w].read) {
                    (SimWorkload::Set, Value::Array(a)) => {
                        self.elem += 1;
                        let mut a = a.clone();
                        a.push(json!(self.elem));
                        Value::Array(a)
                    }
                    (_, v) => json!(v.as_i64().unwrap_or(0) + 1),
                };
                self.send(w, false, "write", Some(key), &owner, fence, v);
            }
            Step::Holding | Step::Releasing => {
                self.workers[w].step = Step::Releasing;
                self.send(w, false, "release", Some(key), &owner, None, Value::Null);
            }
            Step::Acquiring | Step::Done => {}
        }
    }

    pub(super) fn tick(&mut self, w: usize) {
        let wk = &self.workers[w];
        let stop = if self.cfg.sets_ttl {
            !wk.holding
        } else {
            wk.step == Step::Done
        };
        if stop {
            self.workers[w].ticking = false;
            return;
        }
        if !wk.renewing {
            let (key, owner) = if self.cfg.sets_ttl {
                (Some(wk.key), wk.owner.clone())
            } else {
                (None, wk.lease.clone())
            };
            self.workers[w].renewing = true;
            self.send(w, true, "renew", key, &owner, None, Value::Null);
        }
        let next = self.now + self.cfg.lease_ms * MS / 3 + self.rng.gen_range(0..MS);
        self.at(next, Ev::Tick(w));
    }

    fn start_ticking(&mut self, w: usize) {
        if !self.workers[w].ticking {
            self.workers[w].ticking = true;
            let t = self.now + self.cfg.lease_ms * MS / 3;
            self.at(t, Ev::Tick(w));
        }
    }

    /// Record the invocation and put the request on the wire.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        w: usize,
        lease: bool,
        f: &'static str,
        key: Option<usize>,
        owner: &str,
        fence: Option<u64>,
        value: Value,
    ) {
        self.next_call += 1;
        let lost = f == "acquire" && self.rng.gen_bool(self.cfg.info_prob);
        let mut op = Op::new(self.now, self.process(w, lease), OpType::Invoke, f);
        op.key = key.map(|k| self.key_name(f, k));
        op.owner = Some(owner.to_string());
        op.fence = fence;
        if f == "write" {
            op.value = value.clone();
        }
        let inv_index = self.record(w, op);
        let call = Call {
            id: self.next_call,
            f,
            key: key.unwrap_or(0),
            owner: owner.to_string(),
            fence,
            value,
            inv_index,
            lost_reply: lost,
        };
        if !lost || self.rng.gen_bool(0.5) {
            let t = self.now + self.delay();
            self.at(t, Ev::Arrive(w, lease, call.clone()));
        }
        if lost {
            let t = self.now + 100 * MS;
            self.at(t, Ev::Reply(w, lease, call, Answer::default()));
        }
    }

    fn key_name(&self, f: &str, k: usize) -> String {
        match (f, self.cfg.workload) {
            ("read" | "write", SimWorkload::Set) => format!("set{k}"),
            ("read" | "write", _) => format!("counter{k}"),
            _ => format!("lock{k}"),
        }
    }

    fn process(&self, w: usize, lease: bool) -> Process {
        if lease {
            Process::Named(format!("{w}-lease"))
        } else {
            Process::Num(self.workers[w].proc_num)
        }
    }

    /// The servers handle a request that arrived now.
    pub(super) fn serve(&mut self, w: usize, lease: bool, call: Call) {
        let now = self.now;
        let rng = &mut self.rng;
        let mut roll = || rng.gen::<f64>();
        let bugs = &self.cfg.bugs;
        let mut a = Answer::default();
        match call.f {
            "acquire" => {
                let (ok, fence) = self.lock.acquire(
                    call.key,
                    &call.owner,
                    call.id,
                    now,
                    bugs,
                    &mut roll,
                    &mut self.truth,
                );
                a.ok = ok;
                a.fence = fence;
                a.stale = !self.cfg.sets_ttl && !self.lock.lease_alive(&call.owner, now);
            }
            "renew" if self.cfg.sets_ttl => a.ok = self.lock.renew(call.key, &call.owner, now),
            "renew" => {
                let create = call.value == json!("grant");
                a.ok = self.lock.keep_alive(&call.owner, now, create);
            }
            "release" => a.ok = self.lock.release(call.key, &call.owner, now),
            _ => {
                let write = (call.f == "write").then(|| call.value.clone());
                let (ok, seq, v) = self.store.request(
                    call.key,
                    write,
                    call.fence,
                    call.id,
                    bugs,
                    &mut roll,
                    &mut self.truth,
                );
                a.ok = ok;
                a.seq = Some(seq);
                a.value = v;
                a.stale = !ok;
            }
        }
        if !call.lost_reply {
            let t = self.now + self.delay();
            self.at(t, Ev::Reply(w, lease, call, a));
        }
    }

    /// A reply reached the (running) worker: record it and go on.
    pub(super) fn reply(&mut self, w: usize, lease: bool, call: Call, a: Answer) {
        let kind = if call.lost_reply {
            OpType::Info
        } else if a.ok {
            OpType::Ok
        } else {
            OpType::Fail
        };
        let mut op = Op::new(self.now, self.process(w, lease), kind, call.f);
        op.key = (call.f != "renew" || self.cfg.sets_ttl).then(|| self.key_name(call.f, call.key));
        op.owner = Some(call.owner.clone());
        op.fence = if call.f == "acquire" {
            a.fence
        } else {
            call.fence
        };
        if call.f == "acquire" && !self.cfg.fences {
            op.fence = None;
        }
        if a.ok && (call.f == "acquire" || call.f == "renew") {
            op.lease_ms = Some(self.cfg.lease_ms);
        }
        op.seq = a.seq;
        op.value = if call.f == "read" {
            a.value.clone()
        } else {
            call.value.clone()
        };
        if call.f == "renew" || call.f == "release" || call.f == "acquire" {
            op.value = Value::Null;
        }
        if call.f == "read" || call.f == "write" {
            op.error = a.stale.then(|| "stale-fence".to_string());
        }
        let _ = call.inv_index;
        let idx = self.record(w, op);
        if self.truth.calls.contains(&call.id) {
            self.call_done.insert(call.id, idx);
        }
        if lease {
            self.workers[w].renewing = false;
            return;
        }
        self.next_step(w, &call, &a);
    }

    fn next_step(&mut self, w: usize, call: &Call, a: &Answer) {
        let think = self.rng.gen_range(0..10 * MS);
        match call.f {
            "renew" => {
                self.workers[w].step = Step::Idle;
                self.start_ticking(w);
            }
            "acquire" if call.lost_reply => {
                let n = self.cfg.workers as i64;
                let wk = &mut self.workers[w];
                wk.proc_num += n;
                wk.step = Step::Idle;
            }
            "acquire" if !a.ok => {
                self.workers[w].step = if a.stale { Step::NewLease } else { Step::Idle };
                let t = self.now + self.rng.gen_range(5 * MS..40 * MS);
                self.at(t, Ev::Act(w));
                return;
            }
            "acquire" => {
                let fences = self.cfg.fences;
                let wk = &mut self.workers[w];
                wk.holding = true;
                wk.fence = a.fence.filter(|_| fences);
                wk.step = if self.cfg.workload == SimWorkload::Lock {
                    Step::Holding
                } else {
                    Step::Reading
                };
                if self.cfg.sets_ttl && self.cfg.renew {
                    self.start_ticking(w);
                }
                if self.workers[w].step == Step::Holding {
                    self.maybe_pause(w);
                }
            }
            "read" if !a.ok => self.workers[w].step = Step::Releasing,
            "read" => {
                self.workers[w].read = a.value.clone();
                self.workers[w].step = Step::Writing;
                self.maybe_pause(w);
            }
            "write" => self.workers[w].step = Step::Releasing,
            _ => {
                let wk = &mut self.workers[w];
                wk.holding = false;
                wk.steps_left -= 1;
                wk.step = Step::Idle;
            }
        }
        let t = self.now + think;
        self.at(t, Ev::Act(w));
    }

    /// Maybe stop the worker (and its renewals) for longer than its lease.
    fn maybe_pause(&mut self, w: usize) {
        if !self.rng.gen_bool(self.cfg.pause_prob) {
            return;
        }
        self.pauses += 1;
        let lease = self.cfg.lease_ms * MS;
        let until = self.now + self.rng.gen_range(lease * 6 / 5..lease * 3);
        self.workers[w].paused_until = until;
        if self.rng.gen_bool(self.cfg.late_prob) {
            // The line just recorded reaches the file only after the pause.
            if let Some(slot) = self.workers[w].last_slot.take() {
                if let Some(op) = self.out_ops.remove(&slot) {
                    self.emit_at(until, op);
                }
            }
        }
    }

    /// Give the op its index and queue it for the file.
    fn record(&mut self, w: usize, mut op: Op) -> u64 {
        op.index = self.index;
        self.index += 1;
        let i = op.index;
        let t = op.time;
        let slot = self.emit_at(t, op);
        self.workers[w].last_slot = Some(slot);
        i
    }

    pub(super) fn emit_at(&mut self, arrival: u64, op: Op) -> u64 {
        self.seqno += 1;
        self.out_ops.insert(self.seqno, op);
        self.out.push(Reverse((arrival, self.seqno)));
        self.seqno
    }

    /// Hand lines that have reached the file to the sink.
    pub(super) fn flush(&mut self, all: bool) {
        while let Some(&Reverse((arrival, slot))) = self.out.peek() {
            if !all && arrival > self.now {
                break;
            }
            self.out.pop();
            if let Some(op) = self.out_ops.remove(&slot) {
                (self.sink)(op);
            }
        }
    }

    /// After everything: one unfenced read of each storage key.
    pub(super) fn final_reads(&mut self) {
        if self.cfg.workload == SimWorkload::Lock {
            return;
        }
        self.now += 1_000 * MS;
        for k in 0..self.cfg.lock_keys.max(1) {
            let p = Process::Num(10_000 + k as i64);
            let mut op = Op::new(self.now, p.clone(), OpType::Invoke, "read");
            op.key = Some(self.key_name("read", k));
            op.index = self.index;
            self.index += 1;
            self.emit_at(self.now, op.clone());
            let rng = &mut self.rng;
            let mut roll = || rng.gen::<f64>();
            let bugs = self.cfg.bugs.clone();
            let (_, seq, v) =
                self.store
                    .request(k, None, None, 0, &bugs, &mut roll, &mut self.truth);
            op.kind = OpType::Ok;
            op.time = self.now + MS;
            op.index = self.index;
            self.index += 1;
            op.seq = Some(seq);
            op.value = v;
            self.emit_at(self.now + MS, op);
            self.now += 2 * MS;
        }
    }
}
