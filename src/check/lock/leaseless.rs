//! Check 7, exact part: locks without leases checked for linearizability
//! against the `owned-mutex` model.
//!
//! The streaming pass finds the plain real-time violations (a second grant
//! before the holder began releasing). What it cannot decide alone, e.g.
//! two acquires whose outcome is unknown, is settled here: the lock ops of
//! every key that never showed a lease are collected ([`LeaselessTap`]) and
//! handed to the WGL search (`check::linear`) with the `owned-mutex` model,
//! under a time budget (unknown when it runs out). Keys with a lease stop
//! collecting at their first leased grant, so memory follows the lease-less
//! lock ops only.

use super::report::{CheckResult, LockReport};
use super::verdict::compose;
use super::witness::{Witness, WitnessData};
use crate::check::linear::{self, LinOptions};
use crate::check::Validity;
use crate::history::{Meta, Op, OpType, Process};
use std::collections::HashMap;
use std::time::Duration;

/// Most lease-less lock ops kept; past this the check stays unknown.
const MAX_OPS: usize = 2_000_000;
/// Default time budget of the exact search.
const BUDGET: Duration = Duration::from_secs(60);

#[derive(Default)]
struct KeyTap {
    ops: Vec<Op>,
    /// A grant on this key stated a lease, or a renew touched it.
    leased: bool,
    /// A grant on this key had no lease.
    leaseless_grant: bool,
}

/// Collects the lock ops of keys without leases.
#[derive(Default)]
pub(crate) struct LeaselessTap {
    keys: HashMap<Option<String>, KeyTap>,
    /// The key of each process's pending op (completions may omit it).
    pending: HashMap<Process, Option<String>>,
    kept: usize,
    overflow: bool,
}

fn lock_f(f: &str) -> Option<&'static str> {
    match f {
        "acquire" | "campaign" | "lock" => Some("acquire"),
        "release" | "resign" | "unlock" => Some("release"),
        "renew" => Some("renew"),
        _ => None,
    }
}

impl LeaselessTap {
    /// Look at one op of the history (any order).
    pub(crate) fn push(&mut self, op: &Op) {
        if op.process.is_nemesis() {
            return;
        }
        let Some(f) = lock_f(&op.f) else {
            return;
        };
        let key = match op.kind {
            OpType::Invoke => {
                self.pending.insert(op.process.clone(), op.key.clone());
                op.key.clone()
            }
            _ => self
                .pending
                .remove(&op.process)
                .unwrap_or_else(|| op.key.clone()),
        };
        let t = self.keys.entry(key).or_default();
        if t.leased {
            return;
        }
        let leased_grant = f == "acquire" && op.kind == OpType::Ok && op.lease_ms.is_some();
        if f == "renew" || leased_grant {
            t.leased = true;
            self.kept -= t.ops.len();
            t.ops = Vec::new();
            return;
        }
        if f == "acquire" && op.kind == OpType::Ok {
            t.leaseless_grant = true;
        }
        if self.kept >= MAX_OPS {
            self.overflow = true;
            return;
        }
        let mut o = op.clone();
        o.f = f.to_string();
        t.ops.push(o);
        self.kept += 1;
    }

    /// Settle check 7 in `report` when the streaming pass left it unknown
    /// for want of the exact search.
    pub(crate) fn settle(self, report: &mut LockReport, lock_opts: &super::LockOptions) {
        let m = &report.checks.mutex;
        if !m.applicable || m.count > 0 || m.valid != Validity::Unknown || report.stats.late_ops > 0
        {
            return;
        }
        if self.overflow {
            return;
        }
        if self.keys.values().any(|t| t.leased && t.leaseless_grant) {
            // A key with leased and lease-less grants: neither model fits.
            return;
        }
        let ops: Vec<Op> = self
            .keys
            .into_values()
            .filter(|t| t.leaseless_grant)
            .flat_map(|t| t.ops)
            .collect();
        let n = ops.len();
        let opts = LinOptions {
            model: Some("owned-mutex".into()),
            init: Some(serde_json::Value::Null),
            timeout: Some(lock_opts.search_timeout.unwrap_or(BUDGET)),
            ..LinOptions::default()
        };
        let opts = match lock_opts.search_max_memory {
            Some(max_memory) => LinOptions { max_memory, ..opts },
            None => opts,
        };
        let mut m = CheckResult {
            applicable: true,
            limit: report.checks.mutex.limit,
            ..CheckResult::default()
        };
        match linear::check_ops("lease-less locks", Some(Meta::default()), ops, &opts) {
            Ok(r) => match r.valid {
                Validity::True => {
                    m.valid = Validity::True;
                    m.note = Some(format!(
                        "exact owned-mutex linearizability search over {n} lock op(s)"
                    ));
                }
                Validity::False => {
                    m.valid = Validity::False;
                    let key = r
                        .violation
                        .as_ref()
                        .and_then(|v| v.key.clone())
                        .unwrap_or_default();
                    let text = r
                        .violation
                        .as_ref()
                        .map(|v| {
                            format!(
                                "lock '{key}' without leases is not linearizable as an owned \
                                 mutex: after {} op(s) it is {}, and none of the next op(s) can \
                                 follow ({})",
                                v.prefix.len(),
                                v.state,
                                v.stuck
                                    .iter()
                                    .map(|c| format!(
                                        "{} (process {}, op {})",
                                        c.op.op, c.op.process, c.op.index
                                    ))
                                    .collect::<Vec<_>>()
                                    .join("; ")
                            )
                        })
                        .unwrap_or_else(|| "not linearizable as an owned mutex".into());
                    let violation = serde_json::to_value(&r.violation).unwrap_or_default();
                    m.add(Witness {
                        text,
                        data: WitnessData::MutexNotLinearizable { key, violation },
                    });
                }
                Validity::Unknown => {
                    m.valid = Validity::Unknown;
                    m.note = Some(format!(
                        "the exact owned-mutex search did not finish: {}",
                        r.reason.unwrap_or_else(|| "no reason given".into())
                    ));
                }
            },
            Err(e) => {
                m.valid = Validity::Unknown;
                m.note = Some(format!("the exact owned-mutex search could not run: {e}"));
            }
        }
        report.checks.mutex = m;
        let c = &report.checks;
        report.service = compose(&[&c.safety, &c.fence_order, &c.mutex]);
        report.valid = report.service.valid.merge(report.resource.valid);
        if report.nothing_tested().is_some() {
            report.valid = report.valid.merge(Validity::Unknown);
        }
    }
}
