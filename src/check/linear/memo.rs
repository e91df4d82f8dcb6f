//! The search's memory: the set of linearized ops (bitset with Zobrist
//! hash and memo window), the memo of explored configurations, interned
//! model states and remembered transitions.

use hashbrown::HashTable;
use std::hash::BuildHasher;

pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Zobrist value of op `i`.
pub(super) fn zob(i: u32) -> u64 {
    mix((i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15))
}

/// The set of linearized ops, with its hash and memo window.
pub(super) struct Linearized {
    pub(super) req: Vec<u64>,
    pub(super) pend: Vec<u64>,
    pub(super) n_req: usize,
    pub(super) hash: u64,
    /// First word of `req` not all ones.
    pub(super) lo: usize,
    /// One past the last word of `req` not all zeros.
    pub(super) hi: usize,
}

impl Linearized {
    pub(super) fn new(n_req: usize, n_pend: usize) -> Linearized {
        Linearized {
            req: vec![0; n_req.div_ceil(64)],
            pend: vec![0; n_pend.div_ceil(64)],
            n_req,
            hash: 0,
            lo: 0,
            hi: 0,
        }
    }

    pub(super) fn full(&self, w: usize) -> u64 {
        let tail = self.n_req % 64;
        if w + 1 == self.req.len() && tail != 0 {
            (1u64 << tail) - 1
        } else {
            u64::MAX
        }
    }

    pub(super) fn flip(&mut self, i: u32) {
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

    pub(super) fn window(&self) -> &[u64] {
        if self.hi > self.lo {
            &self.req[self.lo..self.hi]
        } else {
            &[]
        }
    }
}

/// The memo of explored (linearized set, state) configurations.
pub(super) struct Memo {
    pub(super) table: HashTable<(u64, u32, u32)>,
    pub(super) arena: Vec<u64>,
}

impl Memo {
    /// Record the configuration; false if it was already explored.
    pub(super) fn visit(&mut self, lin: &Linearized, state: u32) -> bool {
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

    pub(super) fn bytes(&self) -> usize {
        self.arena.capacity() * 8 + self.table.capacity() * 17
    }
}

/// Interned model states.
pub(super) struct States<S> {
    pub(super) table: HashTable<u32>,
    pub(super) vals: Vec<S>,
    pub(super) hasher: hashbrown::DefaultHashBuilder,
}

impl<S: std::hash::Hash + Eq> States<S> {
    pub(super) fn intern(&mut self, s: S) -> u32 {
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

    pub(super) fn bytes(&self) -> usize {
        self.vals.capacity() * std::mem::size_of::<S>() + self.table.capacity() * 5
    }
}

/// Remembered steps: (state id, op) → next state id or `ILLEGAL`, so a
/// step tried again after backtracking costs one lookup instead of a model
/// step and a state interning. Enabled once the search has backtracked more
/// than it has ops (before that, steps rarely repeat); switched off for good
/// when fewer than a quarter of its lookups hit.
#[derive(Default)]
pub(super) struct Transitions {
    table: HashTable<(u32, u32, u32)>,
    on: bool,
    retired: bool,
    lookups: u64,
    hits: u64,
}

pub(super) const ILLEGAL: u32 = u32::MAX;

impl Transitions {
    pub(super) fn hash(state: u32, op: u32) -> u64 {
        mix(((state as u64) << 32) | op as u64)
    }

    pub(super) fn enable(&mut self) {
        self.on = !self.retired;
    }

    pub(super) fn get(&mut self, state: u32, op: u32) -> Option<u32> {
        if !self.on {
            return None;
        }
        self.lookups += 1;
        let h = Self::hash(state, op);
        let found = self
            .table
            .find(h, |e| e.0 == state && e.1 == op)
            .map(|e| e.2);
        self.hits += found.is_some() as u64;
        if self.lookups == 1 << 16 && self.hits < self.lookups / 4 {
            self.on = false;
            self.retired = true;
            self.table = HashTable::new();
        }
        found
    }

    pub(super) fn put(&mut self, state: u32, op: u32, next: u32) {
        if self.on {
            let h = Self::hash(state, op);
            self.table
                .insert_unique(h, (state, op, next), |e| Self::hash(e.0, e.1));
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.table.capacity() * 13
    }
}
