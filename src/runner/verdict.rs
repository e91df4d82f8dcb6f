//! The verdict of a whole `lockjaw run` ([`decide`], pure): the checks'
//! verdict, unless the run tested nothing. Invalid beats unknown (an
//! anomaly found stays invalid, whatever else went wrong); otherwise the
//! run is unknown when the nemesis failed or applied none of its faults
//! (never for `--nemesis none`), when no operation of the kind the
//! workload exists for succeeded (a grant; a protected or applied write),
//! when a check could not run or decide, or when fewer faults landed than
//! `--require-landed` asks. Faults injected that did not land leave the
//! run valid, with a warning; a fault whose start the run's end cut off
//! is no error of the nemesis (it was not due within the run): it is
//! counted as not started. The verdict says what it covers.

use crate::check::Validity;
use crate::nemesis::NemesisSummary;
use crate::report::summary::verdict::{thousands, RunVerdict};
use crate::workload::Kind;
use serde_json::Value;

/// What the nemesis did, for [`decide`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NemesisFacts {
    /// Faults applied (landed or not).
    pub injections: u64,
    /// Applied without error, not cut short by the run's end, and (for
    /// the holder faults, which say) inside a critical section.
    pub landed: u64,
    /// Every error of the nemesis: faults due within the run that it
    /// could not start, faults it could not take back, a nemesis task
    /// that failed.
    pub errors: Vec<String>,
    /// Starts the run's end cut off (no error: nothing was due).
    pub not_started: u64,
}

impl NemesisFacts {
    /// The facts of a nemesis summary (the same "landed" as the trials of
    /// a report: `report::trials`).
    pub fn of(s: &NemesisSummary) -> NemesisFacts {
        let flag = |d: &Value, k: &str| d.get(k).and_then(Value::as_bool);
        let landed = s
            .injections
            .iter()
            .filter(|i| i.error.is_none())
            .filter(|i| flag(&i.detail, "cut_short") != Some(true))
            .filter(|i| flag(&i.detail, "landed_inside") != Some(false))
            .count() as u64;
        let mut errors = s.errors.clone();
        for i in &s.injections {
            if let Some(e) = &i.error {
                errors.push(format!("taking back fault {} ({}): {e}", i.id, i.fault));
            }
        }
        NemesisFacts {
            injections: s.injections.len() as u64,
            landed,
            errors,
            not_started: s.not_started.len() as u64,
        }
    }
}

/// What [`decide`] judges.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFacts {
    /// The checks' composed verdict.
    pub checks: Validity,
    /// Each check that could not run: `checker: why`.
    pub check_errors: Vec<String>,
    pub workload: Kind,
    /// The system grants locks (false for `cas`: conditional writes, no
    /// lock, so no grant is expected).
    pub locks: bool,
    /// `None` for `--nemesis none`.
    pub nemesis: Option<NemesisFacts>,
    /// Successful acquires and won campaigns in the history.
    pub grants: u64,
    /// Writes the storage (or the register) applied.
    pub writes: u64,
    /// `--require-landed N`.
    pub require_landed: Option<u64>,
}

/// What the run exists for: (needs a grant, the name of the writes it
/// needs, if any).
fn purpose(f: &RunFacts) -> (bool, Option<&'static str>) {
    let (grant, writes) = match f.workload {
        Kind::Lock => (true, None),
        Kind::FencedCounter | Kind::LockSet | Kind::Leader | Kind::Jobs => {
            (true, Some("protected writes"))
        }
        Kind::Register => (false, Some("applied writes")),
    };
    (grant && f.locks, writes)
}

/// What the run covered: `3 of 3 faults landed, 412 grants, 1,206
/// protected writes`.
fn covers(f: &RunFacts) -> String {
    let mut parts = vec![match &f.nemesis {
        None => "no faults (nemesis none)".to_string(),
        Some(n) => format!(
            "{} of {} faults landed{}",
            thousands(n.landed),
            thousands(n.injections),
            match n.not_started {
                0 => String::new(),
                k => format!(" ({} not started: the run ended first)", thousands(k)),
            }
        ),
    }];
    let (grants, writes) = purpose(f);
    if grants {
        parts.push(format!("{} grants", thousands(f.grants)));
    }
    if let Some(w) = writes {
        parts.push(format!("{} {w}", thousands(f.writes)));
    }
    parts.join(", ")
}

/// Why the run tested too little to be called valid (empty: it did not).
fn untested(f: &RunFacts) -> Vec<String> {
    let mut why = Vec::new();
    if let Some(n) = &f.nemesis {
        if let Some(first) = n.errors.first() {
            let more = match n.errors.len() {
                1 => String::new(),
                k => format!(" (and {} more)", k - 1),
            };
            why.push(format!("the nemesis failed: {first}{more}"));
        }
        if n.injections == 0 {
            why.push("the nemesis applied none of its faults".into());
        }
        if let Some(min) = f.require_landed.filter(|&m| n.landed < m) {
            why.push(format!(
                "{} of {} faults landed, fewer than --require-landed {min}",
                n.landed, n.injections
            ));
        }
    }
    let (grants, writes) = purpose(f);
    if grants && f.grants == 0 {
        why.push("no acquire succeeded (0 grants): nothing ran under the lock".into());
    } else if let Some(w) = writes.filter(|_| f.writes == 0) {
        why.push(format!("no write succeeded (0 {w})"));
    }
    for e in &f.check_errors {
        why.push(format!("a check could not run: {e}"));
    }
    if f.checks == Validity::Unknown && why.is_empty() {
        why.push("the checks could not decide".into());
    }
    why
}

/// The run's verdict. See the module doc.
pub fn decide(f: &RunFacts) -> RunVerdict {
    let why = untested(f);
    let mut warnings = Vec::new();
    if let Some(n) = &f.nemesis {
        if n.landed < n.injections {
            warnings.push(format!(
                "{} of {} faults did not land (see nemesis.json)",
                n.injections - n.landed,
                n.injections
            ));
        }
    }
    let (valid, unknown) = match f.checks {
        // Invalid beats unknown: what would have made it unknown is
        // still said, as warnings.
        Validity::False => {
            warnings.extend(why);
            (Validity::False, Vec::new())
        }
        _ if !why.is_empty() => (Validity::Unknown, why),
        v => (v, Vec::new()),
    };
    RunVerdict {
        valid,
        unknown,
        warnings,
        covers: covers(f),
    }
}

#[cfg(test)]
mod tests;
