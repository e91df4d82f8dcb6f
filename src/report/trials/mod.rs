//! Runs as measurements: each fault injection that landed is a trial, and
//! a trial succeeds (for an anomaly kind) when at least one anomaly of that
//! kind is attributed to it. Rates come with their 95 % Wilson interval.
//!
//! - An injection *landed* when it was applied without error and, when it
//!   reports `landed_inside` (the holder faults), it struck a holder inside
//!   its critical section. A node fault that was applied hit its node.
//! - An anomaly's moment is the latest of its witness ops (invocation or
//!   completion, whichever the witness names). It is attributed to the
//!   latest landed injection that started at or before that moment and
//!   whose window, from its start to its stop plus two leases, holds it.
//!   The final read is not a moment of the run (it witnesses the run as a
//!   whole): anomalies only it witnesses (lost updates), and anomalies
//!   outside every window, count in the totals but in no trial.
//! - An injection the run's end cut short (`cut_short`) did not last its
//!   length: it is no trial.

//!
//! One file per job: [`wilson`] (rates and their interval), [`kinds`]
//! (the anomaly vocabulary), [`attribution`] (injections as trials, each
//! anomaly to its injection), [`tally`] (runs as one measurement, and its
//! text).

pub mod attribution;
pub mod kinds;
pub mod tally;
pub mod wilson;

pub use attribution::{of_run, run_trials, RunTrials, Trial};
pub use kinds::{kind_label, kind_of, parse_kind, ANY, KINDS};
pub use tally::Tally;
pub use wilson::{pct, wilson, Rate, Z95};
