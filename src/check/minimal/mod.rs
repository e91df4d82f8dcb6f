//! Witness histories (issue 30): per anomaly kind, the smallest
//! sub-history that `lockjaw check` alone still judges invalid for the same
//! anomaly between the same owners, found by delta debugging with the
//! checker as the oracle. Written as `witness-<kind>.jsonl`: the meta
//! record (with a `witness` object, [`WitnessInfo`]) and the kept ops with
//! their original indexes.
//!
//! Public API: [`find`] (a history file to its witnesses), [`write`] and
//! [`read`] (the files). The lock kinds are in `lock`, linearizability in
//! `linear`; both search with [`ddmin`].

mod ddmin;
mod files;
mod linear;
mod lock;

pub use ddmin::{ddmin, Search};
pub use files::{file_name, read, write, WITNESS_PREFIX};

use super::results::CheckOptions;
use crate::history::{HistoryError, Meta, Op};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The default budget, in oracle calls (each call checks one candidate
/// sub-history). Measured on real Redis runs of 7,620 and 19,994 ops: a
/// stale write needs 1 call, a lost update (every write kept) 18 to 25, a
/// duplicate effect 71; a search that must start from the whole history
/// (no small passing set found first) took 457 calls and 8.6 s on the
/// larger, a call on a large candidate costing up to ~20 ms, so 500
/// calls bound a witness to seconds.
pub const DEFAULT_BUDGET: u64 = 500;

/// A second bound, on work rather than calls: the op lines all of one
/// witness's oracle calls may check together. A call's cost grows with
/// its candidate, so on a 100,000-op history whose witness keeps 60,000
/// lines (a lost update keeps every write) 500 calls took 176 s; this cap
/// (about 10 s of checking here) ends such a search, marked not minimal,
/// without touching the searches of 20 s runs (a few thousand lines).
/// Counted, not timed, so the same history gives the same witness.
pub const MAX_CHECKED_LINES: u64 = 1_000_000;

/// How to search.
#[derive(Clone, Debug)]
pub struct WitnessOptions {
    /// Oracle calls per witness; past it the witness is written as found
    /// so far and marked not minimal.
    pub budget: u64,
    /// How the full history is checked (the same options judge every
    /// candidate).
    pub check: CheckOptions,
}

impl Default for WitnessOptions {
    fn default() -> WitnessOptions {
        WitnessOptions {
            budget: DEFAULT_BUDGET,
            check: CheckOptions::default(),
        }
    }
}

/// The `witness` object of a witness file's meta record: what it
/// witnesses and how it was found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WitnessInfo {
    /// The run id (the meta record's `run_id`), else the history file's
    /// name.
    pub run: String,
    /// The anomaly kind: a lock witness's `kind` (`safety-violation`,
    /// `stale-write-accepted`, ...) or `non-linearizable`.
    pub kind: String,
    /// The results.json check that found it (`safety`, `stale_writes`,
    /// ..., `linearizable`).
    pub check: String,
    /// The checker's sentence for the anomaly in the full history.
    pub text: String,
    /// The owners the anomaly names; every op of theirs in the holds it
    /// involves stays.
    pub owners: Vec<String>,
    /// The op indexes the anomaly names as its proof (the same in the
    /// witness and in the full history).
    pub proof_ops: Vec<u64>,
    /// No removable process or op pair can go (false when the budget ran
    /// out first).
    pub minimal: bool,
    pub budget: u64,
    pub oracle_calls: u64,
    /// Op lines the oracle calls checked in all (the search stops, not
    /// minimal, past [`MAX_CHECKED_LINES`]).
    #[serde(default)]
    pub checked_lines: u64,
    /// The search stopped at [`MAX_CHECKED_LINES`].
    #[serde(default)]
    pub capped: bool,
    /// Op lines in the full history, and in the witness.
    pub history_ops: u64,
    pub witness_ops: u64,
    /// Seconds the search took.
    pub seconds: f64,
    /// How a whole-history total (lost updates, phantoms, duplicates) is
    /// proven: `every-write` (every write to the key and the final read
    /// stay) or the local pattern used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Op index → its role, e.g. "A's grant, fence 4".
    #[serde(default)]
    pub roles: BTreeMap<u64, String>,
    /// The anomaly as the checker reports it on the witness (a lock
    /// witness's JSON, or the linearizability evidence).
    #[serde(default)]
    pub anomaly: serde_json::Value,
}

/// The name a witness gives the anomaly's `i`-th owner, in roles,
/// sentences and diagrams: A, B, ..., Z, then AA, AB, ...
pub fn letter(i: usize) -> String {
    let mut n = i;
    let mut s = String::new();
    loop {
        s.insert(0, (b'A' + (n % 26) as u8) as char);
        if n < 26 {
            return s;
        }
        n = n / 26 - 1;
    }
}

impl WitnessInfo {
    /// Why the search stopped before the witness was minimal: "the budget
    /// of 500 checks ran out" or "the cap of 1000000 checked op lines was
    /// reached".
    pub fn why_not_minimal(&self) -> String {
        if !self.capped {
            format!("the budget of {} checks ran out", self.budget)
        } else {
            format!("the cap of {MAX_CHECKED_LINES} checked op lines was reached")
        }
    }
}

/// One witness history: its meta record (the full history's, plus the
/// `witness` object), what it witnesses, and its ops.
#[derive(Clone, Debug)]
pub struct WitnessHistory {
    pub meta: Meta,
    pub info: WitnessInfo,
    pub ops: Vec<Op>,
}

/// What a witness file claims, against its own check `r`: no op line
/// twice, and the anomaly kind it names is one its check finds. `Ok` for a
/// file that is no witness (its meta record has no `witness` object).
pub fn check_claims(
    path: &Path,
    r: &crate::check::results::Results,
    opts: &crate::check::results::CheckOptions,
) -> Result<(), HistoryError> {
    let first = std::fs::File::open(path)
        .ok()
        .and_then(|f| std::io::BufRead::lines(std::io::BufReader::new(f)).next())
        .and_then(|l| l.ok())
        .and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok());
    if first.as_ref().and_then(|m| m.get("witness")).is_none() {
        return Ok(());
    }
    let w = read(path)?;
    let err = |line: usize, msg: String| HistoryError {
        file: path.display().to_string(),
        line: line as u64,
        msg,
    };
    let mut seen = std::collections::HashMap::new();
    for (i, op) in w.ops.iter().enumerate() {
        if let Some(j) = seen.insert(op.index, i) {
            return Err(err(
                i + 2,
                format!(
                    "op index {} is on line {} too: a witness holds each op line once \
                     (hint: write it again with `lockjaw check --witness`)",
                    op.index,
                    j + 2
                ),
            ));
        }
    }
    let shown = match w.info.kind.as_str() {
        linear::KIND => r.valid == crate::check::Validity::False,
        kind => r.lock.as_ref().is_some_and(|l| lock::shows(l, kind)),
    };
    if !shown {
        return Err(err(
            1,
            format!(
                "the witness claims {} ({}), and its own check does not find it (verdict {:?}) \
                 (hint: a witness is judged with the settings in its meta record; write it \
                 again with `lockjaw check --witness`)",
                w.info.kind, w.info.text, r.valid
            ),
        ));
    }
    let lock_report = r.lock.as_ref().filter(|_| w.info.kind != linear::KIND);
    if let (true, Some(l)) = (w.info.minimal, lock_report) {
        if let Some(ops) = lock::removable(&w, l, &opts.lock) {
            return Err(err(
                1,
                format!(
                    "the witness says minimal = true, yet without op(s) {ops:?} it still shows \
                     {} (hint: write it again with `lockjaw check --witness`)",
                    w.info.kind
                ),
            ));
        }
    }
    Ok(())
}

/// Every witness of the history at `path`: one per anomaly kind its check
/// finds (the first anomaly of that kind). Empty for a valid history.
pub fn find(path: &Path, opts: &WitnessOptions) -> Result<Vec<WitnessHistory>, HistoryError> {
    let mut out = lock::find(path, opts)?;
    out.extend(linear::find(path, opts)?);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn owners_are_lettered_a_to_z_then_aa() {
        let l: Vec<String> = [0, 1, 25, 26, 27, 51, 52].map(super::letter).into();
        assert_eq!(l, ["A", "B", "Z", "AA", "AB", "AZ", "BA"]);
    }
}
