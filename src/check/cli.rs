//! `lockjaw check`: verdicts on one or more histories.
//!
//! Each path is a history file, a run directory (a folder holding
//! `run.json`: its `history.jsonl` is checked) or a folder of histories
//! (searched recursively). Per file, the checkers come from `--checker`,
//! else `--model` (linearizability), else the meta record's `checkers` /
//! `model`, else linearizability with the model the format implies. One
//! verdict line per file (or one JSON object per line with `--json`); the
//! exit code is the first of 1, 3, 2, 0 that occurs.

use crate::check::linear::{self, LinOptions};
use crate::check::lock::{self, LockOptions};
use crate::check::Validity;
use crate::exit::Exit;
use crate::history::edn::EdnReader;
use crate::history::import::{self, Format};
use crate::history::{HistoryError, Meta};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which checker to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckerKind {
    /// Linearizability against a model (`--model`).
    Linearizable,
    /// Lock safety: mutual exclusion, fencing, stale writes, lost updates.
    Lock,
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// History files, run directories, or folders of histories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Model for the linearizability check: register, cas-register, kv,
    /// multi-register, mutex, owned-mutex, set. Overrides the meta record.
    #[arg(long)]
    pub model: Option<String>,
    /// Initial model value as JSON or EDN (e.g. 0, '""', '{:x 0 :y 0}',
    /// unlocked). Overrides the meta record.
    #[arg(long)]
    pub init: Option<String>,
    /// Apply this checker regardless of the meta record.
    #[arg(long, value_enum)]
    pub checker: Option<CheckerKind>,
    /// Input format (detected by default).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Check all keys as one state instead of one partition per key.
    #[arg(long)]
    pub one_state: bool,
    /// Give up after this many seconds per file: the verdict is unknown.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Memory cap for the search memo, in MiB; reaching it gives unknown.
    #[arg(long, value_name = "MIB", default_value_t = 4096)]
    pub max_memory: usize,
    /// One JSON object per file on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Lock checker: the workload (lock, fenced-counter, lock-set, leader),
    /// where the meta record does not say.
    #[arg(long)]
    pub workload: Option<String>,
    /// Lock checker: whether an acquire itself starts the lease (true for
    /// Redis `SET .. PX`, false for etcd and ZooKeeper), where the meta
    /// record does not say.
    #[arg(long, value_name = "BOOL")]
    pub acquire_sets_ttl: Option<bool>,
    /// Lock checker: how late (in ms of the time field) a line may appear in
    /// the file and still be ordered correctly.
    #[arg(long, value_name = "MS")]
    pub reorder_window_ms: Option<u64>,
}

/// Parse `--init`: JSON, else EDN, else the text as a string.
pub fn parse_init(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str(text) {
        return v;
    }
    let mut r = EdnReader::new(std::io::Cursor::new(text.as_bytes().to_vec()));
    if let Ok(Some(v)) = r.read() {
        if matches!(r.read(), Ok(None)) && !matches!(v, crate::history::edn::Edn::Symbol(_)) {
            return v.to_json();
        }
    }
    Value::String(text.to_string())
}

/// The history files named by `paths`, in order; errors for missing paths.
pub fn expand(paths: &[PathBuf]) -> Vec<Result<PathBuf, HistoryError>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let before = out.len();
            walk(p, &mut out);
            if out.len() == before {
                out.push(Err(err(p, "no histories in this folder (hint: histories end in .jsonl, .edn, .log or .txt, optionally .gz)")));
            }
        } else if p.exists() {
            out.push(Ok(p.clone()));
        } else {
            out.push(Err(err(p, "no such file or directory")));
        }
    }
    out
}

fn err(p: &Path, msg: &str) -> HistoryError {
    HistoryError {
        file: p.display().to_string(),
        line: 0,
        msg: msg.into(),
    }
}

fn is_history(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(".gz").unwrap_or(name);
    !name.starts_with('.')
        && [".jsonl", ".edn", ".log", ".txt"]
            .iter()
            .any(|e| name.ends_with(e))
}

fn walk(dir: &Path, out: &mut Vec<Result<PathBuf, HistoryError>>) {
    // A run directory: `run.json`, or (a run killed before writing it) its
    // undo log; its history is the one file to check (not `undo.jsonl`).
    if dir.join("run.json").is_file() || dir.join("undo.jsonl").is_file() {
        let gz = dir.join("history.jsonl.gz");
        out.push(Ok(if gz.is_file() {
            gz
        } else {
            dir.join("history.jsonl")
        }));
        return;
    }
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => {
            out.push(Err(err(dir, &format!("cannot read folder: {e}"))));
            return;
        }
    };
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if is_history(&p) {
            out.push(Ok(p));
        }
    }
}

/// Which checkers apply to one file.
fn checkers_for(path: &Path, args: &CheckArgs) -> Result<(bool, bool), HistoryError> {
    match args.checker {
        Some(CheckerKind::Lock) => return Ok((true, false)),
        Some(CheckerKind::Linearizable) => return Ok((false, true)),
        None if args.model.is_some() => return Ok((false, true)),
        None => {}
    }
    let src = import::open(path, args.format)?;
    let meta = src.meta.unwrap_or_default();
    let lock = meta.checkers.iter().any(|c| c == "lock");
    let lin = meta.checkers.iter().any(|c| c == "linearizable") || meta.model.is_some();
    Ok((lock, lin || !lock))
}

fn lin_options(args: &CheckArgs) -> LinOptions {
    LinOptions {
        model: args.model.clone(),
        init: args.init.as_deref().map(parse_init),
        one_state: args.one_state,
        timeout: args.timeout.map(Duration::from_secs_f64),
        max_memory: args.max_memory.saturating_mul(1 << 20),
        format: args.format,
    }
}

fn lock_options(args: &CheckArgs) -> LockOptions {
    let mut params = serde_json::Map::new();
    if let Some(w) = &args.workload {
        params.insert("workload".into(), Value::String(w.clone()));
    }
    if let Some(b) = args.acquire_sets_ttl {
        params.insert("acquire_sets_ttl".into(), Value::Bool(b));
    }
    let given = args.model.is_some() || args.init.is_some() || !params.is_empty();
    let mut opts = LockOptions {
        meta_override: given.then(|| Meta {
            model: args.model.clone(),
            init: args.init.as_deref().map(parse_init),
            checkers: vec!["lock".into()],
            params,
            ..Meta::default()
        }),
        ..LockOptions::default()
    };
    if let Some(w) = args.reorder_window_ms {
        opts.reorder_window_ms = Some(w);
    }
    opts.search_timeout = args.timeout.map(Duration::from_secs_f64);
    opts.search_max_memory = Some(args.max_memory.saturating_mul(1 << 20));
    opts
}

/// Check one file: its verdict, what to print, and its JSON object.
fn check_one(path: &Path, args: &CheckArgs) -> Result<(Validity, String, Value), HistoryError> {
    let (lock, lin) = checkers_for(path, args)?;
    let name = path.display().to_string();
    let mut valid = Validity::True;
    let mut text = Vec::new();
    let mut obj = json!({ "file": name });
    if lin {
        let r = linear::check_file(path, &lin_options(args))?;
        valid = valid.merge(r.valid);
        text.push(r.to_text());
        obj["linearizable"] = serde_json::to_value(&r).unwrap_or(Value::Null);
    }
    if lock {
        let r = lock::check_file(path, &lock_options(args))?;
        valid = valid.merge(r.valid);
        text.push(format!("{}\n", r.summary_text()));
        obj["lock"] = serde_json::to_value(&r).unwrap_or(Value::Null);
    }
    obj["valid"] = serde_json::to_value(valid).unwrap_or(Value::Null);
    let mut out = String::new();
    for (i, t) in text.iter().enumerate() {
        if i == 0 {
            out.push_str(&format!("{name}: {t}"));
        } else {
            out.push_str(&format!("  {t}"));
        }
    }
    Ok((valid, out, obj))
}

pub fn check(args: CheckArgs) -> Exit {
    let mut exit = Exit::Valid;
    for item in expand(&args.paths) {
        let result = item.and_then(|p| check_one(&p, &args));
        match result {
            Ok((valid, text, obj)) => {
                exit = exit.merge(valid.into());
                if args.json {
                    println!("{obj}");
                } else {
                    print!("{text}");
                }
            }
            Err(e) => {
                exit = exit.merge(Exit::Error);
                if args.json {
                    println!(
                        "{}",
                        json!({ "file": e.file, "line": e.line, "error": e.to_string() })
                    );
                }
                eprintln!("error: {e}");
            }
        }
    }
    exit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_parses_json_edn_or_text() {
        assert_eq!(parse_init("0"), json!(0));
        assert_eq!(parse_init("\"\""), json!(""));
        assert_eq!(parse_init(""), json!(""));
        assert_eq!(parse_init("{:x 0 :y 0}"), json!({"x": 0, "y": 0}));
        assert_eq!(parse_init("unlocked"), json!("unlocked"));
        assert_eq!(parse_init("nil"), Value::Null);
    }
}
