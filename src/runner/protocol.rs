//! The controller ↔ worker protocol.
//!
//! The controller writes a [`WorkerSpec`] as JSON into the run directory
//! (`workers/worker-N.json`) and starts `lockjaw worker --spec FILE` with its
//! stdout piped. The worker answers with newline-delimited JSON on stdout,
//! one [`Message`] a line:
//!
//! ```text
//! {"ready":{"pid":4242}}
//! {"op":{"time":1200345,"process":3,"type":"invoke","f":"acquire","key":"lockjaw"}}
//! {"state":{"phase":"granted","process":3,"time":1200801,"key":"lockjaw","owner":"…","fence":33,"lease_ms":2000}}
//! {"stall":{"start_ns":5200000,"end_ns":5261000,"late_ms":56.0}}
//! {"fatal":"cannot connect to …"}
//! {"moment":{"id":4,"moment":"release","state":{"phase":"releasing",…}}}
//! {"passed":{"id":4,"armed":true}}
//! {"outcome":{"id":4,"type":"fail","error":"not-held"}}
//! {"done":{"steps":120,"grants":37}}
//! ```
//!
//! `op` lines are history ops without `index` (the controller's writer
//! numbers them); `state` lines say where the worker is in its critical
//! section (for holder-targeted nemeses); `stall` lines are the worker's
//! stall meter's late wakes (see `super::stallmeter`). Invocations are flushed before
//! their request is sent, so a worker killed at any point never leaves a
//! request in flight that the history does not show. The worker's stderr
//! goes to `logs/worker-N.log`. The controller stops a worker with SIGTERM:
//! it finishes its step (releasing what it holds) and exits 0.
//!
//! The controller writes [`Command`] lines to the worker's stdin, for faults
//! timed by the protocol (`crate::workload::step::moment`):
//!
//! ```text
//! {"watch":{"id":4,"moment":"release"}}    announce your next release
//! {"unwatch":{"id":4}}                     never mind
//! {"go":{"id":4,"armed":true}}             send it now (the fault is armed)
//! ```
//!
//! A watched worker sends `moment` before the request and waits for `go`
//! (at most 100 ms); then `passed` says whether the fault was armed in time,
//! and `outcome` how the request ended.

use crate::history::{Op, OpType};
use crate::service::System;
use crate::workload::step::{Moment, StateEvent};
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Everything a worker process needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Worker slot, 0-based.
    pub slot: usize,
    /// How many times this slot was started before (kill-holder respawns).
    pub incarnation: u32,
    /// First process number; later ones add `stride` (after each `info`).
    pub first_process: i64,
    pub stride: i64,
    pub system: System,
    /// The lock service's client endpoints as announced.
    pub endpoints: Vec<String>,
    /// Announced address → this worker's proxy in front of it.
    pub dial: BTreeMap<String, String>,
    /// This worker's proxy in front of the storage (storage workloads).
    pub storage: Option<String>,
    pub workload: Workload,
    /// Deadline of one storage request (longer than any storage delay fault).
    pub storage_timeout_ms: u64,
    /// Raw CLOCK_MONOTONIC of the run's start.
    pub clock_origin_ns: u64,
    pub seed: u64,
    /// Write ops to stdout (false only for measuring the recording cost).
    #[serde(default = "yes")]
    pub record: bool,
    /// The master name the sentinels monitor (sentinel).
    #[serde(default = "default_master")]
    pub sentinel_master: String,
    /// The client adapter the worker runs instead of lockjaw's own lock
    /// client (`--client`), and what its handshake answered before the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<AdapterSpec>,
    /// The run's id (names what clients create in a shared database).
    #[serde(default)]
    pub run_id: String,
    /// `--postgres-url`: the run directory's private file (mode 0600) that
    /// holds it, password included; the URL itself is in no spec file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_url_file: Option<std::path::PathBuf>,
    /// `--auth`: the user's auth file, which the worker reads again (its
    /// secrets are in no spec file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_file: Option<std::path::PathBuf>,
    /// `--storage postgres`: the run id whose `lockjaw_<run-id>_*` table
    /// holds the protected value; `storage` is then this worker's proxy in
    /// front of the PostgreSQL server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_pg: Option<String>,
    /// `--storage mariadb`: the run id whose `lockjaw_<run-id>_*` table
    /// holds the protected value, in the run's own MariaDB server behind
    /// `storage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_my: Option<String>,
    /// Start the worker (and so its adapter) under libfaketime with a
    /// control file of its own, the wall clock only (client clock faults).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_faketime: bool,
    /// `--max-rate`: requests per second to the lock service, all of the
    /// run's `concurrency` workers together ([`crate::client::pace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<f64>,
    /// The wire is the lease source ([`crate::runner::wire_lease`]): the
    /// adapter's `renewed` events are recorded as `renewed` ops, which no
    /// checker credits.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wire_leases: bool,
}

/// A client adapter: its executable and its handshake answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdapterSpec {
    pub path: std::path::PathBuf,
    pub offer: crate::client::adapter::Offer,
    /// The variables its `--client` pin sets (`NAME@VERSION`, `NAME@PATH`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: crate::client::adapter::Env,
}

fn yes() -> bool {
    true
}

fn default_master() -> String {
    crate::client::SENTINEL_MASTER.to_string()
}

impl WorkerSpec {
    pub fn read(path: &Path) -> Result<WorkerSpec, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}:{}: {e} (hint: this file is written by `lockjaw run`; do not edit it)",
                path.display(),
                e.line()
            )
        })
    }
}

/// One line of a worker's stdout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Message {
    /// Connected, about to start its steps.
    Ready { pid: u32 },
    /// A history op.
    Op(Op),
    /// Where it is in its critical section.
    State(StateEvent),
    /// It cannot go on (the message says why); it exits 3 next.
    Fatal(String),
    /// The lease guard abandoned a protected write (the grant it was for).
    Abandoned(StateEvent),
    /// Its stall meter woke `late_ms` late from a sleep begun at
    /// `start_ns` (run clock): the process could not run for that long.
    Stall {
        start_ns: u64,
        end_ns: u64,
        late_ms: f64,
    },
    /// It is about to send the request of a watched moment and waits.
    Moment {
        id: u64,
        moment: Moment,
        state: StateEvent,
    },
    /// It went on past moment `id`; `armed` false when no `go` with
    /// `armed` came within the wait.
    Passed { id: u64, armed: bool },
    /// The request of moment `id` completed: `ok`, `fail` or `info`, and
    /// the error.
    Outcome {
        id: u64,
        #[serde(rename = "type")]
        kind: OpType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Its last line before a normal exit: steps run, grants obtained
    /// (counted by the worker itself, so also without recording).
    Done { steps: u64, grants: u64 },
}

impl Message {
    /// Parse one line; `None` for a line that is not a message.
    pub fn parse(line: &str) -> Option<Message> {
        serde_json::from_str(line).ok()
    }
}

/// One line the controller writes to a worker's stdin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    /// Announce the next request of this moment (once).
    Watch { id: u64, moment: Moment },
    /// Forget watch `id` if it has not fired.
    Unwatch { id: u64 },
    /// The answer to announced moment `id`: go on.
    Go { id: u64, armed: bool },
    /// Every worker of the run is ready: take the first step. A worker's
    /// first incarnation waits for it after `ready` (so the run's workers
    /// start together, and none steps while the others start); one
    /// started again mid-run does not.
    Start,
}

impl Command {
    pub fn parse(line: &str) -> Option<Command> {
        serde_json::from_str(line).ok()
    }

    /// The line to write, newline included.
    pub fn line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("a command serialises");
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{OpType, Process};
    use crate::workload::step::Phase;

    #[test]
    fn messages_round_trip_as_documented() {
        let op = Op::new(5, Process::Num(3), OpType::Invoke, "acquire");
        let line = serde_json::to_string(&Message::Op(op.clone())).unwrap();
        assert!(line.starts_with("{\"op\":{"), "{line}");
        assert_eq!(Message::parse(&line), Some(Message::Op(op)));
        let st = Message::State(StateEvent {
            phase: Phase::Holding,
            process: 3,
            time: 9,
            key: None,
            owner: None,
            fence: Some(2),
            lease_ms: None,
        });
        let line = serde_json::to_string(&st).unwrap();
        assert!(line.contains("\"phase\":\"holding\""), "{line}");
        assert_eq!(Message::parse(&line), Some(st));
        assert_eq!(
            Message::parse("{\"ready\":{\"pid\":7}}"),
            Some(Message::Ready { pid: 7 })
        );
        assert_eq!(Message::parse("garbage"), None);
        let m = Message::Passed { id: 4, armed: true };
        let line = serde_json::to_string(&m).unwrap();
        assert_eq!(line, r#"{"passed":{"id":4,"armed":true}}"#);
        assert_eq!(Message::parse(&line), Some(m));
    }

    #[test]
    fn commands_round_trip_as_documented() {
        let c = Command::Watch {
            id: 4,
            moment: Moment::Release,
        };
        assert_eq!(c.line(), "{\"watch\":{\"id\":4,\"moment\":\"release\"}}\n");
        assert_eq!(Command::parse(c.line().trim_end()), Some(c));
        assert_eq!(
            Command::parse(r#"{"go":{"id":4,"armed":false}}"#),
            Some(Command::Go {
                id: 4,
                armed: false
            })
        );
        assert_eq!(Command::Start.line(), "\"start\"\n");
        assert_eq!(Command::parse("\"start\""), Some(Command::Start));
        assert_eq!(Command::parse("{}"), None);
    }
}
