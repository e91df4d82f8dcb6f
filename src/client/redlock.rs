//! Redlock client, as Redis' distributed-lock documentation gives the
//! algorithm: N independent Redis nodes; `SET key token NX PX ttl` on every
//! node with a per-node timeout much smaller than the ttl; granted when a
//! quorum N/2+1 said OK and the validity ttl − elapsed − drift (drift =
//! 0.01 × ttl + 2 ms) is positive; after a failed attempt, unlock on every
//! node. No fencing token. One `acquire` call is one attempt (its `wait` is
//! ignored): the caller retries after a random delay ([`retry_delay`]).
//! The grant's lease is the validity, counted from the attempt's start.

use super::redis::{classify, open};
use super::{ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

/// A random delay in [max/2, max] before the next attempt, so competing
/// clients do not retry in lockstep.
pub fn retry_delay(max: Duration) -> Duration {
    use rand::Rng;
    max.mul_f64(rand::thread_rng().gen_range(0.5..=1.0))
}

/// Clock drift allowance of the documentation: 1% of the ttl plus 2 ms.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

struct Node {
    addr: String,
    auth: std::sync::Arc<crate::auth::Auth>,
    conn: Option<MultiplexedConnection>,
}

impl Node {
    /// One request within `t` (connecting first if needed); `Err` drops the
    /// connection so the next attempt reconnects.
    async fn call<T: redis::FromRedisValue>(
        &mut self,
        cmd: redis::Cmd,
        t: Duration,
    ) -> Result<T, ClientError> {
        let r = tokio::time::timeout(t, async {
            if self.conn.is_none() {
                self.conn = Some(open(&self.addr, &self.auth, t).await?);
            }
            let c = self.conn.as_mut().expect("just set");
            cmd.query_async::<T>(c)
                .await
                .map_err(|e| classify(&self.addr, e))
        })
        .await
        .unwrap_or_else(|_| {
            Err(ClientError::Indeterminate(format!(
                "{}: no answer within {t:?}",
                self.addr
            )))
        });
        if r.is_err() {
            self.conn = None;
        }
        r
    }
}

/// A Redlock client over N independent Redis nodes.
pub struct RedlockClient {
    nodes: Vec<Node>,
    node_timeout: Option<Duration>,
    lock: super::redis::Lock,
    /// Token → the ttl it was acquired with (renew extends by it).
    ttls: HashMap<String, Duration>,
}

impl RedlockClient {
    /// Connections are opened lazily, per node, on first use.
    pub async fn connect(cfg: &ClientConfig) -> Result<RedlockClient, ClientError> {
        Ok(RedlockClient {
            nodes: cfg
                .endpoints
                .iter()
                .map(|e| Node {
                    addr: cfg.dial_addr(e),
                    auth: cfg.auth.clone(),
                    conn: None,
                })
                .collect(),
            node_timeout: cfg.redlock_node_timeout,
            lock: super::redis::Lock::new(),
            ttls: HashMap::new(),
        })
    }

    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// The per-node timeout for a ttl: configured, or ttl / 10 within [5 ms, 200 ms].
    pub fn node_timeout(&self, ttl: Duration) -> Duration {
        self.node_timeout.unwrap_or_else(|| {
            (ttl / 10).clamp(Duration::from_millis(5), Duration::from_millis(200))
        })
    }

    /// Send `make()` to every node at once; each node's result.
    async fn all<T: redis::FromRedisValue>(
        &mut self,
        make: impl Fn() -> redis::Cmd,
        t: Duration,
    ) -> Vec<Result<T, ClientError>> {
        futures::future::join_all(self.nodes.iter_mut().map(|n| n.call::<T>(make(), t))).await
    }

    fn script(src: &str, key: &str, args: &[String]) -> redis::Cmd {
        let mut c = redis::cmd("EVAL");
        c.arg(src).arg(1).arg(key);
        for a in args {
            c.arg(a);
        }
        c
    }

    /// Compare-and-delete on every node: per node, the number of keys it
    /// deleted (an answer means the key is not ours there any more).
    async fn unlock_all(
        &mut self,
        key: &str,
        token: &str,
        t: Duration,
    ) -> Vec<Result<i64, ClientError>> {
        let args = [token.to_string()];
        self.all::<i64>(|| Self::script(RELEASE, key, &args), t)
            .await
    }
}

#[async_trait]
impl LockClient for RedlockClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        _wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let token = self.lock.token();
        let t = self.node_timeout(ttl);
        let start = Instant::now();
        let px = ttl.as_millis() as u64;
        let r = self
            .all::<Option<String>>(
                || {
                    redis::cmd("SET")
                        .arg(key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(px)
                        .clone()
                },
                t,
            )
            .await;
        let ok = r.iter().filter(|x| matches!(x, Ok(Some(_)))).count();
        let validity = ttl
            .saturating_sub(start.elapsed())
            .saturating_sub(drift(ttl));
        if ok >= self.quorum() && !validity.is_zero() {
            self.ttls.insert(token.clone(), ttl);
            return Ok(Some(Grant {
                key: key.to_string(),
                owner: token,
                fence: None,
                lease: validity,
                acquire_sets_ttl: true,
            }));
        }
        let unlocked = self.unlock_all(key, &token, t).await;
        // A node may still hold our key when its SET took effect or may have
        // (no answer in time) and the unlock did not reach it. If that could
        // be a quorum, the attempt may have granted a lock nobody releases
        // before its ttl: indeterminate, not failed.
        let maybe_ours = r
            .iter()
            .zip(&unlocked)
            .filter(|(set, gone)| {
                let may_have_set = match set {
                    Ok(v) => v.is_some(),
                    Err(e) => !e.is_definite(),
                };
                may_have_set && gone.is_err()
            })
            .count();
        let errs = || {
            r.iter()
                .filter_map(|x| x.as_ref().err().map(|e| e.to_string()))
                .collect::<Vec<_>>()
                .join("; ")
        };
        if maybe_ours >= self.quorum() {
            return Err(ClientError::Indeterminate(format!(
                "{maybe_ours} Redlock nodes may hold the key after a failed attempt: {}",
                errs()
            )));
        }
        if r.iter().any(|x| matches!(x, Ok(None))) || ok > 0 {
            return Ok(None);
        }
        Err(ClientError::Definite(format!(
            "no Redlock node answered: {}",
            errs()
        )))
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let Some(&ttl) = self.ttls.get(&grant.owner) else {
            return Ok(false);
        };
        let t = self.node_timeout(ttl);
        let start = Instant::now();
        let args = [grant.owner.clone(), (ttl.as_millis() as u64).to_string()];
        let r = self
            .all::<i64>(|| Self::script(RENEW, &grant.key, &args), t)
            .await;
        let ok = r.iter().filter(|x| matches!(x, Ok(1))).count();
        let validity = ttl
            .saturating_sub(start.elapsed())
            .saturating_sub(drift(ttl));
        Ok(ok >= self.quorum() && !validity.is_zero())
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let ttl = self.ttls.remove(&grant.owner).unwrap_or(grant.lease);
        let t = self.node_timeout(ttl);
        let r = self.unlock_all(&grant.key, &grant.owner, t).await;
        Ok(r.iter().filter(|x| matches!(x, Ok(1))).count() >= self.quorum())
    }
}
