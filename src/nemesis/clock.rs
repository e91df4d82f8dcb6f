//! Clock faults on Redis nodes through libfaketime: `clock-jump` and
//! `clock-strobe`. The run starts the Redis servers under libfaketime with a
//! control file per node ([`needs_faketime`]); a fault writes an offset
//! such as `+4.000s` into the targets' files (read on every clock call).
//! Only the wall clock moves, as when NTP steps it: the servers' monotonic
//! clocks are left alone (`FAKETIME_DONT_FAKE_MONOTONIC=1`).
//!
//! - `clock-jump`: once a worker holds the lock (for lock workloads), jump
//!   the targets' clocks forward by `offset_ms` (default 2 × the requested
//!   lease, so every key they hold expires at once) for the fault's length
//!   (default 1 lease), then set them back. On Redlock, jumping a majority
//!   (the default target) makes the majority forget the holder's keys while
//!   the holder's own validity still runs: a second client acquires.
//! - `clock-strobe`: flip the targets' clocks between `+offset_ms` and the
//!   real time every `period_ms` (default 100) for the fault's length
//!   (default 2 leases), then set them back.
//!
//! Each node's previous offset goes into the undo log before its file is
//! first written; on a node on another host, after the dead man's switch
//! that writes it back should lockjaw not come back ([`super::deadman`]). etcd ignores libfaketime (Go reads the clock without
//! libc) and ZooKeeper under libfaketime is not validated: the registry
//! refuses both.

use super::node::pick;
use super::{deadman, Ctx, Fault, Nemesis, NemesisError, NemesisSpec};
use crate::cluster::Cluster;
use crate::service::System;
use crate::undo::Undo;
use crate::workload::step::Phase;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Default flip period of `clock-strobe`.
pub const DEFAULT_PERIOD_MS: u64 = 100;

/// Whether the libraries the Redis servers are started with are here.
pub fn host_ready() -> Result<(), String> {
    let missing: Vec<&str> = crate::process::faketime::FAKETIME_PRELOAD
        .split_whitespace()
        .filter(|lib| !std::path::Path::new(lib).exists())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} missing (hint: install the libfaketime and libmimalloc2.0 packages)",
            missing.join(" and ")
        ))
    }
}

/// True for the clock faults.
pub fn is_clock_fault(fault: &str) -> bool {
    matches!(fault, "clock-jump" | "clock-strobe")
}

/// Whether a run of `spec` on `system` must start its Redis nodes under
/// libfaketime (a clock fault, or `mixed` or `together` holding one).
pub fn needs_faketime(spec: &NemesisSpec, system: System) -> bool {
    system.facts().libfaketime
        && super::together::leaves(spec)
            .iter()
            .any(|s| is_clock_fault(&s.fault))
}

/// The libfaketime offset text for `ms` milliseconds, e.g. `+4.000s`.
pub fn offset_text(ms: i64) -> String {
    let sign = if ms < 0 { '-' } else { '+' };
    let a = ms.unsigned_abs();
    format!("{sign}{}.{:03}s", a / 1000, a % 1000)
}

/// The offset to jump by: `offset_ms`, or 2 × the requested lease.
pub(super) fn offset_ms(ctx: &Ctx) -> i64 {
    ctx.spec.offset_ms.unwrap_or(2 * ctx.ttl.as_millis() as i64)
}

/// The strobe's flip period: `period_ms`, or [`DEFAULT_PERIOD_MS`].
pub(super) fn period(ctx: &Ctx) -> Duration {
    Duration::from_millis(ctx.spec.period_ms.unwrap_or(DEFAULT_PERIOD_MS).max(1))
}

/// A strobe's task: its stop signal and its handle (the flips it made).
#[derive(Default)]
pub(super) struct Strobing(Option<(watch::Sender<bool>, tokio::task::JoinHandle<u64>)>);

impl Strobing {
    /// Flip with `set` between `offset` and the real time (`+0`) every
    /// `period` until stopped; a failed flip is logged, not fatal.
    pub(super) fn start<F, Fut>(&mut self, offset: String, period: Duration, mut set: F)
    where
        F: FnMut(String) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), NemesisError>> + Send + 'static,
    {
        let (tx, mut stop) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut flips = 0u64;
            let mut ahead = false;
            loop {
                ahead = !ahead;
                let text = if ahead { offset.clone() } else { "+0".into() };
                if let Err(e) = set(text).await {
                    tracing::warn!("{e}");
                }
                flips += 1;
                tokio::select! {
                    _ = tokio::time::sleep(period) => {}
                    _ = stop.changed() => return flips,
                }
            }
        });
        self.0 = Some((tx, task));
    }

    /// Stop the flips, then set the clocks back through the undo log;
    /// the fault's stop record (`flips`).
    pub(super) async fn stop(
        &mut self,
        ctx: &mut Ctx,
        name: &str,
        fault: &Fault,
    ) -> Result<Value, NemesisError> {
        let mut flips = 0;
        if let Some((tx, task)) = self.0.take() {
            let _ = tx.send(true);
            flips = task.await.unwrap_or(0);
        }
        ctx.revert(name, &fault.undo).await?;
        Ok(json!({ "flips": flips }))
    }
}

/// For each of `names`, the undo entry that sets its clock back to the
/// offset it has now (its libfaketime control file, here or on its host).
fn control_files(
    cluster: &Cluster,
    fault: &str,
    names: &[String],
) -> Result<Vec<Undo>, NemesisError> {
    names
        .iter()
        .map(|name| {
            let node = cluster
                .node(name)
                .map_err(|e| NemesisError::new(fault, e.to_string()))?;
            node.clock_undo(node.clock_offset()).ok_or_else(|| {
                NemesisError::new(
                    fault,
                    format!("node {name} was not started under libfaketime (hint: clock faults need a Redis cluster lockjaw starts; it starts it under libfaketime for them)"),
                )
            })
        })
        .collect()
}

/// Arm each node's dead man's switch (a node on a host), then write each
/// node's previous offset to the undo log; returns the ids. The fault's
/// planned length is `hold`.
async fn remember(
    ctx: &mut Ctx,
    fault: &str,
    names: &[String],
    files: &[Undo],
    hold: Duration,
) -> Result<Vec<u64>, NemesisError> {
    ctx.deadman.hold = Some(hold);
    for (name, u) in names.iter().zip(files) {
        if let Err(e) = deadman::arm(ctx, fault, name, std::slice::from_ref(u)).await {
            deadman::disarm_all(ctx, names).await;
            return Err(e);
        }
    }
    files.iter().map(|u| ctx.will(fault, u.clone())).collect()
}

/// Set the clocks back (the undo log), then disarm the nodes' switches;
/// the switches' results, to merge into the stop's detail.
async fn set_back(ctx: &mut Ctx, fault: &str, f: &Fault) -> Result<Value, NemesisError> {
    ctx.revert(fault, &f.undo).await?;
    let names: Vec<String> = serde_json::from_value(f.target["nodes"].clone()).unwrap_or_default();
    Ok(deadman::disarm_all(ctx, &names).await)
}

/// Set every node's clock (off the async threads: a node on a host is
/// written over SSH).
async fn set_all(
    cluster: &Arc<Cluster>,
    fault: &str,
    names: &[String],
    offset: &str,
) -> Result<(), NemesisError> {
    let (c, names, offset) = (cluster.clone(), names.to_vec(), offset.to_string());
    tokio::task::spawn_blocking(move || {
        for name in &names {
            c.node(name).and_then(|n| n.set_clock_offset(&offset))?;
        }
        Ok::<_, crate::cluster::ClusterError>(())
    })
    .await
    .map_err(|e| NemesisError::new(fault, e.to_string()))?
    .map_err(|e| NemesisError::new(fault, e.to_string()))
}

/// Wait for a worker to hold the lock; its slot and its description for
/// the history, `None` if the run ends first.
pub(super) async fn holder(ctx: &mut Ctx) -> Option<(usize, Value)> {
    let ev = ctx.wait_for_phase(Phase::Holding).await?;
    let v = json!({
        "slot": ev.slot,
        "process": ev.state.process,
        "owner": ev.state.owner,
        "holding_ns": ev.state.time,
    });
    Some((ev.slot, v))
}

/// Wait for a holder when the workload takes a lock; `None` if the run
/// ends first. The value describes the holder for the history.
async fn aim(ctx: &mut Ctx) -> Option<Value> {
    if !ctx.workload.is_some_and(|k| k.uses_lock()) {
        return (!ctx.is_stopping()).then_some(Value::Null);
    }
    holder(ctx).await.map(|(_, v)| v)
}

/// Jump the targets' clocks forward, past every lease they hold.
pub struct ClockJump;

#[async_trait]
impl Nemesis for ClockJump {
    fn name(&self) -> &'static str {
        "clock-jump"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let fault = self.name();
        let Some(holder) = aim(ctx).await else {
            return Ok(None);
        };
        let names = pick(ctx, fault, ctx.spec.target).await?;
        let cluster = ctx.cluster.clone();
        let files = control_files(&cluster, fault, &names)?;
        let offset = offset_ms(ctx);
        let hold = ctx.spec.duration(ctx.ttl);
        let invoked_at = ctx.clock.now();
        let ids = remember(ctx, fault, &names, &files, hold).await?;
        if let Err(e) = set_all(&cluster, fault, &names, &offset_text(offset)).await {
            let _ = ctx.revert(fault, &ids).await;
            deadman::disarm_all(ctx, &names).await;
            return Err(e);
        }
        Ok(Some(Fault {
            invoked_at,
            undo: ids,
            hold,
            target: json!({
                "target": ctx.spec.target.name(),
                "nodes": names,
                "offset_ms": offset,
                "holder": holder,
            }),
            state: Value::Null,
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        set_back(ctx, self.name(), fault).await
    }
}

/// Flip the targets' clocks back and forth.
#[derive(Default)]
pub struct ClockStrobe {
    running: Strobing,
}

#[async_trait]
impl Nemesis for ClockStrobe {
    fn name(&self) -> &'static str {
        "clock-strobe"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let fault = self.name();
        let Some(holder) = aim(ctx).await else {
            return Ok(None);
        };
        let names = pick(ctx, fault, ctx.spec.target).await?;
        let cluster = ctx.cluster.clone();
        let files = control_files(&cluster, fault, &names)?;
        let offset = offset_ms(ctx);
        let period = period(ctx);
        let hold = ctx.spec.duration(ctx.ttl);
        let invoked_at = ctx.clock.now();
        let ids = remember(ctx, fault, &names, &files, hold).await?;
        let strobed = names.clone();
        self.running
            .start(offset_text(offset), period, move |text: String| {
                let (cluster, names) = (cluster.clone(), strobed.clone());
                async move { set_all(&cluster, "clock-strobe", &names, &text).await }
            });
        Ok(Some(Fault {
            invoked_at,
            undo: ids,
            hold,
            target: json!({
                "target": ctx.spec.target.name(),
                "nodes": names,
                "offset_ms": offset,
                "period_ms": period.as_millis() as u64,
                "holder": holder,
            }),
            state: Value::Null,
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let flips = self.running.stop(ctx, self.name(), fault).await?;
        let names: Vec<String> =
            serde_json::from_value(fault.target["nodes"].clone()).unwrap_or_default();
        Ok(deadman::merged(
            flips,
            deadman::disarm_all(ctx, &names).await,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_written_as_libfaketime_reads_them() {
        assert_eq!(offset_text(4000), "+4.000s");
        assert_eq!(offset_text(1500), "+1.500s");
        assert_eq!(offset_text(-250), "-0.250s");
        assert_eq!(offset_text(0), "+0.000s");
    }

    #[test]
    fn faketime_is_needed_for_clock_faults_on_redis_only() {
        let jump = NemesisSpec::of("clock-jump").unwrap();
        assert!(needs_faketime(&jump, System::Redlock));
        assert!(needs_faketime(&jump, System::Sentinel));
        assert!(!needs_faketime(&jump, System::Etcd));
        let pause = NemesisSpec::of("pause-node").unwrap();
        assert!(!needs_faketime(&pause, System::Redis));
    }
}
