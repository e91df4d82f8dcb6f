//! A saved run directory as the report reads it: `history.jsonl`,
//! `run.json` and `results.json`, with errors naming the missing or broken
//! file. `run.json` and `results.json` are read as loose JSON
//! ([`serde_json::Value`]) so the report tolerates fields being added; the
//! lookups below say which names they try.

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
    /// `run.json`: every parameter, the seed, versions.
    pub run: Value,
    /// `results.json`: the checkers' verdicts and witnesses.
    pub results: Value,
    /// `nemesis.json` (optional): each injection, kill gaps; `Null` if absent.
    pub nemesis: Value,
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
        let rd = RunDir {
            dir: dir.to_path_buf(),
            run: Value::Null,
            results: Value::Null,
            nemesis: Value::Null,
        };
        let hist = rd.history_path();
        if !hist.is_file() {
            return Err(ReportError::Missing {
                path: dir.join(HISTORY).display().to_string(),
                hint: " (hint: a run directory holds history.jsonl, run.json and results.json \
                       as `lockjaw run` writes them)",
            });
        }
        let run = read_json(
            &dir.join(RUN),
            " (hint: `lockjaw run` writes run.json at the start of a run)",
        )?;
        let results = unwrap_check_json(read_json(
            &dir.join(RESULTS),
            " (hint: recreate it with `lockjaw check --json DIR/history.jsonl > DIR/results.json`)",
        )?);
        let nemesis = match read_json(&dir.join(NEMESIS), "") {
            Err(ReportError::Missing { .. }) => Value::Null,
            other => other?,
        };
        Ok(RunDir {
            run,
            results,
            nemesis,
            ..rd
        })
    }

    /// `history.jsonl`, or `history.jsonl.gz` when only that exists.
    pub fn history_path(&self) -> PathBuf {
        let plain = self.dir.join(HISTORY);
        let gz = self.dir.join(format!("{HISTORY}.gz"));
        if !plain.exists() && gz.exists() {
            gz
        } else {
            plain
        }
    }

    /// A `run.json` field: at the top level, or inside one of the nested
    /// parameter objects (`params`, `parameters`, `args`, `config`).
    pub fn param(&self, name: &str) -> Option<&Value> {
        lookup(&self.run, name)
    }

    /// A `run.json` field as text (strings as-is, numbers and booleans
    /// printed; an object with a `name` gives its name).
    pub fn param_str(&self, name: &str) -> Option<String> {
        self.param(name).and_then(value_text)
    }
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

/// `lockjaw check --json` wraps its reports (`{"file", "lock": {...},
/// "linearizable": {...}, "valid"}`); the runner writes the lock report
/// bare. Bring the first to the second's shape: the lock report's fields
/// at the top, `linearizable` beside them, the overall `valid` kept.
pub fn unwrap_check_json(v: Value) -> Value {
    let Some(lock) = v.get("lock").filter(|l| l.get("checks").is_some()) else {
        return v;
    };
    let mut out = lock.clone();
    if let (Some(o), Some(w)) = (out.as_object_mut(), v.as_object()) {
        for k in ["linearizable", "valid"] {
            if let Some(x) = w.get(k) {
                o.insert(k.to_string(), x.clone());
            }
        }
    }
    out
}

const NESTED: [&str; 7] = [
    "params",
    "parameters",
    "args",
    "config",
    "options",
    "workload",
    "nemesis",
];

/// Look `name` up at the top of `v`, then one level down in the usual
/// nested parameter objects.
pub fn lookup<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    if let Some(x) = v.get(name).filter(|x| !x.is_null()) {
        return Some(x);
    }
    NESTED
        .iter()
        .filter_map(|n| v.get(n))
        .find_map(|o| o.get(name).filter(|x| !x.is_null()))
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
    fn lookup_finds_nested_params() {
        let v = json!({"system": "redis", "params": {"seed": 7, "system": "ignored"}});
        assert_eq!(lookup(&v, "system"), Some(&json!("redis")));
        assert_eq!(lookup(&v, "seed"), Some(&json!(7)));
        assert_eq!(lookup(&v, "nope"), None);
        assert_eq!(
            value_text(&json!({"name": "fenced-counter"})).as_deref(),
            Some("fenced-counter")
        );
        assert_eq!(value_bool(&json!("off")), Some(false));
    }

    #[test]
    fn check_json_is_unwrapped() {
        let v = json!({"file": "h", "valid": false,
            "lock": {"valid": true, "checks": {"safety": {}}},
            "linearizable": {"valid": false}});
        let u = unwrap_check_json(v);
        assert_eq!(u["checks"], json!({"safety": {}}));
        assert_eq!(u["valid"], json!(false));
        assert_eq!(u["linearizable"]["valid"], json!(false));
        let bare = json!({"valid": true, "checks": {}});
        assert_eq!(unwrap_check_json(bare.clone()), bare);
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
