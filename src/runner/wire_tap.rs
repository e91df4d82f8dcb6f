//! `lockjaw run --tap-wire`: the run's wire tap ([`crate::toxiproxy::tap`])
//! opened on the run clock before the proxies exist, told each worker's
//! owner token as its grants are recorded (so the tap can mark the
//! requests that carry it), and closed after the embedded Toxiproxy has
//! stopped, when no connection is left to report.

use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use crate::toxiproxy::tap::{self, Tap};
use std::path::Path;
use std::sync::Arc;

/// The run's tap, with `--tap-wire`: `DIR/wire.jsonl`.
pub fn open(on: bool, dir: &Path, clock: RunClock) -> Result<Option<Arc<Tap>>, String> {
    if !on {
        return Ok(None);
    }
    Tap::open(&dir.join(tap::FILE), clock).map(Some)
}

/// `rec`, telling `tap` each worker's owner token as its grant is
/// recorded; `rec` itself without a tap.
pub fn spy(rec: Arc<dyn Sink>, tap: Option<&Arc<Tap>>, workers: usize) -> Arc<dyn Sink> {
    match tap {
        Some(t) if workers > 0 => Arc::new(TokenSpy {
            inner: rec,
            tap: t.clone(),
            workers,
        }),
        _ => rec,
    }
}

/// Close the tap; a warning when records were dropped or not written.
/// Why its file is not whole, if it is not.
pub fn close(tap: Option<&Arc<Tap>>) -> Option<String> {
    let t = tap?;
    match t.close() {
        Ok(w) if w.dropped > 0 => {
            tracing::warn!(
                "{}: the wire tap dropped {} of {} records (its writer fell behind)",
                t.path().display(),
                w.dropped,
                w.records + w.dropped
            );
            Some(format!("the tap dropped {} record(s)", w.dropped))
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("the wire tap: {e}");
            Some(e)
        }
    }
}

/// A sink that reads each recorded grant's owner for the tap.
struct TokenSpy {
    inner: Arc<dyn Sink>,
    tap: Arc<Tap>,
    workers: usize,
}

impl Sink for TokenSpy {
    fn record(&self, op: Op) {
        if op.kind == OpType::Ok && op.f == "acquire" {
            if let (Some(slot), Some(owner)) = (slot_of(&op.process, self.workers), &op.owner) {
                self.tap.set_token(slot, owner);
            }
        }
        self.inner.record(op);
    }
}

/// The worker slot of a process: worker `w`'s processes are numbered
/// `w, w+C, w+2C, ...` (C workers), its own named ones `"<n>-lease"` etc.
pub fn slot_of(p: &Process, workers: usize) -> Option<usize> {
    let n = match p {
        Process::Num(n) => *n,
        Process::Named(s) => s.split_once('-')?.0.parse().ok()?,
        Process::Nemesis => return None,
    };
    usize::try_from(n).ok().map(|n| n % workers.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_map_to_their_worker_slots() {
        assert_eq!(slot_of(&Process::Num(7), 3), Some(1));
        assert_eq!(slot_of(&Process::Named("4-lease".into()), 3), Some(1));
        assert_eq!(slot_of(&Process::Named("final".into()), 3), None);
        assert_eq!(slot_of(&Process::Nemesis, 3), None);
    }
}
