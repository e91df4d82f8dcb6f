//! Setting a run up, in order: Toxiproxy (embedded or external), the
//! run's cgroup group, the cluster (local, on hosts, or `--endpoints`;
//! its undo entry first), `--postgres-url`, the storage (lockjaw's own or
//! PostgreSQL), one proxy per worker × node and worker × storage; then
//! the workers. What is set up is a [`World`], which the later phases use
//! and tear down.

use super::{err, storage_timeout_ms};
use crate::cluster::{Cluster, ClusterSpec, NodeRole};
use crate::history::clock::RunClock;
use crate::history::Sink;
use crate::nemesis::{registry, Links};
use crate::process::ports::{self, PortBlock};
use crate::runner::controller::{RunConfig, RunError};
use crate::runner::progress::Progress;
use crate::runner::protocol::WorkerSpec;
use crate::runner::proxies;
use crate::runner::rundir::{NodeSummary, RunInfo};
use crate::runner::shared::ClusterUse;
use crate::runner::workers::{Death, Pool};
use crate::service::mariadb_storage::MyStorage;
use crate::service::postgres_storage::{self, PgStorage};
use crate::storage::{self, StorageConfig, StorageHandle};
use crate::toxiproxy::{HttpClient, ServerHandle, ToxiproxyApi};
use crate::undo::{Undo, UndoLog};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The protected resource of a run.
pub enum Store {
    /// The workload writes nothing.
    None,
    /// lockjaw's own storage service.
    Builtin(StorageHandle),
    /// A table in PostgreSQL (`--storage postgres`).
    Postgres(PgStorage),
    /// A table in MariaDB (`--storage mariadb`).
    Mariadb(MyStorage),
}

impl Store {
    /// Where the workers' storage proxies point.
    fn addr(&self) -> Option<String> {
        match self {
            Store::None => None,
            Store::Builtin(s) => Some(s.addr().to_string()),
            Store::Postgres(p) => Some(p.addr.clone()),
            Store::Mariadb(m) => Some(m.addr.clone()),
        }
    }
}

/// Everything a run set up before its workers start.
pub struct World {
    pub api: Arc<dyn ToxiproxyApi>,
    /// The embedded Toxiproxy, unless `--toxiproxy URL`.
    pub tox_server: Option<ServerHandle>,
    /// The run's cgroup group, when the host has cgroup v2.
    pub group: Option<String>,
    pub cluster: Arc<Cluster>,
    /// Held until the phases end: no other run takes these ports meanwhile.
    pub _ports: Option<PortBlock>,
    /// `--postgres-url`'s private file for the workers.
    pub url_file: Option<PathBuf>,
    pub store: Store,
    pub links: Links,
    pub per: Vec<proxies::WorkerLinks>,
}

/// Toxiproxy, the cgroup group, the cluster, the storage and the proxies.
pub async fn start(
    cfg: &RunConfig,
    dir: &Path,
    undo: &UndoLog,
    info: &mut RunInfo,
    progress: &Progress,
    tap: Option<Arc<crate::toxiproxy::tap::Tap>>,
) -> Result<World, RunError> {
    let phase = progress.phase("starting Toxiproxy, the cluster and the storage");
    if let Some(url) = &cfg.postgres_url {
        // Before anything is created or recorded: a wrong URL is the
        // run's one error, and leaves no undo entry heal could not drain.
        let t = Duration::from_millis(cfg.workload.op_timeout_ms);
        postgres_storage::user_database_answers(url, &cfg.auth, t)
            .await
            .map_err(err)?;
    }
    let (api, tox_server, tox_version) = toxiproxy(cfg).await?;
    if let (Some(s), Some(t)) = (&tox_server, tap) {
        // Before any proxy exists: every connection is tapped.
        s.set_tap(Some(t)).await;
    }
    info.toxiproxy_url = Some(api.url().to_string());
    info.toxiproxy_version = Some(tox_version);
    info.timings.mark("toxiproxy start");
    let group = run_group(dir, undo, &info.run_id)?;
    let (cluster, ports) = run_cluster(cfg, dir, undo, info).await?;
    let reused = info.cluster.as_ref().is_some_and(|c| c.reused);
    match cluster.spawned_in.filter(|_| !reused) {
        Some(d) => info.timings.split("cluster start", d, "cluster health"),
        None => info.timings.mark("cluster start"),
    }
    let url_file = match &cfg.postgres_url {
        Some(url) => Some(
            postgres_storage::user_database(url, &cfg.auth, dir, undo, &info.run_id)
                .map_err(err)?,
        ),
        None => None,
    };
    info.nodes = node_summaries(&cluster).await;
    info.server_version = cluster.version().await.ok();
    info.server_settings = cluster.settings().await;
    info.attached = crate::runner::attach::records(&cluster);
    info.timings.mark("server versions and settings");
    let store = store(cfg, dir, undo, &info.run_id).await?;
    info.timings.mark("storage start");
    let upstreams = upstreams(cfg, &cluster).await?;
    server_objects(cfg, &cluster, undo, &info.run_id)?;
    let prefix = proxies::prefix(&info.run_id);
    let (links, per) = proxies::create(
        api.as_ref(),
        tox_server.is_some(),
        undo,
        &prefix,
        cfg.workload.concurrency,
        &upstreams,
        store.addr().as_deref(),
    )
    .await
    .map_err(err)?;
    info.timings.mark("proxies");
    phase.done(&format!(
        "{} nodes, {} proxies",
        upstreams.len(),
        links.all().len()
    ));
    Ok(World {
        api,
        tox_server,
        group,
        cluster,
        _ports: ports,
        url_file,
        store,
        links,
        per,
    })
}

/// The protected resource the workload writes to, if any.
async fn store(
    cfg: &RunConfig,
    dir: &Path,
    undo: &UndoLog,
    run_id: &str,
) -> Result<Store, RunError> {
    let w = &cfg.workload;
    if !w.kind.uses_storage() {
        return Ok(Store::None);
    }
    let initial = [(w.storage_key.clone(), w.kind.initial())];
    if cfg.storage == crate::combination::StorageChoice::Postgres {
        let pg = PgStorage::open(
            cfg.postgres_url.as_deref(),
            &cfg.auth,
            dir,
            undo,
            run_id,
            cfg.fencing.is_on(),
            initial.into(),
        )
        .await
        .map_err(err)?;
        return Ok(Store::Postgres(pg));
    }
    if cfg.storage == crate::combination::StorageChoice::Mariadb {
        let my = MyStorage::open(dir, undo, run_id, cfg.fencing.is_on(), initial.into())
            .await
            .map_err(err)?;
        return Ok(Store::Mariadb(my));
    }
    let sc = StorageConfig::new(cfg.fencing).with_initial(initial[0].0.clone(), w.kind.initial());
    let h = storage::spawn("127.0.0.1:0".parse().expect("an address"), sc)
        .map_err(|e| err(e.to_string()))?;
    Ok(Store::Builtin(h))
}

/// Every node the workers' proxies lead to; with `--endpoints`, also the
/// servers behind them the clients will be sent to (Sentinel's).
async fn upstreams(cfg: &RunConfig, cluster: &Cluster) -> Result<Vec<proxies::Upstream>, RunError> {
    let mut upstreams: Vec<proxies::Upstream> = cluster
        .nodes()
        .iter()
        .map(|n| (n.name.clone(), n.addr.clone()))
        .collect();
    if cfg.endpoints.is_some() {
        let eps = client_endpoints(cfg, cluster);
        let t = Duration::from_secs(2);
        let behind = cfg
            .system
            .servers()
            .servers_behind(&eps, &cfg.sentinel_master, &cfg.auth, t);
        upstreams.extend(behind.await.map_err(err)?);
    }
    Ok(upstreams)
}

/// What the clients will create on servers lockjaw did not start (the
/// fence table; the keys, which carry the run id with `--attach` and
/// `--endpoints`),
/// in the undo log before any worker starts: deleted at the end and by
/// heal ([`crate::service::leftovers`]).
fn server_objects(
    cfg: &RunConfig,
    cluster: &Cluster,
    undo: &UndoLog,
    run_id: &str,
) -> Result<(), RunError> {
    use crate::cluster::Mode;
    let sql = cfg.system.makes_sql_tables();
    let theirs = match cluster.mode {
        Mode::Adopted => true,
        // --postgres-url: its own entry drops the run's tables.
        Mode::Endpoints => {
            let own_entry = sql && cfg.postgres_url.is_some();
            !own_entry && !cluster.nodes().is_empty()
        }
        Mode::Owned | Mode::Attached => false,
    };
    if !theirs {
        return Ok(());
    }
    let servers: Vec<String> = cluster.servers().map(|n| n.addr.clone()).collect();
    let w = &cfg.workload;
    let keys = [w.lock_key.as_str(), w.storage_key.as_str()];
    let file = cfg.auth.file.clone();
    let Some(u) = crate::service::leftovers::entry(cfg.system, servers, keys, run_id, file) else {
        return Ok(());
    };
    undo.push(u)
        .map(drop)
        .map_err(|e| err(format!("cannot write the undo log: {e}")))
}

/// Start one worker per slot and wait until each is ready.
pub async fn workers(
    cfg: &RunConfig,
    dir: &Path,
    w: &World,
    run_id: &str,
    clock: &RunClock,
    sink: Arc<dyn Sink>,
    undo: Arc<UndoLog>,
) -> Result<(Arc<Pool>, mpsc::UnboundedReceiver<Death>), RunError> {
    let specs = worker_specs(
        cfg,
        run_id,
        w.url_file.as_deref(),
        &w.cluster,
        &w.per,
        clock,
        &w.store,
    );
    let (pool, deaths) = Pool::new(
        cfg.exe.clone(),
        dir.to_path_buf(),
        w.group.clone(),
        specs,
        sink,
        undo,
    );
    pool.spawn_all().map_err(err)?;
    pool.wait_ready(Duration::from_secs(30))
        .await
        .map_err(err)?;
    pool.start_all();
    Ok((pool, deaths))
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

/// The run's cluster: the campaign's shared one ([`crate::runner::shared`]),
/// or one of its own; what it used goes to `run.json` (local clusters).
async fn run_cluster(
    cfg: &RunConfig,
    dir: &Path,
    undo: &UndoLog,
    info: &mut RunInfo,
) -> Result<(Arc<Cluster>, Option<PortBlock>), RunError> {
    let local = cfg.endpoints.is_none() && cfg.hosts.is_none() && cfg.system.facts().lock.is_yes();
    let mut fresh_because = None;
    if let Some(slot) = cfg.share.as_ref().filter(|_| local) {
        let (shared, use_) = slot.take(cfg, dir, &info.run_id).await?;
        if let Some(c) = shared {
            info.cluster = Some(use_);
            // At once: heal follows `cluster.home` from here.
            let _ = info.write(dir);
            return Ok((c, None));
        }
        fresh_because = use_.fresh_because;
    }
    let r = cluster(cfg, dir, undo, &info.run_id).await?;
    if local {
        info.cluster = Some(ClusterUse::own(&info.run_id, fresh_because));
    }
    Ok(r)
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
        return Ok((Arc::new(Cluster::empty(cfg.system.servers())), None));
    }
    if let Some(eps) = &cfg.endpoints {
        let mut c =
            Cluster::from_endpoints(cfg.system.servers(), eps).map_err(|e| err(e.to_string()))?;
        c.auth = cfg.auth.clone();
        endpoints_answer(cfg, &c).await?;
        return Ok((Arc::new(c), None));
    }
    if let Some(path) = &cfg.hosts {
        let mut c = match cfg.attach {
            true => attached(cfg, path, dir, undo).await?,
            false => on_hosts(cfg, path, dir, undo, run_id).await?,
        };
        c.auth = cfg.auth.clone();
        return Ok((Arc::new(c), None));
    }
    let mut spec = ClusterSpec::new(cfg.system.servers(), dir);
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
    let hosts = crate::runner::hosts::load(path, cfg.system, cfg.nodes)
        .map_err(|e| err(format!("--hosts {}: {e}", path.display())))?;
    let mut spec = ClusterSpec::new(cfg.system.servers(), dir);
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

/// `--hosts FILE --attach`: the running servers of the file's nodes,
/// found, checked healthy, and the units' settings weighed against the
/// faults (a refusal or a warning).
async fn attached(
    cfg: &RunConfig,
    path: &Path,
    dir: &Path,
    undo: &UndoLog,
) -> Result<Cluster, RunError> {
    let hosts = crate::runner::hosts::load_attached(path, cfg.system)
        .map_err(|e| err(format!("--hosts {}: {e}", path.display())))?;
    let mut spec = ClusterSpec::new(cfg.system.servers(), dir);
    spec.auth = cfg.auth.clone();
    let on = crate::cluster::attached::OnAttached {
        hosts: &hosts,
        undo,
        iptables: registry::cuts_hosts(&cfg.nemesis),
    };
    let c = Cluster::adopt(&spec, on).await.map_err(|e| {
        err(format!(
            "cannot attach to the {} servers of {}: {e}",
            cfg.system,
            path.display()
        ))
    })?;
    c.no_keys_under(&cfg.workload.lock_key)
        .await
        .map_err(|e| err(format!("--attach: {e}")))?;
    for w in crate::runner::attach::unit_checks(cfg, &c)? {
        crate::exit::say(&format!("warning: {w}"));
    }
    Ok(c)
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
        return postgres_storage::user_database_answers(url, &cfg.auth, t)
            .await
            .map_err(err);
    }
    let service = cfg.system.service();
    let probes = c.nodes().iter().map(|n| async move {
        match tokio::time::timeout(t, service.probe(&n.addr, n.role, &c.auth, t)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err((n.addr.clone(), e)),
            Err(_) => Err((n.addr.clone(), "no answer".into())),
        }
    });
    for r in futures::future::join_all(probes).await {
        if let Err((addr, e)) = r {
            use crate::client::redis_query::{AUTH_HINT, NEEDS_PASSWORD};
            if e.starts_with(NEEDS_PASSWORD) {
                return Err(err(format!("--endpoints: {addr} {e} (hint: {AUTH_HINT})")));
            }
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
    store: &Store,
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
            endpoints: worker_endpoints(cfg, cluster, l),
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
            auth_file: cfg.auth.file.clone(),
            storage_pg: match store {
                Store::Postgres(p) => Some(p.run_id.clone()),
                _ => None,
            },
            storage_my: match store {
                Store::Mariadb(m) => Some(m.run_id.clone()),
                _ => None,
            },
            client_faketime: cfg.client_faketime || registry::needs_client_faketime(&cfg.nemesis),
            max_rate: cfg.load.max_rate,
            wire_leases: crate::runner::wire_lease::applies(cfg),
        })
        .collect()
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

/// What one worker's clients connect to: the client endpoints, and with
/// `--endpoints` the servers found behind them when clients talk to the
/// servers themselves (every node of a Redis Cluster: its adapters' hello
/// lists them all).
fn worker_endpoints(
    cfg: &RunConfig,
    cluster: &Cluster,
    links: &proxies::WorkerLinks,
) -> Vec<String> {
    let mut eps = client_endpoints(cfg, cluster);
    if cfg.endpoints.is_some() && cfg.system.servers().client_role() == NodeRole::Server {
        for a in links.dial.keys() {
            if !eps.contains(a) {
                eps.push(a.clone());
            }
        }
    }
    eps
}

/// Every node with its role and the version it reports.
async fn node_summaries(cluster: &Cluster) -> Vec<NodeSummary> {
    let t = Duration::from_secs(2);
    let mut out = Vec::new();
    for n in cluster.nodes() {
        let version = cluster
            .system
            .version(&n.addr, n.role, &cluster.auth, t)
            .await;
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
