//! A saved run directory as the report reads it: `history.jsonl`,
//! `run.json` and `results.json`, with errors naming the missing or broken
//! file. `results.json` is read as the checkers' typed [`Results`]
//! (fields added later are ignored; a file from before the typed format is
//! an error that says to run `lockjaw check DIR`). `run.json` is read as
//! [`RunFile`]: the fields `lockjaw run` writes that the report shows,
//! typed, each optional (a run killed early, or written by an older
//! lockjaw, may lack some); the fields it does not show are ignored.

use super::summary::verdict::{RunVerdict, RUN_KEY};
use crate::check::Results;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Why a run directory cannot be reported on.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{dir}: not a directory (hint: pass a run directory, e.g. histories/latest)")]
    NotADir { dir: String },
    #[error("{path}: missing{hint}")]
    Missing { path: String, hint: &'static str },
    #[error("{path}:{line}: {msg}")]
    Json {
        path: String,
        line: usize,
        msg: String,
    },
    #[error("{path}: {msg} (hint: run `lockjaw check {dir}` to rewrite it from the history)")]
    Results {
        path: String,
        dir: String,
        msg: String,
    },
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl ReportError {
    pub fn io(path: &Path, source: std::io::Error) -> ReportError {
        ReportError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// The files of one run directory.
#[derive(Clone, Debug)]
pub struct RunDir {
    pub dir: PathBuf,
    /// `run.json`: the parameters, the seed, versions.
    pub run: RunFile,
    /// `results.json`: the checkers' verdicts and witnesses.
    pub results: Results,
    /// results.json's `run`: the run's verdict, when `lockjaw run` wrote
    /// it (`lockjaw check` writes the history's alone).
    pub verdict: Option<RunVerdict>,
    /// `nemesis.json` (optional): each injection, kill gaps; `Null` if absent.
    pub nemesis: Value,
}

/// `run.json` as the report reads it: what `lockjaw run` writes there
/// (`runner::rundir::RunInfo`, whose test checks that this reads it),
/// limited to what a report shows.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct RunFile {
    pub run_id: Option<String>,
    /// The command line that started the run.
    pub command: Vec<String>,
    pub system: Option<String>,
    pub client: Option<String>,
    /// A client adapter's library and version.
    pub client_library: Option<String>,
    pub storage: Option<String>,
    pub lockjaw_version: Option<String>,
    pub server_version: Option<String>,
    pub toxiproxy_version: Option<String>,
    pub workload: Option<WorkloadFile>,
    pub nemesis: Option<NemesisFile>,
    /// `on` or `off`.
    pub fencing: Option<String>,
    pub seed: Option<u64>,
    /// The lease asked for.
    pub ttl_ms: Option<u64>,
    /// `completed`, `interrupted` or `failed: ...`.
    pub outcome: Option<String>,
    pub counts: Option<CountsFile>,
    /// `--pause-budget-ms` of the run (lease advice).
    pub pause_budget_ms: Option<f64>,
}

/// The run's totals as `run.json` holds them (what a report shows).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct CountsFile {
    /// Protected writes the lease guard abandoned.
    pub abandoned_writes: Option<u64>,
}

/// The workload as `run.json` holds it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct WorkloadFile {
    pub name: Option<String>,
    pub concurrency: Option<i64>,
    pub time_limit_s: Option<f64>,
    pub ttl_ms: Option<u64>,
    pub hold_ms: Option<u64>,
    pub think_ms: Option<u64>,
    /// `on` or `off`.
    pub lease_guard: Option<String>,
}

/// The nemesis as `run.json` holds it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NemesisFile {
    pub name: Option<String>,
    pub fault: Option<String>,
}

impl RunFile {
    /// Whether fencing was on, if `run.json` says.
    pub fn fencing_on(&self) -> Option<bool> {
        match self.fencing.as_deref()? {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }
    }
}

pub const HISTORY: &str = "history.jsonl";
pub const RUN: &str = "run.json";
pub const RESULTS: &str = "results.json";
pub const NEMESIS: &str = "nemesis.json";

impl RunDir {
    /// Open `dir`, reading `run.json` and `results.json` and checking that
    /// `history.jsonl` (or `history.jsonl.gz`) is there.
    pub fn open(dir: &Path) -> Result<RunDir, ReportError> {
        if !dir.is_dir() {
            return Err(ReportError::NotADir {
                dir: dir.display().to_string(),
            });
        }
        if !history_path(dir).is_file() {
            return Err(ReportError::Missing {
                path: dir.join(HISTORY).display().to_string(),
                hint: " (hint: a run directory holds history.jsonl, run.json and results.json \
                       as `lockjaw run` writes them)",
            });
        }
        let run_path = dir.join(RUN);
        let run = read_json(
            &run_path,
            " (hint: `lockjaw run` writes run.json at the start of a run)",
        )?;
        let run: RunFile =
            serde_path_to_error::deserialize(run).map_err(|e| ReportError::Json {
                path: run_path.display().to_string(),
                line: 1,
                msg: format!(
                    "not a run.json as `lockjaw run` writes it: field `{}`: {}",
                    e.path(),
                    e.inner()
                ),
            })?;
        let (results, verdict) = read_results(dir)?;
        let nemesis = match read_json(&dir.join(NEMESIS), "") {
            Err(ReportError::Missing { .. }) => Value::Null,
            other => other?,
        };
        Ok(RunDir {
            dir: dir.to_path_buf(),
            run,
            results,
            verdict,
            nemesis,
        })
    }

    /// `history.jsonl`, or `history.jsonl.gz` when only that exists.
    pub fn history_path(&self) -> PathBuf {
        history_path(&self.dir)
    }

    /// results.json as the page's loose readers ([`super::anomaly`],
    /// [`super::html`]) take it: see [`results_view`].
    pub fn results_view(&self) -> Value {
        results_view(&self.results)
    }
}

fn history_path(dir: &Path) -> PathBuf {
    let plain = dir.join(HISTORY);
    let gz = dir.join(format!("{HISTORY}.gz"));
    if !plain.exists() && gz.exists() {
        gz
    } else {
        plain
    }
}

/// `DIR/results.json` as [`Results`]; a file without a `version` (written
/// before the typed format) or not of that shape is an error whose hint
/// is `lockjaw check DIR`.
fn read_results(dir: &Path) -> Result<(Results, Option<RunVerdict>), ReportError> {
    let path = dir.join(RESULTS);
    let v = read_json(
        &path,
        " (hint: recreate it with `lockjaw check DIR`, which writes DIR/results.json)",
    )?;
    let bad = |msg: String| ReportError::Results {
        path: path.display().to_string(),
        dir: dir.display().to_string(),
        msg,
    };
    if v.get("version").and_then(Value::as_u64).is_none() {
        return Err(bad(
            "written by an older lockjaw (no `version` field), this report cannot read it".into(),
        ));
    }
    let verdict = match v.get(RUN_KEY) {
        None | Some(Value::Null) => None,
        Some(r) => Some(
            serde_json::from_value(r.clone())
                .map_err(|e| bad(format!("`{RUN_KEY}` is not a run's verdict: {e}")))?,
        ),
    };
    let results =
        serde_json::from_value(v).map_err(|e| bad(format!("not a results document: {e}")))?;
    Ok((results, verdict))
}

fn read_json(path: &Path, hint: &'static str) -> Result<Value, ReportError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReportError::Missing {
                path: path.display().to_string(),
                hint,
            })
        }
        Err(e) => return Err(ReportError::io(path, e)),
    };
    serde_json::from_str(&text).map_err(|e| ReportError::Json {
        path: path.display().to_string(),
        line: e.line(),
        msg: format!("{e} (hint: the file must be one JSON object)"),
    })
}

/// Typed results as the loose readers of the page take them (the shape
/// they were written for): the lock report's fields at the top,
/// `linearizable` beside them, the composed `valid`, and the first
/// checker error as `error`.
pub fn results_view(r: &Results) -> Value {
    let mut out = r
        .lock
        .as_ref()
        .and_then(|l| serde_json::to_value(l).ok())
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(o) = out.as_object_mut() {
        if let Some(l) = r
            .linearizable
            .as_ref()
            .and_then(|l| serde_json::to_value(l).ok())
        {
            o.insert("linearizable".into(), l);
        }
        o.insert(
            "valid".into(),
            serde_json::to_value(r.valid).unwrap_or(Value::Null),
        );
        if let Some(e) = r.first_error() {
            o.insert("error".into(), Value::String(e.to_string()));
        }
    }
    out
}

/// A JSON value as short text: strings as-is, scalars printed, an object
/// by its `name` field.
pub fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Object(o) => o.get("name").and_then(value_text),
        _ => None,
    }
}

/// `true`/`false`/"on"/"off"/"yes"/"no" as a boolean.
pub fn value_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.as_str() {
            "on" | "true" | "yes" => Some(true),
            "off" | "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn run_json_is_read_typed_and_a_wrong_type_is_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(HISTORY), "").unwrap();
        let ok = r#"{"version": 1, "valid": true, "checkers": []}"#;
        std::fs::write(d.path().join(RESULTS), ok).unwrap();
        let run = json!({"system": "redis", "seed": 7, "fencing": "off", "later": [1],
            "workload": {"name": "lock", "concurrency": 3}, "nemesis": {"name": "n", "fault": "none"}});
        std::fs::write(d.path().join(RUN), run.to_string()).unwrap();
        let rd = RunDir::open(d.path()).unwrap();
        assert_eq!(rd.run.system.as_deref(), Some("redis"));
        assert_eq!(rd.run.seed, Some(7));
        assert_eq!(rd.run.fencing_on(), Some(false));
        assert_eq!(rd.run.workload.unwrap().concurrency, Some(3));
        std::fs::write(d.path().join(RUN), r#"{"seed": "seven"}"#).unwrap();
        let e = RunDir::open(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("run.json:1: not a run.json") && e.contains("field `seed`"),
            "{e}"
        );
    }

    #[test]
    fn values_read_as_text_and_booleans() {
        assert_eq!(
            value_text(&json!({"name": "fenced-counter"})).as_deref(),
            Some("fenced-counter")
        );
        assert_eq!(value_bool(&json!("off")), Some(false));
    }

    #[test]
    fn results_from_before_the_typed_format_say_to_run_check() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(HISTORY), "").unwrap();
        std::fs::write(d.path().join(RUN), "{}").unwrap();
        std::fs::write(d.path().join(RESULTS), r#"{"valid": true, "checks": {}}"#).unwrap();
        let e = RunDir::open(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("results.json: written by an older lockjaw")
                && e.contains("hint: run `lockjaw check"),
            "{e}"
        );
        std::fs::write(d.path().join(RESULTS), r#"{"version": 1, "valid": 3}"#).unwrap();
        let e = RunDir::open(d.path()).unwrap_err().to_string();
        assert!(e.contains("not a results document"), "{e}");
        let ok = r#"{"version": 1, "valid": "unknown", "checkers": [], "later": 1}"#;
        std::fs::write(d.path().join(RESULTS), ok).unwrap();
        let rd = RunDir::open(d.path()).unwrap();
        assert_eq!(rd.results_view()["valid"], "unknown");
    }

    #[test]
    fn missing_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        let e = RunDir::open(d.path()).unwrap_err().to_string();
        assert!(e.contains("history.jsonl: missing"), "{e}");
        std::fs::write(d.path().join(HISTORY), "").unwrap();
        let e = RunDir::open(d.path()).unwrap_err().to_string();
        assert!(e.contains("run.json: missing"), "{e}");
        std::fs::write(d.path().join(RUN), "{").unwrap();
        let e = RunDir::open(d.path()).unwrap_err().to_string();
        assert!(e.contains("run.json:1:"), "{e}");
    }
}
