//! The history writer: one thread that numbers ops in arrival order and
//! appends them to `history.jsonl`, flushing at least every 100 ms, so a
//! run killed at any point leaves a checkable file.
//!
//! Every source of ops (each worker's stdout reader, the nemesis, the final
//! read) holds a [`Recorder`], a cheap [`Sink`] that sends into the writer.
//! Ops recorded after [`HistoryWriter::close`] are dropped (and counted).
//! The writer keeps running counters for the progress bar ([`Counters`]),
//! and for lock histories feeds every op to a streaming lock checker, so
//! the bar can show anomalies found so far (the verdict still comes from
//! checking the file at the end).

use crate::check::lock::{LockChecker, LockOptions};
use crate::history::jsonl::JsonlWriter;
use crate::history::{Meta, Op, OpType, Sink};
use crate::storage::record::STALE_FENCE;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest time an op waits in the writer's buffer.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Running totals of what was recorded.
#[derive(Debug, Default)]
pub struct Counters {
    pub ops: AtomicU64,
    /// Successful acquires.
    pub grants: AtomicU64,
    /// Storage writes the storage accepted.
    pub writes: AtomicU64,
    /// Storage requests refused by the fence rule.
    pub stale_rejected: AtomicU64,
    /// Completions that ended in `info`.
    pub infos: AtomicU64,
    /// Ops recorded after the writer closed (should stay 0).
    pub dropped: AtomicU64,
    /// Anomalies the live lock checker has found so far (lock histories).
    pub anomalies: AtomicU64,
}

impl Counters {
    fn count(&self, op: &Op) {
        self.ops.fetch_add(1, Ordering::Relaxed);
        if op.process.is_nemesis() {
            return;
        }
        match (op.kind, op.f.as_str()) {
            (OpType::Ok, "acquire") => {
                self.grants.fetch_add(1, Ordering::Relaxed);
            }
            (OpType::Ok, "write") => {
                self.writes.fetch_add(1, Ordering::Relaxed);
            }
            (OpType::Fail, _) if op.error.as_deref() == Some(STALE_FENCE) => {
                self.stale_rejected.fetch_add(1, Ordering::Relaxed);
            }
            (OpType::Info, _) => {
                self.infos.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

enum Msg {
    Op(Box<Op>),
    Close,
}

/// A sink into the history writer.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Msg>,
    counters: Arc<Counters>,
}

impl Sink for Recorder {
    fn record(&self, op: Op) {
        if self.tx.send(Msg::Op(Box::new(op))).is_err() {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The writer thread of one history file.
pub struct HistoryWriter {
    recorder: Recorder,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl HistoryWriter {
    /// Create `path` with `meta` as its first line and start the writer.
    pub fn create(path: &Path, meta: &Meta) -> std::io::Result<HistoryWriter> {
        let mut w = JsonlWriter::create(path, meta)?;
        w.flush()?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let live = if meta.checkers.iter().any(|c| c == "lock") {
            LockChecker::new(Some(meta), &LockOptions::default()).ok()
        } else {
            None
        };
        let thread = std::thread::Builder::new()
            .name("lockjaw-history".into())
            .spawn(move || write_loop(w, rx, &c, live))?;
        Ok(HistoryWriter {
            recorder: Recorder { tx, counters },
            thread: Some(thread),
        })
    }

    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.recorder.counters.clone()
    }

    /// Write what is queued, flush, stop the thread; returns the op count.
    pub fn close(&mut self) -> std::io::Result<u64> {
        let _ = self.recorder.tx.send(Msg::Close);
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the history writer panicked"))),
            None => Ok(Counters::get(&self.recorder.counters.ops)),
        }
    }
}

impl Drop for HistoryWriter {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn write_loop(
    mut w: JsonlWriter<File>,
    rx: mpsc::Receiver<Msg>,
    c: &Counters,
    mut live: Option<LockChecker>,
) -> std::io::Result<u64> {
    let mut dirty = false;
    let mut last_flush = Instant::now();
    loop {
        let msg = rx.recv_timeout(FLUSH_EVERY);
        match msg {
            Ok(Msg::Op(mut op)) => {
                c.count(&op);
                w.write(&mut op)?;
                dirty = true;
                if let Some(chk) = live.as_mut() {
                    if chk.push(*op).is_ok() {
                        c.anomalies.store(chk.anomalies(), Ordering::Relaxed);
                    } else {
                        live = None;
                    }
                }
            }
            Ok(Msg::Close) | Err(RecvTimeoutError::Disconnected) => {
                w.flush()?;
                return Ok(Counters::get(&c.ops));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if dirty && last_flush.elapsed() >= FLUSH_EVERY {
            w.flush()?;
            dirty = false;
            last_flush = Instant::now();
        } else if !dirty {
            last_flush = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::jsonl::read_all;
    use crate::history::Process;

    #[test]
    fn ops_are_numbered_flushed_within_the_interval_and_counted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("history.jsonl");
        let meta = Meta {
            checkers: vec!["lock".into()],
            ..Meta::default()
        };
        let mut w = HistoryWriter::create(&p, &meta).unwrap();
        let r = w.recorder();
        let mut ok = Op::new(2, Process::Num(0), OpType::Ok, "acquire");
        ok.fence = Some(1);
        r.record(Op::new(1, Process::Num(0), OpType::Invoke, "acquire"));
        r.record(ok);
        // Without closing, the file shows both ops within a flush interval.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (_, ops) = read_all(&p).unwrap();
            if ops.len() == 2 {
                assert_eq!((ops[0].index, ops[1].index), (0, 1));
                break;
            }
            assert!(Instant::now() < deadline, "not flushed");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(w.close().unwrap(), 2);
        assert_eq!(Counters::get(&w.counters().grants), 1);
        r.record(Op::new(3, Process::Num(0), OpType::Invoke, "release"));
        assert_eq!(Counters::get(&w.counters().dropped), 1);
        let (meta, ops) = read_all(&p).unwrap();
        assert_eq!(meta.unwrap().checkers, vec!["lock".to_string()]);
        assert_eq!(ops.len(), 2);
    }
}
