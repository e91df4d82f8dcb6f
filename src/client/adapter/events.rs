//! The adapter's events: a background renewal (`renewed`) becomes a
//! `renew` op over the interval the adapter measured, a lease the library
//! gave up on (`lost`) a `lost` op of its owner.

use super::wire::excerpt;
use super::Ctx;
use crate::history::clock::monotonic_raw_ns;
use crate::history::{Op, OpType, Process};
use serde_json::Value;

/// A background renewal: a `renew` op over the interval the adapter
/// measured on the host's monotonic clock.
pub(super) fn renewed(
    ctx: &Ctx,
    key: Option<String>,
    owner: String,
    lease_ms: u64,
    sent_ns: u64,
    done_ns: u64,
    line: &[u8],
) -> Result<(), String> {
    let now = monotonic_raw_ns();
    let never_granted = !ctx
        .granted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&owner);
    let too_long = super::wire::bad_lease(lease_ms);
    let bad = if never_granted {
        Some("`owner` was never granted to this worker (hint: name the owner its acquire returned)")
    } else if let Some(why) = &too_long {
        Some(why.as_str())
    } else if sent_ns > done_ns {
        Some("`sent_ns` is after `done_ns`")
    } else if done_ns > now {
        Some("`done_ns` is in the future (hint: both are CLOCK_MONOTONIC in ns: Python time.monotonic_ns(), Node process.hrtime.bigint(), Java System.nanoTime())")
    } else if sent_ns < ctx.origin {
        Some("`sent_ns` is before the run started (`clock_origin_ns`)")
    } else {
        None
    };
    if let Some(why) = bad {
        return Err(format!("renewed event refused: {why}: {}", excerpt(line)));
    }
    let Some(rec) = &ctx.events else {
        return Ok(());
    };
    let process = rec.process.clone();
    let key = key.unwrap_or_else(|| ctx.key.clone());
    // A report only when the wire is the lease source (the runner's
    // `wire_lease`, which reads back this name).
    let f = if ctx.reported_only {
        "renewed"
    } else {
        "renew"
    };
    let mut inv = Op::new(sent_ns - ctx.origin, process.clone(), OpType::Invoke, f);
    inv.key = Some(key.clone());
    inv.owner = Some(owner.clone());
    let mut ok = Op::new(done_ns - ctx.origin, process, OpType::Ok, f);
    ok.key = Some(key);
    ok.owner = Some(owner);
    ok.lease_ms = Some(lease_ms);
    rec.sink.record(inv);
    rec.sink.record(ok);
    Ok(())
}

/// The library says the lock is gone: a `lost` op of the owner (a release
/// the holder did not ask for).
pub(super) fn lost(ctx: &Ctx, key: Option<String>, owner: String, reason: Option<String>) {
    let Some(rec) = &ctx.events else {
        return;
    };
    let t = monotonic_raw_ns().saturating_sub(ctx.origin);
    let process: Process = rec.process.clone();
    let key = key.unwrap_or_else(|| ctx.key.clone());
    let mut inv = Op::new(t, process.clone(), OpType::Invoke, LOST);
    inv.key = Some(key.clone());
    inv.owner = Some(owner.clone());
    let mut ok = inv.clone();
    ok.kind = OpType::Ok;
    ok.value = reason.map(Value::String).unwrap_or(Value::Null);
    rec.sink.record(inv);
    rec.sink.record(ok);
}

/// The `f` of the op a `lost` event records.
pub const LOST: &str = "lost";
