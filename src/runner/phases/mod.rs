//! The phases of one run, in order:
//!
//! 1. history file (meta record first); [`setup`]: Toxiproxy (embedded or
//!    external), the cluster (unless `--endpoints`; its undo entry first),
//!    the storage, one proxy per worker × node and worker × storage; the
//!    workers;
//! 2. the run: the nemesis schedule until the time limit, Ctrl-C, or a
//!    worker dying;
//! 3. [`finish`]: heal (stop the fault in place, undo every remaining
//!    fault); stop the workers (each finishes its step and releases),
//!    close every storage connection (proxies cut, server side too), then
//!    the final unfenced read of the storage as process `"final"`;
//! 4. teardown (proxies, storage, cluster), then check the history and
//!    write `results.json`, `nemesis.json`, `run.json`.

mod finish;
mod setup;

use super::controller::{RunConfig, RunError};
use super::progress::Progress;
use super::recorder::{Counters, HistoryWriter};
use super::rundir::{self, RunInfo};
use super::workers::{Death, Pool};
use crate::check::Validity;
use crate::client::adapter::version::SOURCE_VAR;
use crate::history::clock::RunClock;
use crate::history::{Meta, Sink};
use crate::nemesis::{registry, schedule, Ctx, NemesisSummary, WorkerPool};
use crate::undo::UndoLog;
use crate::workload::Kind;
use rand::SeedableRng;
use serde_json::{json, Value};
use setup::{Store, World};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// How the phases ended.
pub struct Ended {
    pub verdict: Validity,
    /// Why the run stopped before its time limit, if it did.
    pub early: Option<String>,
    /// Lines for stdout.
    pub summary: String,
    /// `--attach`: the nodes that do not answer after the run (exit 3).
    pub unhealthy: Option<String>,
}

fn err(msg: impl Into<String>) -> RunError {
    RunError::new(msg)
}

/// Longer than any storage delay a nemesis applies (1.5 leases by default).
fn storage_timeout_ms(ttl_ms: u64) -> u64 {
    (4 * ttl_ms).max(5000)
}

/// True when the acquire starts the lease (`SET ... PX`): the system's
/// fact for lockjaw's own clients, the adapter's answer for an adapter.
pub fn acquire_sets_ttl(cfg: &RunConfig) -> bool {
    match &cfg.adapter {
        Some(a) => a.offer.lease == crate::client::adapter::LeaseStart::Acquire,
        None => cfg.system.facts().lease_starts_at_acquire,
    }
}

/// The meta record: what the checkers need to judge the history alone.
pub fn meta(cfg: &RunConfig) -> Meta {
    let w = &cfg.workload;
    let mut m = Meta {
        version: 1,
        ..Meta::default()
    };
    let p = &mut m.params;
    p.insert("workload".into(), json!(w.kind.name()));
    p.insert("system".into(), json!(cfg.system));
    p.insert("nemesis".into(), json!(cfg.nemesis.name));
    p.insert("seed".into(), json!(cfg.seed));
    if w.kind == Kind::Register {
        m.checkers = vec!["linearizable".into()];
        m.model = Some("cas-register".into());
        m.init = Some(Value::Null);
        p.insert("key".into(), json!(w.register_key));
    } else {
        m.checkers = vec!["lock".into()];
        p.insert("acquire_sets_ttl".into(), json!(acquire_sets_ttl(cfg)));
        if let Some(a) = &cfg.adapter {
            let mut c = json!({
                "adapter": cfg.client.to_string(),
                "library": a.offer.library,
                "version": a.offer.version,
                "fence": a.offer.fence,
                "lease": a.offer.lease,
                "renewals": a.offer.renewals,
                // Whether lockjaw's workers renew (never when the
                // library renews every lease by itself).
                "lockjaw_renews": w.renews() && !library_renews(a),
            });
            // What extends the leases: the wire's renewals, appended at
            // the run's end (`runner::wire_lease`), or the events.
            if super::wire_lease::applies(cfg) {
                c["lease_source"] = json!("wire");
            }
            // `NAME@PATH`: the source tree the library came from.
            if let Some((_, Some(src))) = a.env.iter().find(|(k, _)| k == SOURCE_VAR) {
                c["source"] = json!(src);
            }
            p.insert("client".into(), c);
        }
        // What the library promises (its adapter's `hello_ok`, or lockjaw's
        // own client's), for the fault registry's allows-rule.
        let promises = match &cfg.adapter {
            Some(a) => a.offer.promises,
            None => crate::nemesis::allows::builtin_promises(cfg.system),
        };
        p.insert("promises".into(), json!(promises));
        p.insert("initial".into(), w.kind.initial());
        p.insert("drift".into(), json!(1e-3));
        p.insert("epsilon_ms".into(), json!(2));
        p.insert("fencing".into(), json!(cfg.fencing));
        p.insert("ttl_ms".into(), json!(w.ttl_ms));
        p.insert("op_timeout_ms".into(), json!(w.op_timeout_ms));
        p.insert("lock_key".into(), json!(w.lock_key));
        if w.kind.uses_storage() {
            p.insert("storage_key".into(), json!(w.storage_key));
        }
        if w.kind == Kind::Jobs {
            p.insert("jobs".into(), json!(w.jobs));
            p.insert("idempotency_keys".into(), json!(w.idempotency_keys));
        }
    }
    m
}

/// All of a run's phases. See the module doc.
pub async fn run(
    cfg: &RunConfig,
    dir: &Path,
    undo: Arc<UndoLog>,
    cancel: watch::Receiver<bool>,
    info: &mut RunInfo,
) -> Result<Ended, RunError> {
    let started = Instant::now();
    let progress = Progress::new(cfg.progress);
    let clock = RunClock::start();
    let history = dir.join(rundir::HISTORY);
    let mut writer = HistoryWriter::create(&history, &meta(cfg))
        .map_err(|e| err(format!("cannot create {}: {e}", history.display())))?;
    let rec: Arc<dyn Sink> = Arc::new(writer.recorder());
    let tap = super::wire_tap::open(cfg.tap_wire, dir, clock).map_err(err)?;
    let rec = super::wire_tap::spy(rec, tap.as_ref(), cfg.workload.concurrency);

    let mut world = setup::start(cfg, dir, &undo, info, &progress, tap.clone()).await?;
    let phase = progress.phase("starting the workers");
    let (pool, deaths) = setup::workers(
        cfg,
        dir,
        &world,
        &info.run_id,
        &clock,
        rec.clone(),
        undo.clone(),
    )
    .await?;
    phase.done(&format!("{} workers", cfg.workload.concurrency));
    info.timings.mark("workers start");

    let counters = writer.counters();
    let faults = Arc::new(AtomicU64::new(0));
    let ran = Schedule {
        cfg,
        world: &world,
        pool: &pool,
        undo: &undo,
        rec: &rec,
        clock,
        run_id: &info.run_id,
    }
    .run(cancel, deaths, &progress, counters.clone(), faults.clone())
    .await;
    info.timings.mark("run");

    let phase = progress.phase("healing and stopping the workers");
    finish::heal_faults(&undo).await?;
    info.timings.mark("heal faults");
    pool.stop_all(finish::stop_grace(cfg)).await;
    info.timings.mark("workers stop");
    let final_value =
        finish::final_read(&world, &cfg.workload.storage_key, rec.as_ref(), &clock).await?;
    let ops = writer
        .close()
        .map_err(|e| err(format!("writing {}: {e}", history.display())))?;
    info.timings.mark("final read");
    phase.done(&format!("{ops} ops recorded"));
    // Before teardown: its undo drain ends the SSH connections.
    let unhealthy = attached_check(&world, &progress, info).await;

    teardown(&mut world, &undo, &progress).await;
    info.timings.mark("teardown");
    let broken = super::wire_tap::close(tap.as_ref());
    // The renewals that extend the leases of a library that renews by
    // itself, from the wire when it can tell them.
    let leases = super::wire_lease::settle(cfg, dir, &history, ops, broken).map_err(err)?;

    let phase = progress.phase("checking the history");
    let (results, text) = finish::check(&history);
    let facts =
        super::analysis::analyse(&history, acquire_sets_ttl(cfg), &ran.summary).unwrap_or_default();
    let run_verdict = finish::run_verdict(cfg, &results, &ran.summary, &facts);
    let verdict = run_verdict.valid;
    finish::write(
        dir,
        rundir::RESULTS,
        &finish::results_json(&results, &run_verdict),
    )?;
    finish::write(
        dir,
        rundir::NEMESIS,
        &finish::nemesis_json(&ran.summary, &facts),
    )?;
    finish::write(
        dir,
        crate::report::stalls::STALLS,
        &finish::stall_file(&pool),
    )?;
    phase.done(verdict.as_str());
    info.timings.mark("check");

    info.effective_lease_ms = facts.lease;
    info.final_value = final_value.clone();
    info.duration_s = Some(started.elapsed().as_secs_f64());
    info.counts = counts(ops, &counters, &faults, &pool);
    Ok(Ended {
        verdict,
        early: ran.early,
        summary: summary_text(
            cfg,
            info,
            &ran.summary,
            &text,
            &run_verdict,
            leases.as_ref(),
        ),
        unhealthy,
    })
}

/// `--attach`: whether every node answers after the run (`Some(why)`
/// when one does not).
async fn attached_check(world: &World, progress: &Progress, info: &mut RunInfo) -> Option<String> {
    if world.cluster.mode != crate::cluster::Mode::Adopted {
        return None;
    }
    let phase = progress.phase("checking the attached servers");
    let r = super::attach::end(&world.cluster).await.err();
    phase.done(if r.is_none() {
        "every node answers"
    } else {
        "a node does not answer"
    });
    info.timings.mark("attached servers check");
    r
}

/// What the nemesis schedule needs of the run.
struct Schedule<'a> {
    cfg: &'a RunConfig,
    world: &'a World,
    pool: &'a Arc<Pool>,
    undo: &'a Arc<UndoLog>,
    rec: &'a Arc<dyn Sink>,
    clock: RunClock,
    run_id: &'a str,
}

/// How the schedule ended.
struct Ran {
    summary: NemesisSummary,
    /// Why the run stopped before its time limit, if it did.
    early: Option<String>,
}

impl Schedule<'_> {
    /// Run the nemesis schedule until the time limit, Ctrl-C, or a
    /// worker's death; then wait for the schedule to end.
    async fn run(
        self,
        mut cancel: watch::Receiver<bool>,
        mut deaths: mpsc::UnboundedReceiver<Death>,
        progress: &Progress,
        counters: Arc<Counters>,
        faults: Arc<AtomicU64>,
    ) -> Ran {
        let (cfg, w) = (self.cfg, &self.cfg.workload);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut nctx = Ctx::new(
            cfg.system,
            self.world.cluster.clone(),
            self.pool.clone() as Arc<dyn WorkerPool>,
            self.world.api.clone(),
            self.world.tox_server.is_some(),
            Arc::new(self.world.links.clone()),
            self.undo.clone(),
            self.rec.clone(),
            self.clock,
            rand::rngs::StdRng::seed_from_u64(cfg.seed),
            Duration::from_millis(w.ttl_ms),
            Duration::from_millis(w.hold_ms),
            cfg.nemesis.clone(),
            stop_rx,
        );
        nctx.workload = Some(w.kind);
        nctx.run_id = self.run_id.to_string();
        nctx.lock_key = w.lock_key.clone();
        nctx.allow_majority = cfg.allow_majority;
        if cfg.hosts.is_some() {
            nctx.deadman.margin = Some(cfg.dead_man_margin);
        }
        let nemesis = registry::build(&cfg.nemesis);
        let f2 = faults.clone();
        let task = tokio::spawn(async move { schedule::run(nemesis, &mut nctx, &f2).await });
        let limit = w.time_limit();
        let bar = progress.run_bar(limit, counters, faults);
        let early = finish::wait_out(limit, &mut cancel, &mut deaths).await;
        let _ = stop_tx.send(true);
        bar.done();
        let summary = task.await.unwrap_or_else(|e| NemesisSummary {
            errors: vec![format!("the nemesis task failed: {e}")],
            ..NemesisSummary::default()
        });
        Ran { summary, early }
    }
}

/// Stop the storage, the cluster on hosts (through the run's own SSH
/// connections, so the nodes' logs come back), drain the undo log, stop
/// the embedded Toxiproxy.
async fn teardown(world: &mut World, undo: &UndoLog, progress: &Progress) {
    let phase = progress.phase("tearing down");
    match std::mem::replace(&mut world.store, Store::None) {
        Store::Builtin(mut s) => s.shutdown(),
        Store::Postgres(p) => p.close().await,
        Store::Mariadb(m) => m.close().await,
        Store::None => {}
    }
    if world.cluster.on_hosts() {
        // Through the run's own SSH connections, before the undo log ends
        // them: the nodes' logs come back here, the servers stop.
        let c = world.cluster.clone();
        match tokio::task::spawn_blocking(move || c.close()).await {
            Ok(Err(e)) => tracing::warn!("stopping the cluster on the hosts: {e}"),
            Err(e) => tracing::warn!("stopping the cluster on the hosts: {e}"),
            Ok(Ok(())) => {}
        }
    }
    let _ = undo.drain().await;
    if let Some(s) = world.tox_server.as_mut() {
        s.shutdown().await;
    }
    phase.done("done");
}

/// The counts `run.json` records.
fn counts(ops: u64, counters: &Counters, faults: &AtomicU64, pool: &Pool) -> rundir::Counts {
    rundir::Counts {
        ops,
        grants: Counters::get(&counters.grants),
        writes: Counters::get(&counters.writes),
        stale_rejected: Counters::get(&counters.stale_rejected),
        infos: Counters::get(&counters.infos),
        faults: Counters::get(faults),
        workers_started: pool.started.load(Ordering::Relaxed),
        worker_steps: pool.steps.load(Ordering::Relaxed),
        worker_grants: pool.grants.load(Ordering::Relaxed),
        abandoned_writes: pool.abandoned.load(Ordering::Relaxed),
    }
}

/// The lines a finished run prints: what ran, how many ops, grants and
/// faults, the checkers' verdicts.
fn summary_text(
    cfg: &RunConfig,
    info: &RunInfo,
    summary: &NemesisSummary,
    text: &str,
    verdict: &crate::report::summary::verdict::RunVerdict,
    leases: Option<&super::wire_lease::Settled>,
) -> String {
    let w = &cfg.workload;
    let ops = info.counts.ops;
    let fencing = match (w.kind.uses_storage(), cfg.fencing.is_on()) {
        (false, _) => "",
        (true, true) => " (fencing on)",
        (true, false) => " (fencing off)",
    };
    let grants = if w.kind.uses_lock() && cfg.system.facts().lock.is_yes() {
        // Killed workers never report theirs: the recorded grants count too.
        let grants = info.counts.worker_grants.max(info.counts.grants);
        format!(", {grants} grants")
    } else {
        String::new()
    };
    let client = match &cfg.adapter {
        Some(a) => format!(" with {} ({})", a.offer.title(), cfg.client),
        None => String::new(),
    };
    let mut out = format!(
        "{} {} {}{fencing}{client}: {ops} ops{grants}, {} faults\n{text}",
        cfg.system, w.name, cfg.nemesis.name, info.counts.faults,
    );
    if let Some(a) = cfg.adapter.as_ref().filter(|a| library_renews(a)) {
        let line = match leases {
            Some(l) => l.line(&a.offer.title()),
            None => format!(
                "{}the adapter's `renewed` events",
                super::wire_lease::extended_by(&a.offer.title())
            ),
        };
        out.push_str(&format!("\n{line}"));
    }
    if w.lease_guard.is_on() {
        out.push_str(&format!(
            "\nlease guard on: {} protected write(s) abandoned",
            info.counts.abandoned_writes
        ));
    }
    if let Some((inside, n)) = summary.landed_inside() {
        out.push_str(&format!(
            "\nfaults that landed inside the critical section: {inside} of {n}"
        ));
    }
    for w in &verdict.warnings {
        out.push_str(&format!("\nwarning: {w}"));
    }
    out.push_str(&format!("\n{}", verdict.line()));
    out
}

/// True when the adapter's library renews every lease by itself
/// (`renewals = "all"`): lockjaw's workers send no renewals then.
pub fn library_renews(a: &super::protocol::AdapterSpec) -> bool {
    a.offer.renewals == crate::client::adapter::Renewals::All
}
