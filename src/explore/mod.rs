//! `lockjaw explore`: search the faults a lock client can meet for an
//! anomaly nobody named yet (issue 41, docs/explore.md).
//!
//! One file per job: [`learn`] (fault-free runs read back: the request
//! kinds each link carried, by phase, the lease and the timings),
//! [`plan`] (the fault points, each one nemesis file, in search order),
//! [`finding`] (a run's injections per point, each anomaly a finding,
//! allowed by its fault, or undecided), [`feedback`] (whether a landed
//! injection changed what the client sent, from the wire tap), [`output`] (explore.md, .json,
//! .html and the coverage), [`shard`] (`--shard K/N`: its manifest, and
//! the shards' reports joined for `lockjaw merge`), [`ci`] (a case per
//! fault family for `--junit` and `--baseline`), and the driver (learn runs, the search within
//! a budget, confirmation alone, resume).
//!
//! Above `bugs` (it writes row files `lockjaw bugs run` accepts and counts
//! kinds as the catalogue does) and so above the runner: every run is an
//! ordinary run directory, healed as `lockjaw run` heals.

pub mod budget;
pub mod candidates;
pub mod ci;
pub mod cli;
pub mod confirm;
pub mod coverage;
pub mod drive;
pub mod feedback;
pub mod finding;
pub mod learn;
pub mod output;
pub mod pairs;
pub mod plan;
pub mod real;
pub mod rows;
pub mod search;
pub mod shard;
pub mod state;
