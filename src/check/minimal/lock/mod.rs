//! Witnesses of the lock checks' anomalies (two holders under leases and
//! without, fence order, stale writes, lost updates and phantoms, lost set
//! elements, duplicate effects, split brain): per anomaly kind, the first
//! anomaly of that kind, shrunk by [`search`] with the lock checker as the
//! oracle. `docs/reports.md` ("Witness histories") says rule by rule why
//! what may go cannot create the anomaly.
//!
//! Nemesis lines are units like any other (a fault's invocation with its
//! completion; the nemesis is one process): the checks' verdicts read
//! only a `kill-holder` start, which lets a killed holder's lease be
//! judged sooner, so dropping one never creates an anomaly; the oracle
//! decides whether the witness needs it.

mod fixed;
mod grow;
mod roles;
mod search;
mod target;
mod units;

#[cfg(test)]
mod tests;

use super::{WitnessHistory, WitnessInfo, WitnessOptions, MAX_CHECKED_LINES};
use crate::check::lock::{check_file, check_ops_with, LockOptions};
use crate::check::results::{checkers_for, Checker};
use crate::history::{import, HistoryError, Meta, Op};
use std::cell::Cell;
use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;
use target::{Sig, Target};
use units::Units;

/// How many anomalies of each check the full history's check lists; a
/// candidate showing an anomaly beyond the list is rejected.
pub const MAX_LISTED: usize = 1000;

/// The lock witnesses of the history at `path`.
pub fn find(path: &Path, opts: &WitnessOptions) -> Result<Vec<WitnessHistory>, HistoryError> {
    find_kinds(path, opts, |_| true)
}

/// [`find`] for the anomaly kinds `want` accepts.
fn find_kinds(
    path: &Path,
    opts: &WitnessOptions,
    want: impl Fn(&str) -> bool,
) -> Result<Vec<WitnessHistory>, HistoryError> {
    let src = import::open(path, opts.check.format)?;
    if !checkers_for(src.meta.as_ref(), &opts.check).contains(&Checker::Lock) {
        return Ok(Vec::new());
    }
    let meta = settled(src.meta.clone().unwrap_or_default(), &opts.check);
    let mut lopts = LockOptions {
        max_witnesses: Some(MAX_LISTED),
        ..opts.check.lock.clone()
    };
    let full = check_file(path, &lopts)?;
    let mut targets = target::targets(&full);
    targets.retain(|t| want(t.kind));
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    if full.stats.late_ops > 0 {
        lopts.reorder_window_ms = Some(full.stats.max_lateness_ms.ceil() as u64 + 1);
    }
    let mut ops = src
        .map(|r| r.map(|(_, op)| op))
        .collect::<Result<Vec<Op>, _>>()?;
    number(&mut ops);
    let h = Units::new(ops);
    let ctx = Ctx {
        h: &h,
        meta: &meta,
        lopts: &lopts,
        full: target::sigs(&full),
        run: run_name(&meta, path),
        checked: Cell::new(0),
        over: Cell::new(false),
    };
    Ok(targets
        .iter()
        .map(|t| ctx.witness(t, opts.budget))
        .collect())
}

/// The history's meta record with what the command line gave where the
/// record does not say (the lock checker reads it so: `--workload`,
/// `--acquire-sets-ttl`, `--model`, `--init`), and the lock checker named:
/// the witness's meta records every setting its verdict used, so it
/// re-checks alone.
fn settled(mut meta: Meta, opts: &crate::check::results::CheckOptions) -> Meta {
    if let Some(over) = &opts.lock.meta_override {
        for (k, v) in &over.params {
            if meta.params.get(k).map_or(true, |m| m.is_null()) {
                meta.params.insert(k.clone(), v.clone());
            }
        }
        meta.model = meta.model.or_else(|| over.model.clone());
        meta.init = meta.init.or_else(|| over.init.clone());
    }
    match &opts.checkers {
        Some(c) => meta.checkers = c.iter().map(|c| c.name().to_string()).collect(),
        None if meta.checkers.is_empty() => meta.checkers = vec![Checker::Lock.name().into()],
        None => {}
    }
    meta
}

/// A file without `index` fields: number ops by position, as the checker
/// does, so the witness keeps the indexes its anomaly names.
fn number(ops: &mut [Op]) {
    if ops.len() > 1 && ops.iter().all(|o| o.index == 0) {
        for (i, op) in ops.iter_mut().enumerate() {
            op.index = i as u64;
        }
    }
}

/// Whether the lock report `r` shows an anomaly of witness kind `kind`.
pub fn shows(r: &crate::check::lock::LockReport, kind: &str) -> bool {
    target::targets(r).iter().any(|t| t.kind == kind)
}

/// What a witness that says `minimal = true` must be: removing any one
/// process or unit the search could remove (its fixed units and their
/// dependencies stay) loses its anomaly, judged as the search judged it
/// with the witness as the whole history. The op indexes of the first
/// group that could go, or `None` when none can. `r` is the witness's
/// own lock report.
pub fn removable(
    w: &WitnessHistory,
    r: &crate::check::lock::LockReport,
    lopts: &LockOptions,
) -> Option<Vec<u64>> {
    let t = target::target_for(r, &w.info.kind, &w.info.proof_ops)?;
    let h = Units::new(w.ops.clone());
    let kept = vec![true; h.units.len()];
    let fixed = fixed::fixed(&h, &t);
    let lopts = LockOptions {
        max_witnesses: Some(MAX_LISTED),
        ..lopts.clone()
    };
    let ctx = Ctx {
        h: &h,
        meta: &w.meta,
        lopts: &lopts,
        full: target::sigs(r),
        run: String::new(),
        checked: Cell::new(0),
        over: Cell::new(false),
    };
    let found = search::groups(&h).find_map(|g| {
        let cand = search::without(&h, &fixed, &kept, &g)?;
        ctx.accepts(&t, &cand)
            .then(|| g.iter().map(|&u| h.head(u).index).collect())
    });
    found
}

/// The meta record's `run_id`, else the file's name.
fn run_name(meta: &Meta, path: &Path) -> String {
    match meta.params.get("run_id").and_then(|v| v.as_str()) {
        Some(id) => id.to_string(),
        None => path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        ),
    }
}

/// What every search of one history shares.
struct Ctx<'a> {
    h: &'a Units,
    meta: &'a Meta,
    lopts: &'a LockOptions,
    full: HashSet<Sig>,
    run: String,
    /// Op lines the current witness's oracle calls checked, and whether a
    /// call was refused for passing [`MAX_CHECKED_LINES`].
    checked: Cell<u64>,
    over: Cell<bool>,
}

impl Ctx<'_> {
    /// Check the kept units' lines as `lockjaw check` checks their file,
    /// counting them; `None` (not reproduced) once the witness's checks
    /// would pass [`MAX_CHECKED_LINES`].
    fn check(&self, kept: &[bool]) -> Option<crate::check::lock::LockReport> {
        if self.over.get() {
            return None;
        }
        let n = (0..self.h.ops.len())
            .filter(|&i| kept[self.h.unit_of[i]])
            .count();
        let total = self.checked.get() + n as u64;
        if total > MAX_CHECKED_LINES {
            self.over.set(true);
            return None;
        }
        self.checked.set(total);
        let ops = self.h.lines(kept);
        check_ops_with(self.meta, self.lopts, ops.into_iter().map(Ok)).ok()
    }

    /// The oracle: the candidate shows `t` and nothing the full history
    /// lacks.
    fn accepts(&self, t: &Target, kept: &[bool]) -> bool {
        self.check(kept)
            .is_some_and(|r| target::accepts(&r, t, &self.full, MAX_LISTED))
    }

    fn witness(&self, t: &Target, budget: u64) -> WitnessHistory {
        let start = Instant::now();
        self.checked.set(0);
        self.over.set(false);
        let fixed = fixed::fixed(self.h, t);
        let check = |kept: &[bool]| self.check(kept);
        let (grown, spent) = grow::grow(self.h, t, &fixed, &self.full, budget, &check);
        let mut oracle = |kept: &[bool]| self.accepts(t, kept);
        let mut found = search::search(self.h, &fixed, grown, budget - spent, &mut oracle);
        found.calls += spent;
        let checked_lines = self.checked.get();
        let ops = self.h.lines(&found.kept);
        let anomaly = check_ops_with(self.meta, self.lopts, ops.iter().cloned().map(Ok))
            .ok()
            .and_then(|r| target::matching(&r, t))
            .unwrap_or_default();
        let info = WitnessInfo {
            run: self.run.clone(),
            kind: t.kind.to_string(),
            check: t.check.to_string(),
            text: t.text.clone(),
            owners: t.owners.clone(),
            proof_ops: t.proof.clone(),
            minimal: found.minimal && !self.over.get(),
            budget,
            oracle_calls: found.calls,
            checked_lines,
            capped: self.over.get(),
            history_ops: self.h.ops.len() as u64,
            witness_ops: ops.len() as u64,
            seconds: start.elapsed().as_secs_f64(),
            rule: rule(t),
            roles: roles::roles(self.h, &found.kept, t),
            anomaly,
        };
        WitnessHistory {
            meta: self.meta.clone(),
            info,
            ops,
        }
    }
}

/// How a lost update is proven: locally by two writes (`same-value`,
/// `overwritten`), or as a whole-history total (rule c).
fn rule(t: &Target) -> Option<String> {
    if let crate::check::lock::WitnessData::LostUpdatePair { rule, .. } = &t.data {
        return Some(rule.clone());
    }
    match t.total {
        target::Total::None => None,
        target::Total::EveryWrite(_) => Some("every-write".into()),
        target::Total::EveryApply(_) => Some("every-write".into()),
        target::Total::EveryLockOp(_) => Some("every-lock-op".into()),
    }
}
