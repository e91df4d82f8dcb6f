//! Storage calls as history ops, so every worker records them alike.
//!
//! [`call_op`] (and its shorthands [`read_op`], [`write_op`]) records the invocation into a [`Sink`] (time
//! taken before the request is written), make the call, and record its
//! completion (time taken after the answer is read):
//!
//! | outcome | completion |
//! |---|---|
//! | applied | `ok` with `seq` (a read's `value` is what it read) |
//! | refused by the fence rule | `fail`, `error: "stale-fence"`, `seq` |
//! | connect failed / bad request | `fail`, `error` says why (nothing sent or applied) |
//! | timeout, I/O error, closed | `info`, `error` says why (may have been applied) |
//!
//! Every op carries `f` (`read`/`write`/`apply`), `key` and the request's
//! `fence`; writes carry the written `value` on every line, applies their
//! `{"job", "idempotent"}` and, on `ok`, `"applied"` (false: an
//! idempotency key made the storage ignore it).

use super::client::{CallError, Reply};
use super::protocol::{OpKind, Request};
use super::resource::Resource;
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use serde_json::Value;

/// The `error` of a completion refused by the fence rule.
pub const STALE_FENCE: &str = "stale-fence";

/// The `error` of a conditional write refused because the key's version
/// moved on.
pub const VERSION_CONFLICT: &str = "version-conflict";

/// The invocation of a storage op.
pub fn invoke(
    time: u64,
    process: Process,
    kind: OpKind,
    key: &str,
    value: Value,
    fence: Option<u64>,
) -> Op {
    let mut op = Op::new(time, process, OpType::Invoke, kind.as_str());
    op.key = Some(key.to_string());
    op.value = value;
    op.fence = fence;
    op
}

/// The completion of `invoke` at `time`, given the call's outcome.
pub fn complete(invoke: &Op, time: u64, result: &Result<Reply, CallError>) -> Op {
    let mut op = invoke.clone();
    op.time = time;
    match result {
        Ok(Reply::Ok {
            value,
            seq,
            version,
        }) => {
            op.kind = OpType::Ok;
            op.seq = Some(*seq);
            if invoke.f == OpKind::Read.as_str() {
                op.value = value.clone();
                op.version = Some(*version);
            }
            if invoke.f == OpKind::Apply.as_str() {
                if let Some(o) = op.value.as_object_mut() {
                    o.insert("applied".into(), value.clone());
                }
            }
        }
        Ok(Reply::Conflict { seq, version }) => {
            op.kind = OpType::Fail;
            op.seq = Some(*seq);
            op.version = Some(*version);
            op.error = Some(VERSION_CONFLICT.to_string());
        }
        Ok(Reply::Rejected { seq, .. }) => {
            op.kind = OpType::Fail;
            op.seq = Some(*seq);
            op.error = Some(STALE_FENCE.to_string());
        }
        Err(e) => {
            op.kind = if e.is_indeterminate() {
                OpType::Info
            } else {
                OpType::Fail
            };
            op.error = Some(e.history_error());
        }
    }
    op
}

/// Send `req` to `resource`, recording its invocation (before it is sent)
/// and its completion (after the answer) into `sink`. Whatever the request
/// carries (kind, key, value, fence) is recorded from the request itself.
pub async fn call_op(
    resource: &mut dyn Resource,
    sink: &dyn Sink,
    clock: &RunClock,
    process: Process,
    req: Request,
) -> Result<Reply, CallError> {
    let value = req.value.clone().unwrap_or(Value::Null);
    let mut inv = invoke(clock.now(), process, req.op, &req.key, value, req.fence);
    inv.version = req.version;
    sink.record(inv.clone());
    let result = resource.call(req).await;
    sink.record(complete(&inv, clock.now(), &result));
    result
}

/// Read `key` through `resource`, recording invoke and completion into
/// `sink`.
pub async fn read_op(
    resource: &mut dyn Resource,
    sink: &dyn Sink,
    clock: &RunClock,
    process: Process,
    key: &str,
    fence: Option<u64>,
) -> Result<Reply, CallError> {
    call_op(resource, sink, clock, process, Request::read(key, fence)).await
}

/// Write `value` to `key` through `resource`, recording invoke and
/// completion into `sink`.
pub async fn write_op(
    resource: &mut dyn Resource,
    sink: &dyn Sink,
    clock: &RunClock,
    process: Process,
    key: &str,
    value: Value,
    fence: Option<u64>,
) -> Result<Reply, CallError> {
    let req = Request::write(key, value, fence);
    call_op(resource, sink, clock, process, req).await
}

/// Apply job `job` to `key` through `client` (`idempotent`: with an
/// idempotency key), recording invoke and completion into `sink`.
#[allow(clippy::too_many_arguments)]
pub async fn apply_op(
    resource: &mut dyn Resource,
    sink: &dyn Sink,
    clock: &RunClock,
    process: Process,
    key: &str,
    job: u64,
    idempotent: bool,
    fence: Option<u64>,
) -> Result<Reply, CallError> {
    let req = Request::apply(key, job, idempotent, fence);
    call_op(resource, sink, clock, process, req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write_inv() -> Op {
        invoke(10, Process::Num(3), OpKind::Write, "c", json!(8), Some(33))
    }

    #[test]
    fn ok_write_keeps_value_and_gets_seq() {
        let inv = write_inv();
        assert_eq!(
            (inv.kind, inv.f.as_str(), inv.fence),
            (OpType::Invoke, "write", Some(33))
        );
        let done = complete(
            &inv,
            20,
            &Ok(Reply::Ok {
                value: Value::Null,
                seq: 5,
                version: 4,
            }),
        );
        assert_eq!((done.kind, done.time, done.seq), (OpType::Ok, 20, Some(5)));
        assert_eq!(done.value, json!(8));
        assert_eq!(done.key.as_deref(), Some("c"));
    }

    #[test]
    fn ok_read_carries_what_it_read() {
        let inv = invoke(1, Process::Num(1), OpKind::Read, "c", Value::Null, None);
        let done = complete(
            &inv,
            2,
            &Ok(Reply::Ok {
                value: json!(7),
                seq: 9,
                version: 3,
            }),
        );
        assert_eq!(
            (done.kind, done.value.clone(), done.fence, done.version),
            (OpType::Ok, json!(7), None, Some(3))
        );
    }

    #[test]
    fn an_ok_apply_says_whether_it_was_applied() {
        let v = json!({"job": 7, "idempotent": true});
        let inv = invoke(1, Process::Num(1), OpKind::Apply, "jobs", v, Some(3));
        let ok = |applied: bool| Reply::Ok {
            value: json!(applied),
            seq: 4,
            version: 1,
        };
        let done = complete(&inv, 2, &Ok(ok(false)));
        assert_eq!(done.f, "apply");
        assert_eq!(
            done.value,
            json!({"job": 7, "idempotent": true, "applied": false})
        );
        assert_eq!(complete(&inv, 2, &Ok(ok(true))).value["applied"], true);
    }

    #[test]
    fn rejection_is_fail_stale_fence_with_seq() {
        let done = complete(
            &write_inv(),
            20,
            &Ok(Reply::Rejected {
                seq: 6,
                highest: 34,
            }),
        );
        assert_eq!(done.kind, OpType::Fail);
        assert_eq!(done.error.as_deref(), Some(STALE_FENCE));
        assert_eq!(done.seq, Some(6));
    }

    #[test]
    fn version_conflict_is_fail_with_the_current_version() {
        let mut inv = write_inv();
        inv.version = Some(2);
        let done = complete(&inv, 20, &Ok(Reply::Conflict { seq: 7, version: 3 }));
        assert_eq!(done.kind, OpType::Fail);
        assert_eq!(done.error.as_deref(), Some(VERSION_CONFLICT));
        assert_eq!((done.seq, done.version), (Some(7), Some(3)));
        // An accepted conditional write keeps the version it expected.
        let ok = Reply::Ok {
            value: Value::Null,
            seq: 8,
            version: 3,
        };
        let done = complete(&inv, 21, &Ok(ok));
        assert_eq!((done.kind, done.version), (OpType::Ok, Some(2)));
    }

    #[test]
    fn timeout_is_info_and_connect_failure_is_fail() {
        let t = complete(
            &write_inv(),
            20,
            &Err(CallError::Timeout(std::time::Duration::from_secs(1))),
        );
        assert_eq!(
            (t.kind, t.seq, t.error.as_deref()),
            (OpType::Info, None, Some("timeout"))
        );
        let addr = "127.0.0.1:1".parse().unwrap();
        let error = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let c = complete(&write_inv(), 20, &Err(CallError::Connect { addr, error }));
        assert_eq!(c.kind, OpType::Fail);
        assert!(c.error.unwrap().starts_with("connect"));
    }
}
