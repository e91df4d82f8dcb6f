//! `lockjaw merge DIR... --out DIR`: the shards of one static plan
//! (`compare`, `bugs table`, `run --runs`, `sweep` with `--shard K/N`)
//! joined into the tables and pages the unsharded command writes, and
//! the shards of an explore (split by point name) joined into one report
//! that says the search was split.
//!
//! Merge is a pure function of the directories it is given: it reads each
//! shard's manifest ([`crate::runner::shard`]), refuses shards that do
//! not belong together ([`check`]: another plan, lockjaw version, seed or
//! server/library version, a shard missing or given twice, each named),
//! makes every run directory available under `--out` (a relative symbolic
//! link into the shard's directory, or a copy with `--copy`) at the path
//! the unsharded command gives it, and rebuilds the tables from the runs
//! themselves (the rates and intervals from the pooled counts). No
//! server, no network, no clock.

mod check;
pub mod cli;
mod place;

pub use check::check;
pub use cli::{merge, MergeArgs};
