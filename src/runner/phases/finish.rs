//! Ending a run, in order: wait out the time limit (or Ctrl-C, or a
//! worker's death); heal the faults still in place; stop the workers; the
//! final unfenced read of the storage as process `"final"`; then, after
//! teardown, check the history and write `results.json`, `nemesis.json`
//! and `stalls.json`.

use super::err;
use super::setup::{Store, World};
use crate::check::linear::LinOptions;
use crate::check::{check_history, CheckOptions, Checker, Results};
use crate::history::clock::RunClock;
use crate::history::{Process, Sink};
use crate::nemesis::NemesisSummary;
use crate::report::summary::verdict::{RunVerdict, RUN_KEY};
use crate::runner::analysis;
use crate::runner::controller::{RunConfig, RunError};
use crate::runner::proxies;
use crate::runner::rundir;
use crate::runner::verdict;
use crate::runner::workers::{Death, Pool};
use crate::storage;
use crate::toxiproxy::ToxiproxyApi;
use crate::undo::UndoLog;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long the linearizability search may take before it says unknown.
const LINEAR_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a worker may take to finish its step after SIGTERM.
pub(super) fn stop_grace(cfg: &RunConfig) -> Duration {
    let w = &cfg.workload;
    Duration::from_millis(
        w.acquire_wait_ms
            + w.hold_ms
            + 2 * w.op_timeout_ms
            + super::storage_timeout_ms(w.ttl_ms)
            + 2000,
    ) + cfg.load.stop_allowance(w.concurrency)
}

/// Wait for the time limit; stop early on Ctrl-C or a worker's death.
pub(super) async fn wait_out(
    limit: Duration,
    cancel: &mut watch::Receiver<bool>,
    deaths: &mut mpsc::UnboundedReceiver<Death>,
) -> Option<String> {
    tokio::select! {
        _ = tokio::time::sleep(limit) => None,
        _ = async { while cancel.changed().await.is_ok() && !*cancel.borrow() {} } => Some("interrupted".into()),
        d = deaths.recv() => Some(d.map(|d| d.msg).unwrap_or_else(|| "the workers are gone".into())),
    }
}

/// Undo every fault still in place (not the processes, proxies, cluster).
pub(super) async fn heal_faults(undo: &UndoLog) -> Result<(), RunError> {
    let mut errs = Vec::new();
    let mut told = 0;
    for (id, u) in undo.pending().into_iter().rev() {
        if u.is_fault() {
            // One given up at its fault's stop (a start command that
            // failed; the stop said why) is not tried again: `lockjaw
            // heal` takes it once fixed. Others that failed are retried.
            if undo.given_up(id) {
                told += 1;
                continue;
            }
            if let Err(e) = undo.undo(id).await {
                errs.push(e.to_string());
            }
        }
    }
    if told > 0 {
        errs.push(format!(
            "{told} fault(s) whose undo failed at the fault's end, as told above"
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(err(format!("cannot heal: {}", errs.join("; "))))
    }
}

/// Cut every worker's storage proxy (no request of theirs arrives after).
async fn cut_storage_links(
    api: &dyn ToxiproxyApi,
    links: &crate::nemesis::Links,
) -> Result<(), RunError> {
    let names: Vec<String> = links.storage.values().cloned().collect();
    proxies::cut_all(api, &names).await.map_err(err)
}

/// Cut the workers' storage proxies, close every storage connection
/// (for PostgreSQL: end the workers' sessions), then read the final value
/// directly, unfenced, as process `"final"`. `None` without a storage.
pub(super) async fn final_read(
    w: &World,
    key: &str,
    rec: &dyn Sink,
    clock: &RunClock,
) -> Result<Option<Value>, RunError> {
    match &w.store {
        Store::None => return Ok(None),
        Store::Builtin(_) | Store::Postgres(_) | Store::Mariadb(_) => {}
    }
    cut_storage_links(w.api.as_ref(), &w.links).await?;
    let v = match &w.store {
        Store::None => unreachable!("handled above"),
        Store::Builtin(s) => {
            s.disconnect_all();
            let mut c = storage::StorageClient::connect(s.addr())
                .await
                .map_err(|e| err(format!("final read: {e}")))?;
            read_final(&mut c, key, rec, clock).await?
        }
        Store::Postgres(p) => {
            let mut c = p.final_reader().await.map_err(err)?;
            read_final(&mut c, key, rec, clock).await?
        }
        Store::Mariadb(m) => {
            let mut c = m.final_reader().await.map_err(err)?;
            read_final(&mut c, key, rec, clock).await?
        }
    };
    Ok(Some(v))
}

/// The final read itself: unfenced, as process `"final"`.
async fn read_final(
    c: &mut dyn storage::Resource,
    key: &str,
    rec: &dyn Sink,
    clock: &RunClock,
) -> Result<Value, RunError> {
    let final_process = Process::Named("final".into());
    match storage::record::read_op(c, rec, clock, final_process, key, None).await {
        Ok(storage::Reply::Ok { value, .. }) => Ok(value),
        other => Err(err(format!("final read of {key} failed: {other:?}"))),
    }
}

/// Check the history as its meta record says (the path `lockjaw check`
/// takes too); a checker that fails yields `unknown`, never a crash.
pub(super) fn check(history: &Path) -> (Results, String) {
    let opts = CheckOptions {
        lin: LinOptions {
            timeout: Some(LINEAR_TIMEOUT),
            ..LinOptions::default()
        },
        ..CheckOptions::default()
    };
    match check_history(history, &opts) {
        Ok(r) => {
            let texts: Vec<String> = (r.checkers.iter().zip(r.texts()))
                .map(|(c, t)| match c {
                    Checker::Linearizable if !t.starts_with("linearizable:") => {
                        format!("linearizable: {}", t.trim_end())
                    }
                    _ => t.trim_end().to_string(),
                })
                .collect();
            (r, texts.join("\n"))
        }
        Err(e) => {
            let r = Results::unreadable(&e);
            (r, format!("checks: unknown ({e})"))
        }
    }
}

/// The run's verdict ([`crate::runner::verdict::decide`]) from the checks,
/// the nemesis and the history's counts.
pub(super) fn run_verdict(
    cfg: &RunConfig,
    results: &Results,
    summary: &NemesisSummary,
    facts: &analysis::Facts,
) -> RunVerdict {
    let none = cfg.nemesis.fault == "none";
    verdict::decide(&verdict::RunFacts {
        checks: results.valid,
        check_errors: (results.errors.iter())
            .map(|(c, e)| format!("{c}: {}", e.to_history_error()))
            .collect(),
        workload: cfg.workload.kind,
        locks: cfg.system.facts().lock.is_yes(),
        nemesis: (!none).then(|| verdict::NemesisFacts::of(summary)),
        grants: facts.grants,
        writes: facts.writes,
        require_landed: cfg.require_landed,
    })
}

/// results.json: the checks' [`Results`], its `valid` the run's verdict,
/// and the run's verdict with its reasons under `run`.
pub(super) fn results_json(results: &Results, run: &RunVerdict) -> Value {
    let mut v = serde_json::to_value(results).unwrap_or_else(|_| json!({}));
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "valid".into(),
            serde_json::to_value(run.valid).unwrap_or(Value::Null),
        );
        o.insert(
            RUN_KEY.into(),
            serde_json::to_value(run).unwrap_or(Value::Null),
        );
    }
    v
}

pub(super) fn nemesis_json(summary: &NemesisSummary, facts: &analysis::Facts) -> Value {
    let landed = summary
        .landed_inside()
        .map(|(i, n)| json!({"inside": i, "judged": n, "ratio": i as f64 / n as f64}));
    json!({
        "name": summary.name,
        "fault": summary.fault,
        "injections": summary.injections,
        "errors": summary.errors,
        "not_started": summary.not_started,
        "landed_inside": landed,
        "kill_gaps": facts.kill_gaps,
        "max_injections": summary.max_injections,
    })
}

pub(super) fn write<T: serde::Serialize>(dir: &Path, name: &str, v: &T) -> Result<(), RunError> {
    let p = dir.join(name);
    rundir::write_json(&p, v).map_err(|e| err(format!("cannot write {}: {e}", p.display())))
}

/// What the workers' stall meters reported, as stalls.json holds it.
pub(super) fn stall_file(pool: &Pool) -> crate::report::stalls::StallFile {
    use crate::runner::stallmeter::{INTERVAL, THRESHOLD_MS};
    let mut stalls = pool
        .stalls
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    stalls.sort_by_key(|s| (s.start_ns, s.slot));
    crate::report::stalls::StallFile {
        interval_ms: INTERVAL.as_secs_f64() * 1e3,
        threshold_ms: THRESHOLD_MS,
        stalls,
    }
}
