//! The Redis Cluster lock client: the single-Redis scripts
//! ([`super::redis`]) on the primary serving the lock key's slot, with the
//! lock at `{key}` and its fence counter at `{key}:fence` (one slot, so
//! one script touches both).
//!
//! One operation follows the cluster's redirections: `MOVED` (the slot is
//! served elsewhere: remember that node), `ASK` (send `ASKING` and the
//! command to that node, once) and `TRYAGAIN` (retry shortly). Each of
//! these replies proves the command did not run where it was sent, so the
//! one send that runs it is the op's last, after the op's invoke. Every
//! announced address is dialled through the worker's dial map (its
//! proxies). No answer within the op timeout ends the op as `info`; the
//! worker's next attempt is a new op with a new token.

use super::redis::{classify, ACQUIRE, POLL, RELEASE, RENEW};
use super::redis_slots::{self as slots, Redirect};
use super::{ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// At most this many redirections within one op.
const MAX_HOPS: usize = 8;

/// Where the commands for one slot go: the cluster's nodes by announced
/// address, a connection to each node used so far, and the primary last
/// known to serve the slot.
pub struct ClusterTarget {
    cfg: ClientConfig,
    conns: HashMap<String, MultiplexedConnection>,
    primary: Option<String>,
}

impl ClusterTarget {
    pub fn new(cfg: &ClientConfig) -> ClusterTarget {
        ClusterTarget {
            cfg: cfg.clone(),
            conns: HashMap::new(),
            primary: None,
        }
    }

    /// The primary last known to serve the key (announced address).
    pub fn primary(&self) -> Option<&str> {
        self.primary.as_deref()
    }

    /// Ask the nodes (each through its dial address) who serves `slot`.
    async fn discover(&self, slot: u16, t: Duration) -> Result<String, ClientError> {
        let mut errs = Vec::new();
        for e in &self.cfg.endpoints {
            match slots::slot_owner_as(&self.cfg.dial_addr(e), slot, &self.cfg.auth, t).await {
                Ok(Some(a)) => return Ok(a),
                Ok(None) => errs.push(format!("{e}: no primary serves slot {slot}")),
                Err(err) => errs.push(format!("{e}: {err}")),
            }
        }
        Err(ClientError::Definite(format!(
            "no node named the primary of slot {slot}: {}",
            errs.join("; ")
        )))
    }

    async fn conn(
        &mut self,
        addr: &str,
        t: Duration,
    ) -> Result<MultiplexedConnection, ClientError> {
        if let Some(c) = self.conns.get(addr) {
            return Ok(c.clone());
        }
        let c = super::redis::open(&self.cfg.dial_addr(addr), &self.cfg.auth, t).await?;
        self.conns.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// Forget a node's connection and the slot's owner (after an error
    /// that leaves either in doubt).
    fn forget(&mut self, addr: &str) {
        self.conns.remove(addr);
        self.primary = None;
    }

    /// Run `cmd` (on keys of `slot`) on the slot's primary, following
    /// redirections, all within the op timeout.
    pub async fn run<T: redis::FromRedisValue>(
        &mut self,
        slot: u16,
        cmd: &redis::Cmd,
        what: &str,
    ) -> Result<T, ClientError> {
        let t = self.cfg.op_timeout;
        let deadline = Instant::now() + t;
        let mut ask: Option<String> = None;
        for hop in 0..MAX_HOPS {
            if hop > 0 {
                // A re-send is a request of its own (`--max-rate`).
                super::pace::pace().await;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Every earlier send was redirected: nothing ran.
                return Err(ClientError::Definite(format!(
                    "{what}: redirected until the op timeout {t:?} passed"
                )));
            }
            let addr = match (&ask, &self.primary) {
                (Some(a), _) | (None, Some(a)) => a.clone(),
                (None, None) => {
                    let a = self.discover(slot, left).await?;
                    self.primary = Some(a.clone());
                    a
                }
            };
            // Discovery sent no command; what is left is for this send.
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ClientError::Definite(format!(
                    "{what}: the op timeout {t:?} passed before a send"
                )));
            }
            let mut c = self
                .conn(&addr, left)
                .await
                .inspect_err(|_| self.forget(&addr))?;
            let asking = ask.take().is_some();
            let sent = async {
                if asking {
                    let mut p = redis::pipe();
                    p.cmd("ASKING").ignore().add_command(cmd.clone());
                    p.query_async::<(T,)>(&mut c).await.map(|(v,)| v)
                } else {
                    cmd.query_async::<T>(&mut c).await
                }
            };
            let e = match tokio::time::timeout(left, sent).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => e,
                Err(_) => {
                    self.forget(&addr);
                    return Err(ClientError::Indeterminate(format!(
                        "{what}: no answer from {addr} within {t:?}"
                    )));
                }
            };
            match Redirect::of(&e, &addr) {
                Some(Redirect::Moved { addr: to, .. }) => self.primary = Some(to),
                Some(Redirect::Ask { addr: to, .. }) => ask = Some(to),
                Some(Redirect::TryAgain) => {
                    tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())))
                        .await
                }
                None => {
                    let err = classify(&format!("{what} at {addr}"), e);
                    // Whatever the error, ask again who serves the slot
                    // next time (a failover, CLUSTERDOWN, a gone node).
                    self.forget(&addr);
                    return Err(err);
                }
            }
        }
        Err(ClientError::Definite(format!(
            "{what}: more than {MAX_HOPS} redirections (the slot keeps moving)"
        )))
    }
}

/// The lock on a Redis Cluster.
pub struct RedisClusterClient {
    target: ClusterTarget,
    lock: super::redis::Lock,
}

impl RedisClusterClient {
    /// Find the primary of no key yet: check that a node answers.
    pub async fn connect(cfg: &ClientConfig) -> Result<RedisClusterClient, ClientError> {
        let mut target = ClusterTarget::new(cfg);
        let first = cfg.endpoints[0].clone();
        target.conn(&first, cfg.op_timeout).await?;
        Ok(RedisClusterClient {
            target,
            lock: super::redis::Lock::new(),
        })
    }

    /// The primary the client last sent the lock's commands to.
    pub fn server(&self) -> Option<&str> {
        self.target.primary()
    }
}

fn script(text: &str, key: &str, with_fence: bool) -> redis::Cmd {
    let mut c = redis::cmd("EVAL");
    c.arg(text).arg(if with_fence { 2 } else { 1 });
    c.arg(slots::cluster_lock_key(key));
    if with_fence {
        c.arg(slots::cluster_fence_key(key));
    }
    c
}

#[async_trait]
impl LockClient for RedisClusterClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        if !slots::one_slot(key) {
            return Err(ClientError::Definite(format!(
                "lock key {key:?} begins with '}}', so its fence key cannot share its hash slot on Redis Cluster (hint: set lock_key in the workload file to a name that does not)"
            )));
        }
        let deadline = Instant::now() + wait;
        let token = self.lock.token();
        let slot = slots::key_slot(&slots::cluster_lock_key(key));
        loop {
            let mut cmd = script(ACQUIRE, key, true);
            cmd.arg(&token).arg(ttl.as_millis() as u64);
            let fence: Option<u64> = self.target.run(slot, &cmd, "acquire").await?;
            if let Some(fence) = fence {
                return Ok(Some(Grant::set_with_ttl(key, token, fence, ttl)));
            }
            if !super::wait_to_retry(deadline, POLL).await {
                return Ok(None);
            }
        }
    }

    async fn renew(&mut self, g: &Grant) -> Result<bool, ClientError> {
        let mut cmd = script(RENEW, &g.key, false);
        cmd.arg(&g.owner).arg(g.lease.as_millis() as u64);
        let slot = slots::key_slot(&slots::cluster_lock_key(&g.key));
        let n: i64 = self.target.run(slot, &cmd, "renew").await?;
        Ok(n == 1)
    }

    async fn release(&mut self, g: &Grant) -> Result<bool, ClientError> {
        let mut cmd = script(RELEASE, &g.key, false);
        cmd.arg(&g.owner);
        let slot = slots::key_slot(&slots::cluster_lock_key(&g.key));
        let n: i64 = self.target.run(slot, &cmd, "release").await?;
        Ok(n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `MOVED` names the node by its announced address; the client must
    /// dial the worker's proxy for it, which the error then names.
    #[tokio::test]
    async fn an_announced_address_is_dialled_through_the_map() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = closed.local_addr().unwrap().to_string();
        drop(closed);
        let mut cfg = ClientConfig::new(vec!["10.255.0.1:7000".into()]);
        cfg.dial.insert("10.255.0.1:7000".into(), proxy.clone());
        cfg.op_timeout = Duration::from_millis(500);
        let mut t = ClusterTarget::new(&cfg);
        t.primary = Some("10.255.0.1:7000".into());
        let r: Result<Option<u64>, _> = t.run(1, &redis::cmd("PING"), "ping").await;
        let e = r.unwrap_err();
        assert!(e.is_definite(), "a refused connection ran nothing: {e}");
        assert!(e.to_string().contains(&proxy), "{e}");
        assert_eq!(
            t.primary(),
            None,
            "the slot's owner is asked again next time"
        );
        // No owner known: the endpoints are asked, through the map too.
        let e = t
            .run::<()>(1, &redis::cmd("PING"), "ping")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("10.255.0.1:7000"), "{e}");
    }
}
