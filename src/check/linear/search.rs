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
//!
//! # Why every prune is sound
//!
//! A *node* is a configuration: the set L of linearized ops and the model
//! state s. An op is only linearized while its call precedes every
//! remaining return, so L is closed under real-time precedence and the node
//! is linearizable iff the remaining ops R have a legal sequence from s
//! that respects their real-time order and contains every completed op of
//! R (pending ops go anywhere after their call, or nowhere). A prune drops
//! a branch only when another branch, or a fact in the memo, succeeds
//! whenever it would; a node fails only when that follows from such facts.
//!
//! Components (`Model::component`): the state is a product of independent
//! parts and each op reads and writes exactly one. By Herlihy and Wing's
//! locality (which holds with pending ops), R is linearizable from s iff,
//! for every component c, R|c is linearizable from s|c. So "component c
//! fails here" depends only on (L|c, s|c) and proves that this node, and
//! every node with the same (L|c, s|c), fails. With one component (every
//! model checked per key) it simply means "this node fails".
//!
//! 1. Focus (`focus`, `Events::next_candidate`). Let f be the op whose
//!    return comes first, of component k; only ops of k called before f's
//!    return are candidates. If a sequence S linearizes R, let x be the
//!    first op of k in S (f is in S, so x is f or precedes it and x's call
//!    precedes f's return, the first of all returns). The ops before x in S
//!    are of other components (x commutes with them) and return no earlier
//!    than f, so after x's call: x moved to the front of S is still a
//!    linearization. And R|k has exactly these candidates (f's return is
//!    also the first among k's), so when none of them works, component k
//!    fails.
//! 2. Greedy reads (`take_read`). A read-only candidate r (it never changes
//!    any state) legal in s moves to the front of any S: every remaining op
//!    returns after r's call, and taking r out of its place changes no
//!    state. So this node (and r's component) succeeds iff the node after r
//!    does: no alternative needs trying, and a failure after r is one here.
//! 3. Failure memo and backjumping (`fail`). `fail(c)` is only called when
//!    component c provably fails at the current node (by 1, 2, 4, 5 or 6).
//!    Undoing a choice of another component, or a greedy one (2), leaves
//!    a node that fails for c too, so undoing goes on (backjumping). Undoing
//!    a non-greedy choice x of c returns to a node whose candidates are c's
//!    (1), where x's branch is now known to fail for c; the next candidate
//!    is tried. Candidates end there only when each was illegal, known to
//!    fail for c (memo), skipped by 5, or searched and failed for c: then c
//!    fails there (1). Each undone node reached by a choice of c goes into
//!    the memo as (c, L|c, s|c) and every later node with that part fails
//!    at once. An empty stack means the initial node fails: no
//!    linearization exists.
//! 4. Pending supersets (`Memo::contains`). If (L|c, s|c) fails and L'
//!    adds only pending ops to L, then (L'|c, s|c) fails: its remaining ops
//!    are R minus some pending ops, and a linearization of those is one of
//!    R that leaves those pending ops out.
//! 5. Twins (`run`). A pending candidate j whose twin i (same component,
//!    input and output, called no later) is not linearized is skipped. Both
//!    are candidates here and at every later node (every remaining return
//!    follows both calls), and neither must precede anything (pending), so
//!    the branches "j next" and "i next" are the same problem with the
//!    names i and j swapped. Along the chain of twins the earliest
//!    unlinearized one is tried, which decides j's branch too.
//! 6. Look-ahead (`doomed`): see there.
//!
//! Candidate order (first-returning first, completed before pending) only
//! decides which linearization is found first, never whether one is.

use super::events::Events;
use super::memo::{mix, Lin, Memo, States, Transitions, ILLEGAL};
use crate::check::models::Model;
use hashbrown::HashTable;
use prune::{twins, BLIND, GROWS, NONE};
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

/// A choice on the search stack: the call linearized, the state before it,
/// and the node's forced candidate (to resume its candidates on backtrack).
struct Frame {
    call: u32,
    prev: u32,
    forced: u32,
    /// A read-only op taken greedily: its node has no other alternative.
    greedy: bool,
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

/// A resumable search over one partition: `run` advances it by a budget
/// of steps, so a scheduler can interleave partitions and stop all of them
/// as soon as one is found not linearizable.
pub struct Searcher<'a, M: Model> {
    model: &'a M,
    ops: &'a [SearchOp<M::Input, M::Output>],
    /// Per op: the model says it never changes the state.
    read_only: Vec<bool>,
    /// Per op: the part of the state it touches (`Model::component`).
    comp: Vec<u32>,
    /// Per op: what the look-ahead needs to know of it (`GROWS`, `BLIND`);
    /// `None` when no op grows the state, which switches it off.
    kind: Option<Vec<u8>>,
    n_req: usize,
    states: States<M::State>,
    memo: Memo,
    trans: Transitions,
    lin: Lin,
    /// Ops touch several components (a keyed model as one state).
    multi: bool,
    /// Per pending op: the latest pending op called before it that is the
    /// same op (component, input and output), or `NONE`.
    twin: Vec<u32>,
    ev: Events,
    stack: Vec<Frame>,
    best: Best,
    state: u32,
    remaining: usize,
    steps: u64,
    backtracks: usize,
    charged: usize,
    /// Candidates at a node: first the op whose return comes first (it
    /// must be linearized before anything invoked after it returns, and
    /// taking it first linearizes ops as late as possible), then the others
    /// in call order. `after` is the candidate tried last at this node.
    forced: u32,
    after: Option<u32>,
    /// Try candidates in plain call order instead of first-returning first.
    call_order: bool,
    done: Option<Outcome>,
}

impl<'a, M: Model> Searcher<'a, M> {
    /// Prepare a search of `ops` (completed ops first, each group in call
    /// order; pending ops have `ret == PENDING`) from `init`.
    pub fn new(
        model: &'a M,
        init: M::State,
        ops: &'a [SearchOp<M::Input, M::Output>],
        call_order: bool,
    ) -> Self {
        let n_req = ops.iter().take_while(|o| o.ret != PENDING).count();
        debug_assert!(ops[n_req..].iter().all(|o| o.ret == PENDING));
        let mut states = States {
            table: HashTable::new(),
            vals: Vec::new(),
            hasher: hashbrown::DefaultHashBuilder::default(),
        };
        let state = states.intern(init);
        let ev = Events::new(ops);
        let comp: Vec<u32> = ops.iter().map(|o| model.component(&o.input)).collect();
        let forced = ev.first_return_call();
        Searcher {
            model,
            ops,
            read_only: ops.iter().map(|o| model.read_only(&o.input)).collect(),
            kind: {
                let kind: Vec<u8> = ops
                    .iter()
                    .map(|o| {
                        if model.grows(&o.input) {
                            GROWS
                        } else if model.blind(&o.input) {
                            BLIND
                        } else {
                            0
                        }
                    })
                    .collect();
                kind.contains(&GROWS).then_some(kind)
            },
            n_req,
            states,
            memo: Memo::new(),
            trans: Transitions::default(),
            lin: Lin::new(&comp, n_req),
            multi: comp.iter().any(|&c| c != 0),
            twin: twins(ops, &comp, n_req),
            comp,
            ev,
            stack: Vec::new(),
            best: Best {
                ops: Vec::new(),
                common: 0,
            },
            state,
            remaining: n_req,
            steps: 0,
            backtracks: 0,
            charged: 0,
            forced,
            after: None,
            call_order,
            done: None,
        }
    }

    pub fn ops(&self) -> usize {
        self.ops.len()
    }

    /// Give back the memory this search charged to `ctl` (when abandoned).
    pub fn release(&mut self, ctl: &Control) {
        ctl.charge(-(self.charged as isize));
        self.charged = 0;
    }

    pub fn call_order(&self) -> bool {
        self.call_order
    }

    /// Check the shared limits; `Some` when the search must stop.
    fn limits(&mut self, ctl: &Control) -> Option<Outcome> {
        let used = self.memo.bytes()
            + self.states.bytes()
            + self.trans.bytes()
            + self.stack.capacity() * 12;
        let total = ctl.charge(used as isize - self.charged as isize);
        self.charged = used;
        if ctl.cancel.load(Ordering::Relaxed) {
            return Some(Outcome::Cancelled);
        }
        if total > ctl.memory_limit {
            return Some(Outcome::MemoryCap);
        }
        if ctl.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(Outcome::TimedOut);
        }
        None
    }

    /// The next state if op `i` is linearized now, or `ILLEGAL`.
    fn try_step(&mut self, i: u32) -> u32 {
        if let Some(sid) = self.trans.get(self.state, i) {
            return sid;
        }
        let op = &self.ops[i as usize];
        let sid = match self.model.step(
            &self.states.vals[self.state as usize],
            &op.input,
            &op.output,
        ) {
            Some(next) => self.states.intern(next),
            None => ILLEGAL,
        };
        self.trans.put(self.state, i, sid);
        sid
    }

    /// The component of the current node's first-returning op: the only
    /// one whose ops are candidates here.
    fn focus(&self) -> u32 {
        self.comp[((self.forced - 1) / 2) as usize]
    }

    /// Advance by up to `budget` steps; the outcome once decided.
    pub fn run(&mut self, ctl: &Control, budget: u64) -> Option<Outcome> {
        if self.done.is_some() {
            return self.done;
        }
        let stop = self.steps + budget;
        let outcome = loop {
            if self.remaining == 0 {
                self.best.offer(&self.stack);
                break Outcome::Linearizable;
            }
            self.steps += 1;
            if self.steps & 0x3ff == 0 {
                if let Some(o) = self.limits(ctl) {
                    break o;
                }
            }
            if self.steps >= stop {
                return None;
            }
            if self.after.is_none() {
                match self.take_read() {
                    Some(Ok(())) => continue,
                    Some(Err(culprit)) => {
                        if !self.fail(culprit) {
                            break Outcome::Illegal;
                        }
                        continue;
                    }
                    None => {}
                }
            }
            let k = self.focus();
            let Some(call) = self.ev.next_candidate(
                self.forced,
                self.after,
                self.call_order,
                (&self.comp, k),
                self.n_req,
            ) else {
                // No candidate is left: the first-returning op cannot be
                // linearized here, whatever happens to other components.
                if !self.fail(k) {
                    break Outcome::Illegal;
                }
                continue;
            };
            // Try to linearize this op next.
            let i = (call - 1) / 2;
            self.after = Some(call);
            if (i as usize) >= self.n_req {
                // Twins (module doc, 5): of identical pending ops, only the
                // earliest unlinearized one needs trying; the branch of a
                // later one is the same problem with two names swapped.
                let twin = self.twin[i as usize - self.n_req];
                if twin != NONE && !self.lin.has(twin) {
                    continue;
                }
            }
            let sid = self.try_step(i);
            if sid == ILLEGAL {
                continue;
            }
            self.lin.flip(i);
            if self.failed(k, sid) {
                self.lin.flip(i);
                continue;
            }
            let changed = sid != self.state;
            self.push(call, sid, false);
            if changed && self.doomed(k) && !self.fail(k) {
                break Outcome::Illegal;
            }
        };
        ctl.charge(-(self.charged as isize));
        self.charged = 0;
        self.done = Some(outcome);
        Some(outcome)
    }

    /// Linearize the op of `call` (already flipped in `lin`), moving to `sid`.
    fn push(&mut self, call: u32, sid: u32, greedy: bool) {
        self.stack.push(Frame {
            call,
            prev: self.state,
            forced: self.forced,
            greedy,
        });
        self.state = sid;
        self.ev.lift(call);
        if (((call - 1) / 2) as usize) < self.n_req {
            self.remaining -= 1;
        }
        if self.remaining > 0 {
            self.forced = self.ev.first_return_call();
        }
        self.after = None;
    }

    /// At a fresh node, a read-only candidate legal in the current state is
    /// linearized at once with no alternative: it leaves the state as it is
    /// and nothing must precede it, so any linearization from this node can
    /// be rearranged to take it first. `Some(Ok)`: taken; `Some(Err(c))`:
    /// its component `c` is known to fail after it, so this node fails
    /// blaming `c`; `None`: no such candidate.
    fn take_read(&mut self) -> Option<Result<(), u32>> {
        let mut e = self.ev.next[0];
        while self.ev.is_call(e) {
            let i = (e - 1) / 2;
            if self.read_only[i as usize] && self.try_step(i) == self.state {
                let k = self.comp[i as usize];
                self.lin.flip(i);
                if self.failed(k, self.state) {
                    self.lin.flip(i);
                    return Some(Err(k));
                }
                self.push(e, self.state, true);
                return Some(Ok(()));
            }
            e = self.ev.next[e as usize];
        }
        None
    }

    /// A hash of component `k`'s part of state `sid`.
    fn part_hash(&self, sid: u32, k: u32) -> u64 {
        if self.multi {
            self.model.part_hash(&self.states.vals[sid as usize], k)
        } else {
            mix(sid as u64)
        }
    }

    /// Whether component `k`, with its current linearized ops and its part
    /// of state `sid`, is known to fail.
    fn failed(&self, k: u32, sid: u32) -> bool {
        let same = |rep: u32| self.same_part(rep, sid, k);
        self.memo
            .contains(k, &self.lin.parts[k as usize], self.part_hash(sid, k), same)
    }

    /// Whether states `a` and `b` have the same part `k`.
    fn same_part(&self, a: u32, b: u32, k: u32) -> bool {
        let vals = &self.states.vals;
        a == b || (self.multi && self.model.part_eq(&vals[a as usize], &vals[b as usize], k))
    }

    /// The current node fails, blaming component `culprit`: the ops of
    /// `culprit` left cannot all be linearized from its part of the state
    /// (so by locality nothing can be). Undo choices up to the latest one
    /// that changed `culprit`, remembering each configuration of `culprit`
    /// undone as failing; every node in between has the same failing part
    /// (backjumping). Resume that choice's node with its next candidate.
    /// Greedy choices had no alternative and are undone too. False when no
    /// choice is left: no linearization at all.
    fn fail(&mut self, culprit: u32) -> bool {
        self.best.offer(&self.stack);
        loop {
            let Some(f) = self.stack.pop() else {
                return false;
            };
            let i = (f.call - 1) / 2;
            let k = self.comp[i as usize];
            if k == culprit {
                let (h, sid) = (self.part_hash(self.state, k), self.state);
                let (model, vals, multi) = (self.model, &self.states.vals, self.multi);
                let same = |rep: u32| {
                    rep == sid
                        || (multi && model.part_eq(&vals[rep as usize], &vals[sid as usize], k))
                };
                self.memo
                    .insert(k, &self.lin.parts[k as usize], h, sid, same);
            }
            self.best.common = self.best.common.min(self.stack.len());
            self.backtracks += 1;
            if self.backtracks == self.ops.len() {
                self.trans.enable();
            }
            self.lin.flip(i);
            if (i as usize) < self.n_req {
                self.remaining += 1;
            }
            self.ev.unlift(f.call);
            self.state = f.prev;
            self.forced = f.forced;
            if !f.greedy && k == culprit {
                self.after = Some(f.call);
                return true;
            }
        }
    }

    /// The result (call after `run` returned an outcome).
    pub fn finish(self) -> Searched {
        Searched {
            outcome: self.done.unwrap_or(Outcome::Cancelled),
            best: self.best.ops,
            steps: self.steps,
            memo_entries: self.memo.entries,
            states: self.states.vals.len(),
        }
    }
}

/// Search for a linearization of `ops` to the end (tests, one partition).
pub fn search<M: Model>(
    model: &M,
    init: M::State,
    ops: &[SearchOp<M::Input, M::Output>],
    ctl: &Control,
) -> Searched {
    let mut s = Searcher::new(model, init, ops, false);
    s.run(ctl, u64::MAX);
    s.finish()
}

mod prune;
#[cfg(test)]
mod tests;
