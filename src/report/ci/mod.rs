//! What CI reads of a campaign: one case per compare cell, bug row side,
//! repeated run or explore fault family, each passed, failed (with its anomaly kinds, verdict
//! line and witness), an error, not applicable or unknown; a baseline
//! ([`baseline`]) that turns failures a library documents into accepted
//! cases and names its entries that no longer occur; and the JUnit XML of
//! it all ([`junit`]).
//!
//! The commands (`compare`, `bugs table`, `run --runs`, `merge`) make
//! the cases from what they measured; this module knows nothing of them.

pub mod baseline;
pub mod junit;

use crate::exit::Exit;
pub use baseline::{Baseline, Entry};
use std::collections::BTreeMap;

/// One test case: a compare cell, a bug row's side, a repeated run.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// `compare`, `bugs` or `runs`.
    pub suite: String,
    /// The unit's name (a cell's directory name, `ID/SIDE`, `run-i`).
    pub name: String,
    /// What a baseline entry can match: `system`, `client`, `nemesis`,
    /// `fencing` (on/off), `bug`, `side`.
    pub keys: BTreeMap<String, String>,
    pub outcome: Outcome,
}

/// How a case ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Passed,
    /// Anomalies (or an expectation not met).
    Failed {
        /// The anomaly kinds shown (a baseline accepts a case only when
        /// it accepts every one of them).
        kinds: Vec<String>,
        /// The verdict line.
        message: String,
        /// Where the evidence is (a witness history or a run directory).
        witness: Option<String>,
    },
    /// It could not run (exit 3).
    Error {
        message: String,
    },
    NotApplicable {
        reason: String,
    },
    /// Not enough evidence either way (exit 2).
    Unknown {
        reason: String,
    },
    /// A failure the baseline accepts, with the entries' reasons.
    Accepted {
        reason: String,
    },
}

/// The cases after a baseline: failures it accepts become
/// [`Outcome::Accepted`]; its entries that matched no failure are stale.
pub fn apply<'a>(cases: &mut [Case], baseline: &'a Baseline) -> Vec<&'a Entry> {
    let mut used = vec![false; baseline.entries.len()];
    for c in cases.iter_mut() {
        let Outcome::Failed { kinds, .. } = &c.outcome else {
            continue;
        };
        let mut reasons = vec![];
        let mut all = true;
        // Every kind looked at (no short cut): an entry matching one kind
        // of a case that still fails on another is not stale.
        for k in kinds {
            let hit = baseline.entries.iter().position(|e| e.matches(k, &c.keys));
            if let Some(i) = hit {
                used[i] = true;
                let e = &baseline.entries[i];
                reasons.push(format!("{} ({}:{})", e.reason, baseline.file, e.line));
            }
            all &= hit.is_some();
        }
        if all && !kinds.is_empty() {
            reasons.dedup();
            c.outcome = Outcome::Accepted {
                reason: reasons.join("; "),
            };
        }
    }
    baseline
        .entries
        .iter()
        .zip(used)
        .filter(|(_, u)| !u)
        .map(|(e, _)| e)
        .collect()
}

/// The exit code CI sees: 1 for a failure the baseline does not accept,
/// 3 for a case that could not run, 2 for an unknown one, else 0.
pub fn exit(cases: &[Case]) -> Exit {
    cases.iter().fold(Exit::Valid, |e, c| {
        e.merge(match c.outcome {
            Outcome::Failed { .. } => Exit::Invalid,
            Outcome::Error { .. } => Exit::Error,
            Outcome::Unknown { .. } => Exit::Unknown,
            _ => Exit::Valid,
        })
    })
}

/// Say the baseline's effect on stderr: accepted cases and stale entries.
pub fn say(cases: &[Case], stale: &[&Entry], file: &str) {
    for c in cases {
        if let Outcome::Accepted { reason } = &c.outcome {
            eprintln!("accepted: {} {}: {reason}", c.suite, c.name);
        }
    }
    for e in stale {
        eprintln!(
            "stale: {file}:{}: {} no longer occurs (hint: remove the entry)",
            e.line,
            e.what()
        );
    }
}

#[cfg(test)]
mod tests;

/// What one run shows CI, from its summary: failed (its anomaly kinds,
/// the verdict line, its first witness history, else its report, as a
/// path under `rel_dir`), unknown (with why), or passed.
pub fn run_outcome(s: &crate::report::RunSummary, rel_dir: &str) -> Outcome {
    use crate::check::Validity;
    match s.overall {
        Validity::False => {
            let kinds: Vec<String> = s
                .trials
                .anomalies
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, _)| k.clone())
                .collect();
            let counts: Vec<String> = s
                .trials
                .anomalies
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{n} {}", crate::report::trials::kind_label(k)))
                .collect();
            let message = match counts.is_empty() {
                true => "invalid".to_string(),
                false => format!("invalid: {}", counts.join(", ")),
            };
            Outcome::Failed {
                kinds,
                message,
                witness: Some(format!("{rel_dir}/{}", witness_file(&s.dir))),
            }
        }
        Validity::Unknown => Outcome::Unknown {
            reason: s
                .run_verdict
                .as_ref()
                .map(|v| v.unknown.join("; "))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "the checks could not decide".into()),
        },
        Validity::True => Outcome::Passed,
    }
}

/// A run directory's first witness history (`witness-*.jsonl`), else its
/// report.
fn witness_file(dir: &std::path::Path) -> String {
    let mut w: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("witness-") && n.ends_with(".jsonl"))
        .collect();
    w.sort();
    w.into_iter().next().unwrap_or_else(|| "report.html".into())
}

/// `--junit`, `--baseline` and `--unknown-fails`, as every campaign
/// command takes them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CiArgs {
    /// Write JUnit XML to FILE: one test case per compare cell, bug row
    /// side, repeated run or explore fault family (docs/ci.md). With it
    /// or --baseline the exit code is CI's: 1 when a case failed and the
    /// baseline does not accept it.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Accepted outcomes (TOML, `[[accept]]` with kind, keys and reason):
    /// reported as accepted, not failed; an entry that no longer occurs
    /// is reported as stale.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<std::path::PathBuf>,
    /// With --junit: an unknown case (not enough evidence) is a failure,
    /// not skipped.
    #[arg(long, requires = "junit")]
    pub unknown_fails: bool,
}

impl CiArgs {
    /// Whether CI's view was asked for.
    pub fn given(&self) -> bool {
        self.junit.is_some() || self.baseline.is_some()
    }

    /// Read the baseline first (bad input before hours of runs).
    pub fn load(&self) -> Result<Baseline, String> {
        match &self.baseline {
            Some(p) => Baseline::load(p).map_err(|e| e.to_string()),
            None => Ok(Baseline::default()),
        }
    }

    /// Apply the baseline to `cases`, say its effect, write the JUnit
    /// file; CI's exit code (`None` when neither flag was given).
    pub fn finish(&self, baseline: &Baseline, mut cases: Vec<Case>) -> Option<Exit> {
        if !self.given() {
            return None;
        }
        let stale = apply(&mut cases, baseline);
        say(&cases, &stale, &baseline.file);
        let mut e = exit(&cases);
        if let Some(path) = &self.junit {
            match junit::write(
                path,
                "lockjaw",
                &cases,
                &stale,
                &baseline.file,
                self.unknown_fails,
            ) {
                Ok(()) => eprintln!("JUnit XML written to {}", path.display()),
                Err(err) => {
                    eprintln!("error: {err}");
                    e = e.merge(Exit::Error);
                }
            }
        }
        Some(e)
    }
}
