//! etcd lock client: a lease per acquire (grant with the requested ttl
//! rounded up to whole seconds; etcd may raise it to its minimum, and the
//! grant reports what the server answered), a background keep-alive every
//! third of the TTL, and the v3 Lock API bound to that lease. Fence = the
//! create revision of the lock's key. Release = unlock + revoke.
//!
//! The lease grant and every keep-alive are recorded (when the config has a
//! recorder) as `renew` ops with owner = lease id and `lease_ms` = the TTL
//! the server answered; a keep-alive answered with TTL 0 is a `fail`.

use super::{begin, finish, timed, ClientConfig, ClientError, Grant, LockClient};
use crate::auth::Auth;
use async_trait::async_trait;
use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper, LockOptions};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

/// A lease's keep-alive stream. After any error or timeout the stream is
/// dropped and the next refresh opens a new one: an answer to an abandoned
/// keep-alive must never be taken for the answer to a later one (that would
/// credit the lease with a refresh the server may never have seen).
struct KeepAlive {
    client: Client,
    id: i64,
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
}

type Keeper = Arc<Mutex<KeepAlive>>;

struct Lease {
    id: i64,
    lock_key: Vec<u8>,
    keeper: Keeper,
    task: JoinHandle<()>,
}

/// A lock client on an etcd cluster.
pub struct EtcdClient {
    client: Client,
    cfg: ClientConfig,
    held: HashMap<String, Lease>,
}

/// Map an etcd error: refusals by the server are definite; timeouts,
/// unavailability and transport errors may have taken effect.
pub fn classify(what: &str, e: etcd_client::Error) -> ClientError {
    use tonic::Code;
    let msg = format!("{what}: {e}");
    match &e {
        etcd_client::Error::GRpcStatus(s) => match s.code() {
            Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::Unimplemented
            | Code::Unauthenticated
            | Code::ResourceExhausted => ClientError::Definite(msg),
            _ => ClientError::Indeterminate(msg),
        },
        etcd_client::Error::InvalidArgs(_) | etcd_client::Error::InvalidUri(_) => {
            ClientError::Definite(msg)
        }
        _ => ClientError::Indeterminate(msg),
    }
}

/// Connect to the members in `cfg.endpoints` (dialled through `cfg.dial`).
/// `request_timeout` bounds every unary request on the channel (`None` for
/// clients whose calls may block longer, e.g. an election campaign; they
/// bound each call themselves).
///
/// Members that do not answer a status request within `cfg.op_timeout`
/// are left out of the client (all are kept if none answers). The channel
/// balances requests over its members, and a paused (SIGSTOPped) member
/// still completes TCP handshakes from its kernel backlog, so tonic counts
/// it as ready and sends it a share of the requests, each of which then
/// hangs until its timeout. Go's etcd client does not pick such a member:
/// gRPC-Go waits for the server's HTTP/2 preface before it uses a
/// connection. The check is made once, when the client connects.
pub async fn open(
    cfg: &ClientConfig,
    request_timeout: Option<Duration>,
) -> Result<Client, ClientError> {
    let all: Vec<String> = cfg
        .endpoints
        .iter()
        .map(|e| url(&cfg.dial_addr(e), &cfg.auth))
        .collect();
    let urls = answering(&all, &cfg.auth, cfg.op_timeout).await;
    let mut opts = options(&cfg.auth)
        .map_err(ClientError::Definite)?
        .with_connect_timeout(cfg.op_timeout);
    if let Some(t) = request_timeout {
        opts = opts.with_timeout(t);
    }
    tokio::time::timeout(
        cfg.op_timeout * 2,
        Client::connect(urls.clone(), Some(opts)),
    )
    .await
    .map_err(|_| ClientError::Definite(format!("connect to {}: timed out", urls.join(","))))?
    .map_err(|e| ClientError::Definite(format!("connect to {}: {e}", urls.join(","))))
}

/// The URL of the member at `addr`: `https://` with a `[tls]` table.
pub fn url(addr: &str, auth: &Auth) -> String {
    match auth.tls {
        Some(_) => format!("https://{addr}"),
        None => format!("http://{addr}"),
    }
}

/// Connect options carrying `auth`: TLS that trusts its CA, presents its
/// client certificate and verifies its `server_name` (not the dialled
/// address), and its `[user]` (etcd's user authentication).
pub fn options(auth: &Auth) -> Result<etcd_client::ConnectOptions, String> {
    let mut o = etcd_client::ConnectOptions::new();
    if let Some(t) = &auth.tls {
        let mut tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(&t.ca.pem))
            .domain_name(t.server_name.clone());
        if let Some((cert, key)) = &t.identity {
            tls = tls.identity(etcd_client::Identity::from_pem(&cert.pem, key.pem.expose()));
        }
        o = o.with_tls(tls);
    }
    if let Some(u) = &auth.user {
        o = o.with_user(u.name.clone(), u.password.expose());
    }
    Ok(o)
}

/// The members of `urls` that answer a status request within `t`, in
/// their order; all of `urls` if there is only one or none answers.
async fn answering(urls: &[String], auth: &Auth, t: Duration) -> Vec<String> {
    if urls.len() < 2 {
        return urls.to_vec();
    }
    let Ok(base) = options(auth) else {
        return urls.to_vec();
    };
    let probes = urls.iter().map(|u| {
        let base = base.clone();
        async move {
            let opts = base.with_connect_timeout(t).with_timeout(t);
            let up = tokio::time::timeout(t, async {
                let mut c = Client::connect([u.as_str()], Some(opts)).await.ok()?;
                c.status().await.ok()
            })
            .await;
            matches!(up, Ok(Some(_)))
        }
    });
    let up = futures::future::join_all(probes).await;
    let live: Vec<String> = urls
        .iter()
        .zip(up)
        .filter(|(_, up)| *up)
        .map(|(u, _)| u.clone())
        .collect();
    if live.is_empty() {
        urls.to_vec()
    } else {
        live
    }
}

fn not_found(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::NotFound)
}

impl EtcdClient {
    pub async fn connect(cfg: &ClientConfig) -> Result<EtcdClient, ClientError> {
        let client = open(cfg, Some(cfg.op_timeout)).await?;
        Ok(EtcdClient {
            client,
            cfg: cfg.clone(),
            held: HashMap::new(),
        })
    }

    /// Grant a lease of at least `ttl` (whole seconds); records it as a renew.
    async fn grant(&mut self, key: &str, ttl: Duration) -> Result<(i64, Duration), ClientError> {
        let secs = ttl.as_secs_f64().ceil().max(1.0) as i64;
        let mut op = begin(&self.cfg.recorder, key, None);
        let mut c = self.client.clone();
        let r = timed(self.cfg.op_timeout, "lease grant", async {
            c.lease_grant(secs, None)
                .await
                .map_err(|e| classify("lease grant", e))
        })
        .await;
        let (id, granted) = match r {
            Ok(resp) => (resp.id(), Duration::from_secs(resp.ttl().max(0) as u64)),
            Err(e) => return Err(e),
        };
        if let Some(op) = op.as_mut() {
            op.set_owner(&id.to_string());
        }
        finish(op, &Ok(granted));
        Ok((id, granted))
    }

    /// Start the keep-alive stream and its background task.
    async fn keep_alive(
        &mut self,
        key: &str,
        id: i64,
        ttl: Duration,
    ) -> Result<(Keeper, JoinHandle<()>), ClientError> {
        let mut c = self.client.clone();
        let pair = timed(self.cfg.op_timeout, "lease keep-alive", async {
            c.lease_keep_alive(id)
                .await
                .map_err(|e| classify("lease keep-alive", e))
        })
        .await?;
        let keeper: Keeper = Arc::new(Mutex::new(KeepAlive {
            client: self.client.clone(),
            id,
            stream: Some(pair),
        }));
        let (k2, cfg, key) = (keeper.clone(), self.cfg.clone(), key.to_string());
        let period = (ttl / 3).max(Duration::from_millis(100));
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let op = begin(&cfg.recorder, &key, Some(&id.to_string()));
                let r = refresh(&k2, cfg.op_timeout).await;
                finish(op, &r);
                if matches!(r, Ok(d) if d.is_zero()) {
                    break;
                }
            }
        });
        Ok((keeper, task))
    }

    /// Revoke a lease; `Ok(false)` if it was already gone.
    async fn revoke(&mut self, id: i64) -> Result<bool, ClientError> {
        let mut c = self.client.clone();
        timed(self.cfg.op_timeout, "lease revoke", async {
            match c.lease_revoke(id).await {
                Ok(_) => Ok(true),
                Err(e) if not_found(&e) => Ok(false),
                Err(e) => Err(classify("lease revoke", e)),
            }
        })
        .await
    }

    /// Lock `key` under lease `id` within `bound`; the lock key's name and
    /// create revision, or `None` if not granted in time.
    async fn lock(
        &mut self,
        key: &str,
        id: i64,
        bound: Duration,
    ) -> Result<Option<(Vec<u8>, u64)>, ClientError> {
        let mut c = self.client.clone();
        // The wait ends early when the worker winds down (as if it ran out).
        let locked =
            super::wind_down::within(bound, c.lock(key, Some(LockOptions::new().with_lease(id))))
                .await;
        let lock_key = match locked {
            None => return Ok(None),
            Some(Err(e)) => return Err(classify("lock", e)),
            Some(Ok(resp)) => resp.key().to_vec(),
        };
        let lk = lock_key.clone();
        let rev = timed(self.cfg.op_timeout, "get lock key", async {
            let r = c
                .get(lk, None)
                .await
                .map_err(|e| classify("get lock key", e))?;
            Ok(r.kvs().first().map(|kv| kv.create_revision() as u64))
        })
        .await?;
        match rev {
            Some(rev) => Ok(Some((lock_key, rev))),
            // The key is gone again: the lease expired right after the grant.
            None => Ok(None),
        }
    }
}

/// One keep-alive: the TTL the server answered. Uses the open stream, or
/// opens a fresh one when the last refresh on it failed or timed out.
async fn refresh(keeper: &Keeper, t: Duration) -> Result<Duration, ClientError> {
    let mut g = keeper.lock().await;
    let ka = &mut *g;
    // Taken out for the duration of the call: a timeout or error leaves it
    // `None`, so a late answer on this stream is never read.
    let mut stream = ka.stream.take();
    let r = timed(t, "keep-alive", async {
        if stream.is_none() {
            let mut c = ka.client.clone();
            stream = Some(
                c.lease_keep_alive(ka.id)
                    .await
                    .map_err(|e| classify("keep-alive", e))?,
            );
        }
        let (k, s) = stream.as_mut().expect("opened above");
        k.keep_alive()
            .await
            .map_err(|e| classify("keep-alive", e))?;
        match s.message().await.map_err(|e| classify("keep-alive", e))? {
            Some(resp) => Ok(Duration::from_secs(resp.ttl().max(0) as u64)),
            None => Err(ClientError::Indeterminate(
                "keep-alive: stream closed".into(),
            )),
        }
    })
    .await;
    if r.is_ok() {
        ka.stream = stream;
    }
    r
}

#[async_trait]
impl LockClient for EtcdClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let (id, granted) = self.grant(key, ttl).await?;
        let (keeper, task) = match self.keep_alive(key, id, granted).await {
            Ok(k) => k,
            Err(e) => {
                let _ = self.revoke(id).await;
                return Err(e);
            }
        };
        let bound = wait.max(self.cfg.op_timeout.min(Duration::from_millis(500)));
        let r = self.lock(key, id, bound).await;
        match r {
            Ok(Some((lock_key, rev))) => {
                let owner = id.to_string();
                if let Some(old) = self.held.insert(
                    owner.clone(),
                    Lease {
                        id,
                        lock_key,
                        keeper,
                        task,
                    },
                ) {
                    old.task.abort();
                }
                Ok(Some(Grant {
                    key: key.to_string(),
                    owner,
                    fence: Some(rev),
                    lease: granted,
                    acquire_sets_ttl: false,
                }))
            }
            other => {
                task.abort();
                // Not granted (or unknown): give the lease back, which also
                // drops any lock key it holds or waits with.
                match self.revoke(id).await {
                    Ok(_) => other.map(|_| None),
                    Err(e) => Err(other.err().unwrap_or(e)),
                }
            }
        }
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let Some(l) = self.held.get(&grant.owner) else {
            return Ok(false);
        };
        Ok(!refresh(&l.keeper, self.cfg.op_timeout).await?.is_zero())
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let Some(l) = self.held.remove(&grant.owner) else {
            return Ok(false);
        };
        l.task.abort();
        let mut c = self.client.clone();
        let lk = l.lock_key.clone();
        timed(self.cfg.op_timeout, "unlock", async {
            c.unlock(lk)
                .await
                .map(drop)
                .map_err(|e| classify("unlock", e))
        })
        .await?;
        self.revoke(l.id).await
    }
}

impl Drop for EtcdClient {
    fn drop(&mut self) {
        for l in self.held.values() {
            l.task.abort();
        }
    }
}
