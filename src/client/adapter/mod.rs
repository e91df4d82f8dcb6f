//! Client adapters: a lock library in any language behind newline-delimited
//! JSON on its stdin and stdout (protocol version 1, `docs/adapters.md`).
//!
//! [`AdapterClient`] is a [`LockClient`] that runs the adapter as a child of
//! the worker, in the worker's process group (so pausing or killing the
//! worker's group reaches the library) with a parent-death signal. Each
//! request carries an id; a reader task routes replies to their requests,
//! records the adapter's `renewed` events as `renew` ops over the interval
//! the adapter measured, and its `lost` events as `lost` ops. A request
//! without a reply within the op timeout is `info`; after any `info` the
//! adapter is replaced by a fresh process, since the old one may still hold
//! what the worker gave up on. A protocol error (a line that is not a
//! message, a reply to an id never sent, a grant without its lease) is
//! fatal: the worker stops with an error naming the adapter and the line.
//!
//! [`query`] runs an adapter just for its handshake answer (before a run,
//! and for `compare`'s table).
//!
//! This file is the client (requests and what their replies mean); the
//! child process and its handshake are in `process`, the reader task that
//! routes replies in `route`, the events it records in `events`, the
//! messages themselves in `wire`.

mod events;
pub mod helpers;
mod process;
mod route;
pub mod version;
mod wire;

pub use events::LOST;
pub use process::{query, query_within};
pub use wire::{
    excerpt, resolve, Credentials, FromAdapter, Hello, LeaseStart, Offer, Promises, Renewals,
    MAX_LEASE_MS, MAX_LINE,
};

use super::{ClientError, Grant, LeaseRecorder, LockClient};
use async_trait::async_trait;
use process::{exit_status, open, send_line, Live};
use route::{Reply, Slot};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long an adapter may take to answer the handshake.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// An adapter's answer to the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Offer(Offer),
    Unsupported(String),
}

/// Environment variables an adapter starts with (`None`: removed), from
/// its `--client` spec's pin ([`version::env`]).
pub type Env = Vec<(String, Option<String>)>;

/// What a fatal protocol error does (the worker: report and exit).
pub type Fatal = Arc<dyn Fn(String) + Send + Sync>;

/// How a worker runs its adapter.
#[derive(Clone)]
pub struct AdapterConfig {
    pub path: PathBuf,
    /// Its pinned version's variables ([`Env`]).
    pub env: Env,
    pub hello: Hello,
    pub op_timeout: Duration,
    /// What the handshake before the run answered; a replacement must
    /// answer the same.
    pub offer: Offer,
    /// Records `renewed` and `lost` events under its process.
    pub events: Option<LeaseRecorder>,
    /// Record `renewed` events as `renewed` ops (a report the checkers do
    /// not credit: the wire is the lease source), not as `renew` ops.
    pub reported_only: bool,
    pub fatal: Fatal,
}

/// What the reader task needs.
struct Ctx {
    name: String,
    key: String,
    origin: u64,
    events: Option<LeaseRecorder>,
    /// [`AdapterConfig::reported_only`].
    reported_only: bool,
    fatal: Fatal,
    /// Every owner an acquire of this client was granted (by any of its
    /// processes): a `renewed` event must name one of them.
    granted: Mutex<HashSet<String>>,
}

impl Ctx {
    fn fatal(&self, line_no: u64, what: String) {
        (self.fatal)(format!("{}: stdout line {line_no}: {what}", self.name));
    }
}

/// A lock client that is an adapter process (see the module comment).
pub struct AdapterClient {
    cfg: AdapterConfig,
    ctx: Arc<Ctx>,
    live: Option<Live>,
    next_id: u64,
}

impl AdapterClient {
    /// Start the adapter and complete its handshake. An error (it does not
    /// start, exits, answers badly or differently from before the run) is
    /// fatal for the worker.
    pub async fn start(cfg: AdapterConfig) -> Result<AdapterClient, String> {
        let ctx = Arc::new(Ctx {
            name: format!(
                "adapter {} (worker {})",
                cfg.path.display(),
                cfg.hello.worker
            ),
            key: cfg.hello.key.clone(),
            origin: cfg.hello.clock_origin_ns,
            events: cfg.events.clone(),
            reported_only: cfg.reported_only,
            fatal: cfg.fatal.clone(),
            granted: Mutex::new(HashSet::new()),
        });
        let mut c = AdapterClient {
            cfg,
            ctx,
            live: None,
            next_id: 1,
        };
        c.launch().await?;
        Ok(c)
    }

    /// The running adapter process, if any.
    pub fn pid(&self) -> Option<u32> {
        self.live.as_ref().and_then(|l| l.child.id())
    }

    async fn launch(&mut self) -> Result<(), String> {
        let (live, answer) = open(
            &self.cfg.path,
            &self.cfg.env,
            &self.ctx,
            &self.cfg.hello,
            self.next_id,
            HELLO_TIMEOUT,
        )
        .await?;
        let name = &self.ctx.name;
        match answer {
            Answer::Offer(o) if o == self.cfg.offer => {}
            Answer::Offer(o) => {
                return Err(format!(
                    "{name}: answered the handshake differently from before the run \
                     ({o:?}, before: {:?})",
                    self.cfg.offer
                ))
            }
            Answer::Unsupported(why) => {
                return Err(format!(
                    "{name}: declares --system {} unsupported: {why}",
                    self.cfg.hello.system
                ))
            }
        }
        self.live = Some(live);
        Ok(())
    }

    /// Kill the adapter (only it: not the worker's group) and forget it;
    /// the next request starts a fresh one.
    async fn replace(&mut self, why: &str) {
        if let Some(mut l) = self.live.take() {
            eprintln!(
                "{}: replacing the adapter process after {why}",
                self.ctx.name
            );
            let _ = l.child.start_kill();
            let _ = l.child.wait().await;
        }
    }

    /// Send one request and wait for its reply.
    async fn call(
        &mut self,
        kind: &str,
        key: &str,
        ttl: Option<Duration>,
        wait: Option<Duration>,
        owner: Option<&str>,
    ) -> Result<(Map<String, Value>, String), ClientError> {
        if self.live.is_none() {
            if let Err(e) = self.launch().await {
                (self.cfg.fatal)(e.clone());
                return Err(ClientError::Indeterminate(e));
            }
        }
        let live = self.live.as_mut().expect("launched above");
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = oneshot::channel();
        {
            let mut c = live.conn.lock().unwrap_or_else(|e| e.into_inner());
            let acquire = kind == "acquire";
            c.slots.insert(id, Slot::Waiting { tx, acquire });
            c.last = Some(id);
        }
        let req = wire::Request {
            id,
            kind,
            key,
            ttl_ms: ttl.map(|d| d.as_millis() as u64),
            wait_ms: wait.map(|d| d.as_millis() as u64),
            owner,
        };
        if let Err(e) = send_line(&mut live.stdin, &req).await {
            self.replace("a failed write").await;
            return Err(ClientError::Indeterminate(format!(
                "cannot send {kind} to the adapter: {e}"
            )));
        }
        let reply = match tokio::time::timeout(self.cfg.op_timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Reply::Gone,
            Err(_) => {
                live.conn
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .slots
                    .insert(id, Slot::TimedOut);
                self.replace("a request without a reply").await;
                return Err(ClientError::Indeterminate(format!(
                    "{kind}: no reply from the adapter within {:?}",
                    self.cfg.op_timeout
                )));
            }
        };
        match reply {
            Reply::Ok { fields, line } => Ok((fields, line)),
            Reply::Fail(e) => Err(ClientError::Definite(e)),
            Reply::Info(e) => {
                self.replace("an info reply").await;
                Err(ClientError::Indeterminate(e))
            }
            Reply::Gone => {
                let status = match self.live.as_mut() {
                    Some(l) => exit_status(&mut l.child).await,
                    None => "gone".into(),
                };
                self.replace("its exit").await;
                Err(ClientError::Indeterminate(format!(
                    "{kind}: the adapter exited before replying ({status})"
                )))
            }
        }
    }

    /// A reply lacking a field the checks need: fatal.
    fn refuse(&self, kind: &str, line: &str, why: &str) -> ClientError {
        let msg = format!(
            "{}: its reply to {kind} {line} is refused: {why}",
            self.ctx.name
        );
        (self.cfg.fatal)(msg.clone());
        ClientError::Indeterminate(msg)
    }
}

/// The `owner` of a reply: a non-empty string or a number.
fn owner_of(fields: &Map<String, Value>) -> Option<String> {
    match fields.get("owner") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

impl Drop for AdapterClient {
    fn drop(&mut self) {
        if let Some(l) = self.live.as_mut() {
            let _ = l.child.start_kill();
        }
    }
}

#[async_trait]
impl LockClient for AdapterClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let (fields, line) = match self.call("acquire", key, Some(ttl), Some(wait), None).await {
            Ok(r) => r,
            Err(ClientError::Definite(e)) if e == "held" || e.is_empty() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(owner) = owner_of(&fields) else {
            return Err(self.refuse(
                "acquire",
                &line,
                "no `owner` (the lease's identity: token, session or lease id)",
            ));
        };
        let Some(lease_ms) = fields.get("lease_ms").and_then(Value::as_u64) else {
            return Err(self.refuse(
                "acquire",
                &line,
                "no `lease_ms`: a leased grant without its length would be judged as a \
                 lock without a lease, and every takeover after expiry flagged",
            ));
        };
        if let Some(why) = wire::bad_lease(lease_ms) {
            return Err(self.refuse("acquire", &line, &why));
        }
        if lease_ms == 0 && self.cfg.offer.lease == LeaseStart::Acquire {
            return Err(self.refuse(
                "acquire",
                &line,
                "`lease_ms` 0, though its handshake said the acquire starts the lease: \
                 a lease that ended as it was granted (hint: report the ttl the server set)",
            ));
        }
        let fence = fields.get("fence").and_then(Value::as_u64);
        if self.cfg.offer.fence && fence.is_none() {
            return Err(self.refuse(
                "acquire",
                &line,
                "no `fence`, though its handshake said every grant carries one",
            ));
        }
        Ok(Some(Grant {
            key: key.to_string(),
            owner,
            fence: fence.filter(|_| self.cfg.offer.fence),
            lease: Duration::from_millis(lease_ms),
            acquire_sets_ttl: self.cfg.offer.lease == LeaseStart::Acquire,
        }))
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        match self
            .call("renew", &grant.key, None, None, Some(&grant.owner))
            .await
        {
            Ok(_) => Ok(true),
            Err(ClientError::Definite(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        match self
            .call("release", &grant.key, None, None, Some(&grant.owner))
            .await
        {
            Ok(_) => Ok(true),
            Err(ClientError::Definite(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn renews_by_itself(&self) -> bool {
        self.cfg.offer.renewals == Renewals::All
    }

    fn can_probe(&self) -> bool {
        true
    }

    async fn probe(&mut self, grant: &Grant) -> Result<Option<Duration>, ClientError> {
        match self
            .call("probe", &grant.key, None, None, Some(&grant.owner))
            .await
        {
            Ok((fields, line)) => match fields.get("lease_ms").and_then(Value::as_u64) {
                Some(ms) if ms > MAX_LEASE_MS => {
                    Err(self.refuse("probe", &line, &wire::bad_lease(ms).unwrap_or_default()))
                }
                Some(ms) => Ok(Some(Duration::from_millis(ms))),
                None => Err(self.refuse(
                    "probe",
                    &line,
                    "no `lease_ms` (how long the lease certainly lasts from the send)",
                )),
            },
            Err(ClientError::Definite(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
