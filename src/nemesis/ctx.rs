//! What a fault can reach ([`Ctx`]), and the helpers that apply an effect
//! only after its undo entry is on disk.

use super::{Links, MomentEvent, MomentNote, NemesisError, NemesisSpec, WorkerEvent, WorkerPool};
use crate::cluster::Cluster;
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use crate::process::{ProcId, Signal};
use crate::service::System;
use crate::toxiproxy::{Toxic, ToxiproxyApi};
use crate::undo::{Undo, UndoLog};
use crate::workload::step::{Moment, Phase, StateEvent};
use rand::rngs::StdRng;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

/// A worker that announced a watched moment and waits ([`Ctx::next_moment`]).
pub struct Announced {
    pub slot: usize,
    pub incarnation: u32,
    /// The watch id.
    pub id: u64,
    /// Who announced it, when (run clock), for which grant.
    pub state: StateEvent,
    rx: broadcast::Receiver<MomentEvent>,
}

impl Announced {
    /// Wait (at most `limit`) until the worker says how its announced
    /// request ended: `ok`, `fail` or `info`, and the error.
    pub async fn outcome(&mut self, limit: Duration) -> Option<(OpType, Option<String>)> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Ok(MomentEvent {
                    id,
                    note: MomentNote::Outcome { kind, error },
                    ..
                })) if id == self.id => return Some((kind, error)),
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
}

/// Everything a fault may touch during a run.
pub struct Ctx {
    pub system: System,
    /// The cluster (nodes, leader discovery, pause/kill/clock per node);
    /// `mode` says whether lockjaw started it.
    pub cluster: Arc<Cluster>,
    /// The workers and what each holds.
    pub workers: Arc<dyn WorkerPool>,
    pub toxiproxy: Arc<dyn ToxiproxyApi>,
    /// True when `toxiproxy` is lockjaw's embedded server.
    pub embedded_toxiproxy: bool,
    pub links: Arc<Links>,
    pub undo: Arc<UndoLog>,
    /// The run's history (nemesis ops go here).
    pub history: Arc<dyn Sink>,
    pub clock: RunClock,
    pub rng: StdRng,
    /// The requested lease.
    pub ttl: Duration,
    /// The workload's time inside the critical section.
    pub hold: Duration,
    pub spec: NemesisSpec,
    /// Turns true when the run is ending.
    pub stopping: watch::Receiver<bool>,
    /// The run's workload kind, when the runner sets it (`mixed` uses it
    /// to keep only the faults that apply).
    pub workload: Option<crate::workload::Kind>,
    /// The run's id, carried by every iptables rule's comment
    /// (`lockjaw:ID ...`); the runner sets it.
    pub run_id: String,
    /// The workload's lock key (which primary serves it, on Redis
    /// Cluster); the runner sets it.
    pub lock_key: String,
    /// `--allow-majority`: faults on attached servers may take a majority
    /// (or every replica); the runner sets it.
    pub allow_majority: bool,
    /// The dead man's switches of faults on other hosts: the margin (the
    /// runner sets it for a run on hosts) and the planned length of the
    /// fault being struck (its nemesis sets it before it acts).
    pub deadman: super::deadman::Plan,
    /// A holder chosen for the fault about to start (`together` pins one
    /// for both its faults): [`Ctx::wait_for_phase`] returns it at once
    /// when its phase is the one waited for.
    pub pinned: Option<WorkerEvent>,
    toxics: u64,
}

impl Ctx {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        system: System,
        cluster: Arc<Cluster>,
        workers: Arc<dyn WorkerPool>,
        toxiproxy: Arc<dyn ToxiproxyApi>,
        embedded_toxiproxy: bool,
        links: Arc<Links>,
        undo: Arc<UndoLog>,
        history: Arc<dyn Sink>,
        clock: RunClock,
        rng: StdRng,
        ttl: Duration,
        hold: Duration,
        spec: NemesisSpec,
        stopping: watch::Receiver<bool>,
    ) -> Ctx {
        Ctx {
            system,
            cluster,
            workers,
            toxiproxy,
            embedded_toxiproxy,
            links,
            undo,
            history,
            clock,
            rng,
            ttl,
            hold,
            spec,
            stopping,
            workload: None,
            run_id: format!("pid{}", std::process::id()),
            lock_key: "lockjaw".into(),
            allow_majority: false,
            deadman: Default::default(),
            pinned: None,
            toxics: 0,
        }
    }

    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Wait until the run ends.
    pub async fn until_stopping(&mut self) {
        while !*self.stopping.borrow_and_update() {
            if self.stopping.changed().await.is_err() {
                return;
            }
        }
    }

    /// Sleep `d`; false if the run began ending first.
    pub async fn sleep(&mut self, d: Duration) -> bool {
        if self.is_stopping() {
            return false;
        }
        let mut rx = self.stopping.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = async { while rx.changed().await.is_ok() && !*rx.borrow() {} } => false,
        }
    }

    /// Record a nemesis op.
    pub fn record(&self, kind: OpType, f: &str, time: u64, value: Value) {
        let mut op = Op::new(time, Process::Nemesis, kind, f);
        op.value = value;
        self.history.record(op);
    }

    /// Write `undo` into the undo log (fsynced); call before applying the
    /// effect it takes back.
    pub fn will(&self, fault: &str, undo: Undo) -> Result<u64, NemesisError> {
        self.undo
            .push(undo)
            .map_err(|e| NemesisError::new(fault, format!("cannot write the undo log: {e}")))
    }

    /// Undo these effects, newest first; every one is tried.
    pub async fn revert(&self, fault: &str, ids: &[u64]) -> Result<(), NemesisError> {
        let mut errs = Vec::new();
        for id in ids.iter().rev() {
            if let Err(e) = self.undo.undo(*id).await {
                errs.push(e.to_string());
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(NemesisError::new(fault, errs.join("; ")))
        }
    }

    /// SIGSTOP a process group (undo: SIGCONT) and wait until the kernel
    /// reports it stopped (at most 2 s). Returns the undo id.
    pub async fn pause_group(
        &self,
        fault: &str,
        what: &str,
        proc: ProcId,
    ) -> Result<u64, NemesisError> {
        let id = self.will(
            fault,
            Undo::Paused {
                what: what.to_string(),
                proc,
            },
        )?;
        proc.signal_group(Signal::Stop)
            .map_err(|e| NemesisError::new(fault, e.to_string()))?;
        let deadline = Instant::now() + Duration::from_secs(2);
        while proc.is_alive() && !proc.is_stopped() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        Ok(id)
    }

    /// Add a toxic to a proxy (undo: remove it). The toxic's name is made
    /// unique. Returns the undo id.
    pub async fn add_toxic(
        &mut self,
        fault: &str,
        proxy: &str,
        toxic: Toxic,
    ) -> Result<u64, NemesisError> {
        Ok(self.add_named_toxic(fault, proxy, toxic).await?.0)
    }

    /// [`Ctx::add_toxic`], returning the undo id and the toxic's name.
    pub async fn add_named_toxic(
        &mut self,
        fault: &str,
        proxy: &str,
        mut toxic: Toxic,
    ) -> Result<(u64, String), NemesisError> {
        self.toxics += 1;
        toxic.name = format!("lockjaw-{fault}-{}", self.toxics);
        let id = self.will(
            fault,
            Undo::Toxic {
                url: self.toxiproxy.url().to_string(),
                proxy: proxy.to_string(),
                toxic: toxic.name.clone(),
                embedded: self.embedded_toxiproxy,
            },
        )?;
        self.toxiproxy
            .add_toxic(proxy, &toxic)
            .await
            .map_err(|e| NemesisError::new(fault, e.to_string()))?;
        Ok((id, toxic.name))
    }

    /// Whether a one-shot toxic (`hold_next`, `reset_next`) has struck.
    pub async fn toxic_fired(&self, proxy: &str, name: &str) -> bool {
        self.toxiproxy
            .toxic(proxy, name)
            .await
            .is_ok_and(|t| t.fired() == Some(true))
    }

    /// What a one-shot toxic struck (its `struck`, docs/toxiproxy.md): the
    /// Redis command or ZooKeeper op name of the request (for a reply: of
    /// its request); None when it has not fired or the link is not framed
    /// (etcd's HTTP/2, TLS).
    pub async fn toxic_struck(&self, proxy: &str, name: &str) -> Option<String> {
        self.toxiproxy
            .toxic(proxy, name)
            .await
            .ok()
            .and_then(|t| t.struck())
    }

    /// Disable a proxy: its connections close and new ones are refused
    /// (undo: enable it). Returns the undo id.
    pub async fn disable_proxy(&self, fault: &str, proxy: &str) -> Result<u64, NemesisError> {
        let id = self.will(
            fault,
            Undo::ProxyDisabled {
                url: self.toxiproxy.url().to_string(),
                proxy: proxy.to_string(),
                embedded: self.embedded_toxiproxy,
            },
        )?;
        self.toxiproxy
            .set_enabled(proxy, false)
            .await
            .map_err(|e| NemesisError::new(fault, e.to_string()))?;
        Ok(id)
    }

    /// Wait for a worker to report `phase` (a fresh report: less than half
    /// the hold old), or take the pinned one. `None` when the run ends
    /// first.
    pub async fn wait_for_phase(&mut self, phase: Phase) -> Option<WorkerEvent> {
        if let Some(ev) = self.pinned.take().filter(|e| e.state.phase == phase) {
            return Some(ev);
        }
        let mut rx = self.workers.subscribe();
        let fresh = (self.hold / 2).max(Duration::from_millis(1)).as_nanos() as u64;
        loop {
            if self.is_stopping() {
                return None;
            }
            let mut stop = self.stopping.clone();
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                _ = async { while stop.changed().await.is_ok() && !*stop.borrow() {} } => return None,
            };
            match ev {
                Ok(ev) if ev.state.phase == phase => {
                    if self.clock.now().saturating_sub(ev.state.time) <= fresh {
                        return Some(ev);
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Ask the workers of `slots` to announce their next request of
    /// `moment`; the first to announce is the one returned (its worker
    /// waits for [`Ctx::go`]), the other watches are withdrawn. `None`
    /// when the run ends first.
    pub async fn next_moment(
        &mut self,
        fault: &str,
        slots: &[usize],
        moment: Moment,
    ) -> Result<Option<Announced>, NemesisError> {
        self.next_moment_until(fault, slots, moment, None).await
    }

    /// [`Ctx::next_moment`], giving up at `until` (the watches withdrawn):
    /// `None` then too ([`Ctx::is_stopping`] tells the two apart).
    pub async fn next_moment_until(
        &mut self,
        fault: &str,
        slots: &[usize],
        moment: Moment,
        until: Option<tokio::time::Instant>,
    ) -> Result<Option<Announced>, NemesisError> {
        let Some(mut rx) = self.workers.moments() else {
            return Err(NemesisError::new(
                fault,
                "these workers cannot announce protocol moments",
            ));
        };
        let mut ids = Vec::new();
        for &slot in slots {
            if let Ok(id) = self.workers.watch(slot, moment) {
                ids.push((slot, id));
            }
        }
        let withdraw = |ctx: &Ctx, keep: Option<u64>| {
            for &(slot, id) in &ids {
                if Some(id) != keep {
                    ctx.workers.unwatch(slot, id);
                }
            }
        };
        if ids.is_empty() {
            return Err(NemesisError::new(fault, "no worker is running"));
        }
        loop {
            let mut stop = self.stopping.clone();
            if self.is_stopping() {
                withdraw(self, None);
                return Ok(None);
            }
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                _ = async { while stop.changed().await.is_ok() && !*stop.borrow() {} } => {
                    withdraw(self, None);
                    return Ok(None);
                }
                _ = async {
                    match until {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {
                    withdraw(self, None);
                    return Ok(None);
                }
            };
            match ev {
                Ok(MomentEvent {
                    slot,
                    incarnation,
                    id,
                    note: MomentNote::Announced { state, .. },
                }) if ids.iter().any(|w| w.1 == id) => {
                    withdraw(self, Some(id));
                    return Ok(Some(Announced {
                        slot,
                        incarnation,
                        id,
                        state,
                        rx,
                    }));
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    withdraw(self, None);
                    return Ok(None);
                }
            }
        }
    }

    /// Let the announced worker send its request. With `armed`, wait
    /// (at most 1 s) until it says it went on, and return whether the
    /// fault was armed in time for its request (false: it gave up waiting
    /// first, and the fault must be taken back unjudged).
    pub async fn go(&self, a: &mut Announced, armed: bool) -> bool {
        self.workers.go(a.slot, a.id, armed);
        if !armed {
            return false;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            match tokio::time::timeout_at(deadline, a.rx.recv()).await {
                Ok(Ok(MomentEvent {
                    id,
                    note: MomentNote::Passed { armed },
                    ..
                })) if id == a.id => return armed,
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }

    /// The lease a holder's grant carries (at least the requested ttl).
    pub fn lease_of(&self, ev: &WorkerEvent) -> Duration {
        ev.state
            .lease_ms
            .map(Duration::from_millis)
            .unwrap_or(self.ttl)
            .max(self.ttl)
    }
}
