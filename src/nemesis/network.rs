//! Network faults through each worker's own Toxiproxy proxies:
//! `partition-holder`, `latency`, `delay-storage`.
//!
//! - `partition-holder`: once a worker is holding, disable its proxies to
//!   every lock-service node (its connections close, new ones are refused)
//!   for the fault's length (default 1.5 × its lease). Its storage link stays
//!   up, so a holder that lost its lease can still write. With `blackhole =
//!   true` (nemesis `partition-holder-blackhole`) a `timeout` toxic on both
//!   directions instead: no byte passes and no connection closes.
//! - `latency`: a latency toxic (`latency_ms` ± `jitter_ms`, server→client)
//!   on every worker's links to the lock service.
//! - `delay-storage`: once a worker is holding, a latency toxic on the
//!   client→storage direction of its storage proxy, as long as the fault
//!   (default 1.5 × its lease): its protected write reaches the storage
//!   after its lease ran out, the delayed-packet case. The toxic stays until
//!   the write has been held that long; `stop` records `write_delayed`.

use super::{Ctx, Fault, Nemesis, NemesisError, WorkerEvent};
use crate::toxiproxy::{Stream, Toxic, ToxicKind};
use crate::workload::step::Phase;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::broadcast;

fn holder_target(ev: &WorkerEvent, lease: Duration) -> Value {
    json!({
        "slot": ev.slot,
        "process": ev.state.process,
        "owner": ev.state.owner,
        "fence": ev.state.fence,
        "lease_ms": lease.as_millis() as u64,
        "holding_ns": ev.state.time,
    })
}

/// Cut the holder off from the lock service.
pub struct PartitionHolder;

#[async_trait]
impl Nemesis for PartitionHolder {
    fn name(&self) -> &'static str {
        "partition-holder"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let Some(ev) = ctx.wait_for_phase(Phase::Holding).await else {
            return Ok(None);
        };
        let lease = ctx.lease_of(&ev);
        let proxies = ctx.links.node_proxies(ev.slot);
        let invoked_at = ctx.clock.now();
        let mut ids = Vec::new();
        for p in &proxies {
            if ctx.spec.blackhole {
                for stream in [Stream::Upstream, Stream::Downstream] {
                    let hole = Toxic::new("", stream, ToxicKind::Timeout { timeout: 0 });
                    let r = ctx.add_toxic(self.name(), p, hole).await;
                    super::node::keep_or_revert(ctx, self.name(), &mut ids, r).await?;
                }
            } else {
                let r = ctx.disable_proxy(self.name(), p).await;
                super::node::keep_or_revert(ctx, self.name(), &mut ids, r).await?;
            }
        }
        let mut target = holder_target(&ev, lease);
        target["proxies"] = json!(proxies);
        Ok(Some(Fault {
            invoked_at,
            undo: ids,
            hold: ctx.spec.duration(lease),
            target,
            state: Value::Null,
        }))
    }
}

/// Latency with jitter on every client link to the lock service.
pub struct Latency;

#[async_trait]
impl Nemesis for Latency {
    fn name(&self) -> &'static str {
        "latency"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.is_stopping() {
            return Ok(None);
        }
        let proxies = ctx.links.all_node_proxies();
        let kind = ToxicKind::Latency {
            latency: ctx.spec.latency_ms as i64,
            jitter: ctx.spec.jitter_ms as i64,
        };
        let invoked_at = ctx.clock.now();
        let mut ids = Vec::new();
        for p in &proxies {
            let toxic = Toxic::new("latency", Stream::Downstream, kind);
            let r = ctx.add_toxic(self.name(), p, toxic).await;
            super::node::keep_or_revert(ctx, self.name(), &mut ids, r).await?;
        }
        Ok(Some(Fault {
            invoked_at,
            undo: ids,
            hold: ctx.spec.duration(ctx.ttl),
            target: json!({
                "links": proxies.len(),
                "latency_ms": ctx.spec.latency_ms,
                "jitter_ms": ctx.spec.jitter_ms,
            }),
            state: Value::Null,
        }))
    }
}

/// Hold the holder's protected write past its lease.
#[derive(Default)]
pub struct DelayStorage {
    events: Option<broadcast::Receiver<WorkerEvent>>,
}

#[async_trait]
impl Nemesis for DelayStorage {
    fn name(&self) -> &'static str {
        "delay-storage"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let Some(ev) = ctx.wait_for_phase(Phase::Holding).await else {
            return Ok(None);
        };
        let Some(proxy) = ctx.links.storage.get(&ev.slot).cloned() else {
            return Err(NemesisError::new(
                self.name(),
                format!("worker {} has no storage proxy", ev.slot),
            ));
        };
        let lease = ctx.lease_of(&ev);
        let delay = ctx.spec.duration(lease);
        self.events = Some(ctx.workers.subscribe());
        let invoked_at = ctx.clock.now();
        let kind = ToxicKind::Latency {
            latency: delay.as_millis() as i64,
            jitter: 0,
        };
        let toxic = Toxic::new("delay", Stream::Upstream, kind);
        let id = ctx.add_toxic(self.name(), &proxy, toxic).await?;
        let mut target = holder_target(&ev, lease);
        target["proxy"] = json!(proxy);
        target["delay_ms"] = json!(delay.as_millis() as u64);
        Ok(Some(Fault {
            invoked_at,
            undo: vec![id],
            // The write leaves after the rest of the hold; keep the toxic
            // until it was held `delay` (removing it flushes at once).
            hold: ctx.hold + delay + Duration::from_millis(50),
            target,
            state: json!({ "slot": ev.slot, "incarnation": ev.incarnation }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let slot = fault.state["slot"].as_u64().unwrap_or(0) as usize;
        let inc = fault.state["incarnation"].as_u64().unwrap_or(0) as u32;
        let mut delayed = false;
        if let Some(mut rx) = self.events.take() {
            loop {
                match rx.try_recv() {
                    Ok(e) => {
                        delayed |= e.slot == slot
                            && e.incarnation == inc
                            && e.state.phase == Phase::Writing
                            && e.state.time >= fault.invoked_at;
                    }
                    Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                    Err(_) => break,
                }
            }
        }
        ctx.revert(self.name(), &fault.undo).await?;
        Ok(json!({ "write_delayed": delayed }))
    }
}
