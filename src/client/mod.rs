//! Lock clients: one small trait, one file per lock service.
//!
//! A client acquires a named lock with a requested ttl and gets back a
//! [`Grant`] saying what the server actually granted: the lease length, the
//! owner id (lease, session or token id), the fencing token where the service
//! has one, and whether the acquire itself started the lease. Background
//! lease refreshes (etcd keep-alives, ZooKeeper's post-grant `sync`) are
//! recorded by the client itself through a [`crate::history::Sink`] under
//! the worker's lease process (e.g. `"3-lease"`), as `renew` ops.

use async_trait::async_trait;
use std::time::Duration;

/// What the lock service granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub key: String,
    /// Lease, session or token id; grants are compared by owner.
    pub owner: String,
    /// Fencing token, if the service has one (not Redlock).
    pub fence: Option<u64>,
    /// The lease length the server actually granted (not the requested one).
    pub lease: Duration,
    /// True when the acquire itself started the lease (Redis `SET .. PX`);
    /// false when the lease started earlier (etcd lease grant, ZK session).
    pub acquire_sets_ttl: bool,
}

impl Grant {
    /// A fenced grant whose lease the acquire itself set to `ttl` (the
    /// Redis lock script's `SET .. PX`, on one server or a cluster).
    pub fn set_with_ttl(key: &str, owner: String, fence: u64, ttl: Duration) -> Grant {
        Grant {
            key: key.to_string(),
            owner,
            fence: Some(fence),
            lease: ttl,
            acquire_sets_ttl: true,
        }
    }

    /// A fenced grant held as long as the holder's database session (a
    /// session lease, `lease_ms: 0`: PostgreSQL's advisory locks,
    /// MariaDB's named locks); the session began before the acquire.
    pub fn session(key: &str, owner: String, fence: u64) -> Grant {
        Grant {
            key: key.to_string(),
            owner,
            fence: Some(fence),
            lease: Duration::ZERO,
            acquire_sets_ttl: false,
        }
    }
}

/// Why an operation did not complete normally.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The operation certainly did not take effect (recorded as `fail`).
    #[error("{0}")]
    Definite(String),
    /// It may or may not have taken effect: a timeout, a lost connection
    /// after the request was written (recorded as `info`).
    #[error("{0}")]
    Indeterminate(String),
}

impl ClientError {
    pub fn is_definite(&self) -> bool {
        matches!(self, ClientError::Definite(_))
    }
}

/// One lock service client. Implementations live in one file per system.
#[async_trait]
pub trait LockClient: Send {
    /// Try to acquire `key` with the requested ttl, waiting at most `wait`
    /// for a holder to go away. `Ok(None)`: not granted (the lock is held).
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError>;

    /// Extend the grant's lease. `Ok(false)`: the lease is gone.
    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError>;

    /// Release the grant. `Ok(false)`: it was no longer held by us.
    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError>;

    /// Whether the library renews its leases by itself, all of them, and
    /// reports every renewal (an adapter whose `hello_ok` says
    /// `renewals = "all"`): the worker then sends no renewals of its own.
    fn renews_by_itself(&self) -> bool {
        false
    }

    /// Whether [`LockClient::probe`] proves leases. lockjaw's own clients
    /// record their lease proofs themselves (etcd keep-alives, ZooKeeper's
    /// `sync`); client adapters are asked to probe.
    fn can_probe(&self) -> bool {
        false
    }

    /// Prove the grant's lease with one server round trip that the caller
    /// times: `Ok(Some(d))`, the lease certainly lasts `d` from the send;
    /// `Ok(None)`, it is gone.
    async fn probe(&mut self, _grant: &Grant) -> Result<Option<Duration>, ClientError> {
        Err(ClientError::Definite(
            "this client does not probe its leases".into(),
        ))
    }
}

pub mod adapter;
pub mod db_names;
pub mod etcd;
pub mod fence_failed;
pub mod mariadb;
pub mod mariadb_conn;
pub mod pace;
pub mod postgres;
pub mod postgres_conn;
pub mod postgres_tls;
pub mod redis;
pub mod redis_cluster;
pub mod redlock;
pub mod zookeeper;

pub mod election;
pub mod redis_query;
pub mod redis_slots;
pub mod redis_target;
pub mod register;
pub mod tls;
pub mod tls_bridge;
pub mod wind_down;

use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Between two tries of a polling acquire: sleep `poll`, or what is left
/// until `deadline` if that is less; `false`, without sleeping, once the
/// deadline has passed or the worker winds down ([`wind_down`]; the
/// acquire then ends unsuccessful). With
/// `--max-rate` the retry also waits for the worker's next slot
/// ([`pace`]), and is not made when that slot lies after the deadline.
pub(crate) async fn wait_to_retry(deadline: std::time::Instant, poll: Duration) -> bool {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    if left.is_zero() || wind_down::begun() {
        return false;
    }
    tokio::time::sleep(left.min(poll)).await;
    pace::pace_before(deadline).await
}

/// An error's message followed by those of its causes that it does not
/// already contain (a driver's "error connecting" alone hides whether the
/// connection was refused or the host unknown).
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(&format!(": {more}"));
        }
        src = s.source();
    }
    text
}

/// The Redis master name Sentinel monitors (lockjaw's own Sentinel
/// clusters name it so; `--sentinel-master` names another).
pub const SENTINEL_MASTER: &str = "lockjaw";

/// How a client reaches its lock service and records lease refreshes.
#[derive(Clone)]
pub struct ClientConfig {
    /// Where to connect: every server (redis: one; redlock: N independent
    /// nodes; etcd, zookeeper: the members) or, for sentinel, the sentinels.
    /// May be proxy addresses.
    pub endpoints: Vec<String>,
    /// Announced address → address to dial (e.g. this worker's proxy). A
    /// Sentinel names the primary by the address it announces; the client
    /// dials what this map says (or the announced address itself).
    pub dial: HashMap<String, String>,
    /// Per-request timeout; a request that times out is indeterminate.
    pub op_timeout: Duration,
    /// Records background lease refreshes (etcd lease grant and keep-alives,
    /// ZooKeeper's post-grant `sync`) as `renew` ops, when set.
    pub recorder: Option<LeaseRecorder>,
    /// The Redis master name the sentinels monitor.
    pub sentinel_master: String,
    /// Redlock's per-node timeout; default ttl / 10, within [5 ms, 200 ms].
    pub redlock_node_timeout: Option<Duration>,
    /// The run's id: names what a client creates in a database it shares
    /// (PostgreSQL's `lockjaw_<run-id>_fence`).
    pub run_id: String,
    /// `--postgres-url`: user, password and database of the user's own
    /// PostgreSQL (host and port come from the endpoints).
    pub postgres_url: Option<String>,
    /// `--auth`: TLS and credentials (none by default).
    pub auth: Arc<crate::auth::Auth>,
}

impl ClientConfig {
    pub fn new(endpoints: Vec<String>) -> ClientConfig {
        ClientConfig {
            endpoints,
            dial: HashMap::new(),
            op_timeout: Duration::from_secs(2),
            recorder: None,
            sentinel_master: SENTINEL_MASTER.to_string(),
            redlock_node_timeout: None,
            run_id: String::new(),
            postgres_url: None,
            auth: Arc::default(),
        }
    }

    /// The address to dial for an announced one.
    pub fn dial_addr(&self, announced: &str) -> String {
        self.dial
            .get(announced)
            .cloned()
            .unwrap_or_else(|| announced.to_string())
    }
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("endpoints", &self.endpoints)
            .field("dial", &self.dial)
            .field("op_timeout", &self.op_timeout)
            .field("recording", &self.recorder.is_some())
            .field("auth", &self.auth.summary())
            .finish()
    }
}

/// Records a client's background lease refreshes as `renew` ops under a
/// logical process of their own (e.g. `"3-lease"`), with `owner` = the
/// lease or session id and `lease_ms` = the TTL the server answered. The
/// invoke time is taken before the request is written, the completion time
/// after the reply is read. After an `info` (ambiguous outcome) the process
/// may not invoke again, so later refreshes go under `"<name>.1"`, `.2`, ...
#[derive(Clone)]
pub struct LeaseRecorder {
    pub sink: Arc<dyn Sink>,
    pub process: Process,
    pub clock: RunClock,
    infos: Arc<AtomicU64>,
}

/// One renew in flight: its invocation time is taken when it begins; both
/// the invoke and the completion are recorded when it completes, and only
/// if the owner (lease or session id) is known by then.
pub(crate) struct RenewOp {
    rec: LeaseRecorder,
    time: u64,
    key: String,
    owner: Option<String>,
}

impl LeaseRecorder {
    pub fn new(sink: Arc<dyn Sink>, process: Process, clock: RunClock) -> LeaseRecorder {
        LeaseRecorder {
            sink,
            process,
            clock,
            infos: Arc::new(AtomicU64::new(0)),
        }
    }

    fn current_process(&self) -> Process {
        match self.infos.load(Ordering::SeqCst) {
            0 => self.process.clone(),
            n => Process::Named(format!("{}.{n}", self.process)),
        }
    }

    /// Take the invocation time of a renew now, before its request is written.
    pub(crate) fn begin(&self, key: &str, owner: Option<&str>) -> RenewOp {
        RenewOp {
            rec: self.clone(),
            time: self.clock.now(),
            key: key.to_string(),
            owner: owner.map(str::to_string),
        }
    }
}

/// Begin a renew on an optional recorder.
pub(crate) fn begin(
    rec: &Option<LeaseRecorder>,
    key: &str,
    owner: Option<&str>,
) -> Option<RenewOp> {
    rec.as_ref().map(|r| r.begin(key, owner))
}

impl RenewOp {
    /// The owner, once the reply names it (etcd's lease grant).
    pub(crate) fn set_owner(&mut self, owner: &str) {
        self.owner = Some(owner.to_string());
    }

    fn complete(self, kind: OpType, lease: Option<Duration>, error: Option<String>) {
        let Some(owner) = self.owner else {
            return;
        };
        let process = self.rec.current_process();
        let mut inv = Op::new(self.time, process.clone(), OpType::Invoke, "renew");
        inv.key = Some(self.key.clone());
        inv.owner = Some(owner.clone());
        let mut op = Op::new(self.rec.clock.now(), process, kind, "renew");
        op.key = Some(self.key);
        op.owner = Some(owner);
        op.lease_ms = lease.map(|d| d.as_millis() as u64);
        op.error = error;
        if kind == OpType::Info {
            self.rec.infos.fetch_add(1, Ordering::SeqCst);
        }
        self.rec.sink.record(inv);
        self.rec.sink.record(op);
    }

    /// Complete from a client result: a TTL (zero = the lease is gone, a
    /// fail), a definite error (fail) or an ambiguous one (info).
    pub(crate) fn finish(self, r: &Result<Duration, ClientError>) {
        match r {
            Ok(d) if d.is_zero() => {
                self.complete(OpType::Fail, None, Some("lease gone (TTL 0)".into()))
            }
            Ok(d) => self.complete(OpType::Ok, Some(*d), None),
            Err(ClientError::Definite(e)) => self.complete(OpType::Fail, None, Some(e.clone())),
            Err(ClientError::Indeterminate(e)) => {
                self.complete(OpType::Info, None, Some(e.clone()))
            }
        }
    }
}

/// Finish an optional renew.
pub(crate) fn finish(op: Option<RenewOp>, r: &Result<Duration, ClientError>) {
    if let Some(op) = op {
        op.finish(r);
    }
}

/// A random id for tokens and client names.
pub(crate) fn random_id() -> String {
    use rand::Rng;
    format!("{:016x}", rand::thread_rng().gen::<u64>())
}

/// Run `fut` with a deadline; a timeout is indeterminate.
pub(crate) async fn timed<T>(
    t: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, ClientError> {
    tokio::time::timeout(t, fut).await.unwrap_or_else(|_| {
        Err(ClientError::Indeterminate(format!(
            "{what}: no answer within {t:?}"
        )))
    })
}
