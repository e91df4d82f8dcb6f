//! What each fault allows: for a fault on a system, with fencing on or off
//! and the library's promises (as its adapter declares them), which
//! anomaly kinds are allowed by the fault (never a finding), which are
//! findings, and which the rule does not decide (undecided: review).
//! docs/faults.md's table of expected verdicts is generated from it.
//!
//! CONTRACT (issue 41): the types are fixed; `allows` is filled in by the
//! together/allows work.

use serde::{Deserialize, Serialize};

/// What a library promises, as its adapter's `hello_ok` declares
/// (`promises`); `None`: not declared.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promises {
    /// A release deletes the lock only when it still holds its own token.
    pub own_token_release: Option<bool>,
    /// After a grant, the library checks the lease's remaining validity
    /// (and gives the lock up when too little is left).
    pub validity_check: Option<bool>,
    /// The library renews the lease by itself (`renewals = "all"`).
    pub renews_itself: Option<bool>,
}

/// The rule's word on one anomaly kind under one fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowance {
    /// Expected of this fault here: never a finding (why).
    Allowed(String),
    /// Not expected: a finding.
    Finding,
    /// The rule does not decide (why): review.
    Undecided(String),
}

/// The rule for anomaly `kind` (the catalogue's `expect` words:
/// `two-holders`, `stale-write-accepted`, `lost-updates`, `stuck-lock`,
/// `orphaned-renewal`) under nemesis file `spec` (a `together` file: its
/// two faults) on `system` (as `--system` names it).
pub fn allows(
    spec: &super::spec::NemesisSpec,
    system: &str,
    fencing: bool,
    promises: &Promises,
    kind: &str,
) -> Allowance {
    let _ = (spec, system, fencing, promises, kind);
    Allowance::Undecided("the allows-rule is not built yet (issue 41 contract)".into())
}
