//! The runner: wires cluster, workers, nemesis, storage and Toxiproxy into
//! a recorded, checked run (`lockjaw run`), the worker subcommand, and
//! healing (`lockjaw heal`).
//!
//! - [`controller`]: validation, exit paths (normal, error, Ctrl-C, panic),
//!   draining the undo log on every one of them.
//! - [`phases`]: the order of a run: setup, run, heal, stop, final read,
//!   teardown, check.
//! - [`workers`] / [`worker`] / [`protocol`]: the worker processes, both
//!   sides, and the lines they exchange.
//! - [`recorder`]: the history writer (numbering, periodic flush).
//! - [`proxies`]: one Toxiproxy proxy per worker × node and worker × storage.
//! - [`heal`]: `lockjaw heal DIR` after a SIGKILL; the undo log itself
//!   lives in [`crate::undo`] (the nemeses write to it too).
//! - [`compare`]: `lockjaw compare`, a matrix of `lockjaw run` children
//!   (N/A cells from the service registry), Ctrl-C between cells.
//! - [`adapter`]: `--client`'s adapter found and asked before the run.
//! - [`repeat`]: `--runs N` and `--jobs J`, one configuration run N times.
//! - [`shrink`]: `lockjaw shrink RUN_DIR`, the smallest command that still
//!   reproduces a run's anomaly, confirmed on fresh seeds.
//! - [`sweep`]: `lockjaw sweep`, rates against a varied fault or workload
//!   parameter, and `--find-boundary`'s bisection.
//! - [`verdict`]: the run's verdict: the checks', or unknown when the run
//!   tested nothing.
//! - [`rundir`], [`analysis`], [`progress`]: the run directory and
//!   `run.json`, facts read back from the history, progress bars.
//! - [`shard`]: `--shard K/N` of the static plans and the manifest
//!   `lockjaw merge` reads.
//! - [`timings`]: `run.json`'s per-phase wall times (`--timings`).

pub mod adapter;
pub mod analysis;
pub mod attach;
mod attach_plan;
pub mod cli;
pub mod cluster_cli;
pub mod compare;
pub mod controller;
pub mod heal;
mod hosts;
pub mod load;
pub mod phases;
pub mod progress;
pub mod protocol;
pub mod proxies;
pub mod recorder;
pub mod renewal_check;
pub mod repeat;
mod run_auth;
pub mod rundir;
pub mod runs_shard;
pub mod shard;
pub mod shared;
pub mod shrink;
pub mod stallmeter;
pub mod sweep;
pub mod timings;
pub mod verdict;
pub mod wire_lease;
pub mod wire_tap;
pub mod worker;
pub mod workers;
