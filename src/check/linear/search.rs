//! The linearization search (Wing & Gong, Lowe; Porcupine's shape).
//!
//! Call and return events sit in a doubly linked list in real-time order.
//! The search walks the list: at a call it tries to linearize that op next
//! (the model's `step` must accept it), lifting its call and return out of
//! the list; at a return whose op is not yet linearized it backtracks. A
//! memo of (set of linearized ops, model state) prunes every configuration
//! already explored. Ops pending forever (ended in `info`) may take effect
//! at any point after their call or never, so the search is done once every
//! completed op is linearized.
//!
//! Representation: ops are numbered completed-first, in call order. The set
//! of linearized ops is a bitset with a Zobrist hash updated per bit; the
//! memo stores it as the window between the first word not all set and the
//! last word not all clear (all earlier ops are linearized, later ones not),
//! plus the pending ops' bits, in one arena. Model states are interned to
//! u32 ids. Nothing here knows any model beyond the `Model` trait.

use crate::check::models::Model;
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

/// A return time meaning "never returned" (pending forever).
pub const PENDING: u64 = u64::MAX;

/// One operation as the search sees it.
#[derive(Clone, Debug)]
pub struct SearchOp<I, O> {
    pub call: u64,
    /// `PENDING` for an op that may take effect at any time after `call`.
    pub ret: u64,
    pub input: I,
    pub output: O,
}

/// Limits shared by the searches of one check (all partitions).
#[derive(Debug)]
pub struct Control {
    pub cancel: AtomicBool,
    pub deadline: Option<Instant>,
    /// Cap on the memo's memory, summed over concurrent searches.
    pub memory_limit: usize,
    pub memory_used: AtomicUsize,
    pub memory_peak: AtomicUsize,
}

impl Control {
    pub fn new(deadline: Option<Instant>, memory_limit: usize) -> Control {
        Control {
            cancel: AtomicBool::new(false),
            deadline,
            memory_limit,
            memory_used: AtomicUsize::new(0),
            memory_peak: AtomicUsize::new(0),
        }
    }

    fn charge(&self, delta: isize) -> usize {
        let now = if delta >= 0 {
            self.memory_used
                .fetch_add(delta as usize, Ordering::Relaxed)
                + delta as usize
        } else {
            self.memory_used
                .fetch_sub((-delta) as usize, Ordering::Relaxed)
                - (-delta) as usize
        };
        self.memory_peak.fetch_max(now, Ordering::Relaxed);
        now
    }
}

/// How a search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Linearizable,
    /// No linearization exists.
    Illegal,
    /// Another partition found a violation first.
    Cancelled,
    TimedOut,
    /// The memo reached `Control::memory_limit`.
    MemoryCap,
}

/// The result of one search.
#[derive(Clone, Debug)]
pub struct Searched {
    pub outcome: Outcome,
    /// The longest linearizable prefix found (op numbers in order); on
    /// success, a full linearization of the completed ops.
    pub best: Vec<u32>,
    pub steps: u64,
    pub memo_entries: usize,
    pub states: usize,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Zobrist value of op `i`.
fn zob(i: u32) -> u64 {
    mix((i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15))
}

/// The set of linearized ops, with its hash and memo window.
struct Linearized {
    req: Vec<u64>,
    pend: Vec<u64>,
    n_req: usize,
    hash: u64,
    /// First word of `req` not all ones.
    lo: usize,
    /// One past the last word of `req` not all zeros.
    hi: usize,
}

impl Linearized {
    fn new(n_req: usize, n_pend: usize) -> Linearized {
        Linearized {
            req: vec![0; n_req.div_ceil(64)],
            pend: vec![0; n_pend.div_ceil(64)],
            n_req,
            hash: 0,
            lo: 0,
            hi: 0,
        }
    }

    fn full(&self, w: usize) -> u64 {
        let tail = self.n_req % 64;
        if w + 1 == self.req.len() && tail != 0 {
            (1u64 << tail) - 1
        } else {
            u64::MAX
        }
    }

    fn flip(&mut self, i: u32) {
        self.hash ^= zob(i);
        let i = i as usize;
        if i >= self.n_req {
            let j = i - self.n_req;
            self.pend[j / 64] ^= 1 << (j % 64);
            return;
        }
        let w = i / 64;
        self.req[w] ^= 1 << (i % 64);
        if self.req[w] & (1 << (i % 64)) != 0 {
            // Set.
            if w >= self.hi {
                self.hi = w + 1;
            }
            while self.lo < self.req.len() && self.req[self.lo] == self.full(self.lo) {
                self.lo += 1;
            }
        } else {
            // Cleared.
            if w < self.lo {
                self.lo = w;
            }
            while self.hi > 0 && self.req[self.hi - 1] == 0 {
                self.hi -= 1;
            }
        }
    }

    fn window(&self) -> &[u64] {
        if self.hi > self.lo {
            &self.req[self.lo..self.hi]
        } else {
            &[]
        }
    }
}

/// The memo of explored (linearized set, state) configurations.
struct Memo {
    table: HashTable<(u64, u32, u32)>,
    arena: Vec<u64>,
}

impl Memo {
    /// Record the configuration; false if it was already explored.
    fn visit(&mut self, lin: &Linearized, state: u32) -> bool {
        let hash = mix(lin.hash ^ (state as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let win = lin.window();
        let header = (lin.lo as u64) | ((win.len() as u64) << 32);
        let arena = &self.arena;
        let seen = self.table.find(hash, |&(h, s, off)| {
            if h != hash || s != state {
                return false;
            }
            let off = off as usize;
            arena[off] == header
                && arena[off + 1..off + 1 + win.len()] == *win
                && arena[off + 1 + win.len()..off + 1 + win.len() + lin.pend.len()] == *lin.pend
        });
        if seen.is_some() {
            return false;
        }
        let off = self.arena.len() as u32;
        self.arena.push(header);
        self.arena.extend_from_slice(win);
        self.arena.extend_from_slice(&lin.pend);
        self.table.insert_unique(hash, (hash, state, off), |e| e.0);
        true
    }

    fn bytes(&self) -> usize {
        self.arena.capacity() * 8 + self.table.capacity() * 17
    }
}

/// Interned model states.
struct States<S> {
    table: HashTable<u32>,
    vals: Vec<S>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl<S: std::hash::Hash + Eq> States<S> {
    fn intern(&mut self, s: S) -> u32 {
        let hash = self.hasher.hash_one(&s);
        let vals = &self.vals;
        if let Some(&id) = self.table.find(hash, |&id| vals[id as usize] == s) {
            return id;
        }
        let id = self.vals.len() as u32;
        self.vals.push(s);
        let (vals, hasher) = (&self.vals, &self.hasher);
        self.table
            .insert_unique(hash, id, |&i| hasher.hash_one(&vals[i as usize]));
        id
    }

    fn bytes(&self) -> usize {
        self.vals.capacity() * std::mem::size_of::<S>() + self.table.capacity() * 5
    }
}

/// Remembered steps: (state id, op) → next state id or `ILLEGAL`, so a
/// step tried again after backtracking costs one lookup instead of a model
/// step and a state interning. Enabled once the search has backtracked more
/// than it has ops (before that, steps rarely repeat).
struct Transitions {
    table: HashTable<(u32, u32, u32)>,
    on: bool,
}

const ILLEGAL: u32 = u32::MAX;

impl Transitions {
    fn hash(state: u32, op: u32) -> u64 {
        mix(((state as u64) << 32) | op as u64)
    }

    fn get(&self, state: u32, op: u32) -> Option<u32> {
        let h = Self::hash(state, op);
        self.table
            .find(h, |e| e.0 == state && e.1 == op)
            .map(|e| e.2)
    }

    fn put(&mut self, state: u32, op: u32, next: u32) {
        let h = Self::hash(state, op);
        self.table
            .insert_unique(h, (state, op, next), |e| Self::hash(e.0, e.1));
    }

    fn bytes(&self) -> usize {
        self.table.capacity() * 13
    }
}

/// The event list: node 0 is the head, 2i+1 / 2i+2 the call / return of op
/// i, the last node the tail.
struct Events {
    next: Vec<u32>,
    prev: Vec<u32>,
}

impl Events {
    fn new<I, O>(ops: &[SearchOp<I, O>]) -> Events {
        let n = ops.len();
        let mut order: Vec<(u64, u8, u32)> = Vec::with_capacity(2 * n);
        for (i, op) in ops.iter().enumerate() {
            order.push((op.call, 0, i as u32));
            order.push((op.ret, 1, i as u32));
        }
        // Real-time order; at equal times calls come first (the intervals
        // overlap), which never invents a violation.
        order.sort_unstable();
        let tail = (2 * n + 1) as u32;
        let mut next = vec![tail; 2 * n + 2];
        let mut prev = vec![0u32; 2 * n + 2];
        let mut last = 0u32;
        for &(_, kind, i) in &order {
            let node = 2 * i + 1 + kind as u32;
            next[last as usize] = node;
            prev[node as usize] = last;
            last = node;
        }
        next[last as usize] = tail;
        prev[tail as usize] = last;
        Events { next, prev }
    }

    fn unlink(&mut self, x: u32) {
        let (p, n) = (self.prev[x as usize], self.next[x as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    fn relink(&mut self, x: u32) {
        let (p, n) = (self.prev[x as usize], self.next[x as usize]);
        self.next[p as usize] = x;
        self.prev[n as usize] = x;
    }

    fn is_call(&self, node: u32) -> bool {
        node & 1 == 1 && (node as usize) < self.next.len() - 1
    }

    /// The call node of the op whose return is first in the list.
    fn first_return_call(&self) -> u32 {
        let mut e = self.next[0];
        while self.is_call(e) {
            e = self.next[e as usize];
        }
        e - 1
    }

    /// The candidate after `after` at a node whose first-returning op has
    /// call node `forced`: `forced` itself first, then the other calls
    /// before the first return, in list order.
    fn next_candidate(&self, forced: u32, after: Option<u32>) -> Option<u32> {
        let mut e = match after {
            None => return Some(forced),
            Some(a) if a == forced => self.next[0],
            Some(a) => self.next[a as usize],
        };
        while self.is_call(e) {
            if e != forced {
                return Some(e);
            }
            e = self.next[e as usize];
        }
        None
    }

    /// Take a call and its return out of the list.
    fn lift(&mut self, call: u32) {
        self.unlink(call);
        self.unlink(call + 1);
    }

    /// Undo the latest `lift(call)`.
    fn unlift(&mut self, call: u32) {
        self.relink(call + 1);
        self.relink(call);
    }
}

/// A choice on the search stack: the call linearized, the state before it,
/// and the node's forced candidate (to resume its candidates on backtrack).
struct Frame {
    call: u32,
    prev: u32,
    forced: u32,
}

/// Longest prefix bookkeeping: `best` shares `common` ops with the stack.
struct Best {
    ops: Vec<u32>,
    common: usize,
}

impl Best {
    fn offer(&mut self, stack: &[Frame]) {
        if stack.len() > self.ops.len() {
            self.ops.truncate(self.common);
            self.ops
                .extend(stack[self.common..].iter().map(|f| (f.call - 1) / 2));
            self.common = stack.len();
        }
    }
}

/// Search for a linearization of `ops` (completed ops first, each group in
/// call order; pending ops have `ret == PENDING`) from `init`.
pub fn search<M: Model>(
    model: &M,
    init: M::State,
    ops: &[SearchOp<M::Input, M::Output>],
    ctl: &Control,
) -> Searched {
    let n_req = ops.iter().take_while(|o| o.ret != PENDING).count();
    debug_assert!(ops[n_req..].iter().all(|o| o.ret == PENDING));
    let mut states = States {
        table: HashTable::new(),
        vals: Vec::new(),
        hasher: hashbrown::DefaultHashBuilder::default(),
    };
    let mut memo = Memo {
        table: HashTable::new(),
        arena: Vec::new(),
    };
    let mut lin = Linearized::new(n_req, ops.len() - n_req);
    let mut ev = Events::new(ops);
    let mut stack: Vec<Frame> = Vec::new();
    let mut best = Best {
        ops: Vec::new(),
        common: 0,
    };
    let mut state = states.intern(init);
    let mut remaining = n_req;
    let mut steps: u64 = 0;
    let mut backtracks: usize = 0;
    let mut trans = Transitions {
        table: HashTable::new(),
        on: false,
    };
    let mut charged = 0usize;
    // Candidates at a node: first the op whose return comes first (it must
    // be linearized before anything invoked after it returns, and taking it
    // first linearizes ops as late as possible), then the others in call
    // order. `after` is the candidate tried last at this node.
    let mut forced = ev.first_return_call();
    let mut after: Option<u32> = None;
    let outcome = loop {
        if remaining == 0 {
            best.offer(&stack);
            break Outcome::Linearizable;
        }
        steps += 1;
        if steps & 0x3ff == 0 {
            let used = memo.bytes() + states.bytes() + trans.bytes() + stack.capacity() * 12;
            let total = ctl.charge(used as isize - charged as isize);
            charged = used;
            if ctl.cancel.load(Ordering::Relaxed) {
                break Outcome::Cancelled;
            }
            if total > ctl.memory_limit {
                break Outcome::MemoryCap;
            }
            if ctl.deadline.is_some_and(|d| Instant::now() >= d) {
                break Outcome::TimedOut;
            }
        }
        if let Some(call) = ev.next_candidate(forced, after) {
            // Try to linearize this op next.
            let i = (call - 1) / 2;
            let known = if trans.on { trans.get(state, i) } else { None };
            let sid = known.unwrap_or_else(|| {
                let op = &ops[i as usize];
                let sid = match model.step(&states.vals[state as usize], &op.input, &op.output) {
                    Some(next) => states.intern(next),
                    None => ILLEGAL,
                };
                if trans.on {
                    trans.put(state, i, sid);
                }
                sid
            });
            if sid != ILLEGAL {
                lin.flip(i);
                if memo.visit(&lin, sid) {
                    stack.push(Frame {
                        call,
                        prev: state,
                        forced,
                    });
                    state = sid;
                    ev.lift(call);
                    if (i as usize) < n_req {
                        remaining -= 1;
                    }
                    if remaining > 0 {
                        forced = ev.first_return_call();
                    }
                    after = None;
                    continue;
                }
                lin.flip(i);
            }
            after = Some(call);
        } else {
            // Every candidate failed: the op returning first cannot be
            // linearized here. Undo the latest choice.
            best.offer(&stack);
            let Some(f) = stack.pop() else {
                break Outcome::Illegal;
            };
            best.common = best.common.min(stack.len());
            backtracks += 1;
            if backtracks == ops.len() {
                trans.on = true;
            }
            let i = (f.call - 1) / 2;
            lin.flip(i);
            if (i as usize) < n_req {
                remaining += 1;
            }
            ev.unlift(f.call);
            state = f.prev;
            forced = f.forced;
            after = Some(f.call);
        }
    };
    ctl.charge(-(charged as isize));
    Searched {
        outcome,
        best: best.ops,
        steps,
        memo_entries: memo.table.len(),
        states: states.vals.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::models::cas_register::{CasRegister, RegIn, RegOut};

    fn op(call: u64, ret: u64, input: RegIn, output: RegOut) -> SearchOp<RegIn, RegOut> {
        SearchOp {
            call,
            ret,
            input,
            output,
        }
    }

    fn run(ops: &[SearchOp<RegIn, RegOut>]) -> Searched {
        let m = CasRegister::new(serde_json::Value::Null, true);
        search(&m, 0, ops, &Control::new(None, usize::MAX))
    }

    #[test]
    fn concurrent_write_explains_read() {
        // write 1 overlaps read → 1: linearizable.
        let r = run(&[
            op(0, 10, RegIn::Write(1), RegOut::Done),
            op(5, 6, RegIn::Read, RegOut::Read(1)),
        ]);
        assert_eq!(r.outcome, Outcome::Linearizable);
        assert_eq!(r.best, vec![0, 1]);
    }

    #[test]
    fn stale_read_is_illegal() {
        // write 1 completes, then a read → 0 (absent) starts: illegal.
        let r = run(&[
            op(0, 1, RegIn::Write(1), RegOut::Done),
            op(2, 3, RegIn::Read, RegOut::Read(0)),
        ]);
        assert_eq!(r.outcome, Outcome::Illegal);
        assert_eq!(r.best, vec![0]);
    }

    #[test]
    fn pending_write_may_or_may_not_happen() {
        let w = op(0, PENDING, RegIn::Write(1), RegOut::Unknown);
        let seen = run(&[op(2, 3, RegIn::Read, RegOut::Read(1)), w.clone()]);
        assert_eq!(seen.outcome, Outcome::Linearizable);
        let unseen = run(&[op(2, 3, RegIn::Read, RegOut::Read(0)), w]);
        assert_eq!(unseen.outcome, Outcome::Linearizable);
    }

    #[test]
    fn memory_cap_gives_up() {
        let mut ops: Vec<_> = (0..40u64)
            .map(|i| op(0, 100 + i, RegIn::Write(i as u32 % 3), RegOut::Done))
            .collect();
        ops.push(op(1000, 1001, RegIn::Read, RegOut::Read(7)));
        let m = CasRegister::new(serde_json::Value::Null, true);
        let r = search(&m, 0, &ops, &Control::new(None, 1 << 16));
        assert_eq!(r.outcome, Outcome::MemoryCap);
    }
}
