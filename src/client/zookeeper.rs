//! ZooKeeper lock client: the standard recipe. An ephemeral sequential node
//! under `/locks/<key>`; the lowest sequence holds the lock; the others
//! watch their predecessor. The lease is the session: its timeout as the
//! server negotiated it (clamped to [2, 20] × tickTime) is reported as the
//! grant's lease; owner = session id; fence = the czxid of our node. Right
//! after a grant one `sync` is made and recorded as a lease refresh, so the
//! lease end is known even when the acquire waited long in the queue.
//!
//! Sessions are detached: dropping the client without releasing leaves its
//! nodes until the session times out, as a crashed client would.

use super::{begin, finish, timed, ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use zookeeper_client as zk;

struct Session {
    client: zk::Client,
    _bridge: Bridged,
    requested: Duration,
    timeout: Duration,
    id: String,
}

/// A lock client on a ZooKeeper ensemble.
pub struct ZkClient {
    cfg: ClientConfig,
    connect: String,
    session: Option<Session>,
    /// Lock key → (our node's path, its czxid).
    held: HashMap<String, (String, u64)>,
}

/// Map a ZooKeeper error: answers from the server are definite; a lost
/// connection or timeout may have taken effect.
pub fn classify(what: &str, e: zk::Error) -> ClientError {
    use zk::Error as E;
    let msg = format!("{what}: {e}");
    match e {
        E::NoNode
        | E::NodeExists
        | E::BadVersion
        | E::NoAuth
        | E::BadArguments(_)
        | E::SessionExpired
        | E::NotEmpty
        | E::InvalidAcl
        | E::AuthFailed
        | E::NoChildrenForEphemerals
        | E::Unimplemented
        | E::ClientClosed
        | E::NoHosts => ClientError::Definite(msg),
        _ => ClientError::Indeterminate(msg),
    }
}

/// The directory of a lock key (`/` in keys escaped, so keys never nest).
pub fn lock_dir(key: &str) -> String {
    format!("/locks/{}", key.replace('%', "%25").replace('/', "%2F"))
}

fn is_terminal(s: zk::SessionState) -> bool {
    matches!(
        s,
        zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
    )
}

impl ZkClient {
    pub async fn connect(cfg: &ClientConfig) -> Result<ZkClient, ClientError> {
        let connect = connect_string(cfg);
        let mut c = ZkClient {
            cfg: cfg.clone(),
            connect,
            session: None,
            held: HashMap::new(),
        };
        c.session(Duration::from_secs(2)).await?;
        Ok(c)
    }

    /// A live session with the requested timeout (a new one if the old one
    /// expired or was asked with another timeout).
    async fn session(&mut self, ttl: Duration) -> Result<&Session, ClientError> {
        let fresh = match &self.session {
            Some(s) => s.requested == ttl && !is_terminal(s.client.state()),
            None => false,
        };
        if !fresh {
            self.held.clear();
            let (client, bridge) =
                open_session(&self.connect, ttl, self.cfg.op_timeout, &self.cfg.auth).await?;
            self.session = Some(Session {
                timeout: client.session_timeout(),
                id: client.session_id().to_string(),
                client,
                _bridge: bridge,
                requested: ttl,
            });
        }
        Ok(self.session.as_ref().expect("just set"))
    }

    /// The negotiated session timeout of the current session.
    pub fn session_timeout(&self) -> Option<Duration> {
        self.session.as_ref().map(|s| s.timeout)
    }
}

/// The connection string: every endpoint, dialled through `cfg.dial`.
pub fn connect_string(cfg: &ClientConfig) -> String {
    cfg.endpoints
        .iter()
        .map(|e| cfg.dial_addr(e))
        .collect::<Vec<_>>()
        .join(",")
}

/// The bridge a session over TLS dials through (kept as long as the
/// session's client is used); `None` without `[tls]`.
pub type Bridged = Option<std::sync::Arc<super::tls_bridge::Bridge>>;

/// A new detached session (dropping the client leaves it to time out, as
/// a crashed client would) asking for `ttl` as its timeout; with
/// `--auth`'s `[zookeeper]` table it authenticates with the `digest`
/// scheme, and with its `[tls]` table it speaks TLS through a loopback
/// [`super::tls_bridge::Bridge`] (the client library's plain TCP wrapped
/// in lockjaw's TLS, verifying `server_name`), returned with it.
pub async fn open_session(
    connect: &str,
    ttl: Duration,
    t: Duration,
    auth: &crate::auth::Auth,
) -> Result<(zk::Client, Bridged), ClientError> {
    let mut connector = zk::Client::connector()
        .with_session_timeout(ttl)
        .with_connection_timeout(t)
        .with_detached();
    if let Some(d) = &auth.zookeeper_digest {
        connector = connector.with_auth("digest", d.expose().as_bytes());
    }
    let bridge = match &auth.tls {
        Some(tls) => {
            let targets: Vec<String> = connect.split(',').map(str::to_string).collect();
            let b = super::tls_bridge::Bridge::open(&targets, tls)
                .await
                .map_err(|e| ClientError::Definite(format!("TLS bridge to {connect}: {e}")))?;
            Some(std::sync::Arc::new(b))
        }
        None => None,
    };
    let dialled = match &bridge {
        Some(b) => b.local.join(","),
        None => connect.to_string(),
    };
    let tls_error = || {
        bridge
            .as_ref()
            .and_then(|b| b.last_error())
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    };
    let fut = connector.connect(&dialled);
    let client = tokio::time::timeout(t * 2, fut)
        .await
        .map_err(|_| {
            ClientError::Definite(format!("connect to {connect}: timed out{}", tls_error()))
        })?
        .map_err(|e| ClientError::Definite(format!("connect to {connect}: {e}{}", tls_error())))?;
    Ok((client, bridge))
}

/// The ACL of the nodes lockjaw creates: with a `[zookeeper]` digest,
/// only that identity's (`creator_all`: a server that guards the lock
/// path with the digest scheme keeps its lock nodes guarded too); else
/// anyone's.
pub fn acls(auth: &crate::auth::Auth) -> zk::Acls<'static> {
    if auth.zookeeper_digest.is_some() {
        zk::Acls::creator_all()
    } else {
        zk::Acls::anyone_all()
    }
}

/// Create our ephemeral sequential node `<dir>/<prefix><seq>` holding
/// `data` and wait until it is the lowest of the `prefix` nodes; `None` if
/// `wait` ran out (our node is deleted again). The lock and the
/// leader-election recipes share it; `acls` guard the nodes it creates.
pub(crate) async fn enqueue(
    c: &zk::Client,
    acls: zk::Acls<'static>,
    dir: &str,
    prefix: &str,
    data: &[u8],
    t: Duration,
    wait: Duration,
) -> Result<Option<(String, u64)>, ClientError> {
    let persistent = zk::CreateMode::Persistent.with_acls(acls);
    timed(t, "mkdir", async {
        c.mkdir(dir, &persistent)
            .await
            .map_err(|e| classify("mkdir", e))
    })
    .await?;
    let eph = zk::CreateMode::EphemeralSequential.with_acls(acls);
    let node_prefix = format!("{dir}/{prefix}");
    let (stat, seq) = timed(t, "create", async {
        c.create(&node_prefix, data, &eph)
            .await
            .map_err(|e| classify("create", e))
    })
    .await?;
    let me = format!("{prefix}{seq}");
    let path = format!("{dir}/{me}");
    let deadline = Instant::now() + wait;
    loop {
        let mut kids = timed(t, "list", async {
            c.list_children(dir).await.map_err(|e| classify("list", e))
        })
        .await?;
        kids.retain(|k| k.starts_with(prefix));
        kids.sort_by_key(|k| k[prefix.len()..].parse::<i64>().unwrap_or(i64::MAX));
        let Some(pos) = kids.iter().position(|k| *k == me) else {
            return Err(ClientError::Definite(format!(
                "our node {path} is gone (session expired?)"
            )));
        };
        if pos == 0 {
            return Ok(Some((path, stat.czxid as u64)));
        }
        let pred = format!("{dir}/{}", kids[pos - 1]);
        let (exists, watcher) = timed(t, "watch", async {
            c.check_and_watch_stat(&pred)
                .await
                .map_err(|e| classify("watch", e))
        })
        .await?;
        if exists.is_none() {
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        // The wait ends early when the worker winds down (as if it ran out).
        let changed = super::wind_down::within(left, watcher.changed());
        if left.is_zero() || changed.await.is_none() {
            timed(t, "delete", async {
                c.delete(&path, None)
                    .await
                    .map_err(|e| classify("delete", e))
            })
            .await?;
            return Ok(None);
        }
    }
}

#[async_trait]
impl LockClient for ZkClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let t = self.cfg.op_timeout;
        let rec = self.cfg.recorder.clone();
        let acls = acls(&self.cfg.auth);
        let s = self.session(ttl).await?;
        let queued = enqueue(&s.client, acls, &lock_dir(key), "lock-", b"", t, wait).await;
        let (path, czxid) = match queued {
            Ok(Some(won)) => won,
            Ok(None) => return Ok(None),
            Err(e) => {
                // Our node may be left in the queue (created, then a later
                // request failed): let it die with the session rather than
                // reach the head and block the lock while we keep pinging.
                self.held.clear();
                self.session = None;
                return Err(e);
            }
        };
        let s = self.session.as_ref().expect("the session enqueue used");
        // One more request right after the grant: a refresh of the session
        // whose invocation time bounds the lease end from below.
        let op = begin(&rec, key, Some(&s.id));
        let r = timed(t, "sync", async {
            s.client.sync("/").await.map_err(|e| classify("sync", e))?;
            Ok(s.timeout)
        })
        .await;
        finish(op, &r);
        let grant = Grant {
            key: key.to_string(),
            owner: s.id.clone(),
            fence: Some(czxid),
            lease: s.timeout,
            acquire_sets_ttl: false,
        };
        self.held.insert(key.to_string(), (path, czxid));
        Ok(Some(grant))
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let (Some(s), Some((path, _))) = (&self.session, self.held.get(&grant.key)) else {
            return Ok(false);
        };
        if s.id != grant.owner {
            return Ok(false);
        }
        let r = timed(self.cfg.op_timeout, "renew", async {
            s.client
                .check_stat(path)
                .await
                .map_err(|e| classify("renew", e))
        })
        .await;
        match r {
            Ok(stat) => Ok(stat.is_some_and(|st| Some(st.czxid as u64) == grant.fence)),
            Err(ClientError::Definite(_)) if is_terminal(s.client.state()) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let (Some(s), Some((path, czxid))) = (&self.session, self.held.get(&grant.key).cloned())
        else {
            return Ok(false);
        };
        if s.id != grant.owner || Some(czxid) != grant.fence {
            return Ok(false);
        }
        let r = timed(self.cfg.op_timeout, "release", async {
            match s.client.delete(&path, None).await {
                Ok(()) => Ok(true),
                Err(zk::Error::NoNode) | Err(zk::Error::SessionExpired) => Ok(false),
                Err(e) => Err(classify("release", e)),
            }
        })
        .await;
        if r.is_ok() {
            self.held.remove(&grant.key);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_never_nest_lock_dirs() {
        assert_eq!(super::lock_dir("a/b"), "/locks/a%2Fb");
        assert_eq!(super::lock_dir("a%2Fb"), "/locks/a%252Fb");
    }
}
