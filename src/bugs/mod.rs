//! The bug catalogue: real lock-library bugs, one `bugs/ID.toml` each,
//! replayed through `lockjaw run` on the buggy and the fixed release.
//!
//! One file per job: [`catalogue`] (reading and checking a file),
//! [`folder`] (the catalogue folder: every file, a row by id),
//! [`expect`] (an expected anomaly kind, counted in one finished run),
//! [`side`] (one side's runs as a measurement, and whether it met its
//! expectation), [`replay`] (running a side's runs through the runner),
//! [`table`] (the markdown table of `make bugs`), [`cli`] (`lockjaw bugs`),
//! [`shard`] (`bugs table --shard K/N` and its rebuild for `lockjaw merge`),
//! [`ci`] (the measured rows as CI cases: `--junit`, `--baseline`).
//!
//! Above the runner: a side's runs are ordinary runs, in-process through
//! `runner::repeat`, so Ctrl-C heals them as it heals `lockjaw run`.
//! docs/bugs.md is the user's chapter.

pub mod catalogue;
pub mod ci;
pub mod cli;
pub mod expect;
pub mod folder;
pub mod replay;
pub mod shard;
pub mod side;
pub mod table;

pub use catalogue::{Bug, Class, Per, Role};
pub use expect::Expect;
