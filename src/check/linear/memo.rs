//! The search's memory: the set of linearized ops (one bitset per state
//! component, each with a Zobrist hash and memo window), the memo of
//! configurations known to fail, interned model states and remembered
//! transitions.

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

    /// Flip op `i` (its number within the component). `hash` covers the
    /// completed ops only: the memo compares pending ones by inclusion.
    pub(super) fn flip(&mut self, i: u32) {
        let i = i as usize;
        if i >= self.n_req {
            let j = i - self.n_req;
            self.pend[j / 64] ^= 1 << (j % 64);
            return;
        }
        self.hash ^= zob(i as u32);
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

/// The linearized ops, one [`Linearized`] per state component (see
/// `Model::component`); ops are numbered per component, completed first.
pub(super) struct Lin {
    pub(super) parts: Vec<Linearized>,
    /// Per op: (component, number within it).
    at: Vec<(u32, u32)>,
}

impl Lin {
    /// `comp`: each op's component; the first `n_req` ops are completed.
    pub(super) fn new(comp: &[u32], n_req: usize) -> Lin {
        let n = comp.iter().map(|&c| c as usize + 1).max().unwrap_or(1);
        let mut req = vec![0u32; n];
        let mut pend = vec![0u32; n];
        for (i, &c) in comp.iter().enumerate() {
            if i < n_req {
                req[c as usize] += 1;
            } else {
                pend[c as usize] += 1;
            }
        }
        let mut seen = vec![0u32; n];
        let at = comp
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let c = c as usize;
                let local = if i < n_req { seen[c] } else { req[c] + seen[c] };
                seen[c] += 1;
                if i + 1 == n_req {
                    seen.iter_mut().for_each(|x| *x = 0);
                }
                (c as u32, local)
            })
            .collect();
        let parts = (0..n)
            .map(|c| Linearized::new(req[c] as usize, pend[c] as usize))
            .collect();
        Lin { parts, at }
    }

    pub(super) fn flip(&mut self, i: u32) {
        let (c, local) = self.at[i as usize];
        self.parts[c as usize].flip(local);
    }

    /// Whether op `i` is linearized.
    pub(super) fn has(&self, i: u32) -> bool {
        let (c, local) = self.at[i as usize];
        let p = &self.parts[c as usize];
        let local = local as usize;
        let (words, j) = if local < p.n_req {
            (&p.req, local)
        } else {
            (&p.pend, local - p.n_req)
        };
        words[j / 64] & (1 << (j % 64)) != 0
    }
}

/// The memo: configurations of one component (its linearized ops and its
/// part of the state) from which that component's remaining ops cannot
/// all be linearized. A configuration of the whole object containing one
/// of them fails (Herlihy and Wing's locality, applied to what is left).
///
/// Failing configurations that differ only in which pending ops (never
/// returned) they linearized share one key; a configuration fails if it
/// linearized a superset of the pending ops of a failing one with the same
/// completed ops and state: linearizing more pending ops only takes
/// options away (the rest may still take effect or not).
pub(super) struct Memo {
    /// (hash, state id, offset of the key in `keys`, newest set in `sets`).
    table: HashTable<(u64, u32, u32, u32)>,
    /// Per key: component, header (window start | window length << 32),
    /// window words.
    keys: Vec<u64>,
    /// Per failing set of pending ops: the older set of the same key
    /// (`NONE` ends the list), then the pending words.
    sets: Vec<u64>,
    pub(super) entries: usize,
}

const NONE: u32 = u32::MAX;

impl Memo {
    pub(super) fn new() -> Memo {
        Memo {
            table: HashTable::new(),
            keys: Vec::new(),
            sets: Vec::new(),
            entries: 0,
        }
    }

    fn hash(k: u32, lin: &Linearized, part_hash: u64) -> u64 {
        mix(lin.hash
            ^ part_hash.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (k as u64).wrapping_mul(0xd6e8_feb8_6659_fd93))
    }

    /// The table entry of this key (component, completed ops, state).
    fn find(
        &self,
        hash: u64,
        k: u32,
        lin: &Linearized,
        same: impl Fn(u32) -> bool,
    ) -> Option<&(u64, u32, u32, u32)> {
        let win = lin.window();
        let header = (lin.lo as u64) | ((win.len() as u64) << 32);
        let keys = &self.keys;
        self.table.find(hash, |&(h, s, off, _)| {
            let off = off as usize;
            h == hash
                && keys[off] == k as u64
                && keys[off + 1] == header
                && keys[off + 2..off + 2 + win.len()] == *win
                && same(s)
        })
    }

    /// Whether component `k` with `lin` linearized and a state whose part
    /// hashes to `part_hash` is known to fail; `same(id)` says whether the
    /// state with id `id` has the same part `k`.
    pub(super) fn contains(
        &self,
        k: u32,
        lin: &Linearized,
        part_hash: u64,
        same: impl Fn(u32) -> bool,
    ) -> bool {
        let hash = Self::hash(k, lin, part_hash);
        let Some(&(_, _, _, mut set)) = self.find(hash, k, lin, same) else {
            return false;
        };
        let words = lin.pend.len();
        while set != NONE {
            let at = set as usize;
            let failed = &self.sets[at + 1..at + 1 + words];
            if failed.iter().zip(&lin.pend).all(|(f, p)| f & !p == 0) {
                return true;
            }
            set = self.sets[at] as u32;
        }
        false
    }

    /// Record that component `k` fails from this configuration (`state`:
    /// the id of a state with that part; `same` as for `contains`).
    pub(super) fn insert(
        &mut self,
        k: u32,
        lin: &Linearized,
        part_hash: u64,
        state: u32,
        same: impl Fn(u32) -> bool,
    ) {
        let hash = Self::hash(k, lin, part_hash);
        let set = self.sets.len() as u32;
        let older = self.find(hash, k, lin, same).map(|e| (e.2, e.3));
        self.sets.push(older.map_or(NONE, |(_, head)| head) as u64);
        self.sets.extend_from_slice(&lin.pend);
        self.entries += 1;
        let Some((key, _)) = older else {
            let off = self.keys.len() as u32;
            let win = lin.window();
            self.keys.push(k as u64);
            self.keys.push((lin.lo as u64) | ((win.len() as u64) << 32));
            self.keys.extend_from_slice(win);
            self.table
                .insert_unique(hash, (hash, state, off, set), |e| e.0);
            return;
        };
        let entry = self
            .table
            .find_mut(hash, |e| e.2 == key)
            .expect("found above");
        entry.3 = set;
    }

    pub(super) fn bytes(&self) -> usize {
        (self.keys.capacity() + self.sets.capacity()) * 8 + self.table.capacity() * 21
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
