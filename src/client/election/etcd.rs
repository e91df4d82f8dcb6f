//! etcd election client: etcd's v3 election API bound to a lease.
//!
//! campaign = lease grant (the requested ttl rounded up to whole seconds;
//! etcd may raise it to its minimum: the term reports what the server
//! answered) + keep-alives every third of the TTL in the background + the
//! `Campaign` call with that lease (the server creates `<election>/<lease
//! hex>` and answers once every key created before it is gone). Fence = the
//! leader key's create revision; owner = the lease id (also the proclaimed
//! value). Before answering, the client reads the key back: if its lease
//! ran out during a long wait the campaign did not win. resign = `Resign` +
//! lease revoke (`false` if the lease was gone). observe = `Leader`.
//!
//! The lease grant and every keep-alive are recorded through the config's
//! recorder as `renew` ops (owner = lease id, `lease_ms` = the TTL the
//! server answered), exactly as the etcd lock client does. A keep-alive
//! stream is reopened after any error, so a late answer is never taken for
//! the answer to a later keep-alive. The term ends when a keep-alive
//! answers TTL 0, when a watch sees the leader key deleted, or when no
//! keep-alive was answered for a whole TTL.

use super::keeper::{KeepSpec, Keeper, Refresh, Refreshed};
use super::{refresh_period, ElectionClient, Leader, LossKind, LossWatch, Term};
use crate::client::etcd::{classify, open};
use crate::client::{begin, finish, timed, ClientConfig, ClientError};
use async_trait::async_trait;
use etcd_client::{
    Client, EventType, LeaderKey, LeaseKeepAliveStream, LeaseKeeper, ResignOptions, WatchOptions,
};
use futures::FutureExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

struct EtcdTerm {
    leader: LeaderKey,
    keeper: Keeper,
}

pub struct EtcdElection {
    /// No per-request timeout on the channel (a campaign may wait long):
    /// every call is bounded by `timed` instead.
    client: Client,
    cfg: ClientConfig,
    terms: HashMap<String, EtcdTerm>,
}

/// Keep-alives on a stream of our own, reopened after any error.
struct EtcdRefresh {
    client: Client,
    id: i64,
    granted: Duration,
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    t: Duration,
}

impl EtcdRefresh {
    async fn once(&mut self) -> Result<Refreshed, ClientError> {
        let gone = |ttl: i64| {
            Refreshed::Gone(
                LossKind::LeaseExpired,
                format!(
                    "lease {:x} is gone (keep-alive answered TTL {ttl})",
                    self.id
                ),
            )
        };
        let Some((k, s)) = &mut self.stream else {
            // Opening the stream sends a keep-alive and reads its answer.
            return match self.client.lease_keep_alive(self.id).await {
                Ok(pair) => {
                    self.stream = Some(pair);
                    Ok(Refreshed::Alive(self.granted))
                }
                Err(etcd_client::Error::LeaseKeepAliveError(m)) if m.contains("not found") => {
                    Ok(gone(0))
                }
                Err(e) => Err(classify("keep-alive", e)),
            };
        };
        k.keep_alive()
            .await
            .map_err(|e| classify("keep-alive", e))?;
        match s.message().await.map_err(|e| classify("keep-alive", e))? {
            Some(r) if r.ttl() > 0 => Ok(Refreshed::Alive(Duration::from_secs(r.ttl() as u64))),
            Some(r) => Ok(gone(r.ttl())),
            None => Err(ClientError::Indeterminate(
                "keep-alive: stream closed".into(),
            )),
        }
    }
}

#[async_trait]
impl Refresh for EtcdRefresh {
    async fn refresh(&mut self) -> Result<Refreshed, ClientError> {
        let t = self.t;
        let r = timed(t, "keep-alive", self.once()).await;
        if r.is_err() {
            self.stream = None;
        }
        r
    }
}

/// Resolves when the leader key is deleted (watched from its creation).
async fn key_deleted(mut c: Client, key: Vec<u8>, rev: i64) -> (LossKind, String) {
    let opts = WatchOptions::new().with_start_revision(rev);
    if let Ok(mut s) = c.watch(key.clone(), Some(opts)).await {
        while let Ok(Some(resp)) = s.message().await {
            if resp
                .events()
                .iter()
                .any(|e| e.event_type() == EventType::Delete)
            {
                let k = String::from_utf8_lossy(&key).into_owned();
                return (LossKind::KeyDeleted, format!("leader key {k} was deleted"));
            }
            if resp.canceled() {
                break;
            }
        }
    }
    // The watch broke: the keep-alives and the deadline still decide.
    std::future::pending().await
}

impl EtcdElection {
    pub async fn connect(cfg: &ClientConfig) -> Result<EtcdElection, ClientError> {
        Ok(EtcdElection {
            client: open(cfg, None).await?,
            cfg: cfg.clone(),
            terms: HashMap::new(),
        })
    }

    /// Grant a lease of at least `ttl` (whole seconds); recorded as a
    /// renew. The id, the TTL the server answered, and the send time.
    async fn grant(
        &mut self,
        election: &str,
        ttl: Duration,
    ) -> Result<(i64, Duration, Instant), ClientError> {
        let secs = ttl.as_secs_f64().ceil().max(1.0) as i64;
        let mut op = begin(&self.cfg.recorder, election, None);
        let sent = Instant::now();
        let c = &mut self.client;
        let resp = timed(self.cfg.op_timeout, "lease grant", async {
            c.lease_grant(secs, None)
                .await
                .map_err(|e| classify("lease grant", e))
        })
        .await?;
        let (id, granted) = (resp.id(), Duration::from_secs(resp.ttl().max(0) as u64));
        if let Some(op) = op.as_mut() {
            op.set_owner(&id.to_string());
        }
        finish(op, &Ok(granted));
        Ok((id, granted, sent))
    }

    /// Revoke a lease; `Ok(false)` if it was already gone.
    async fn revoke(&mut self, id: i64) -> Result<bool, ClientError> {
        let c = &mut self.client;
        timed(self.cfg.op_timeout, "lease revoke", async {
            match c.lease_revoke(id).await {
                Ok(_) => Ok(true),
                Err(etcd_client::Error::GRpcStatus(s)) if s.code() == tonic::Code::NotFound => {
                    Ok(false)
                }
                Err(e) => Err(classify("lease revoke", e)),
            }
        })
        .await
    }

    /// Campaign within `wait`; the leader key if it still exists with our
    /// lease afterwards.
    async fn run_campaign(
        &mut self,
        election: &str,
        id: i64,
        wait: Duration,
    ) -> Result<Option<LeaderKey>, ClientError> {
        let mut c = self.client.clone();
        let won = tokio::time::timeout(wait, c.campaign(election, id.to_string(), id)).await;
        let leader = match won {
            // Dropping the call cancels it; the server then deletes our key.
            Err(_) => return Ok(None),
            Ok(Err(e)) => return Err(classify("campaign", e)),
            Ok(Ok(resp)) => match resp.leader() {
                Some(l) => l.clone(),
                None => return Err(ClientError::Indeterminate("campaign: no leader key".into())),
            },
        };
        let key = leader.key().to_vec();
        let kv = timed(self.cfg.op_timeout, "get leader key", async {
            let r = c
                .get(key, None)
                .await
                .map_err(|e| classify("get leader key", e))?;
            Ok(r.kvs().first().map(|kv| (kv.create_revision(), kv.lease())))
        })
        .await?;
        Ok((kv == Some((leader.rev(), id))).then_some(leader))
    }
}

#[async_trait]
impl ElectionClient for EtcdElection {
    async fn campaign(
        &mut self,
        election: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Term>, ClientError> {
        self.terms.retain(|_, t| t.keeper.lost().is_none());
        let (id, granted, sent) = self.grant(election, ttl).await?;
        let (gone_tx, gone_rx) = oneshot::channel::<super::keeper::Gone>();
        let gone = async move {
            match gone_rx.await {
                Ok(g) => g.await,
                Err(_) => std::future::pending().await,
            }
        };
        let refresh = EtcdRefresh {
            client: self.client.clone(),
            id,
            granted,
            stream: None,
            t: self.cfg.op_timeout,
        };
        let spec = KeepSpec {
            key: election.to_string(),
            owner: id.to_string(),
            period: refresh_period(granted),
            deadline: sent + granted,
            recorder: self.cfg.recorder.clone(),
        };
        let keeper = Keeper::start(refresh, spec, gone.boxed());
        // Never wait shorter than one request may take.
        let wait = wait.max(self.cfg.op_timeout.min(Duration::from_millis(500)));
        let r = self.run_campaign(election, id, wait).await;
        let leader = match r {
            Ok(Some(l)) if keeper.lost().is_none() => l,
            other => {
                keeper.stop(LossKind::Resigned, "not elected");
                // Give the lease back: that also drops our candidacy key.
                return match self.revoke(id).await {
                    Ok(_) => other.map(|_| None),
                    Err(e) => Err(other.err().unwrap_or(e)),
                };
            }
        };
        let watch = key_deleted(self.client.clone(), leader.key().to_vec(), leader.rev());
        let _ = gone_tx.send(watch.boxed());
        let term = Term {
            key: election.to_string(),
            owner: id.to_string(),
            fence: Some(leader.rev() as u64),
            lease: granted,
            acquire_sets_ttl: false,
        };
        self.terms
            .insert(term.owner.clone(), EtcdTerm { leader, keeper });
        Ok(Some(term))
    }

    async fn resign(&mut self, term: &Term) -> Result<bool, ClientError> {
        let Some(t) = self.terms.remove(&term.owner) else {
            return Ok(false);
        };
        t.keeper.stop(LossKind::Resigned, "resigned");
        let c = &mut self.client;
        let opts = ResignOptions::new().with_leader(t.leader.clone());
        timed(self.cfg.op_timeout, "resign", async {
            c.resign(Some(opts))
                .await
                .map(drop)
                .map_err(|e| classify("resign", e))
        })
        .await?;
        self.revoke(t.leader.lease()).await
    }

    async fn observe(&mut self, election: &str) -> Result<Option<Leader>, ClientError> {
        let c = &mut self.client;
        timed(self.cfg.op_timeout, "leader", async {
            match c.leader(election).await {
                Ok(r) => Ok(r.kv().map(|kv| Leader {
                    owner: kv.lease().to_string(),
                    fence: Some(kv.create_revision() as u64),
                })),
                // etcd's concurrency package answers this with a plain
                // error; not to be confused with "etcdserver: no leader"
                // (no raft leader: unavailable).
                Err(e) if e.to_string().contains("election: no leader") => Ok(None),
                Err(e) => Err(classify("leader", e)),
            }
        })
        .await
    }

    fn loss_watch(&self, term: &Term) -> Option<LossWatch> {
        self.terms.get(&term.owner).map(|t| t.keeper.watch())
    }
}
