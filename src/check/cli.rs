//! `lockjaw check`: the arguments, and the loop that prints one verdict
//! per file.
//!
//! Each path is a history file, a run directory (a folder holding
//! `run.json`: its `history.jsonl` is checked, and its `results.json`
//! rewritten) or a folder of histories (searched recursively). Per file,
//! the checkers come from `--checker`, else `--model` (linearizability),
//! else the meta record (see [`crate::check::results::checkers_for`]). One
//! verdict line per file (or one JSON object per line with `--json`: the
//! `results.json` document plus `file`); the exit code is the first of 1,
//! 3, 2, 0 that occurs. The file's warnings (a cut-off last line that was
//! ignored) go to stderr as `warning: FILE:LINE: ...`.

use crate::check::files;
use crate::check::linear::LinOptions;
use crate::check::lock::LockOptions;
use crate::check::minimal::{self, WitnessHistory, WitnessOptions};
use crate::check::results::{CheckOptions, Checker, Results};
use crate::check::Validity;
use crate::exit::Exit;
use crate::history::import::Format;
use crate::history::jsonl::{set_max_line_bytes, DEFAULT_MAX_LINE_BYTES};
use crate::history::{init_flag, HistoryError, Meta};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    pub checker: Option<Checker>,
    /// Input format (detected by default).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Check all keys as one state instead of one partition per key.
    #[arg(long)]
    pub one_state: bool,
    /// Give up after this many seconds per file: the verdict is unknown.
    #[arg(long, value_name = "SECS", value_parser = timeout_secs)]
    pub timeout: Option<f64>,
    /// Memory cap for the search memo, in MiB; reaching it gives unknown.
    /// For lock histories it also bounds what waits on leases past their
    /// end for a late renew (256 bytes an entry).
    #[arg(long, value_name = "MIB", default_value_t = 4096)]
    pub max_memory: usize,
    /// The longest history line to read, in bytes (default 64 MiB); a
    /// longer one is an error naming its line.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_line_bytes: u64,
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
    /// For each invalid file, write its witness histories
    /// (`witness-<kind>.jsonl`: the smallest sub-history still judged
    /// invalid for the same anomaly) into its run directory, or beside the
    /// history file.
    #[arg(long)]
    pub witness: bool,
    /// With --witness: write the witnesses into DIR instead (created if
    /// missing).
    #[arg(long, value_name = "DIR", requires = "witness")]
    pub witness_dir: Option<PathBuf>,
    /// With --witness: checks of candidate sub-histories per witness; when
    /// they run out, the witness found so far is written, marked not
    /// minimal.
    #[arg(long, value_name = "N", default_value_t = minimal::DEFAULT_BUDGET, requires = "witness")]
    pub witness_budget: u64,
}

impl CheckArgs {
    /// The options these arguments give; an error names the flag at fault.
    pub fn options(&self) -> Result<CheckOptions, String> {
        let init = init_flag(self.init.as_deref())?;
        Ok(CheckOptions {
            checkers: self.checker.map(|c| vec![c]),
            lin: self.lin_options(init.clone()),
            lock: self.lock_options(init),
            format: self.format,
        })
    }

    fn lin_options(&self, init: Option<Value>) -> LinOptions {
        LinOptions {
            model: self.model.clone(),
            init,
            one_state: self.one_state,
            timeout: self.timeout.map(Duration::from_secs_f64),
            max_memory: self.max_memory.saturating_mul(1 << 20),
            format: self.format,
        }
    }

    fn lock_options(&self, init: Option<Value>) -> LockOptions {
        let mut params = serde_json::Map::new();
        if let Some(w) = &self.workload {
            params.insert("workload".into(), Value::String(w.clone()));
        }
        if let Some(b) = self.acquire_sets_ttl {
            params.insert("acquire_sets_ttl".into(), Value::Bool(b));
        }
        let given = self.model.is_some() || self.init.is_some() || !params.is_empty();
        LockOptions {
            meta_override: given.then(|| Meta {
                model: self.model.clone(),
                init,
                checkers: vec!["lock".into()],
                params,
                ..Meta::default()
            }),
            reorder_window_ms: self.reorder_window_ms,
            search_timeout: self.timeout.map(Duration::from_secs_f64),
            search_max_memory: Some(self.max_memory.saturating_mul(1 << 20)),
            max_waiting: Some(self.max_memory.saturating_mul(1 << 12)),
            ..LockOptions::default()
        }
    }
}

/// Check one file (recording a run directory's results.json): its
/// results, what to print, and its JSON line. A checker's error is this
/// file's error (exit 3).
/// `--timeout SECS`: a positive number of seconds, at most a year (a
/// larger one would overflow the clock when the deadline is computed).
fn timeout_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 31_536_000.0 => Ok(x),
        _ => Err(format!(
            "--timeout {s}: not a number of seconds from 0 to a year (hint: e.g. --timeout 60)"
        )),
    }
}

fn check_one(path: &Path, opts: &CheckOptions) -> Result<(Results, String, Value), HistoryError> {
    let r = files::check_and_record(path, opts)?;
    for w in &r.warnings {
        eprintln!("warning: {}", w.to_history_error());
    }
    if let Some(e) = r.first_error() {
        return Err(e);
    }
    minimal::check_claims(path, &r, opts)?;
    let name = path.display().to_string();
    let mut obj = serde_json::to_value(&r).unwrap_or(Value::Null);
    if let Some(o) = obj.as_object_mut() {
        o.insert("file".into(), Value::String(name.clone()));
    }
    let text = r.text(&name);
    Ok((r, text, obj))
}

pub fn check(args: CheckArgs) -> Exit {
    set_max_line_bytes(args.max_line_bytes);
    let opts = match args.options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    if let Some(dir) = &args.witness_dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("error: {}", unwritable(dir, &e));
            return Exit::Error;
        }
    }
    let mut exit = Exit::Valid;
    let mut witness_failed = false;
    for item in files::expand(&args.paths) {
        match item.and_then(|p| check_one(&p, &opts).map(|r| (p, r))) {
            Ok((path, (r, text, mut obj))) => {
                exit = exit.merge(r.valid.into());
                if !args.json {
                    print!("{text}");
                }
                if args.witness && r.valid == Validity::False {
                    match witnesses(&path, &opts, &args) {
                        Ok(ws) => report_witnesses(&ws, &mut obj, args.json),
                        Err(e) => {
                            witness_failed = true;
                            eprintln!("error: {e}");
                        }
                    }
                }
                if args.json {
                    println!("{obj}");
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
    // The verdict's code, unless a witness asked for could not be written.
    if witness_failed {
        Exit::Error
    } else {
        exit
    }
}

/// A directory witnesses cannot be written into.
fn unwritable(dir: &Path, e: &std::io::Error) -> String {
    format!(
        "cannot write witnesses into {}: {e} (hint: make it writable, or pass --witness-dir DIR)",
        dir.display()
    )
}

/// Find and write the witnesses of the invalid history at `path`: into
/// `--witness-dir`, else its run directory, else the file's directory.
/// Each with its file path.
fn witnesses(
    path: &Path,
    opts: &CheckOptions,
    args: &CheckArgs,
) -> Result<Vec<(PathBuf, WitnessHistory)>, String> {
    let wopts = WitnessOptions {
        budget: args.witness_budget,
        check: opts.clone(),
    };
    let found = minimal::find(path, &wopts).map_err(|e| format!("{e}"))?;
    let dir = match (&args.witness_dir, files::run_dir_of(path)) {
        (Some(d), _) => d.clone(),
        (None, Some(run)) => run.to_path_buf(),
        (None, None) => match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        },
    };
    found
        .into_iter()
        .map(|w| {
            minimal::write(&dir, &w)
                .map(|p| (p, w))
                .map_err(|e| unwritable(&dir, &e))
        })
        .collect()
}

/// One line per witness written (or, with `--json`, list them under
/// `witnesses` in the file's object).
fn report_witnesses(ws: &[(PathBuf, WitnessHistory)], obj: &mut Value, json: bool) {
    if json {
        let list: Vec<Value> = ws
            .iter()
            .map(|(p, w)| {
                json!({"file": p.display().to_string(), "kind": w.info.kind,
                    "witness_ops": w.info.witness_ops, "history_ops": w.info.history_ops,
                    "minimal": w.info.minimal, "oracle_calls": w.info.oracle_calls,
                    "budget": w.info.budget, "seconds": w.info.seconds})
            })
            .collect();
        if let Some(o) = obj.as_object_mut() {
            o.insert("witnesses".into(), Value::Array(list));
        }
        return;
    }
    for (p, w) in ws {
        let i = &w.info;
        let how = if i.minimal {
            "minimal".to_string()
        } else {
            format!("not minimal: budget of {} oracle calls ran out", i.budget)
        };
        println!(
            "witness {}: {} of {} op lines, {how}, {:.2} s",
            p.display(),
            i.witness_ops,
            i.history_ops,
            i.seconds
        );
    }
}
