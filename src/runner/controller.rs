//! The controller of `lockjaw run`: validation, the exit paths, and the
//! order of teardown.
//!
//! [`run`] checks the combination (the service registry's
//! [`crate::combination::applies`], then the host's readiness for the fault), creates the run
//! directory and the undo log, and drives the phases ([`super::phases`])
//! on a tokio runtime. Whatever way the phases end (normally, with an
//! error, on Ctrl-C or SIGTERM, or by panicking) the undo log is drained
//! afterwards, newest effect first; a second Ctrl-C skips the grace periods.
//! If lockjaw itself is SIGKILLed, `lockjaw heal DIR` drains the same log.

use super::phases::{self, Ended};
use super::rundir::{self, Counts, RunInfo};
use crate::combination;
use crate::combination::{
    ClientChoice, Combination, NotApplicable, Placement, StorageChoice, ToxiproxyChoice,
};
use crate::exit::Exit;
use crate::nemesis::registry;
use crate::nemesis::{NemesisSpec, Target};
use crate::service::System;
use crate::storage::Fencing;
use crate::undo::{UndoLog, UNDO_FILE};
use crate::workload::Workload;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Everything `lockjaw run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub system: System,
    pub workload: Workload,
    pub nemesis: NemesisSpec,
    pub fencing: Fencing,
    /// A cluster lockjaw did not start; `None` = start a local one.
    pub endpoints: Option<Vec<String>>,
    /// `--postgres-url` (with its password: never written to a file other
    /// than the run directory's private `postgres.url`).
    pub postgres_url: Option<String>,
    /// `--auth`: credentials for clients, probes and adapters (none without).
    pub auth: std::sync::Arc<crate::auth::Auth>,
    /// An external Toxiproxy; `None` = the embedded one.
    pub toxiproxy: Option<String>,
    /// `--tap-wire`: every framed message of the proxies to `wire.jsonl`.
    pub tap_wire: bool,
    /// The lock clients the workers run (`--client`).
    pub client: ClientChoice,
    /// The client adapter and its handshake answer (`--client NAME|PATH`).
    pub adapter: Option<super::protocol::AdapterSpec>,
    /// The protected resource (`--storage`).
    pub storage: StorageChoice,
    /// Remote hosts to start the servers on (`--hosts FILE`).
    pub hosts: Option<PathBuf>,
    /// `--attach`: the hosts' servers run already; lockjaw attaches.
    pub attach: bool,
    /// `--plan`: print the commands of an attached run, change nothing.
    pub plan: bool,
    /// `--allow-majority`: faults on attached servers may take a majority.
    pub allow_majority: bool,
    /// `--dead-man-margin-ms`: a fault on a host is taken back there by
    /// itself this long after its planned end, unless lockjaw did first.
    pub dead_man_margin: std::time::Duration,
    pub seed: u64,
    /// Exactly this run directory, or a new one under `histories`.
    pub out: Option<PathBuf>,
    pub histories: PathBuf,
    /// Local cluster: first port and node count (system defaults if None).
    pub base_port: Option<u16>,
    pub nodes: Option<usize>,
    pub progress: bool,
    /// The lockjaw binary workers are started from.
    pub exe: PathBuf,
    pub command: Vec<String>,
    /// Record ops (false only to measure the cost of recording).
    pub record: bool,
    /// The master name the sentinels monitor (sentinel; `lockjaw` for a
    /// local cluster).
    pub sentinel_master: String,
    /// `--pause-budget-ms` (recorded in run.json for the lease advice).
    pub pause_budget_ms: Option<f64>,
    /// `--require-landed N`: fewer landed faults make the run unknown.
    pub require_landed: Option<u64>,
    /// How to search an invalid run's witness histories; `None` with
    /// `--no-witness`.
    pub witness: Option<crate::check::minimal::WitnessOptions>,
    /// `--max-rate`, `--max-workers`: the run's load ceiling.
    pub load: super::load::Load,
    /// `--client-faketime`: start every worker under libfaketime even
    /// without a client clock fault (a schedule may move any worker's
    /// clock; `explore` runs so).
    pub client_faketime: bool,
    /// The run's lock and storage keys carry its run id (`lockjaw-<id>`),
    /// as on servers lockjaw did not start: every run of a campaign
    /// (`--runs N`, N > 1), whether or not its runs share a cluster.
    pub own_keys: bool,
    /// A campaign's cluster for its runs one after another (`--runs N`
    /// without `--fresh-cluster`: [`super::shared`]); `None`: the run
    /// starts its own.
    pub share: Option<Arc<super::shared::Slot>>,
}

/// How a run ended, for the caller.
#[derive(Debug)]
pub struct RunOutcome {
    pub dir: PathBuf,
    pub exit: Exit,
    /// A few lines for stdout: verdicts and where to look.
    pub summary: String,
    /// Why a run that ended exits 3 (a worker died, an effect was not
    /// undone): the first line of stderr.
    pub error: Option<String>,
}

/// A run that could not be set up or went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{msg}")]
pub struct RunError {
    pub msg: String,
    /// The run directory, if one was made.
    pub dir: Option<PathBuf>,
    /// The exit code: 3 (failed), or 2 when the run was interrupted (it
    /// found no anomaly: it never got to check).
    pub exit: Exit,
}

impl RunError {
    pub fn new(msg: impl Into<String>) -> RunError {
        RunError {
            msg: msg.into(),
            dir: None,
            exit: Exit::Error,
        }
    }
}

/// What the run combines, for [`crate::combination::applies`].
pub fn combination(cfg: &RunConfig) -> Combination {
    Combination {
        system: cfg.system,
        client: cfg.client.clone(),
        storage: cfg.storage,
        workload: cfg.workload.kind,
        nemesis: cfg.nemesis.clone(),
        fencing: Some(cfg.fencing.is_on()),
        placement: Placement::from_flags(cfg.hosts.is_some(), cfg.endpoints.is_some()),
        attach: cfg.attach,
        toxiproxy: match cfg.toxiproxy {
            Some(_) => ToxiproxyChoice::External,
            None => ToxiproxyChoice::Embedded,
        },
    }
}

/// Refuse combinations that cannot work, before anything starts: the
/// service registry decides what applies, then this host must be ready.
pub fn validate(cfg: &RunConfig) -> Result<(), RunError> {
    if cfg.nodes == Some(0) {
        return Err(RunError::new(
            "--nodes 0: a cluster needs at least one node (hint: leave --nodes out for the system's default)",
        ));
    }
    if let Some(eps) = &cfg.endpoints {
        if eps.is_empty() {
            return Err(RunError::new(
                "--endpoints is empty (hint: --endpoints host:port,host:port)",
            ));
        }
        for e in eps {
            if e.rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
                .is_none()
            {
                return Err(RunError::new(format!(
                    "--endpoints: {e:?} is not host:port (hint: e.g. 127.0.0.1:6379)"
                )));
            }
        }
    }
    if cfg.hosts.is_some() && cfg.endpoints.is_some() {
        return Err(RunError::new(
            "--hosts and --endpoints together: lockjaw either starts the servers on the hosts or uses the ones you run (hint: drop one of them)",
        ));
    }
    let c = combination(cfg);
    // With --attach its own reasons first (they name the attached servers);
    // without, what cannot run at all (Sentinel started on hosts) first.
    let applies = || combination::applies(&c).map_err(|e| RunError::new(e.to_string()));
    if !cfg.attach {
        applies()?;
    }
    super::attach::check(cfg)?;
    applies()?;
    let renewals = c.nemesis.fault == "renew-race" || c.nemesis.target == Target::Renewer;
    let library = cfg.adapter.as_ref().filter(|a| phases::library_renews(a));
    if let (true, Some(a)) = (renewals, library) {
        return Err(RunError::new(format!(
            "{}: nemesis {} strikes lockjaw's own renewals, and {} renews its leases by itself (renewals = \"all\"), so lockjaw sends none (hint: strike the library's renewals by their command: strike-command)",
            NotApplicable::nemesis(&c, "no renewals of lockjaw's".into()).what,
            c.nemesis.name,
            a.offer.title()
        )));
    }
    if renewals && !cfg.workload.renew {
        return Err(RunError::new(format!(
            "{}: nemesis {} strikes a lease renewal, and workload {} does not renew (hint: use a workload with `renew = true`, e.g. fenced-counter-renewing)",
            NotApplicable::nemesis(&c, "no renewals".into()).what,
            c.nemesis.name,
            cfg.workload.name
        )));
    }
    if cfg.client_faketime {
        crate::nemesis::client_clock::host_ready()
            .map_err(|why| RunError::new(format!("--client-faketime: {why}")))?;
    }
    registry::host_ready(&c.scope())
        .map_err(|why| RunError::new(NotApplicable::nemesis(&c, why).to_string()))
}

/// The run directory's name without the time: `redis-fenced-counter-pause-holder`.
pub fn run_name(cfg: &RunConfig) -> String {
    format!("{}-{}-{}", cfg.system, cfg.workload.name, cfg.nemesis.name)
}

fn initial_info(cfg: &RunConfig) -> RunInfo {
    RunInfo {
        run_id: rundir::new_run_id(),
        lockjaw_version: env!("CARGO_PKG_VERSION").to_string(),
        // Without a URL's password, however the command came.
        command: crate::auth::redact::args(&cfg.command),
        system: cfg.system,
        local_cluster: cfg.endpoints.is_none(),
        hosts_file: cfg.hosts.as_ref().and_then(|h| std::path::absolute(h).ok()),
        endpoints: cfg.endpoints.clone().unwrap_or_default(),
        nodes: Vec::new(),
        server_version: None,
        server_settings: Default::default(),
        auth: (!cfg.auth.is_empty()).then(|| cfg.auth.summary()),
        attached: Vec::new(),
        toxiproxy_url: cfg.toxiproxy.clone(),
        toxiproxy_embedded: cfg.toxiproxy.is_none(),
        client: cfg.client.to_string(),
        client_library: cfg.adapter.as_ref().map(|a| a.offer.title()),
        storage: cfg.storage,
        toxiproxy_version: None,
        workload: cfg.workload.clone(),
        nemesis: cfg.nemesis.clone(),
        fencing: cfg.fencing,
        seed: cfg.seed,
        ttl_ms: cfg.workload.ttl_ms,
        effective_lease_ms: None,
        started_utc: rundir::utc_now(),
        finished_utc: None,
        duration_s: None,
        counts: Counts::default(),
        final_value: None,
        outcome: "running".into(),
        exit_code: None,
        pause_budget_ms: cfg.pause_budget_ms,
        dead_man_margin_ms: cfg
            .hosts
            .as_ref()
            .map(|_| cfg.dead_man_margin.as_millis() as u64),
        load: cfg.load,
        timings: Default::default(),
        cluster: None,
    }
}

/// Set once a run of this process was interrupted (Ctrl-C, SIGTERM): no
/// further run of `--runs` starts.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a run of this process was interrupted.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Run one test from start to verdict. Heals on every exit path.
pub fn run(cfg: RunConfig) -> Result<RunOutcome, RunError> {
    let timings = super::timings::Timings::start();
    validate(&cfg)?;
    let mut cfg = cfg;
    let dir = rundir::create(&cfg.histories, &run_name(&cfg), cfg.out.as_deref())
        .map_err(RunError::new)?;
    let fail = |msg: String| RunError {
        msg,
        dir: Some(dir.clone()),
        exit: Exit::Error,
    };
    super::heal::write_controller(&dir);
    let mut info = initial_info(&cfg);
    info.timings = timings;
    if cfg.attach || cfg.endpoints.is_some() || cfg.own_keys {
        // Keys of their own on a cluster that is not lockjaw's (deleted
        // at the end and by heal, service::leftovers, never a user's), and
        // in each run of a campaign, so that no run meets a key an
        // earlier run of it left on a cluster they share.
        let w = &mut cfg.workload;
        w.lock_key = format!("{}-{}", w.lock_key, info.run_id);
        w.storage_key = format!("{}-{}", w.storage_key, info.run_id);
        // run.json names the keys the run used.
        info.workload = cfg.workload.clone();
    }
    if cfg.attach {
        if let Some(h) = &cfg.hosts {
            // Before the cluster is touched: heal reads the start commands here.
            super::attach::copy_hosts_file(h, &dir).map_err(fail)?;
        }
    }
    info.write(&dir).map_err(|e| {
        fail(format!(
            "cannot write {}: {e}",
            dir.join(rundir::RUN).display()
        ))
    })?;
    let undo = Arc::new(
        UndoLog::open(&dir.join(UNDO_FILE), super::heal::executor())
            .map_err(|e| fail(format!("cannot create the undo log: {e}")))?
            .with_run_id(&info.run_id),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(format!("cannot start the async runtime: {e}")))?;
    info.timings.mark("prepare");
    let r = rt.block_on(supervise(&cfg, &dir, undo.clone(), &mut info));
    // Effects of tasks the runtime still held are in the log too.
    let leftover = rt.block_on(undo.drain());
    rt.shutdown_timeout(Duration::from_secs(2));
    info.timings.mark("undo drain");
    let mut r = r;
    if !leftover.is_empty() {
        // Each error once: one told already is only counted.
        let told = leftover.iter().filter(|e| e.repeated).count();
        let mut parts: Vec<String> = leftover
            .iter()
            .filter(|e| !e.repeated)
            .map(|e| e.to_string())
            .collect();
        if told > 0 {
            parts.push(format!("{told} effect(s) whose undo failed as told above"));
        }
        let msg = format!(
            "could not undo everything: {} (hint: run `lockjaw heal {}` once the cause is fixed)",
            parts.join("; "),
            dir.display()
        );
        match &mut r {
            Ok(o) => {
                o.exit = o.exit.merge(Exit::Error);
                o.error.get_or_insert(msg);
            }
            Err(_) => crate::exit::say(&format!("error: {msg}")),
        }
    }
    info.finished_utc = Some(rundir::utc_now());
    if let Ok(o) = &r {
        info.exit_code = Some(o.exit.code());
    }
    let _ = info.write(&dir);
    // The page and summary.md, also for a run that ended early: whatever
    // history it left is evidence. A run that failed before its check has
    // no results to show; its error says what went wrong.
    if dir.join(rundir::RESULTS).exists() {
        witnesses(&cfg, &dir, &mut r);
        info.timings.mark("witness");
        let report = crate::report::write_report(&dir, None);
        info.timings.mark("report");
        // With the witness's and the report's times.
        let _ = info.write(&dir);
        match report {
            Ok(w) => {
                if let Ok(o) = &mut r {
                    if let Some(a) = &w.summary.advice {
                        o.summary.push_str(&format!(
                            "\nlease advice: the lease of {:.0} ms {} the recommended {:.0} ms (see {})",
                            a.lease_ms,
                            if a.met { "met" } else { "did not meet" },
                            a.bound_ms,
                            w.markdown.display()
                        ));
                    }
                    o.summary
                        .push_str(&format!("\nreport: {}", w.html.display()));
                }
            }
            Err(e) => crate::exit::say(&format!(
                "warning: no report written: {e} (hint: `lockjaw report {}` retries)",
                dir.display()
            )),
        }
    }
    r.map_err(|e| RunError {
        dir: Some(dir),
        ..e
    })
}

/// An invalid run's witness histories (issue 30), one line each in the
/// summary; an error is a warning line and never changes the verdict.
fn witnesses(cfg: &RunConfig, dir: &Path, r: &mut Result<RunOutcome, RunError>) {
    let Some(opts) = &cfg.witness else {
        return;
    };
    if interrupted() {
        // The user asked to stop: no search now; `lockjaw report` does it.
        crate::exit::say(&format!(
            "witness histories not searched: the run was interrupted (hint: `lockjaw report {}` writes them)",
            dir.display()
        ));
        return;
    }
    for line in crate::report::cli::witness_lines(dir, opts) {
        match r {
            Ok(o) if !line.starts_with("warning:") => {
                o.summary.push('\n');
                o.summary.push_str(&line);
            }
            _ => crate::exit::say(&line),
        }
    }
}

/// Run the phases under Ctrl-C/SIGTERM handling and panic catching; drain
/// the undo log whatever happens.
async fn supervise(
    cfg: &RunConfig,
    dir: &Path,
    undo: Arc<UndoLog>,
    info: &mut RunInfo,
) -> Result<RunOutcome, RunError> {
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let (abort_tx, mut abort_rx) = watch::channel(false);
    let u = undo.clone();
    let signals = tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term), Ok(mut orphan)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::from_raw(super::compare::child::PARENT_DIED)),
        ) else {
            return;
        };
        // The parent-death signal of a compare's or sweep's child counts
        // once: it comes again each time another of the dying parent's
        // threads exits.
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {}, _ = orphan.recv() => {} }
        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
        eprintln!("\nlockjaw: interrupted; healing every fault and stopping what was started (again to skip the grace periods)");
        let _ = cancel_tx.send(true);
        tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        eprintln!("\nlockjaw: interrupted again; killing without grace");
        u.set_grace(Duration::ZERO);
        let _ = abort_tx.send(true);
    });
    let body =
        AssertUnwindSafe(phases::run(cfg, dir, undo.clone(), cancel_rx, info)).catch_unwind();
    let r = tokio::select! {
        r = body => r,
        _ = async { while abort_rx.changed().await.is_ok() && !*abort_rx.borrow() {} } => {
            Ok(Err(RunError::new("interrupted twice: stopped without checking")))
        }
    };
    let errors = undo.drain().await;
    signals.abort();
    for e in errors.iter().filter(|e| !e.repeated) {
        crate::exit::say(&format!("error: {e}"));
    }
    let r = r.map(|r| r.map_err(interrupted_error));
    match r {
        Ok(Ok(ended)) => Ok(finish(dir, ended, info)),
        Ok(Err(e)) => {
            info.outcome = format!("failed: {}", e.msg);
            Err(e)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            info.outcome = format!("failed: internal error: {what}");
            Err(RunError::new(format!(
                "internal error: {what} (everything the run started was stopped; the history so far is in {})",
                dir.display()
            )))
        }
    }
}

/// An error of a run that was interrupted exits 2: the run found no
/// anomaly (it would have exited 1), and was cut short by the user.
fn interrupted_error(mut e: RunError) -> RunError {
    if interrupted() {
        e.exit = Exit::Unknown;
    }
    e
}

/// The exit code of a run that ended: its verdict's; for a run stopped
/// early, 1 if it found anomalies, else 2 when interrupted (never valid:
/// it was cut short) and 3 for any other reason (a worker died).
fn early_exit(verdict: crate::check::Validity, why: &str) -> Exit {
    match verdict {
        crate::check::Validity::False => Exit::Invalid,
        _ if why.starts_with("interrupted") => Exit::Unknown,
        _ => Exit::Error,
    }
}

fn finish(dir: &Path, ended: Ended, info: &mut RunInfo) -> RunOutcome {
    let mut exit = Exit::from(ended.verdict);
    info.outcome = match &ended.early {
        None => "completed".into(),
        Some(why) => {
            exit = early_exit(ended.verdict, why);
            why.clone()
        }
    };
    let mut summary = ended.summary;
    if let Some(why) = &ended.early {
        summary.push_str(&format!("\nthe run ended early: {why}"));
    }
    summary.push_str(&format!("\nrun directory: {}", dir.display()));
    let mut error = (exit == Exit::Error)
        .then(|| ended.early.map(|why| format!("the run ended early: {why}")))
        .flatten();
    if let Some(why) = ended.unhealthy {
        exit = exit.merge(Exit::Error);
        error.get_or_insert(why);
    }
    RunOutcome {
        dir: dir.to_path_buf(),
        exit,
        summary,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Validity;

    #[test]
    fn an_interrupted_run_exits_1_with_anomalies_else_2() {
        assert_eq!(early_exit(Validity::False, "interrupted"), Exit::Invalid);
        assert_eq!(early_exit(Validity::True, "interrupted"), Exit::Unknown);
        assert_eq!(early_exit(Validity::Unknown, "interrupted"), Exit::Unknown);
        assert_eq!(early_exit(Validity::True, "worker 1 died"), Exit::Error);
        assert_eq!(early_exit(Validity::False, "worker 1 died"), Exit::Invalid);
    }
}
