//! The linearizability checker: history in, tri-state verdict and evidence out.
//!
//! `check_file` reads any supported format (streaming), picks the model
//! (options, then the meta record, then a guess from the ops), prepares one
//! partition per independent key (P-compositionality; `one_state` keeps all
//! keys in one state instead) and searches the partitions in parallel,
//! largest first. The first violation cancels the rest; a deadline or the
//! memo's memory cap makes the verdict `unknown` instead of running on.

mod events;
pub mod evidence;
mod memo;
pub mod prepare;
pub mod search;

use crate::check::models::keyed::Keyed;
use crate::check::models::{guess_model, with_model, Encode, ModelVisitor};
use crate::check::Validity;
use crate::history::import::{self, Format, Source};
use crate::history::{HistoryError, Meta};
use evidence::Violation;
use search::{Control, Outcome, Searched, Searcher};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How to check. `Default` checks per key with no deadline and a 4 GiB memo cap.
#[derive(Clone, Debug)]
pub struct LinOptions {
    /// Model name; overrides the meta record.
    pub model: Option<String>,
    /// Initial value; overrides the meta record.
    pub init: Option<Value>,
    /// Check all keys as one state instead of per key.
    pub one_state: bool,
    pub timeout: Option<Duration>,
    /// Cap on the memo's memory (bytes), over all partitions at once.
    pub max_memory: usize,
    /// Input format; detected when `None`.
    pub format: Option<Format>,
}

impl Default for LinOptions {
    fn default() -> Self {
        LinOptions {
            model: None,
            init: None,
            one_state: false,
            timeout: None,
            max_memory: 4 << 30,
            format: None,
        }
    }
}

/// Search effort and memory, for the verdict line and the report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LinStats {
    pub elapsed_ms: f64,
    pub search_steps: u64,
    pub memo_entries: usize,
    pub model_states: usize,
    /// Peak memory the memos of concurrent searches held (bytes).
    pub memo_peak_bytes: usize,
    /// Peak resident memory of this process so far (VmHWM), if known.
    pub peak_rss_bytes: Option<u64>,
}

/// This process's peak resident set size, from /proc/self/status.
fn peak_rss() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The linearizability verdict on one history.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinResult {
    pub valid: Validity,
    pub model: String,
    pub init: Value,
    pub format: Format,
    /// All keys checked as one state (no partitioning).
    pub one_state: bool,
    /// Client operations (invokes) in the history.
    pub ops: usize,
    /// Failed ops (dropped: they did not happen) and pending ones.
    pub failed: usize,
    pub pending: usize,
    pub partitions: usize,
    /// Why the verdict is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violation: Option<Violation>,
    /// Effort and memory: they differ from one check of the same history
    /// to the next, so results.json keeps them under `stats`.
    #[serde(skip)]
    pub stats: LinStats,
    /// A cut-off last line the reader ignored (see the lock report's).
    #[serde(skip)]
    pub partial_line: Option<u64>,
}

impl LinResult {
    /// One line: verdict, model and effort.
    pub fn summary_line(&self) -> String {
        let shape = if self.one_state {
            "one state".to_string()
        } else if self.partitions == 1 {
            "1 partition".to_string()
        } else {
            format!("{} partitions", self.partitions)
        };
        let mut s = format!(
            "{} ({}, {} ops, {}, {:.1} ms, memo {} entries / {:.1} MiB)",
            self.valid.as_str(),
            self.model,
            self.ops,
            shape,
            self.stats.elapsed_ms,
            self.stats.memo_entries,
            self.stats.memo_peak_bytes as f64 / (1 << 20) as f64
        );
        if let Some(r) = &self.reason {
            s.push_str(": ");
            s.push_str(r);
        }
        s
    }

    /// The summary line, then the evidence of a violation.
    pub fn to_text(&self) -> String {
        let mut s = self.summary_line();
        s.push('\n');
        if let Some(v) = &self.violation {
            let unit = if self.format == Format::Jsonl {
                "ns since run start"
            } else {
                "file order"
            };
            s.push_str(&v.to_text(unit));
        }
        s
    }
}

/// Check the history at `path` (any supported format, possibly gzipped).
pub fn check_file(path: &Path, opts: &LinOptions) -> Result<LinResult, HistoryError> {
    let start = Instant::now();
    let src = import::open(path, opts.format)?;
    let tail = src.partial_tail();
    let mut r = check_source(src, opts, start)?;
    r.partial_line = tail.line();
    Ok(r)
}

/// Check an open history; `start` is when the check began (for the deadline).
pub fn check_source(
    mut src: Source,
    opts: &LinOptions,
    start: Instant,
) -> Result<LinResult, HistoryError> {
    let meta = src.meta.clone().unwrap_or_default();
    let first_f = match (&opts.model, &meta.model) {
        (None, None) => src.first_client_op()?.map(|o| o.f.clone()),
        _ => None,
    };
    let (file, format) = (src.file.clone(), src.format);
    check_iter(file, format, &meta, first_f, Box::new(src), opts, start)
}

/// Check a history the caller already holds (e.g. the runner's, in memory).
pub fn check_ops(
    name: &str,
    meta: Option<Meta>,
    ops: Vec<crate::history::Op>,
    opts: &LinOptions,
) -> Result<LinResult, HistoryError> {
    let meta = meta.unwrap_or_default();
    let first_f = ops
        .iter()
        .find(|o| !o.process.is_nemesis())
        .map(|o| o.f.clone());
    let lines = ops
        .into_iter()
        .enumerate()
        .map(|(i, op)| Ok((i as u64 + 1, op)));
    check_iter(
        name.into(),
        Format::Jsonl,
        &meta,
        first_f,
        Box::new(lines),
        opts,
        Instant::now(),
    )
}

type OpStream = Box<dyn Iterator<Item = Result<(u64, crate::history::Op), HistoryError>> + Send>;

fn check_iter(
    file: String,
    format: Format,
    meta: &Meta,
    first_f: Option<String>,
    ops: OpStream,
    opts: &LinOptions,
    start: Instant,
) -> Result<LinResult, HistoryError> {
    let model = match (&opts.model, &meta.model) {
        (Some(m), _) | (None, Some(m)) => m.clone(),
        (None, None) => first_f.as_deref().and_then(guess_model).map(str::to_string).ok_or_else(|| HistoryError {
            file: file.clone(),
            line: 0,
            msg: "no model to check with (hint: pass --model NAME, or put \"model\" in the meta record)".into(),
        })?,
    };
    let init = opts
        .init
        .clone()
        .or(meta.init.clone())
        .unwrap_or(Value::Null);
    let run = Run {
        file: file.clone(),
        format,
        ops,
        opts,
        start,
        model: model.clone(),
        init: init.clone(),
    };
    with_model(&model, Some(&init), run).map_err(|msg| HistoryError { file, line: 0, msg })?
}

struct Run<'a> {
    file: String,
    format: Format,
    ops: OpStream,
    opts: &'a LinOptions,
    start: Instant,
    model: String,
    init: Value,
}

impl ModelVisitor for Run<'_> {
    type Out = Result<LinResult, HistoryError>;

    fn visit<M: Encode>(self, model: M) -> Self::Out {
        if self.opts.one_state {
            self.run(Keyed::new(model))
        } else {
            self.run(model)
        }
    }
}

impl Run<'_> {
    fn run<M: Encode>(self, model: M) -> Result<LinResult, HistoryError> {
        let format = self.format;
        let prep = prepare::prepare(&self.file, model, self.ops)?;
        let ctl = Control::new(
            self.opts.timeout.map(|t| self.start + t),
            self.opts.max_memory,
        );
        let model = &prep.model;
        let results = schedule(model, &prep.parts, &ctl);
        let mut stats = LinStats {
            memo_peak_bytes: ctl.memory_peak.load(Ordering::Relaxed),
            ..LinStats::default()
        };
        let mut illegal: Option<usize> = None;
        let (mut timed_out, mut capped) = (false, false);
        for (i, r) in &results {
            stats.search_steps += r.steps;
            stats.memo_entries += r.memo_entries;
            stats.model_states += r.states;
            match r.outcome {
                Outcome::Illegal => illegal = Some(illegal.map_or(*i, |j| j.min(*i))),
                Outcome::TimedOut => timed_out = true,
                Outcome::MemoryCap => capped = true,
                Outcome::Linearizable | Outcome::Cancelled => {}
            }
        }
        let (valid, reason, violation) = if let Some(i) = illegal {
            let best = &results
                .iter()
                .find(|(j, _)| *j == i)
                .expect("found above")
                .1
                .best;
            let (part, init) = &prep.parts[i];
            (
                Validity::False,
                None,
                Some(evidence::build(model, part, init, best)),
            )
        } else if timed_out {
            let secs = self.opts.timeout.map_or(0.0, |t| t.as_secs_f64());
            (
                Validity::Unknown,
                Some(format!("timed out after {secs} s (hint: raise --timeout)")),
                None,
            )
        } else if capped {
            let mib = self.opts.max_memory >> 20;
            (
                Validity::Unknown,
                Some(format!(
                    "the search memo reached its cap of {mib} MiB (hint: raise --max-memory)"
                )),
                None,
            )
        } else {
            (Validity::True, None, None)
        };
        stats.elapsed_ms = self.start.elapsed().as_secs_f64() * 1e3;
        stats.peak_rss_bytes = peak_rss();
        Ok(LinResult {
            valid,
            model: self.model,
            init: self.init,
            format,
            one_state: self.opts.one_state,
            ops: prep.ops,
            failed: prep.failed,
            pending: prep.pending,
            partitions: prep.parts.len(),
            reason,
            violation,
            stats,
            partial_line: None,
        })
    }
}

/// A partition waiting for its next time slice.
enum Job<'a, M: Encode> {
    New(usize),
    Running(usize, Box<Searcher<'a, M>>, u64),
}

/// Search all partitions on a few threads in time slices (a budget of
/// steps that doubles each round), so a partition that is quickly found
/// not linearizable stops the rest even when others would run for long.
fn schedule<M: Encode>(
    model: &M,
    parts: &[prepare::PartWithInit<M>],
    ctl: &Control,
) -> Vec<(usize, Searched)> {
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(parts[i].0.ops.len()));
    let queue: Mutex<VecDeque<Job<M>>> = Mutex::new(order.into_iter().map(Job::New).collect());
    let decided: Vec<std::sync::atomic::AtomicBool> =
        (0..parts.len()).map(|_| Default::default()).collect();
    let extra_steps = std::sync::atomic::AtomicU64::new(0);
    let results: Mutex<Vec<(usize, Searched)>> = Mutex::new(Vec::new());
    let unfinished = std::sync::atomic::AtomicUsize::new(parts.len());
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(parts.len())
        .max(1);
    // Idle workers wait for a job to come back or the last one to end;
    // both are signalled under the queue lock, so no wakeup is lost.
    let ready = Condvar::new();
    let next_job = || {
        let mut q = queue.lock().expect("queue lock");
        loop {
            if let Some(job) = q.pop_front() {
                return Some(job);
            }
            if unfinished.load(Ordering::Acquire) == 0 {
                return None;
            }
            q = ready.wait(q).expect("queue lock");
        }
    };
    let work = || loop {
        let Some(job) = next_job() else {
            return;
        };
        let (i, mut searcher, budget) = match job {
            Job::New(i) if decided[i].load(Ordering::Acquire) => continue,
            Job::Running(i, mut s, _) if decided[i].load(Ordering::Acquire) => {
                s.release(ctl);
                extra_steps.fetch_add(s.finish().steps, Ordering::Relaxed);
                continue;
            }
            Job::New(i) => {
                // Plain call order unless some op is pending forever:
                // first-returning-first is several times faster with
                // pending ops, call order without them (measured on
                // the reference corpus).
                let ops = &parts[i].0.ops;
                let plain = ops.last().map_or(true, |o| o.ret != search::PENDING);
                let s = Searcher::new(model, parts[i].1.clone(), ops, plain);
                (i, Box::new(s), 1u64 << 16)
            }
            Job::Running(i, s, b) => (i, s, b),
        };
        let t = Instant::now();
        let outcome = if ctl.cancel.load(Ordering::Relaxed) {
            Some(Outcome::Cancelled)
        } else {
            searcher.run(ctl, budget)
        };
        match outcome {
            None => {
                let mut q = queue.lock().expect("queue lock");
                q.push_back(Job::Running(i, searcher, budget * 2));
                ready.notify_one();
            }
            Some(_) if decided[i].swap(true, Ordering::AcqRel) => {
                extra_steps.fetch_add(searcher.finish().steps, Ordering::Relaxed);
            }
            Some(o) => {
                if o == Outcome::Illegal {
                    ctl.cancel.store(true, Ordering::Relaxed);
                }
                let r = searcher.finish();
                tracing::debug!(key = ?parts[i].0.key, ops = parts[i].0.ops.len(), outcome = ?r.outcome, steps = r.steps, slice_ms = t.elapsed().as_secs_f64() * 1e3, "partition searched");
                results
                    .lock()
                    .expect("results lock")
                    .push((i, Searched { outcome: o, ..r }));
                let _q = queue.lock().expect("queue lock");
                if unfinished.fetch_sub(1, Ordering::AcqRel) == 1 {
                    ready.notify_all();
                }
            }
        }
    };
    // The calling thread is one of the workers: a history with one
    // partition never waits for a thread to start.
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    let mut res = results.into_inner().expect("results lock");
    if let Some(first) = res.first_mut() {
        first.1.steps += extra_steps.into_inner();
    }
    res
}
