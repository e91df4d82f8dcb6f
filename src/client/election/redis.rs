//! Redis lease-key election, the commonly used and weaker option: the
//! leader holds the election's key, taken with the redis lock client's
//! script (`SET key token NX PX ttl` and, only then, `INCR key:fence`, so
//! term and fence are atomic) and renewed in the background every third of
//! the ttl by compare-and-pexpire. Resign = compare-and-delete. Observe =
//! `MGET key key:fence`: the counter only moves when the key is taken, so
//! while a leader holds the key it equals that leader's fence.
//!
//! The lease is the requested ttl, started by the campaign itself
//! (`acquire_sets_ttl`), and it lives by the server's clock: a Redis whose
//! clock jumps forward expires it early (split brain). Works on a single
//! server and on the Sentinel-named primary.

use super::keeper::{never, KeepSpec, Keeper, Refresh, Refreshed};
use super::{refresh_period, ElectionClient, Leader, LossKind, LossWatch, Term};
use crate::client::redis::{classify, fence_key, Lock, POLL};
use crate::client::redis_target::RedisTarget;
use crate::client::{timed, ClientConfig, ClientError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub struct RedisElection {
    target: RedisTarget,
    lock: Lock,
    /// Owner token → the keeper of that term.
    terms: HashMap<String, Keeper>,
}

impl RedisElection {
    /// On the first endpoint, a plain Redis server.
    pub async fn connect(cfg: &ClientConfig) -> Result<RedisElection, ClientError> {
        RedisElection::on(RedisTarget::fixed(cfg)).await
    }

    /// On the primary the sentinels in `cfg.endpoints` name.
    pub async fn connect_sentinel(cfg: &ClientConfig) -> Result<RedisElection, ClientError> {
        RedisElection::on(RedisTarget::sentinel(cfg)).await
    }

    async fn on(mut target: RedisTarget) -> Result<RedisElection, ClientError> {
        target.conn().await?;
        Ok(RedisElection {
            target,
            lock: Lock::new(),
            terms: HashMap::new(),
        })
    }

    /// One attempt: the fence and the instant the request was sent.
    async fn try_once(
        &mut self,
        election: &str,
        token: &str,
        ttl: Duration,
    ) -> Result<Option<(u64, Instant)>, ClientError> {
        let t = self.target.op_timeout();
        let sent = Instant::now();
        let r = async {
            let c = self.target.conn().await?;
            self.lock.try_acquire(c, election, token, ttl, t).await
        }
        .await;
        Ok(self.target.check(r)?.map(|f| (f, sent)))
    }
}

/// Compare-and-pexpire on a connection of the keeper's own.
struct RedisRefresh {
    target: RedisTarget,
    lock: Lock,
    term: Term,
}

#[async_trait]
impl Refresh for RedisRefresh {
    async fn refresh(&mut self) -> Result<Refreshed, ClientError> {
        let t = self.target.op_timeout();
        let r = async {
            let c = self.target.conn().await?;
            self.lock.renew(c, &self.term, t).await
        }
        .await;
        Ok(match self.target.check(r)? {
            true => Refreshed::Alive(self.term.lease),
            false => Refreshed::Gone(
                LossKind::LeaseExpired,
                format!("the key {} expired or is held by another", self.term.key),
            ),
        })
    }
}

#[async_trait]
impl ElectionClient for RedisElection {
    async fn campaign(
        &mut self,
        election: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Term>, ClientError> {
        self.terms.retain(|_, k| k.lost().is_none());
        let give_up = Instant::now() + wait;
        let token = self.lock.token();
        let (fence, sent) = loop {
            if let Some(won) = self.try_once(election, &token, ttl).await? {
                break won;
            }
            if !crate::client::wait_to_retry(give_up, POLL).await {
                return Ok(None);
            }
        };
        let term = Term {
            key: election.to_string(),
            owner: token.clone(),
            fence: Some(fence),
            lease: ttl,
            acquire_sets_ttl: true,
        };
        let refresh = RedisRefresh {
            target: self.target.clone(),
            lock: Lock::new(),
            term: term.clone(),
        };
        let spec = KeepSpec {
            key: election.to_string(),
            owner: token.clone(),
            period: refresh_period(ttl),
            deadline: sent + ttl,
            recorder: self.target.config().recorder.clone(),
        };
        self.terms
            .insert(token, Keeper::start(refresh, spec, never()));
        Ok(Some(term))
    }

    async fn resign(&mut self, term: &Term) -> Result<bool, ClientError> {
        if let Some(k) = self.terms.remove(&term.owner) {
            k.stop(LossKind::Resigned, "resigned");
        }
        let t = self.target.op_timeout();
        let r = async {
            let c = self.target.conn().await?;
            self.lock.release(c, &term.key, &term.owner, t).await
        }
        .await;
        self.target.check(r)
    }

    async fn observe(&mut self, election: &str) -> Result<Option<Leader>, ClientError> {
        let t = self.target.op_timeout();
        let r = async {
            let c = self.target.conn().await?;
            timed(t, "observe", async {
                redis::cmd("MGET")
                    .arg(election)
                    .arg(fence_key(election))
                    .query_async::<(Option<String>, Option<u64>)>(c)
                    .await
                    .map_err(|e| classify("observe", e))
            })
            .await
        }
        .await;
        let (owner, fence) = self.target.check(r)?;
        Ok(owner.map(|owner| Leader { owner, fence }))
    }

    fn loss_watch(&self, term: &Term) -> Option<LossWatch> {
        self.terms.get(&term.owner).map(Keeper::watch)
    }
}
