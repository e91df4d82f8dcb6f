//! The streaming lock checker: ops in (any line order) through the front
//! (`pair`: lines to events), events through the back (the reorder buffer,
//! then each event to every check, a sweep now and then to forget what can
//! no longer matter), and the report at the end. `check_file` runs the
//! front and the back on two threads; [`LockChecker`] runs both inline.

use super::event::{Event, Keys, Reorder};
use super::failover::Failover;
use super::lost::Lost;
use super::pair::{OpRef, Pairer};
use super::params::LockParams;
use super::report::{CheckResult, LockReport, Stats};
use super::service::Service;
use super::storage::{Finding, StaleWrites};
use super::witness::{secs, Witness, WitnessData};
use super::LockOptions;
use crate::history::{HistoryError, Meta, Op};

/// Events between two sweeps.
const SWEEP_EVERY: u32 = 4096;

/// Checks one lock history op by op; [`LockChecker::finish`] gives the report.
pub struct LockChecker {
    front: Pairer,
    back: Backend,
    tap: super::leaseless::LeaselessTap,
    opts: LockOptions,
}

/// The checks, fed events in any order within the reorder window.
pub(crate) struct Backend {
    pub(crate) p: LockParams,
    reorder: Reorder,
    keys: Keys,
    pub(crate) service: Service,
    pub(crate) stale_writes: CheckResult,
    writes: StaleWrites,
    pub(crate) lost: Lost,
    /// The jobs workload's counts, which replace the lost-update check.
    pub(crate) jobs: Option<super::jobs::Jobs>,
    pub(crate) failover: Failover,
    /// Stuck locks and orphaned renewals (liveness).
    pub(crate) live: super::liveness::Tracker,
    findings: Vec<Finding>,
    /// Storage writes the storage accepted.
    ok_writes: u64,
    since_sweep: u32,
    now: u64,
    /// The first error a check raised (a value of the wrong type).
    error: Option<HistoryError>,
    file: String,
}

impl LockChecker {
    /// A checker for a history whose meta record is `meta` (`opts`'
    /// override fills what it lacks).
    pub fn new(meta: Option<&Meta>, opts: &LockOptions) -> Result<LockChecker, HistoryError> {
        LockChecker::for_file("history", meta, opts)
    }

    /// A checker whose errors name `file`.
    pub fn for_file(
        file: &str,
        meta: Option<&Meta>,
        opts: &LockOptions,
    ) -> Result<LockChecker, HistoryError> {
        let file = file.to_string();
        Ok(LockChecker {
            front: Pairer::new(file.clone()),
            back: Backend::new(file, meta, opts)?,
            tap: Default::default(),
            opts: opts.clone(),
        })
    }

    /// Take one op.
    pub fn push(&mut self, op: Op) -> Result<(), HistoryError> {
        self.push_line(op, 0)
    }

    /// [`LockChecker::push`] of the op read from line `line` (1-based).
    pub fn push_line(&mut self, mut op: Op, line: u64) -> Result<(), HistoryError> {
        self.tap.push(&op);
        if let Some(ev) = self.front.push(OpRef::of(&mut op), line)? {
            self.back.learn_keys(&self.front.keys);
            self.back.push(ev)?;
        }
        Ok(())
    }

    /// Anomalies found so far (service and resource), e.g. for a progress bar.
    pub fn anomalies(&self) -> u64 {
        self.back.anomalies()
    }

    /// How far out of order the input was so far (ns).
    pub fn max_lateness_ns(&self) -> u64 {
        self.back.reorder.max_lateness
    }

    /// End of input: settle everything and build the report.
    pub fn finish(self) -> Result<LockReport, HistoryError> {
        let mut r = self.back.finish(self.front)?;
        self.tap.settle(&mut r, &self.opts);
        Ok(r)
    }
}

impl Backend {
    pub(crate) fn new(
        file: String,
        meta: Option<&Meta>,
        opts: &LockOptions,
    ) -> Result<Backend, HistoryError> {
        let window = opts
            .reorder_window_ms
            .unwrap_or(super::params::DEFAULT_WINDOW_MS);
        let p = LockParams::new(&file, meta, opts.meta_override.as_ref(), window)?;
        let limit = opts.max_witnesses.unwrap_or(super::report::MAX_WITNESSES);
        let mut service = Service::new(p.clone());
        if let Some(n) = opts.max_waiting {
            service.max_waiting = n;
        }
        for r in [
            &mut service.safety,
            &mut service.fence_order,
            &mut service.mutex,
        ] {
            r.limit = limit;
        }
        Ok(Backend {
            reorder: Reorder::new(p.window_ns),
            keys: Keys::default(),
            service,
            stale_writes: CheckResult {
                limit,
                ..CheckResult::default()
            },
            writes: StaleWrites::default(),
            lost: Lost::new(p.store, p.initial.clone()),
            jobs: (p.workload.as_deref() == Some("jobs")).then(Default::default),
            failover: Failover::default(),
            live: Default::default(),
            p,
            findings: Vec::new(),
            ok_writes: 0,
            since_sweep: 0,
            now: 0,
            error: None,
            file,
        })
    }

    /// Mirror key names the front has given ids since the last call.
    pub(crate) fn learn_keys(&mut self, keys: &Keys) {
        if keys.len() > self.keys.len() {
            self.keys.extend(keys.since(self.keys.len()));
        }
    }

    pub(crate) fn learn_names(&mut self, names: Vec<String>) {
        self.keys.extend(names);
    }

    /// Take one event (in any order within the window).
    pub(crate) fn push(&mut self, ev: Event) -> Result<(), HistoryError> {
        // An event too late to be put in order is skipped; the report
        // then says unknown (see `verdict`).
        self.reorder.push(ev);
        while let Some(ev) = self.reorder.pop_ready() {
            self.dispatch(ev);
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn anomalies(&self) -> u64 {
        self.service.safety.count
            + self.service.fence_order.count
            + self.service.mutex.count
            + self.stale_writes.count
    }

    fn dispatch(&mut self, ev: Event) {
        self.now = self.now.max(ev.time());
        match &ev {
            Event::Inv(i) if i.fun.is_storage() => {
                self.writes.on_invoke(i);
                match self.jobs.as_mut() {
                    Some(j) => j.on_invoke(i),
                    None => self.lost.on_invoke(i),
                }
            }
            Event::Inv(i) => self.service.on_invoke(i, &self.keys),
            Event::Done(d) if d.fun.is_storage() => {
                self.service.request_done(d, self.now);
                if d.fun == super::event::Fun::Write {
                    self.ok_writes += (d.outcome == super::event::Outcome::Ok) as u64;
                    self.service.write_done(d, self.keys.name(d.key));
                }
                self.writes
                    .on_done(d, self.now, self.p.window_ns, &mut self.findings);
                let counted = match self.jobs.as_mut() {
                    Some(j) => j.on_done(d),
                    None => {
                        // A request is named by the grant behind its fence,
                        // as stale writes are.
                        let grant = d.fence.and_then(|f| self.service.fences.get(f));
                        let owner = grant.map_or(&*d.owner, |(g, _)| g.owner.as_str());
                        let owner = owner.to_string();
                        self.lost.on_done(d, &owner)
                    }
                };
                if let Err(msg) = counted {
                    self.error.get_or_insert(HistoryError {
                        file: self.file.clone(),
                        line: 0,
                        msg: format!("op index {} (process {}): {msg}", d.index, d.process),
                    });
                }
            }
            Event::Done(d) => {
                self.failover.on_done(d, self.now);
                self.live.on_done(&self.p, d, &self.keys, self.now);
                self.service.on_done(d, &self.keys)
            }
            Event::Fault(f) => {
                if &*f.fault == "kill-holder" {
                    self.service.holder_killed(&f.owner);
                }
                self.failover.on_fault(f);
                self.live.on_fault(f, &self.keys);
            }
        }
        self.since_sweep += 1;
        if self.since_sweep >= SWEEP_EVERY {
            self.since_sweep = 0;
            self.service.sweep(self.now, self.p.window_ns);
            self.writes
                .sweep(self.now, self.p.window_ns, &mut self.findings);
        }
        if !self.findings.is_empty() {
            self.take_findings();
        }
    }

    fn take_findings(&mut self) {
        let mut found = std::mem::take(&mut self.findings);
        // Keys are swept in hash order: sort so the report does not depend on it.
        found.sort_by_key(|f| (f.request.completed_ns, f.request.op));
        for f in found {
            if f.request.f != "write" {
                self.stale_writes.bump("stale_reads_accepted", 1);
                continue;
            }
            if !self.stale_writes.wants_witness() {
                self.stale_writes.count += 1;
                self.stale_writes.valid = crate::check::Validity::False;
                continue;
            }
            let w = self.stale_witness(f);
            self.stale_writes.add(w);
        }
    }

    fn stale_witness(&self, f: Finding) -> Witness {
        let key = self.keys.name(f.key).to_string();
        let stale = f
            .request
            .fence
            .and_then(|x| self.service.grant_for_fence(x));
        let newer = f.seen.fence.and_then(|x| self.service.grant_for_fence(x));
        let mut request = (*f.request).clone();
        if let Some((g, _)) = &stale {
            request.owner = g.owner.clone();
        }
        let mut seen = (*f.seen).clone();
        if let Some((g, _)) = &newer {
            seen.owner = g.owner.clone();
        }
        let mut parts = Vec::new();
        if let Some((g, upper)) = &stale {
            parts.push(g.acquired());
            if let Some(u) = upper {
                parts.push(format!("its lease had certainly ended by {}", secs(*u)));
            }
        }
        if let Some((g, _)) = &newer {
            parts.push(g.acquired());
        }
        let order = if f.order == "seq" {
            "in the storage's own order"
        } else {
            "which completed before it was sent"
        };
        parts.push(format!(
            "{} and the storage ACCEPTED it after seeing fence {} ({} {order})",
            request.described(&key),
            seen.fence.unwrap_or(0),
            seen.described(&key),
        ));
        Witness {
            text: parts.join("; "),
            data: WitnessData::StaleWriteAccepted {
                key,
                request,
                seen,
                order: f.order.to_string(),
                stale_lease_over_by_ns: stale.as_ref().and_then(|(_, u)| *u),
                stale_grant: stale.map(|(g, _)| g),
                newer_grant: newer.map(|(g, _)| g),
            },
        }
    }

    /// End of input: hand out what is buffered, settle everything, and
    /// build the report; `front` supplies the input's counters.
    pub(crate) fn finish(mut self, mut front: Pairer) -> Result<LockReport, HistoryError> {
        self.learn_keys(&front.keys);
        while let Some(ev) = self.reorder.pop_any() {
            self.dispatch(ev);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.service.finish();
        self.writes.finish(&mut self.findings);
        self.take_findings();
        let stats = Stats {
            ops: front.ops,
            grants: self.service.grants,
            storage_requests: self.writes.requests,
            lock_keys: self.service.key_count() as u64,
            storage_keys: self.writes.key_count() as u64,
            ignored: std::mem::take(&mut front.ignored),
            incomplete: front.incomplete(),
            max_lateness_ms: super::witness::ms(self.reorder.max_lateness),
            late_ops: self.reorder.late,
            passes: 1,
            peak_buffered_events: self.reorder.peak as u64,
            peak_live_leases: self.service.peak_leases.max(self.service.leases.len()) as u64,
            protected_writes: self.ok_writes,
        };
        let file = self.file.clone();
        let keys = std::mem::take(&mut self.keys);
        super::verdict::assemble(self, stats, &keys).map_err(|msg| HistoryError {
            file,
            line: 0,
            msg,
        })
    }

    pub(crate) fn writes(&self) -> &StaleWrites {
        &self.writes
    }
}
