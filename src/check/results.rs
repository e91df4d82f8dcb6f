//! The one check path: [`check_history`] reads a history's meta record,
//! runs the checkers it names (lock safety, linearizability, or both) and
//! composes their verdicts into [`Results`], the typed `results.json` that
//! `lockjaw run` and `lockjaw check` both write.
//!
//! `results.json` is versioned and additive: later versions add fields,
//! and readers ignore the fields they do not know. Everything that may
//! differ between two checks of the same history (timings, search effort,
//! memory) lives under `stats`; the rest is a function of the history and
//! the options.

use super::linear::{self, LinOptions, LinResult, LinStats};
use super::lock::{self, LockOptions, LockReport};
use super::Validity;
use crate::history::import::{self, Format};
use crate::history::jsonl::PartialTail;
use crate::history::{HistoryError, Meta};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// The `results.json` format version this lockjaw writes.
pub const RESULTS_VERSION: u32 = 1;

/// A checker, by the name the meta record's `checkers` uses.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Checker {
    /// Linearizability against a model (`--model`).
    Linearizable,
    /// Lock safety: mutual exclusion, fencing, stale writes, lost updates.
    Lock,
}

impl Checker {
    pub fn name(self) -> &'static str {
        match self {
            Checker::Linearizable => "linearizable",
            Checker::Lock => "lock",
        }
    }
}

/// How to check one history.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// Run these checkers whatever the meta record says (`--checker`);
    /// `None`: the meta record decides.
    pub checkers: Option<Vec<Checker>>,
    pub lin: LinOptions,
    pub lock: LockOptions,
    /// Input format; detected when `None`.
    pub format: Option<Format>,
}

/// Why a checker gave no report; its verdict counts as unknown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckerError {
    pub file: String,
    /// 0 when the error is not about one line.
    pub line: u64,
    pub message: String,
}

impl From<&HistoryError> for CheckerError {
    fn from(e: &HistoryError) -> CheckerError {
        CheckerError {
            file: e.file.clone(),
            line: e.line,
            message: e.msg.clone(),
        }
    }
}

impl CheckerError {
    pub fn to_history_error(&self) -> HistoryError {
        HistoryError {
            file: self.file.clone(),
            line: self.line,
            msg: self.message.clone(),
        }
    }
}

/// What may differ between two checks of the same history.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CheckStats {
    /// Wall time of all checkers together (ms).
    #[serde(default)]
    pub elapsed_ms: f64,
    /// Wall time of each checker (ms), by name.
    #[serde(default)]
    pub checker_ms: BTreeMap<String, f64>,
    /// The linearizability search's effort and memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linearizable: Option<LinStats>,
}

/// `results.json`: the composed verdict and each checker's report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    /// [`RESULTS_VERSION`] when written.
    pub version: u32,
    /// Every checker's verdict composed false > unknown > true; a checker
    /// that failed counts as unknown.
    pub valid: Validity,
    /// The checkers that ran, in order.
    pub checkers: Vec<Checker>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<LockReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linearizable: Option<LinResult>,
    /// Checker name → why it gave no report.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, CheckerError>,
    /// What was wrong with the file without stopping the check (a
    /// cut-off last line, ignored), each naming the file and line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    #[serde(default)]
    pub stats: CheckStats,
}

/// A problem of the file that did not stop the check: the same fields as
/// a checker's error.
pub type Warning = CheckerError;

impl Results {
    /// The results of a history that could not even be opened: unknown,
    /// with the reason under `errors.history`.
    pub fn unreadable(e: &HistoryError) -> Results {
        Results {
            version: RESULTS_VERSION,
            valid: Validity::Unknown,
            checkers: Vec::new(),
            lock: None,
            linearizable: None,
            errors: BTreeMap::from([("history".to_string(), CheckerError::from(e))]),
            warnings: Vec::new(),
            stats: CheckStats::default(),
        }
    }

    /// The first checker error, as the history error it was.
    pub fn first_error(&self) -> Option<HistoryError> {
        self.errors
            .values()
            .next()
            .map(CheckerError::to_history_error)
    }

    /// Each checker's text: the linearizability verdict line (and
    /// evidence), the lock checks' summary, or the checker's error.
    pub fn texts(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.checkers {
            let text = match (c, self.errors.get(c.name())) {
                (_, Some(e)) => format!("{}: unknown ({})\n", c.name(), e.to_history_error()),
                (Checker::Linearizable, None) => self
                    .linearizable
                    .as_ref()
                    .map(|r| r.to_text())
                    .unwrap_or_default(),
                (Checker::Lock, None) => self
                    .lock
                    .as_ref()
                    .map(|r| format!("{}\n", r.summary_text()))
                    .unwrap_or_default(),
            };
            out.push(text);
        }
        out
    }

    /// What `lockjaw check` prints for the file `name`: its name, then
    /// each checker's text (later ones indented).
    pub fn text(&self, name: &str) -> String {
        let mut out = String::new();
        for (i, t) in self.texts().iter().enumerate() {
            if i == 0 {
                out.push_str(&format!("{name}: {t}"));
            } else {
                out.push_str(&format!("  {t}"));
            }
        }
        out
    }

    /// This document as JSON text, pretty-printed.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            format!(
                "{{\"version\": {RESULTS_VERSION}, \"valid\": \"unknown\", \"error\": \"{e}\"}}"
            )
        })
    }
}

/// The checkers that apply to a history with this meta record: `opts`'s
/// when given, else linearizability when a model is forced, else the meta
/// record's `checkers` (a `model` alone means linearizability), else
/// linearizability with the model the format implies.
pub fn checkers_for(meta: Option<&Meta>, opts: &CheckOptions) -> Vec<Checker> {
    if let Some(c) = &opts.checkers {
        return c.clone();
    }
    if opts.lin.model.is_some() {
        return vec![Checker::Linearizable];
    }
    let named = |n: &str| meta.is_some_and(|m| m.checkers.iter().any(|c| c == n));
    let lock = named("lock");
    let lin = named("linearizable") || meta.is_some_and(|m| m.model.is_some());
    let mut out = Vec::new();
    if lin || !lock {
        out.push(Checker::Linearizable);
    }
    if lock {
        out.push(Checker::Lock);
    }
    out
}

/// Check the history at `path` with the checkers its meta record names.
/// An error opening the file is returned; an error inside a checker is
/// recorded in [`Results::errors`] and makes the verdict unknown.
pub fn check_history(path: &Path, opts: &CheckOptions) -> Result<Results, HistoryError> {
    let started = Instant::now();
    let src = import::open(path, opts.format)?;
    let checkers = checkers_for(src.meta.as_ref(), opts);
    drop(src);
    let mut r = Results {
        version: RESULTS_VERSION,
        valid: Validity::True,
        checkers: checkers.clone(),
        lock: None,
        linearizable: None,
        errors: BTreeMap::new(),
        warnings: Vec::new(),
        stats: CheckStats::default(),
    };
    let mut partial = None;
    for c in checkers {
        let t = Instant::now();
        let outcome = match c {
            Checker::Linearizable => {
                let lin = LinOptions {
                    format: opts.format,
                    ..opts.lin.clone()
                };
                linear::check_file(path, &lin).map(|l| {
                    partial = partial.or(l.partial_line);
                    r.stats.linearizable = Some(l.stats.clone());
                    r.valid = r.valid.merge(l.valid);
                    r.linearizable = Some(l);
                })
            }
            Checker::Lock => lock::check_file(path, &opts.lock).map(|l| {
                partial = partial.or(l.partial_line);
                r.valid = r.valid.merge(l.valid);
                r.lock = Some(l);
            }),
        };
        if let Err(e) = outcome {
            r.valid = r.valid.merge(Validity::Unknown);
            r.errors
                .insert(c.name().to_string(), CheckerError::from(&e));
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        r.stats.checker_ms.insert(c.name().to_string(), ms);
    }
    if let Some(line) = partial {
        r.warnings.push(Warning {
            file: path.display().to_string(),
            line,
            message: PartialTail::message().to_string(),
        });
    }
    r.stats.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn write(dir: &Path, name: &str, lines: &[Value]) -> std::path::PathBuf {
        let p = dir.join(name);
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&p, text.join("\n") + "\n").unwrap();
        p
    }

    fn op(i: u64, p: i64, kind: &str, f: &str, extra: Value) -> Value {
        let mut o = json!({"index": i, "time": i * 1_000_000, "process": p, "type": kind, "f": f});
        if let (Some(o), Some(e)) = (o.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        o
    }

    /// Results without `stats`, as JSON: what two checks must agree on.
    fn stable(r: &Results) -> Value {
        let mut v = serde_json::to_value(r).unwrap();
        v.as_object_mut().unwrap().remove("stats");
        v
    }

    #[test]
    fn a_lock_history_gets_the_lock_checker_and_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let meta = json!({"type": "meta", "version": 1, "checkers": ["lock"],
            "workload": "lock", "acquire_sets_ttl": true});
        let owner = json!({"key": "l", "owner": "a", "fence": 1, "lease_ms": 1000});
        let p = write(
            d.path(),
            "h.jsonl",
            &[
                meta,
                op(0, 0, "invoke", "acquire", json!({"key": "l"})),
                op(1, 0, "ok", "acquire", owner.clone()),
                op(2, 0, "invoke", "release", owner.clone()),
                op(3, 0, "ok", "release", owner),
            ],
        );
        let r = check_history(&p, &CheckOptions::default()).unwrap();
        assert_eq!(r.checkers, [Checker::Lock]);
        assert_eq!(r.valid, Validity::True);
        assert!(r.lock.is_some() && r.linearizable.is_none() && r.errors.is_empty());
        let again = check_history(&p, &CheckOptions::default()).unwrap();
        assert_eq!(stable(&r), stable(&again));
        let read: Results = serde_json::from_str(&r.to_json_pretty()).unwrap();
        assert_eq!(stable(&read), stable(&r));
        assert_eq!(read.version, RESULTS_VERSION);
    }

    #[test]
    fn a_register_history_gets_linearizability_with_stats_apart() {
        let d = tempfile::tempdir().unwrap();
        let meta = json!({"type": "meta", "version": 1, "checkers": ["linearizable"],
            "model": "cas-register", "init": null});
        let p = write(
            d.path(),
            "r.jsonl",
            &[
                meta,
                op(0, 0, "invoke", "write", json!({"key": "r", "value": 1})),
                op(1, 0, "ok", "write", json!({"key": "r", "value": 1})),
                op(2, 1, "invoke", "read", json!({"key": "r"})),
                op(3, 1, "ok", "read", json!({"key": "r", "value": 2})),
            ],
        );
        let r = check_history(&p, &CheckOptions::default()).unwrap();
        assert_eq!(r.checkers, [Checker::Linearizable]);
        assert_eq!(r.valid, Validity::False);
        assert!(r.stats.linearizable.is_some());
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["linearizable"].get("stats").is_none(), "{v}");
        assert_eq!(v["linearizable"]["model"], "cas-register");
        let again = check_history(&p, &CheckOptions::default()).unwrap();
        assert_eq!(stable(&r), stable(&again));
        // Readers ignore fields they do not know.
        let mut newer = v.clone();
        newer["added_later"] = json!({"x": 1});
        let read: Results = serde_json::from_value(newer).unwrap();
        assert_eq!(read.valid, Validity::False);
    }

    #[test]
    fn a_failing_checker_gives_unknown_not_an_error() {
        let d = tempfile::tempdir().unwrap();
        let meta = json!({"type": "meta", "version": 1, "checkers": ["lock"], "workload": "lock",
            "acquire_sets_ttl": true});
        let p = d.path().join("bad.jsonl");
        std::fs::write(&p, format!("{meta}\n{{not json\n")).unwrap();
        let r = check_history(&p, &CheckOptions::default()).unwrap();
        assert_eq!(r.valid, Validity::Unknown);
        let e = &r.errors["lock"];
        assert_eq!(e.line, 2, "{e:?}");
        assert!(
            r.texts()[0].starts_with("lock: unknown ("),
            "{:?}",
            r.texts()
        );
    }

    #[test]
    fn options_override_the_meta_record() {
        let meta = Meta {
            checkers: vec!["lock".into()],
            ..Meta::default()
        };
        let o = CheckOptions::default();
        assert_eq!(checkers_for(Some(&meta), &o), [Checker::Lock]);
        assert_eq!(checkers_for(None, &o), [Checker::Linearizable]);
        let forced = CheckOptions {
            checkers: Some(vec![Checker::Linearizable]),
            ..CheckOptions::default()
        };
        assert_eq!(checkers_for(Some(&meta), &forced), [Checker::Linearizable]);
        let both = Meta {
            checkers: vec!["lock".into(), "linearizable".into()],
            ..Meta::default()
        };
        assert_eq!(
            checkers_for(Some(&both), &o),
            [Checker::Linearizable, Checker::Lock]
        );
    }
}
