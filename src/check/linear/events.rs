//! The event list of the search: calls and returns in real-time order as
//! a doubly linked list over arrays, with O(1) lift/unlift of an op.

use super::search::SearchOp;

/// The event list: node 0 is the head, 2i+1 / 2i+2 the call / return of op
/// i, the last node the tail.
pub(super) struct Events {
    pub(super) next: Vec<u32>,
    pub(super) prev: Vec<u32>,
}

impl Events {
    pub(super) fn new<I, O>(ops: &[SearchOp<I, O>]) -> Events {
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

    pub(super) fn unlink(&mut self, x: u32) {
        let (p, n) = (self.prev[x as usize], self.next[x as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    pub(super) fn relink(&mut self, x: u32) {
        let (p, n) = (self.prev[x as usize], self.next[x as usize]);
        self.next[p as usize] = x;
        self.prev[n as usize] = x;
    }

    pub(super) fn is_call(&self, node: u32) -> bool {
        node & 1 == 1 && (node as usize) < self.next.len() - 1
    }

    /// The call node of the op whose return is first in the list.
    pub(super) fn first_return_call(&self) -> u32 {
        let mut e = self.next[0];
        while self.is_call(e) {
            e = self.next[e as usize];
        }
        e - 1
    }

    /// The candidate after `after` at a node whose first-returning op has
    /// call node `forced`: `forced` itself first (unless `call_order`),
    /// then the other calls before the first return in list order,
    /// completed ops (numbered below `n_req`) before pending ones: a
    /// failure found with fewer pending ops linearized prunes more (see
    /// the memo). Only ops of component `k` (`comp`, per op) are
    /// candidates: the first-returning op's own.
    pub(super) fn next_candidate(
        &self,
        forced: u32,
        after: Option<u32>,
        call_order: bool,
        (comp, k): (&[u32], u32),
        n_req: usize,
    ) -> Option<u32> {
        let completed = |e: u32| (((e - 1) / 2) as usize) < n_req;
        let (mut e, mut pending) = match after {
            None if !call_order => return Some(forced),
            None => (self.next[0], false),
            Some(a) if a == forced && !call_order => (self.next[0], false),
            Some(a) => (self.next[a as usize], !completed(a)),
        };
        loop {
            while self.is_call(e) {
                if completed(e) != pending
                    && (call_order || e != forced)
                    && comp[((e - 1) / 2) as usize] == k
                {
                    return Some(e);
                }
                e = self.next[e as usize];
            }
            if pending {
                return None;
            }
            (e, pending) = (self.next[0], true);
        }
    }

    /// Take a call and its return out of the list.
    pub(super) fn lift(&mut self, call: u32) {
        self.unlink(call);
        self.unlink(call + 1);
    }

    /// Undo the latest `lift(call)`.
    pub(super) fn unlift(&mut self, call: u32) {
        self.relink(call + 1);
        self.relink(call);
    }
}
