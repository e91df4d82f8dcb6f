//! The phases of one run, in order:
//!
//! 1. history file (meta record first), Toxiproxy (embedded or external),
//!    the cluster (unless `--endpoints`; its undo entry first), the storage;
//! 2. one proxy per worker × node and worker × storage; the workers;
//! 3. the run: the nemesis schedule until the time limit, Ctrl-C, or a
//!    worker dying;
//! 4. heal: stop the fault in place, undo every remaining fault;
//! 5. stop the workers (each finishes its step and releases), close every
//!    storage connection (proxies cut, server side too), then the final
//!    unfenced read of the storage as process `"final"`;
//! 6. teardown (proxies, storage, cluster), then check the history and
//!    write `results.json`, `nemesis.json`, `run.json`.

use super::analysis;
use super::controller::{RunConfig, RunError};
use super::progress::Progress;
use super::protocol::WorkerSpec;
use super::proxies;
use super::recorder::{Counters, HistoryWriter};
use super::rundir::{self, NodeSummary, RunInfo};
use super::workers::{Death, Pool};
use crate::check::linear::LinOptions;
use crate::check::{check_history, CheckOptions, Checker, Results, Validity};
use crate::cluster::{Cluster, ClusterSpec, NodeRole};
use crate::history::clock::RunClock;
use crate::history::{Meta, Process, Sink};
use crate::nemesis::{registry, schedule, Ctx, NemesisSummary, WorkerPool};
use crate::process::ports::{self, PortBlock};
use crate::storage::{self, StorageConfig, StorageHandle};
use crate::toxiproxy::{HttpClient, ServerHandle, ToxiproxyApi};
use crate::undo::{Undo, UndoLog};
use crate::workload::Kind;
use rand::SeedableRng;
use serde_json::{json, Value};
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
}

fn err(msg: impl Into<String>) -> RunError {
    RunError::new(msg)
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
            p.insert(
                "client".into(),
                json!({
                    "adapter": cfg.client.to_string(),
                    "library": a.offer.library,
                    "version": a.offer.version,
                    "fence": a.offer.fence,
                    "lease": a.offer.lease,
                    "renewals": a.offer.renewals,
                }),
            );
        }
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

/// Toxiproxy: the embedded server, or a client of `--toxiproxy URL`.
async fn toxiproxy(
    cfg: &RunConfig,
) -> Result<(Arc<dyn ToxiproxyApi>, Option<ServerHandle>, String), RunError> {
    match &cfg.toxiproxy {
        Some(url) => {
            let c = HttpClient::new(url).map_err(|e| err(e.to_string()))?;
            let v = c.version().await.map_err(|e| err(e.to_string()))?;
            Ok((Arc::new(c), None, v))
        }
        None => {
            let s = crate::toxiproxy::spawn_loopback()
                .await
                .map_err(|e| err(format!("cannot start the embedded Toxiproxy: {e}")))?;
            let c = s.client().map_err(|e| err(e.to_string()))?;
            Ok((
                Arc::new(c),
                Some(s),
                crate::toxiproxy::server::VERSION.to_string(),
            ))
        }
    }
}

/// The cluster: local (its undo entry written first) or `--endpoints`.
///
/// A local cluster's ports come from a block the run reserves (`--base-port`
/// or a free one), held until the run ends; its cgroups carry the run id.
async fn cluster(
    cfg: &RunConfig,
    dir: &Path,
    undo: &UndoLog,
    run_id: &str,
) -> Result<(Arc<Cluster>, Option<PortBlock>), RunError> {
    if !cfg.system.facts().lock.is_yes() {
        return Ok((Arc::new(Cluster::empty(cfg.system)), None));
    }
    if let Some(eps) = &cfg.endpoints {
        let c = Cluster::from_endpoints(cfg.system, eps).map_err(|e| err(e.to_string()))?;
        endpoints_answer(cfg, &c).await?;
        return Ok((Arc::new(c), None));
    }
    if let Some(path) = &cfg.hosts {
        return Ok((
            Arc::new(on_hosts(cfg, path, dir, undo, run_id).await?),
            None,
        ));
    }
    let mut spec = ClusterSpec::new(cfg.system, dir);
    spec.nodes = cfg.nodes;
    let span = u16::try_from(spec.port_span())
        .map_err(|_| err(format!("--nodes {}: too many nodes", spec.node_count())))?;
    let ports = ports::reserve(cfg.base_port, span).map_err(err)?;
    spec.base_port = Some(ports.base);
    spec.group = Some(run_id.to_string());
    spec.faketime = registry::needs_faketime(&cfg.nemesis, cfg.system);
    spec.appendfsync = cfg.nemesis.appendfsync;
    undo.push(Undo::Cluster {
        dir: dir.to_path_buf(),
    })
    .map_err(|e| err(format!("cannot write the undo log: {e}")))?;
    let c = Cluster::start(&spec)
        .await
        .map_err(|e| err(format!("cannot start the {} cluster: {e}", cfg.system)))?;
    Ok((Arc::new(c), Some(ports)))
}

/// `--hosts FILE`: the cluster on the file's hosts (one data node each),
/// reached over SSH; what the faults need is checked on every host first.
async fn on_hosts(
    cfg: &RunConfig,
    path: &Path,
    dir: &Path,
    undo: &UndoLog,
    run_id: &str,
) -> Result<Cluster, RunError> {
    let hosts = crate::remote::HostsFile::read(path)
        .and_then(|f| f.for_system(cfg.system, cfg.nodes))
        .map_err(|e| err(format!("--hosts {}: {e}", path.display())))?;
    let mut spec = ClusterSpec::new(cfg.system, dir);
    spec.nodes = Some(hosts.len());
    spec.faketime = registry::needs_faketime(&cfg.nemesis, cfg.system);
    spec.appendfsync = cfg.nemesis.appendfsync;
    let on = crate::cluster::hosts::OnHosts {
        hosts: &hosts,
        run_id,
        undo,
        iptables: registry::cuts_hosts(&cfg.nemesis),
    };
    Cluster::start_on_hosts(&spec, on).await.map_err(|e| {
        err(format!(
            "cannot start the {} cluster on the hosts of {}: {e}",
            cfg.system,
            path.display()
        ))
    })
}

/// `--postgres-url`: the URL in the run directory's private file for the
/// workers, and the undo entry that drops the run's `lockjaw_<run-id>_*`
/// tables (written before any worker could create one).
fn user_database(
    cfg: &RunConfig,
    dir: &Path,
    undo: &UndoLog,
    run_id: &str,
) -> Result<Option<std::path::PathBuf>, RunError> {
    let Some(url) = &cfg.postgres_url else {
        return Ok(None);
    };
    let file = crate::cluster::postgres::write_url_file(dir, url).map_err(|e| {
        err(format!(
            "cannot write {}: {e}",
            dir.join(crate::cluster::postgres::URL_FILE).display()
        ))
    })?;
    undo.push(Undo::PostgresTables {
        file: file.clone(),
        prefix: crate::cluster::postgres::prefix(run_id),
    })
    .map_err(|e| err(format!("cannot write the undo log: {e}")))?;
    Ok(Some(file))
}

/// The run's cgroup group `lockjaw/<run-id>`, owned by the run directory:
/// every process the run starts (servers and workers) goes in a leaf of
/// it. Its undo entry comes first, so it is removed last, leaves first,
/// with whatever is still in it. `None` without a writable cgroup v2.
fn run_group(dir: &Path, undo: &UndoLog, run_id: &str) -> Result<Option<String>, RunError> {
    if crate::process::Cgroup::root().is_none() {
        return Ok(None);
    }
    let group = format!("{}/{run_id}", crate::process::cgroup::TOP);
    let owner =
        crate::process::Owner::of_dir(dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
    undo.push(Undo::Cgroup {
        group: group.clone(),
    })
    .map_err(|e| err(format!("cannot write the undo log: {e}")))?;
    crate::process::Cgroup::create_group(&group, owner.tag()).map_err(err)?;
    Ok(Some(group))
}

/// With `--endpoints`: every endpoint answers the system's health probe
/// within the workload's op timeout, or the run stops here naming the
/// first that does not (before any proxy or worker stands between).
async fn endpoints_answer(cfg: &RunConfig, c: &Cluster) -> Result<(), RunError> {
    let t = Duration::from_millis(cfg.workload.op_timeout_ms);
    if let Some(url) = &cfg.postgres_url {
        let shown = crate::cluster::postgres::parse_url(url)
            .map(|d| d.url_without_password)
            .unwrap_or_default();
        return crate::cluster::postgres::version_at(url, t.max(Duration::from_secs(2)))
            .await
            .map(drop)
            .map_err(|e| {
                err(format!(
                    "--postgres-url {shown}: {e} (hint: check the address, user, password and database; the database must accept connections when a run starts)"
                ))
            });
    }
    let service = cfg.system.service();
    let probes = c.nodes().iter().map(|n| async move {
        match tokio::time::timeout(t, service.probe(&n.addr, n.role, t)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err((n.addr.clone(), e)),
            Err(_) => Err((n.addr.clone(), "no answer".into())),
        }
    });
    for r in futures::future::join_all(probes).await {
        if let Err((addr, e)) = r {
            return Err(err(format!(
                "--endpoints: {addr} does not answer as a {} server within {} ms: {e} \
                 (hint: start it, or fix the address; every endpoint must answer when a run starts)",
                cfg.system,
                t.as_millis()
            )));
        }
    }
    Ok(())
}

fn worker_specs(
    cfg: &RunConfig,
    run_id: &str,
    url_file: Option<&Path>,
    cluster: &Cluster,
    links: &[proxies::WorkerLinks],
    clock: &RunClock,
    pg: Option<&PgStorage>,
) -> Vec<WorkerSpec> {
    let w = &cfg.workload;
    let c = w.concurrency as i64;
    links
        .iter()
        .enumerate()
        .map(|(slot, l)| WorkerSpec {
            slot,
            incarnation: 0,
            first_process: slot as i64,
            stride: c,
            system: cfg.system,
            endpoints: client_endpoints(cfg, cluster),
            dial: l.dial.clone(),
            storage: l.storage.clone(),
            workload: w.clone(),
            storage_timeout_ms: storage_timeout_ms(w.ttl_ms),
            clock_origin_ns: clock.start_raw_ns(),
            seed: cfg.seed.wrapping_add(slot as u64),
            record: cfg.record,
            sentinel_master: cfg.sentinel_master.clone(),
            adapter: cfg.adapter.clone(),
            run_id: run_id.to_string(),
            postgres_url_file: url_file.map(Path::to_path_buf),
            storage_pg: pg.map(|p| p.run_id.clone()),
        })
        .collect()
}

/// Longer than any storage delay a nemesis applies (1.5 leases by default).
fn storage_timeout_ms(ttl_ms: u64) -> u64 {
    (4 * ttl_ms).max(5000)
}

/// How long the linearizability search may take before it says unknown.
const LINEAR_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a worker may take to finish its step after SIGTERM.
fn stop_grace(cfg: &RunConfig) -> Duration {
    let w = &cfg.workload;
    Duration::from_millis(
        w.acquire_wait_ms + w.hold_ms + 2 * w.op_timeout_ms + storage_timeout_ms(w.ttl_ms) + 2000,
    )
}

/// All of a run's phases. See the module doc.
pub async fn run(
    cfg: &RunConfig,
    dir: &Path,
    undo: Arc<UndoLog>,
    mut cancel: watch::Receiver<bool>,
    info: &mut RunInfo,
) -> Result<Ended, RunError> {
    let started = Instant::now();
    let progress = Progress::new(cfg.progress);
    let clock = RunClock::start();
    let history = dir.join(rundir::HISTORY);
    let mut writer = HistoryWriter::create(&history, &meta(cfg))
        .map_err(|e| err(format!("cannot create {}: {e}", history.display())))?;
    let rec: Arc<dyn Sink> = Arc::new(writer.recorder());

    let phase = progress.phase("starting Toxiproxy, the cluster and the storage");
    let (api, mut tox_server, tox_version) = toxiproxy(cfg).await?;
    info.toxiproxy_url = Some(api.url().to_string());
    info.toxiproxy_version = Some(tox_version);
    let group = run_group(dir, &undo, &info.run_id)?;
    // Held until the phases end: no other run takes these ports meanwhile.
    let (cluster, _ports) = cluster(cfg, dir, &undo, &info.run_id).await?;
    let url_file = user_database(cfg, dir, &undo, &info.run_id)?;
    info.nodes = node_summaries(&cluster).await;
    info.server_version = cluster.version().await.ok();
    let w = &cfg.workload;
    let pg = pg_storage(cfg, dir, &undo, &info.run_id).await?;
    let mut store: Option<StorageHandle> = if w.kind.uses_storage() && pg.is_none() {
        let sc =
            StorageConfig::new(cfg.fencing).with_initial(w.storage_key.clone(), w.kind.initial());
        Some(
            storage::spawn("127.0.0.1:0".parse().expect("an address"), sc)
                .map_err(|e| err(e.to_string()))?,
        )
    } else {
        None
    };
    let mut upstreams: Vec<proxies::Upstream> = cluster
        .nodes()
        .iter()
        .map(|n| (n.name.clone(), n.addr.clone()))
        .collect();
    if cfg.endpoints.is_some() {
        let eps = client_endpoints(cfg, &cluster);
        let t = Duration::from_secs(2);
        let behind = cfg
            .system
            .service()
            .servers_behind(&eps, &cfg.sentinel_master, t);
        upstreams.extend(behind.await.map_err(err)?);
    }
    let prefix = format!("lockjaw-{}", info.run_id);
    let storage_addr = match &pg {
        Some(p) => Some(p.addr.clone()),
        None => store.as_ref().map(|s| s.addr().to_string()),
    };
    let (links, per) = proxies::create(
        api.as_ref(),
        tox_server.is_some(),
        &undo,
        &prefix,
        w.concurrency,
        &upstreams,
        storage_addr.as_deref(),
    )
    .await
    .map_err(err)?;
    phase.done(&format!(
        "{} nodes, {} proxies",
        upstreams.len(),
        links.all().len()
    ));

    let phase = progress.phase("starting the workers");
    let specs = worker_specs(
        cfg,
        &info.run_id,
        url_file.as_deref(),
        &cluster,
        &per,
        &clock,
        pg.as_ref(),
    );
    let (pool, mut deaths) = Pool::new(
        cfg.exe.clone(),
        dir.to_path_buf(),
        group,
        specs,
        rec.clone(),
        undo.clone(),
    );
    pool.spawn_all().map_err(err)?;
    pool.wait_ready(Duration::from_secs(30))
        .await
        .map_err(err)?;
    phase.done(&format!("{} workers", w.concurrency));

    let counters = writer.counters();
    let faults = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut nctx = Ctx::new(
        cfg.system,
        cluster.clone(),
        pool.clone() as Arc<dyn WorkerPool>,
        api.clone(),
        tox_server.is_some(),
        Arc::new(links.clone()),
        undo.clone(),
        rec.clone(),
        clock,
        rand::rngs::StdRng::seed_from_u64(cfg.seed),
        Duration::from_millis(w.ttl_ms),
        Duration::from_millis(w.hold_ms),
        cfg.nemesis.clone(),
        stop_rx,
    );
    nctx.workload = Some(w.kind);
    nctx.renews = w.renews();
    nctx.run_id = info.run_id.clone();
    let nemesis = registry::build(&cfg.nemesis);
    let f2 = faults.clone();
    let nemesis_task = tokio::spawn(async move { schedule::run(nemesis, &mut nctx, &f2).await });
    let limit = Duration::from_secs_f64(w.time_limit_s);
    let bar = progress.run_bar(limit, counters.clone(), faults.clone());
    let early = wait_out(limit, &mut cancel, &mut deaths).await;
    let _ = stop_tx.send(true);
    bar.done();

    let phase = progress.phase("healing and stopping the workers");
    let summary = nemesis_task.await.unwrap_or_else(|e| NemesisSummary {
        errors: vec![format!("the nemesis task failed: {e}")],
        ..NemesisSummary::default()
    });
    heal_faults(&undo).await?;
    pool.stop_all(stop_grace(cfg)).await;
    let final_value = match (&store, &pg) {
        (_, Some(p)) => Some(
            p.final_read(api.as_ref(), &links, &w.storage_key, rec.as_ref(), &clock)
                .await?,
        ),
        (Some(s), None) => Some(
            final_read(
                api.as_ref(),
                &links,
                s,
                &w.storage_key,
                rec.as_ref(),
                &clock,
            )
            .await?,
        ),
        (None, None) => None,
    };
    let ops = writer
        .close()
        .map_err(|e| err(format!("writing {}: {e}", history.display())))?;
    phase.done(&format!("{ops} ops recorded"));

    let phase = progress.phase("tearing down");
    if let Some(s) = store.as_mut() {
        s.shutdown();
    }
    if let Some(p) = pg {
        p.close().await;
    }
    if cluster.on_hosts() {
        // Through the run's own SSH connections, before the undo log ends
        // them: the nodes' logs come back here, the servers stop.
        let c = cluster.clone();
        match tokio::task::spawn_blocking(move || c.close()).await {
            Ok(Err(e)) => tracing::warn!("stopping the cluster on the hosts: {e}"),
            Err(e) => tracing::warn!("stopping the cluster on the hosts: {e}"),
            Ok(Ok(())) => {}
        }
    }
    let _ = undo.drain().await;
    if let Some(s) = tox_server.as_mut() {
        s.shutdown().await;
    }
    phase.done("done");

    let phase = progress.phase("checking the history");
    let (results, text) = check(&history);
    let verdict = results.valid;
    write(dir, rundir::RESULTS, &results)?;
    let facts = analysis::analyse(&history, acquire_sets_ttl(cfg), &summary).unwrap_or_default();
    write(dir, rundir::NEMESIS, &nemesis_json(&summary, &facts))?;
    write(dir, crate::report::stalls::STALLS, &stall_file(&pool))?;
    phase.done(verdict.as_str());

    info.effective_lease_ms = facts.lease;
    info.final_value = final_value.clone();
    info.duration_s = Some(started.elapsed().as_secs_f64());
    info.counts = rundir::Counts {
        ops,
        grants: Counters::get(&counters.grants),
        writes: Counters::get(&counters.writes),
        stale_rejected: Counters::get(&counters.stale_rejected),
        infos: Counters::get(&counters.infos),
        faults: Counters::get(&faults),
        workers_started: pool.started.load(Ordering::Relaxed),
        worker_steps: pool.steps.load(Ordering::Relaxed),
        worker_grants: pool.grants.load(Ordering::Relaxed),
        abandoned_writes: pool.abandoned.load(Ordering::Relaxed),
    };
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
    Ok(Ended {
        verdict,
        early,
        summary: out,
    })
}

/// What clients connect to: `--endpoints` as given (for sentinel, the
/// sentinels; `Cluster::from_endpoints` marks every endpoint a server), or
/// the local cluster's client endpoints.
fn client_endpoints(cfg: &RunConfig, cluster: &Cluster) -> Vec<String> {
    match &cfg.endpoints {
        Some(eps) => eps.clone(),
        None => cluster.client_endpoints(),
    }
}

/// Every node with its role and the version it reports.
async fn node_summaries(cluster: &Cluster) -> Vec<NodeSummary> {
    let t = Duration::from_secs(2);
    let mut out = Vec::new();
    for n in cluster.nodes() {
        let version = cluster.system.service().version(&n.addr, n.role, t).await;
        out.push(NodeSummary {
            name: n.name.clone(),
            addr: n.addr.clone(),
            role: match n.role {
                NodeRole::Sentinel => "sentinel",
                NodeRole::Server => "server",
            }
            .into(),
            version: version.ok(),
        });
    }
    out
}

/// Wait for the time limit; stop early on Ctrl-C or a worker's death.
async fn wait_out(
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
async fn heal_faults(undo: &UndoLog) -> Result<(), RunError> {
    let mut errs = Vec::new();
    for (id, u) in undo.pending().into_iter().rev() {
        if u.is_fault() {
            if let Err(e) = undo.undo(id).await {
                errs.push(e.to_string());
            }
        }
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

/// Close every storage connection, then read the final value directly,
/// unfenced, as process `"final"`.
async fn final_read(
    api: &dyn ToxiproxyApi,
    links: &crate::nemesis::Links,
    store: &StorageHandle,
    key: &str,
    rec: &dyn Sink,
    clock: &RunClock,
) -> Result<Value, RunError> {
    cut_storage_links(api, links).await?;
    store.disconnect_all();
    let mut c = storage::StorageClient::connect(store.addr())
        .await
        .map_err(|e| err(format!("final read: {e}")))?;
    read_final(&mut c, key, rec, clock).await
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
fn check(history: &Path) -> (Results, String) {
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

fn nemesis_json(summary: &NemesisSummary, facts: &analysis::Facts) -> Value {
    let landed = summary
        .landed_inside()
        .map(|(i, n)| json!({"inside": i, "judged": n, "ratio": i as f64 / n as f64}));
    json!({
        "name": summary.name,
        "fault": summary.fault,
        "injections": summary.injections,
        "errors": summary.errors,
        "landed_inside": landed,
        "kill_gaps": facts.kill_gaps,
    })
}

fn write<T: serde::Serialize>(dir: &Path, name: &str, v: &T) -> Result<(), RunError> {
    let p = dir.join(name);
    rundir::write_json(&p, v).map_err(|e| err(format!("cannot write {}: {e}", p.display())))
}

/// `--storage postgres`: where the table lives (the run's own server, or
/// the database of `--postgres-url`) and its names.
struct PgStorage {
    /// The run's own server; `None` in the user's database.
    server: Option<crate::service::postgres::Server>,
    /// Where the workers' proxies point (`HOST:PORT`).
    addr: String,
    /// lockjaw's own connections (setup, final read, teardown).
    url: String,
    names: storage::postgres::Names,
    run_id: String,
    /// Held until the run ends: no other run takes the server's port.
    _port: Option<PortBlock>,
}

/// Start the run's PostgreSQL server (its undo entry first), or take the
/// database of `--postgres-url` (whose undo entry drops the run's objects),
/// and create the table, sequence and function, when the run protects a
/// value in PostgreSQL.
async fn pg_storage(
    cfg: &RunConfig,
    dir: &Path,
    undo: &UndoLog,
    run_id: &str,
) -> Result<Option<PgStorage>, RunError> {
    use crate::service::postgres::Server;
    let w = &cfg.workload;
    if cfg.storage != crate::service::StorageChoice::Postgres || !w.kind.uses_storage() {
        return Ok(None);
    }
    let (server, addr, url, port) = match &cfg.postgres_url {
        Some(url) => {
            let db = crate::cluster::postgres::parse_url(url).map_err(err)?;
            (None, db.endpoint, url.clone(), None)
        }
        None => {
            let port = ports::reserve(None, 1).map_err(err)?;
            undo.push(Undo::Cluster {
                dir: Server::dir(dir),
            })
            .map_err(|e| err(format!("cannot write the undo log: {e}")))?;
            let server = Server::start(dir, run_id, port.base)
                .await
                .map_err(|e| err(format!("cannot start the PostgreSQL storage: {e}")))?;
            let (addr, url) = (server.addr(), server.url());
            (Some(server), addr, url, Some(port))
        }
    };
    let names = storage::postgres::Names::new(run_id);
    let initial = [(w.storage_key.clone(), w.kind.initial())].into();
    let t = Duration::from_secs(10);
    storage::postgres::setup(&url, &names, cfg.fencing.is_on(), &initial, t)
        .await
        .map_err(|e| err(format!("cannot set up the PostgreSQL storage: {e}")))?;
    Ok(Some(PgStorage {
        server,
        addr,
        url,
        names,
        run_id: run_id.to_string(),
        _port: port,
    }))
}

impl PgStorage {
    /// Cut the workers' proxies, end their sessions and wait until they
    /// are gone, then read the final value directly, unfenced, as process
    /// `"final"`.
    async fn final_read(
        &self,
        api: &dyn ToxiproxyApi,
        links: &crate::nemesis::Links,
        key: &str,
        rec: &dyn Sink,
        clock: &RunClock,
    ) -> Result<Value, RunError> {
        cut_storage_links(api, links).await?;
        let url = &self.url;
        let t = Duration::from_secs(10);
        storage::postgres::end_worker_sessions(url, &self.names, t)
            .await
            .map_err(|e| err(format!("final read: {e}")))?;
        let mut c = storage::postgres::PgResource::new(url, &self.names, "lockjaw-final", t)
            .map_err(err)?;
        read_final(&mut c, key, rec, clock).await
    }

    /// Drop the run's objects, then stop the server.
    async fn close(self) {
        let prefix = crate::cluster::postgres::prefix(&self.run_id);
        let t = Duration::from_secs(5);
        if let Err(e) = crate::cluster::postgres::drop_prefixed(&self.url, &prefix, t).await {
            eprintln!("warning: dropping {prefix}* in the PostgreSQL storage: {e}");
        }
        if let Some(Err(e)) = self.server.as_ref().map(|s| s.close()) {
            eprintln!("warning: stopping the PostgreSQL storage: {e}");
        }
    }
}

/// What the workers' stall meters reported, as stalls.json holds it.
fn stall_file(pool: &super::workers::Pool) -> crate::report::stalls::StallFile {
    use super::stallmeter::{INTERVAL, THRESHOLD_MS};
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
