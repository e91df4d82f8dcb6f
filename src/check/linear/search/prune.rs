//! Prunes of the search that need more than the event list: twins among
//! pending ops and the look-ahead for growing values and blind writes
//! (the soundness argument for both is in the parent module's doc).

use super::{SearchOp, Searcher};
use crate::check::models::Model;

/// Events the look-ahead scans at most, reads it checks and blind writes
/// it considers (see `Searcher::doomed`). Checking the next two reads finds
/// nearly every dead end the next 256 events would: on Porcupine's c50-ok
/// per key, 96.6M instructions instead of 174.7M for 24.7k steps instead
/// of 22.0k.
const LOOKAHEAD: usize = 256;
const LOOKAHEAD_READS: usize = 2;
const MAX_BLIND: usize = 8;
/// No op.
pub(super) const NONE: u32 = u32::MAX;

/// For each pending op (ops from `n_req` on), the latest op numbered
/// before it among the 64 pending ops before it that is its twin: same
/// component, equal input and output, and called no later (any earlier
/// twin would do; the bound keeps this linear). See the module doc of
/// `search` (5) for why only the earliest unlinearized twin is tried.
pub(super) fn twins<I: PartialEq, O: PartialEq>(
    ops: &[SearchOp<I, O>],
    comp: &[u32],
    n_req: usize,
) -> Vec<u32> {
    let mut twin = vec![NONE; ops.len() - n_req];
    for j in n_req..ops.len() {
        twin[j - n_req] = (n_req.max(j.saturating_sub(64))..j)
            .rev()
            .find(|&i| {
                comp[i] == comp[j]
                    && ops[i].call <= ops[j].call
                    && ops[i].input == ops[j].input
                    && ops[i].output == ops[j].output
            })
            .map_or(NONE, |i| i as u32);
    }
    twin
}

/// Op kinds for the look-ahead.
pub(super) const GROWS: u8 = 1;
pub(super) const BLIND: u8 = 2;

impl<M: Model> Searcher<'_, M> {
    /// Look-ahead after the op just linearized changed component `k`: true
    /// when component `k` provably fails at this node (the caller then
    /// calls `fail(k)`), found without branching.
    ///
    /// Scan the remaining events from the head. Take a read r of `k` (a
    /// read-only op) whose return comes before the call of any op of `k`
    /// that neither grows the state (`Model::grows`) nor writes blindly
    /// (`Model::blind`). In any linearization of `k`'s remaining ops, every
    /// op before r was called before r returned (real time), so it is one
    /// of those scanned: a growing op, a read (no change), or one of the
    /// blind writes W seen so far. So r sees either the current part of
    /// the state grown by growing ops, or what the last blind write w ∈ W
    /// before it left (independent of the state before w) grown by growing
    /// ops. If `Model::reachable` (current state) and `reachable_after`
    /// (each w) both rule r's output out, no linearization of `k`'s ops
    /// exists from here. Both predicates answer true when unsure, and
    /// stopping early (after `LOOKAHEAD` events, `LOOKAHEAD_READS` reads,
    /// `MAX_BLIND` writes, or at an op of another kind) only proves less.
    pub(super) fn doomed(&self, k: u32) -> bool {
        let Some(kind) = &self.kind else {
            return false;
        };
        let state = &self.states.vals[self.state as usize];
        let tail = (self.ev.next.len() - 1) as u32;
        let mut writes = [0u32; MAX_BLIND];
        let mut n_writes = 0;
        let mut e = self.ev.next[0];
        let mut reads = 0;
        for _ in 0..LOOKAHEAD {
            if e == tail || reads == LOOKAHEAD_READS {
                break;
            }
            let i = ((e - 1) / 2) as usize;
            if self.comp[i] == k && !self.read_only[i] {
                if e & 1 == 1 && kind[i] != GROWS {
                    if kind[i] != BLIND || n_writes == MAX_BLIND {
                        return false;
                    }
                    writes[n_writes] = i as u32;
                    n_writes += 1;
                }
            } else if self.comp[i] == k && e & 1 == 0 {
                let op = &self.ops[i];
                reads += 1;
                if !self.model.reachable(state, &op.input, &op.output)
                    && writes[..n_writes].iter().all(|&w| {
                        !self.model.reachable_after(
                            &self.ops[w as usize].input,
                            &op.input,
                            &op.output,
                        )
                    })
                {
                    return true;
                }
            }
            e = self.ev.next[e as usize];
        }
        false
    }
}
