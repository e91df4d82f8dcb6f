//! lockjaw: a Jepsen-style black-box checker for distributed locks.
//!
//! Data flows one way: `cli` → `merge` → `explore` → `bugs` → `runner` → (`service`, `cluster`, `client`,
//! `nemesis`, `remote`, `storage`, `testbed`, `toxiproxy`, `workload`) → `report` → `check` →
//! `history`; `exit`, `process`, `undo` and `toml_file` are utilities any
//! module may use. `flow_tests` fails on a `crate::` path against that order.
//! See `README.md` and `docs/ARCHITECTURE.md` for the shape of the crate.

pub mod auth;
pub mod bugs;
pub mod check;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod combination;
pub mod exit;
pub mod explore;
pub mod history;
pub mod merge;
pub mod nemesis;
pub mod process;
pub mod remote;
pub mod report;
pub mod runner;
pub mod service;
pub mod storage;
pub mod testbed;
pub mod toml_file;
pub mod toxiproxy;
pub mod undo;
pub mod workload;

#[cfg(test)]
mod flow_tests;
