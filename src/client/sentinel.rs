//! Redis-with-Sentinel lock client: the single-Redis lock (`redis.rs`) on
//! whichever primary the sentinels name. It asks the sentinels (in order,
//! first answer wins) when it has no connection, and drops the connection
//! after any ambiguous error or a server error such as `READONLY` (the old
//! primary demoted), so the next operation follows the failover. The
//! announced primary address is dialled through the config's map.

use super::redis::{open, Lock};
use super::{ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

pub struct SentinelClient {
    cfg: ClientConfig,
    conn: Option<MultiplexedConnection>,
    /// The announced address of the primary we are connected to.
    primary: Option<String>,
    lock: Lock,
}

impl SentinelClient {
    pub async fn connect(cfg: &ClientConfig) -> Result<SentinelClient, ClientError> {
        let mut c = SentinelClient {
            cfg: cfg.clone(),
            conn: None,
            primary: None,
            lock: Lock::new(),
        };
        c.parts().await?;
        Ok(c)
    }

    /// The primary's announced address, from the first sentinel that answers.
    async fn discover(&self) -> Result<String, ClientError> {
        discover(&self.cfg).await
    }

    async fn parts(&mut self) -> Result<(&mut MultiplexedConnection, &mut Lock), ClientError> {
        if self.conn.is_none() {
            let announced = self.discover().await?;
            self.conn = Some(open(&self.cfg.dial_addr(&announced), self.cfg.op_timeout).await?);
            self.primary = Some(announced);
        }
        Ok((self.conn.as_mut().expect("just set"), &mut self.lock))
    }

    /// The primary this client currently talks to (announced address).
    pub fn primary(&self) -> Option<&str> {
        self.primary.as_deref()
    }

    fn check<T>(&mut self, r: Result<T, ClientError>) -> Result<T, ClientError> {
        if r.is_err() {
            self.conn = None;
            self.primary = None;
        }
        r
    }
}

#[async_trait]
impl LockClient for SentinelClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let deadline = Instant::now() + wait;
        let token = self.lock.token();
        let t = self.cfg.op_timeout;
        loop {
            let (c, lock) = self.parts().await?;
            let r = lock.try_acquire(c, key, &token, ttl, t).await;
            if let Some(fence) = self.check(r)? {
                return Ok(Some(Grant {
                    key: key.to_string(),
                    owner: token,
                    fence: Some(fence),
                    lease: ttl,
                    acquire_sets_ttl: true,
                }));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::time::sleep(left.min(super::redis::POLL)).await;
        }
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let t = self.cfg.op_timeout;
        let (c, lock) = self.parts().await?;
        let r = lock.renew(c, grant, t).await;
        self.check(r)
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let t = self.cfg.op_timeout;
        let (c, lock) = self.parts().await?;
        let r = lock.release(c, &grant.key, &grant.owner, t).await;
        self.check(r)
    }
}

/// The primary's announced address, from the first sentinel in
/// `cfg.endpoints` (dialled through `cfg.dial`) that answers.
pub async fn discover(cfg: &ClientConfig) -> Result<String, ClientError> {
    let t = cfg.op_timeout;
    let mut errs = Vec::new();
    for s in &cfg.endpoints {
        match super::redis_query::ask_primary(&cfg.dial_addr(s), &cfg.sentinel_master, t).await {
            Ok(a) => return Ok(a),
            Err(e) => errs.push(format!("{s}: {e}")),
        }
    }
    Err(ClientError::Definite(format!(
        "no sentinel named a primary: {}",
        errs.join("; ")
    )))
}
