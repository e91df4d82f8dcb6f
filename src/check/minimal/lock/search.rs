//! The search for one lock witness: ddmin over processes (a process with a
//! fixed unit stays), then over the units of the kept processes (or over
//! a small set already known to pass, when the caller found one), then a
//! last pass that tries to drop each remaining process and unit alone, so
//! the result is 1-minimal unless the budget ran out. Every candidate is
//! closed under dependencies before the oracle sees it.

use super::units::Units;
use crate::check::minimal::ddmin;

/// What the search kept and what it cost.
pub struct Found {
    /// Units kept (closed under dependencies).
    pub kept: Vec<bool>,
    pub calls: u64,
    /// No single process or unit can go (false when the budget ran out).
    pub minimal: bool,
}

/// Counts oracle calls against a budget.
struct Judge<'a> {
    oracle: &'a mut dyn FnMut(&[bool]) -> bool,
    calls: u64,
    budget: u64,
}

impl Judge<'_> {
    fn left(&self) -> u64 {
        self.budget.saturating_sub(self.calls)
    }

    /// `None` when the budget is spent.
    fn ask(&mut self, units: &[bool]) -> Option<bool> {
        if self.calls >= self.budget {
            return None;
        }
        self.calls += 1;
        Some((self.oracle)(units))
    }
}

/// Search down from `start`, a set of units known to show the anomaly
/// (closed under dependencies), or else from the whole history, first by
/// process.
pub fn search(
    h: &Units,
    fixed: &[bool],
    start: Option<Vec<bool>>,
    budget: u64,
    oracle: &mut dyn FnMut(&[bool]) -> bool,
) -> Found {
    let mut j = Judge {
        oracle,
        calls: 0,
        budget,
    };
    let from = match start {
        Some(s) => s,
        None => match by_process(h, fixed, &mut j) {
            Some(procs) => h.units_of_procs(&procs),
            None => {
                return Found {
                    kept: vec![true; h.units.len()],
                    calls: j.calls,
                    minimal: false,
                }
            }
        },
    };
    let (kept, done) = by_unit(h, fixed, &from, &mut j);
    if !done {
        return Found {
            kept,
            calls: j.calls,
            minimal: false,
        };
    }
    let (kept, minimal) = polish(h, fixed, kept, &mut j);
    Found {
        kept,
        calls: j.calls,
        minimal,
    }
}

/// ddmin over processes; `None` when the budget ran out before any
/// candidate passed.
fn by_process(h: &Units, fixed: &[bool], j: &mut Judge) -> Option<Vec<bool>> {
    let mut pfixed = vec![false; h.procs.len()];
    for (u, &f) in fixed.iter().enumerate() {
        pfixed[h.units[u].proc] |= f;
    }
    h.close_procs(&mut pfixed);
    let left = j.left();
    let (mut procs, s) = ddmin(&pfixed, left, |cand| {
        let mut c = cand.to_vec();
        h.close_procs(&mut c);
        j.calls += 1;
        (j.oracle)(&h.units_of_procs(&c))
    });
    h.close_procs(&mut procs);
    if s.exhausted && procs.iter().all(|&p| p) {
        return None;
    }
    Some(procs)
}

/// ddmin over the units of `from`. Returns the kept units and whether
/// the budget lasted.
fn by_unit(h: &Units, fixed: &[bool], from: &[bool], j: &mut Judge) -> (Vec<bool>, bool) {
    let list: Vec<usize> = (0..h.units.len()).filter(|&u| from[u]).collect();
    let lfixed: Vec<bool> = list.iter().map(|&u| fixed[u]).collect();
    let expand = |cand: &[bool]| {
        let mut units = vec![false; h.units.len()];
        for (i, &k) in cand.iter().enumerate() {
            units[list[i]] = k;
        }
        h.close(&mut units);
        units
    };
    let left = j.left();
    let (kept, s) = ddmin(&lfixed, left, |cand| {
        j.calls += 1;
        (j.oracle)(&expand(cand))
    });
    (expand(&kept), !s.exhausted)
}

/// The groups a last pass tries to drop alone: each process's units, then
/// each unit.
pub fn groups(h: &Units) -> impl Iterator<Item = Vec<usize>> + '_ {
    (0..h.procs.len())
        .map(|p| h.proc_units[p].clone())
        .chain((0..h.units.len()).map(|u| vec![u]))
}

/// `kept` without group `g`, closed under dependencies; `None` when the
/// group is not kept, holds a fixed unit, or a kept op depends on it.
pub fn without(h: &Units, fixed: &[bool], kept: &[bool], g: &[usize]) -> Option<Vec<bool>> {
    if !g.iter().any(|&u| kept[u]) || g.iter().any(|&u| fixed[u] && kept[u]) {
        return None;
    }
    let mut cand = kept.to_vec();
    for &u in g {
        cand[u] = false;
    }
    h.close(&mut cand);
    (!g.iter().any(|&u| cand[u])).then_some(cand)
}

/// Try to drop each remaining non-fixed process, then each unit, alone
/// (with what depends on it kept, an op it needs is not droppable); repeat
/// until none can go. Returns the units and whether the pass finished.
fn polish(h: &Units, fixed: &[bool], mut kept: Vec<bool>, j: &mut Judge) -> (Vec<bool>, bool) {
    loop {
        let mut changed = false;
        for g in groups(h) {
            let Some(cand) = without(h, fixed, &kept, &g) else {
                continue;
            };
            match j.ask(&cand) {
                None => return (kept, false),
                Some(true) => {
                    kept = cand;
                    changed = true;
                }
                Some(false) => {}
            }
        }
        if !changed {
            return (kept, true);
        }
    }
}
