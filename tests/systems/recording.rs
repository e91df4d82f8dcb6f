//! Client configs that record lease refreshes, for the in-process client
//! tests (`clusters/`, `clients_ext/`): an in-memory history sink and a
//! recorder writing into it under the logical process `"0-lease"`.

use lockjaw::client::{ClientConfig, LeaseRecorder};
use lockjaw::history::{clock::RunClock, Op, Process, Sink};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A history sink that keeps ops in memory.
#[derive(Default)]
pub struct VecSink {
    pub ops: Mutex<Vec<Op>>,
}

impl Sink for VecSink {
    fn record(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }
}

/// `cfg` with a recorder under `"0-lease"`; the instant is no later than
/// the recorder's time zero (Instant and RunClock read CLOCK_MONOTONIC).
pub fn recording(mut cfg: ClientConfig) -> (ClientConfig, Arc<VecSink>, Instant) {
    let sink = Arc::new(VecSink::default());
    let t0 = Instant::now();
    let clock = RunClock::start();
    cfg.recorder = Some(LeaseRecorder::new(
        sink.clone(),
        Process::Named("0-lease".into()),
        clock,
    ));
    (cfg, sink, t0)
}
