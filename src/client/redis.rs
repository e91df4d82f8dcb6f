//! Single-Redis lock client: one Lua script does `SET key token NX PX ttl`
//! and, only if that succeeded, `INCR key:fence`, so grant and fencing token
//! are atomic. Release is compare-and-delete, renew compare-and-pexpire.
//! One client serves a single server and Redis under Sentinel: a
//! [`RedisTarget`] says where the commands go (the register and election
//! clients use the same targets).

use super::redis_target::RedisTarget;
use super::{timed, ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use std::time::{Duration, Instant};

pub(crate) const ACQUIRE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false";

pub(crate) const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0";

pub(crate) const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

/// How often a waiting acquire retries while the lock is held.
pub const POLL: Duration = Duration::from_millis(25);

/// The key holding a lock key's fence counter.
pub fn fence_key(key: &str) -> String {
    format!("{key}:fence")
}

/// Map a redis error: a server error reply or a refused connection
/// certainly did nothing; anything else (I/O after the write, timeout) may
/// have taken effect.
pub fn classify(what: &str, e: redis::RedisError) -> ClientError {
    let msg = format!("{what}: {e}");
    if matches!(e.kind(), redis::ErrorKind::Server(_)) || e.is_connection_refusal() {
        ClientError::Definite(msg)
    } else {
        ClientError::Indeterminate(msg)
    }
}

/// Connect to one Redis server; refusals are definite.
pub async fn open(
    addr: &str,
    auth: &crate::auth::Auth,
    t: Duration,
) -> Result<MultiplexedConnection, ClientError> {
    // No request was written yet: any failure to connect is definite.
    super::redis_query::connect_as(addr, auth, t)
        .await
        .map_err(|e| ClientError::Definite(format!("connect to {addr}: {e}")))
}

/// The three scripts, loaded once per client.
pub struct Lock {
    acquire: redis::Script,
    renew: redis::Script,
    release: redis::Script,
    id: String,
    seq: u64,
}

impl Default for Lock {
    fn default() -> Self {
        Lock::new()
    }
}

impl Lock {
    pub fn new() -> Lock {
        Lock {
            acquire: redis::Script::new(ACQUIRE),
            renew: redis::Script::new(RENEW),
            release: redis::Script::new(RELEASE),
            id: super::random_id(),
            seq: 0,
        }
    }

    /// A fresh token, unique to this client and attempt.
    pub fn token(&mut self) -> String {
        self.seq += 1;
        format!("{}-{}", self.id, self.seq)
    }

    /// One attempt: `Some(fence)` if granted.
    pub async fn try_acquire(
        &self,
        c: &mut MultiplexedConnection,
        key: &str,
        token: &str,
        ttl: Duration,
        t: Duration,
    ) -> Result<Option<u64>, ClientError> {
        let mut inv = self.acquire.key(key);
        inv.key(fence_key(key))
            .arg(token)
            .arg(ttl.as_millis() as u64);
        timed(t, "acquire", async {
            inv.invoke_async(c)
                .await
                .map_err(|e| classify("acquire", e))
        })
        .await
    }

    /// Compare-and-pexpire: `true` if the token still held the key.
    pub async fn renew(
        &self,
        c: &mut MultiplexedConnection,
        g: &Grant,
        t: Duration,
    ) -> Result<bool, ClientError> {
        let mut inv = self.renew.key(&g.key);
        inv.arg(&g.owner).arg(g.lease.as_millis() as u64);
        let n: i64 = timed(t, "renew", async {
            inv.invoke_async(c).await.map_err(|e| classify("renew", e))
        })
        .await?;
        Ok(n == 1)
    }

    /// Compare-and-delete: `true` if the token still held the key.
    pub async fn release(
        &self,
        c: &mut MultiplexedConnection,
        key: &str,
        token: &str,
        t: Duration,
    ) -> Result<bool, ClientError> {
        let mut inv = self.release.key(key);
        inv.arg(token);
        let n: i64 = timed(t, "release", async {
            inv.invoke_async(c)
                .await
                .map_err(|e| classify("release", e))
        })
        .await?;
        Ok(n == 1)
    }
}

/// The Redis lock client: the scripts above on one Redis server, or on
/// whichever primary the sentinels name ([`RedisTarget`] finds it, and
/// drops the connection after an error that leaves it in doubt, so the
/// next operation follows a failover).
pub struct RedisClient {
    target: RedisTarget,
    lock: Lock,
}

impl RedisClient {
    /// On the first endpoint, a plain Redis server (dialled through the
    /// announced→dial map).
    pub async fn connect(cfg: &ClientConfig) -> Result<RedisClient, ClientError> {
        RedisClient::on(RedisTarget::fixed(cfg)).await
    }

    /// On the primary the sentinels in `cfg.endpoints` name.
    pub async fn connect_sentinel(cfg: &ClientConfig) -> Result<RedisClient, ClientError> {
        RedisClient::on(RedisTarget::sentinel(cfg)).await
    }

    async fn on(mut target: RedisTarget) -> Result<RedisClient, ClientError> {
        target.conn().await?;
        Ok(RedisClient {
            target,
            lock: Lock::new(),
        })
    }

    /// The server this client currently talks to (announced address).
    pub fn server(&self) -> Option<&str> {
        self.target.server()
    }
}

#[async_trait]
impl LockClient for RedisClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let deadline = Instant::now() + wait;
        let token = self.lock.token();
        let t = self.target.op_timeout();
        loop {
            let c = self.target.conn().await?;
            let r = self.lock.try_acquire(c, key, &token, ttl, t).await;
            if let Some(fence) = self.target.check(r)? {
                return Ok(Some(Grant::set_with_ttl(key, token, fence, ttl)));
            }
            if !super::wait_to_retry(deadline, POLL).await {
                return Ok(None);
            }
        }
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let t = self.target.op_timeout();
        let c = self.target.conn().await?;
        let r = self.lock.renew(c, grant, t).await;
        self.target.check(r)
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        let t = self.target.op_timeout();
        let c = self.target.conn().await?;
        let r = self.lock.release(c, &grant.key, &grant.owner, t).await;
        self.target.check(r)
    }
}
