//! What a fault can reach ([`Ctx`]), and the helpers that apply an effect
//! only after its undo entry is on disk.

use super::{Links, NemesisError, NemesisSpec, WorkerEvent, WorkerPool};
use crate::cluster::{Cluster, System};
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use crate::process::{ProcId, Signal};
use crate::toxiproxy::{Toxic, ToxiproxyApi};
use crate::undo::{Undo, UndoLog};
use crate::workload::step::Phase;
use rand::rngs::StdRng;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

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
        mut toxic: Toxic,
    ) -> Result<u64, NemesisError> {
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
        Ok(id)
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
    /// the hold old). `None` when the run ends first.
    pub async fn wait_for_phase(&mut self, phase: Phase) -> Option<WorkerEvent> {
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

    /// The lease a holder's grant carries (at least the requested ttl).
    pub fn lease_of(&self, ev: &WorkerEvent) -> Duration {
        ev.state
            .lease_ms
            .map(Duration::from_millis)
            .unwrap_or(self.ttl)
            .max(self.ttl)
    }
}
