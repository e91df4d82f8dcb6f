//! The register workload: read, write and compare-and-set on one key of the
//! lock service's own store, checked for linearizability (`cas-register`).
//!
//! The clients are [`crate::client::register`] (one per store, connected
//! with [`crate::client::connect_register`]); this file draws the ops and
//! records them. Values are small integers; the register starts absent
//! (`null`), which is why a run uses a key of its own.
//!
//! History ops (process numbers as for the lock workloads): `read` (ok value
//! = what was read, `null` = absent), `write` (value), `cas` (value
//! `[old, new]`; `fail` = the value was not `old`, or a definite error;
//! `info` = maybe applied).

use super::step::Procs;
use super::Workload;
use crate::client::register::RegisterClient;
use crate::client::ClientError;
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Sink};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::time::Duration;

/// Draws register ops and records them.
pub struct Generator {
    key: String,
    read_ratio: f64,
    values: u64,
    think: Duration,
    rng: StdRng,
    procs: Procs,
}

impl Generator {
    pub fn new(w: &Workload, seed: u64, procs: Procs) -> Generator {
        Generator {
            key: w.register_key.clone(),
            read_ratio: w.read_ratio,
            values: w.values,
            think: Duration::from_millis(w.think_ms),
            rng: StdRng::seed_from_u64(seed),
            procs,
        }
    }

    /// One op, recorded, then the think time.
    pub async fn step(&mut self, c: &mut dyn RegisterClient, clock: &RunClock, sink: &dyn Sink) {
        let x: f64 = self.rng.gen();
        let a = self.rng.gen_range(0..self.values) as i64;
        let b = self.rng.gen_range(0..self.values) as i64;
        let (f, value) = if x < self.read_ratio {
            ("read", Value::Null)
        } else if x < self.read_ratio + (1.0 - self.read_ratio) / 2.0 {
            ("write", Value::from(a))
        } else {
            ("cas", Value::from(vec![a, b]))
        };
        let mut inv = Op::new(clock.now(), self.procs.process(), OpType::Invoke, f);
        inv.key = Some(self.key.clone());
        inv.value = value;
        sink.record(inv.clone());
        let r: Result<(OpType, Value), ClientError> = match f {
            "read" => c
                .read(&self.key)
                .await
                .map(|v| (OpType::Ok, v.map_or(Value::Null, Value::from))),
            "write" => c
                .write(&self.key, a)
                .await
                .map(|()| (OpType::Ok, inv.value.clone())),
            _ => c.cas(&self.key, a, b).await.map(|ok| {
                let kind = if ok { OpType::Ok } else { OpType::Fail };
                (kind, inv.value.clone())
            }),
        };
        let mut done = inv;
        done.time = clock.now();
        match r {
            Ok((kind, v)) => {
                done.kind = kind;
                done.value = v;
            }
            Err(e) => {
                done.error = Some(e.to_string());
                if e.is_definite() {
                    done.kind = OpType::Fail;
                } else {
                    done.kind = OpType::Info;
                    self.procs.bump();
                }
            }
        }
        sink.record(done);
        if !self.think.is_zero() {
            tokio::time::sleep(self.think).await;
        }
    }
}
