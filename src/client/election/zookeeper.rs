//! ZooKeeper election client: the leader-election recipe. Each candidate
//! creates an ephemeral sequential node `/election/<name>/n-<seq>` (data =
//! its session id); the lowest leads; the others watch their predecessor
//! (the same queue as the lock recipe). Fence = the leader node's czxid;
//! owner = the session id; lease = the session timeout the server
//! negotiated (clamped to [2, 20] × tickTime).
//!
//! Right after winning, one `sync` is recorded as a lease refresh (as the
//! ZooKeeper lock client does), so the lease end is known even after a
//! long wait in the queue. Then every third of the timeout the client
//! checks its node (`exists`), recorded as a `renew`: an answer proves the
//! session was alive when the check was sent. The term ends when the node
//! is gone (deleted, or found missing), when the session expires or is
//! closed, or when no check was answered for a whole session timeout.
//!
//! resign = delete the node (`false` if it was gone). observe = `sync`,
//! then the lowest node's owner (its `ephemeralOwner`) and czxid. Sessions
//! are detached: dropping the client leaves its node until the session
//! times out, as a crashed client would. After a failed campaign the
//! session is dropped, so a candidacy left behind dies with it.

use super::keeper::{KeepSpec, Keeper, Refresh, Refreshed};
use super::{refresh_period, ElectionClient, Leader, LossKind, LossWatch, Term};
use crate::client::zookeeper::{classify, connect_string, enqueue, open_session};
use crate::client::{begin, finish, timed, ClientConfig, ClientError};
use async_trait::async_trait;
use futures::FutureExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// Candidate nodes are `<dir>/n-<seq>`.
const PREFIX: &str = "n-";

/// The directory of an election (`/` in names escaped, so they never nest).
pub fn election_dir(name: &str) -> String {
    format!("/election/{}", name.replace('%', "%25").replace('/', "%2F"))
}

struct Session {
    client: zk::Client,
    /// A term's keeper may outlive the session's entry here: it keeps
    /// the bridge too.
    bridge: crate::client::zookeeper::Bridged,
    requested: Duration,
    timeout: Duration,
    id: String,
}

pub struct ZkElection {
    cfg: ClientConfig,
    connect: String,
    session: Option<Session>,
    /// Owner + fence → (our node's path, its keeper).
    terms: HashMap<(String, u64), (String, Keeper)>,
}

fn terminal(s: zk::SessionState) -> bool {
    matches!(
        s,
        zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
    )
}

/// `exists` on our node: still ours while it is there with our czxid.
struct ZkRefresh {
    client: zk::Client,
    _bridge: crate::client::zookeeper::Bridged,
    path: String,
    czxid: u64,
    timeout: Duration,
    t: Duration,
}

#[async_trait]
impl Refresh for ZkRefresh {
    async fn refresh(&mut self) -> Result<Refreshed, ClientError> {
        let c = &self.client;
        let r = timed(self.t, "exists", async {
            c.check_stat(&self.path)
                .await
                .map_err(|e| classify("exists", e))
        })
        .await;
        if terminal(c.state()) {
            return Ok(Refreshed::Gone(
                LossKind::SessionExpired,
                format!("session {}", c.state()),
            ));
        }
        Ok(match r? {
            Some(st) if st.czxid as u64 == self.czxid => Refreshed::Alive(self.timeout),
            _ => Refreshed::Gone(
                LossKind::KeyDeleted,
                format!("leader node {} is gone", self.path),
            ),
        })
    }
}

/// Resolves when our node is deleted or the session ends.
async fn node_or_session_gone(c: zk::Client, path: String) -> (LossKind, String) {
    let mut states = c.state_watcher();
    let session_end = async move {
        loop {
            let s = states.changed().await;
            if terminal(s) {
                return (LossKind::SessionExpired, format!("session {s}"));
            }
        }
    };
    let node_gone = async {
        match c.check_and_watch_stat(&path).await {
            Ok((Some(_), w)) => {
                let ev = w.changed().await;
                if ev.event_type == zk::EventType::NodeDeleted {
                    return (
                        LossKind::KeyDeleted,
                        format!("leader node {path} was deleted"),
                    );
                }
                if terminal(ev.session_state) {
                    return (
                        LossKind::SessionExpired,
                        format!("session {}", ev.session_state),
                    );
                }
            }
            Ok((None, _)) => {
                return (LossKind::KeyDeleted, format!("leader node {path} is gone"));
            }
            Err(_) => {}
        }
        // Anything else: the periodic checks decide.
        std::future::pending().await
    };
    tokio::select! {
        r = session_end => r,
        r = node_gone => r,
    }
}

impl ZkElection {
    pub async fn connect(cfg: &ClientConfig) -> Result<ZkElection, ClientError> {
        let mut c = ZkElection {
            cfg: cfg.clone(),
            connect: connect_string(cfg),
            session: None,
            terms: HashMap::new(),
        };
        c.session(Duration::from_secs(2)).await?;
        Ok(c)
    }

    /// A live session with the requested timeout (a new one if the old one
    /// ended or was asked with another timeout).
    async fn session(&mut self, ttl: Duration) -> Result<&Session, ClientError> {
        let fresh = match &self.session {
            Some(s) => s.requested == ttl && !terminal(s.client.state()),
            None => false,
        };
        if !fresh {
            let (client, bridge) =
                open_session(&self.connect, ttl, self.cfg.op_timeout, &self.cfg.auth).await?;
            self.session = Some(Session {
                timeout: client.session_timeout(),
                id: client.session_id().to_string(),
                client,
                bridge,
                requested: ttl,
            });
        }
        Ok(self.session.as_ref().expect("just set"))
    }

    /// Record one `sync` as a refresh; its send time if it was answered.
    async fn synced(&self, election: &str) -> Option<Instant> {
        let s = self.session.as_ref()?;
        let op = begin(&self.cfg.recorder, election, Some(&s.id));
        let sent = Instant::now();
        let r = timed(self.cfg.op_timeout, "sync", async {
            s.client.sync("/").await.map_err(|e| classify("sync", e))?;
            Ok(s.timeout)
        })
        .await;
        finish(op, &r);
        r.ok().map(|_| sent)
    }
}

#[async_trait]
impl ElectionClient for ZkElection {
    async fn campaign(
        &mut self,
        election: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Term>, ClientError> {
        self.terms.retain(|_, (_, k)| k.lost().is_none());
        let t = self.cfg.op_timeout;
        let started = Instant::now();
        let s = self.session(ttl).await?;
        let (client, id, timeout) = (s.client.clone(), s.id.clone(), s.timeout);
        let bridge = s.bridge.clone();
        let dir = election_dir(election);
        let acls = crate::client::zookeeper::acls(&self.cfg.auth);
        let queued = enqueue(&client, acls, &dir, PREFIX, id.as_bytes(), t, wait).await;
        let (path, czxid) = match queued {
            Ok(Some(won)) => won,
            Ok(None) => return Ok(None),
            Err(e) => {
                // Our node may be left in the queue: let it die with the session.
                self.session = None;
                return Err(e);
            }
        };
        // The session was alive when the campaign was sent; the sync
        // (answered) moves that forward to now.
        let refreshed = self.synced(election).await.unwrap_or(started);
        let refresh = ZkRefresh {
            client: client.clone(),
            _bridge: bridge,
            path: path.clone(),
            czxid,
            timeout,
            t,
        };
        let spec = KeepSpec {
            key: election.to_string(),
            owner: id.clone(),
            period: refresh_period(timeout),
            deadline: refreshed + timeout,
            recorder: self.cfg.recorder.clone(),
        };
        let gone = node_or_session_gone(client, path.clone()).boxed();
        let keeper = Keeper::start(refresh, spec, gone);
        self.terms.insert((id.clone(), czxid), (path, keeper));
        Ok(Some(Term {
            key: election.to_string(),
            owner: id,
            fence: Some(czxid),
            lease: timeout,
            acquire_sets_ttl: false,
        }))
    }

    async fn resign(&mut self, term: &Term) -> Result<bool, ClientError> {
        let k = (term.owner.clone(), term.fence.unwrap_or(0));
        let Some((path, keeper)) = self.terms.remove(&k) else {
            return Ok(false);
        };
        keeper.stop(LossKind::Resigned, "resigned");
        let Some(s) = self.session.as_ref().filter(|s| s.id == term.owner) else {
            return Ok(false);
        };
        timed(self.cfg.op_timeout, "resign", async {
            match s.client.delete(&path, None).await {
                Ok(()) => Ok(true),
                Err(zk::Error::NoNode) | Err(zk::Error::SessionExpired) => Ok(false),
                Err(e) => Err(classify("resign", e)),
            }
        })
        .await
    }

    async fn observe(&mut self, election: &str) -> Result<Option<Leader>, ClientError> {
        let t = self.cfg.op_timeout;
        let ttl = self
            .session
            .as_ref()
            .map_or(Duration::from_secs(2), |s| s.requested);
        let c = self.session(ttl).await?.client.clone();
        let dir = election_dir(election);
        timed(t, "observe", async {
            c.sync(&dir).await.map_err(|e| classify("sync", e))?;
            // The lowest node may vanish between the listing and its stat.
            loop {
                let mut kids = match c.list_children(&dir).await {
                    Ok(k) => k,
                    Err(zk::Error::NoNode) => return Ok(None),
                    Err(e) => return Err(classify("list", e)),
                };
                kids.retain(|k| k.starts_with(PREFIX));
                let Some(first) = kids
                    .iter()
                    .min_by_key(|k| k[PREFIX.len()..].parse::<i64>().unwrap_or(i64::MAX))
                else {
                    return Ok(None);
                };
                let stat = c
                    .check_stat(&format!("{dir}/{first}"))
                    .await
                    .map_err(|e| classify("exists", e))?;
                if let Some(st) = stat {
                    return Ok(Some(Leader {
                        owner: zk::SessionId(st.ephemeral_owner).to_string(),
                        fence: Some(st.czxid as u64),
                    }));
                }
            }
        })
        .await
    }

    fn loss_watch(&self, term: &Term) -> Option<LossWatch> {
        let k = (term.owner.clone(), term.fence.unwrap_or(0));
        self.terms.get(&k).map(|(_, keeper)| keeper.watch())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn election_names_never_nest() {
        assert_eq!(super::election_dir("a/b"), "/election/a%2Fb");
        assert_eq!(super::election_dir("a%2Fb"), "/election/a%252Fb");
    }
}
