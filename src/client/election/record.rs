//! The election history vocabulary, mapped onto the lock one so the same
//! checks apply: builders for each op and wrappers that record a call's
//! invocation (time taken before the request is written) and completion
//! (after the answer is read) into a [`Sink`].
//!
//! | f | invoke | ok | fail | info |
//! |---|---|---|---|---|
//! | `campaign` (plays `acquire`) | `key` = election | elected: `owner`, `fence`, `lease_ms` | `error: "not-elected"` or a definite error | ambiguous error |
//! | `resign` (plays `release`) | `key`, `owner`, `fence` of the term | resigned | `error: "not-leader"` (the term had ended) or a definite error | ambiguous error |
//! | `observe` | `key` | `value` = the leader's owner (`null`: no leader), `fence` = its fence | definite error | never (a read) |
//! | `lost-leadership` | `key`, `owner`, `fence` of the term | `value` = why (`lease-expired`, `lease-ran-out`, `session-expired`, `key-deleted`) | never | never |
//!
//! `lost-leadership` is a notification: the leader's worker records it
//! when it learns its term ended, as an invoke and an ok at the same
//! instant (the checkers pair every completion with an invocation), under
//! its own process, between its other ops. `observe` ops carry no `owner`
//! (the owner of an op is its lock holder; an observer holds nothing).

use super::{ElectionClient, Leader, Loss, Term};
use crate::client::ClientError;
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use serde_json::Value;
use std::time::Duration;

pub const CAMPAIGN: &str = "campaign";
pub const RESIGN: &str = "resign";
pub const OBSERVE: &str = "observe";
pub const LOST_LEADERSHIP: &str = "lost-leadership";

fn op(time: u64, process: Process, f: &str, election: &str) -> Op {
    let mut op = Op::new(time, process, OpType::Invoke, f);
    op.key = Some(election.to_string());
    op
}

/// Complete `inv` at `time` as `fail` or `info` from an error.
fn failed(mut done: Op, e: &ClientError) -> Op {
    done.kind = if e.is_definite() {
        OpType::Fail
    } else {
        OpType::Info
    };
    done.error = Some(e.to_string());
    done
}

pub fn campaign_invoke(time: u64, process: Process, election: &str) -> Op {
    op(time, process, CAMPAIGN, election)
}

pub fn campaign_complete(inv: &Op, time: u64, r: &Result<Option<Term>, ClientError>) -> Op {
    let mut done = inv.clone();
    done.time = time;
    match r {
        Ok(Some(t)) => {
            done.kind = OpType::Ok;
            done.owner = Some(t.owner.clone());
            done.fence = t.fence;
            done.lease_ms = Some(t.lease.as_millis() as u64);
            done
        }
        Ok(None) => {
            done.kind = OpType::Fail;
            done.error = Some("not-elected".into());
            done
        }
        Err(e) => failed(done, e),
    }
}

pub fn resign_invoke(time: u64, process: Process, term: &Term) -> Op {
    let mut op = op(time, process, RESIGN, &term.key);
    op.owner = Some(term.owner.clone());
    op.fence = term.fence;
    op
}

pub fn resign_complete(inv: &Op, time: u64, r: &Result<bool, ClientError>) -> Op {
    let mut done = inv.clone();
    done.time = time;
    match r {
        Ok(true) => {
            done.kind = OpType::Ok;
            done
        }
        Ok(false) => {
            done.kind = OpType::Fail;
            done.error = Some("not-leader".into());
            done
        }
        Err(e) => failed(done, e),
    }
}

pub fn observe_invoke(time: u64, process: Process, election: &str) -> Op {
    op(time, process, OBSERVE, election)
}

pub fn observe_complete(inv: &Op, time: u64, r: &Result<Option<Leader>, ClientError>) -> Op {
    let mut done = inv.clone();
    done.time = time;
    match r {
        Ok(l) => {
            done.kind = OpType::Ok;
            done.value = l
                .as_ref()
                .map_or(Value::Null, |l| Value::String(l.owner.clone()));
            done.fence = l.as_ref().and_then(|l| l.fence);
            done
        }
        // An observe changes nothing: a failed one is a fail.
        Err(e) => {
            let mut done = failed(done, e);
            done.kind = OpType::Fail;
            done
        }
    }
}

/// The `lost-leadership` notification: an invoke and an ok at `time`.
pub fn lost_ops(time: u64, process: Process, term: &Term, loss: &Loss) -> [Op; 2] {
    let mut inv = op(time, process, LOST_LEADERSHIP, &term.key);
    inv.owner = Some(term.owner.clone());
    inv.fence = term.fence;
    let mut ok = inv.clone();
    ok.kind = OpType::Ok;
    ok.value = Value::String(loss.kind.as_str().to_string());
    [inv, ok]
}

/// How the wrappers record.
pub struct Rec<'a> {
    pub sink: &'a dyn Sink,
    pub clock: &'a RunClock,
    pub process: Process,
}

/// Campaign, recording invoke and completion.
pub async fn campaign_op(
    c: &mut dyn ElectionClient,
    rec: &Rec<'_>,
    election: &str,
    ttl: Duration,
    wait: Duration,
) -> Result<Option<Term>, ClientError> {
    let inv = campaign_invoke(rec.clock.now(), rec.process.clone(), election);
    rec.sink.record(inv.clone());
    let r = c.campaign(election, ttl, wait).await;
    rec.sink
        .record(campaign_complete(&inv, rec.clock.now(), &r));
    r
}

/// Resign, recording invoke and completion.
pub async fn resign_op(
    c: &mut dyn ElectionClient,
    rec: &Rec<'_>,
    term: &Term,
) -> Result<bool, ClientError> {
    let inv = resign_invoke(rec.clock.now(), rec.process.clone(), term);
    rec.sink.record(inv.clone());
    let r = c.resign(term).await;
    rec.sink.record(resign_complete(&inv, rec.clock.now(), &r));
    r
}

/// Observe, recording invoke and completion.
pub async fn observe_op(
    c: &mut dyn ElectionClient,
    rec: &Rec<'_>,
    election: &str,
) -> Result<Option<Leader>, ClientError> {
    let inv = observe_invoke(rec.clock.now(), rec.process.clone(), election);
    rec.sink.record(inv.clone());
    let r = c.observe(election).await;
    rec.sink.record(observe_complete(&inv, rec.clock.now(), &r));
    r
}

/// Record that the leader of `term` learned its term ended, now.
pub fn record_lost(rec: &Rec<'_>, term: &Term, loss: &Loss) {
    for op in lost_ops(rec.clock.now(), rec.process.clone(), term, loss) {
        rec.sink.record(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::election::LossKind;
    use std::time::Instant;

    fn term() -> Term {
        Term {
            key: "e".into(),
            owner: "7".into(),
            fence: Some(33),
            lease: Duration::from_millis(1500),
            acquire_sets_ttl: false,
        }
    }

    #[test]
    fn campaign_ok_plays_an_acquire_ok() {
        let inv = campaign_invoke(5, Process::Num(2), "e");
        assert_eq!(
            (inv.f.as_str(), inv.key.as_deref()),
            ("campaign", Some("e"))
        );
        let ok = campaign_complete(&inv, 9, &Ok(Some(term())));
        assert_eq!(ok.kind, OpType::Ok);
        assert_eq!((ok.time, ok.fence, ok.lease_ms), (9, Some(33), Some(1500)));
        assert_eq!(ok.owner.as_deref(), Some("7"));
        let fail = campaign_complete(&inv, 9, &Ok(None));
        assert_eq!(fail.kind, OpType::Fail);
        assert_eq!(fail.error.as_deref(), Some("not-elected"));
        let info = campaign_complete(&inv, 9, &Err(ClientError::Indeterminate("t".into())));
        assert_eq!(info.kind, OpType::Info);
    }

    #[test]
    fn resign_names_its_term_and_fails_when_not_leader() {
        let inv = resign_invoke(5, Process::Num(2), &term());
        assert_eq!((inv.owner.as_deref(), inv.fence), (Some("7"), Some(33)));
        assert_eq!(resign_complete(&inv, 6, &Ok(true)).kind, OpType::Ok);
        let f = resign_complete(&inv, 6, &Ok(false));
        assert_eq!(
            (f.kind, f.error.as_deref()),
            (OpType::Fail, Some("not-leader"))
        );
    }

    #[test]
    fn observe_records_the_belief_in_value_and_fence() {
        let inv = observe_invoke(1, Process::Num(4), "e");
        let l = Leader {
            owner: "7".into(),
            fence: Some(33),
        };
        let ok = observe_complete(&inv, 2, &Ok(Some(l)));
        assert_eq!(ok.value, Value::String("7".into()));
        assert_eq!((ok.fence, ok.owner.as_deref()), (Some(33), None));
        let none = observe_complete(&inv, 2, &Ok(None));
        assert_eq!((none.kind, none.value.clone()), (OpType::Ok, Value::Null));
        let err = observe_complete(&inv, 2, &Err(ClientError::Indeterminate("t".into())));
        assert_eq!(err.kind, OpType::Fail, "an observe changes nothing");
    }

    #[test]
    fn lost_leadership_is_an_invoke_and_an_ok_at_one_instant() {
        let loss = Loss {
            kind: LossKind::LeaseRanOut,
            at: Instant::now(),
            detail: String::new(),
        };
        let [inv, ok] = lost_ops(40, Process::Num(2), &term(), &loss);
        assert_eq!((inv.kind, ok.kind), (OpType::Invoke, OpType::Ok));
        assert_eq!((inv.time, ok.time), (40, 40));
        assert_eq!(ok.f, "lost-leadership");
        assert_eq!((ok.owner.as_deref(), ok.fence), (Some("7"), Some(33)));
        assert_eq!(ok.value, Value::String("lease-ran-out".into()));
    }
}
