//! lockjaw: a Jepsen-style black-box checker for distributed locks.
//!
//! Data flows one way: `cli` → `runner` → (`cluster`, `client`, `nemesis`,
//! `storage`, `toxiproxy`) → `history` → `check` → `report`.
//! See `README.md` and `docs/ARCHITECTURE.md` for the shape of the crate.

pub mod check;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod exit;
pub mod history;
pub mod nemesis;
pub mod process;
pub mod report;
pub mod runner;
pub mod storage;
pub mod toml_file;
pub mod toxiproxy;
pub mod undo;
pub mod workload;
