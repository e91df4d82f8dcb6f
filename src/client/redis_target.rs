//! Where a Redis-based register or election client sends its commands: one
//! fixed server, or the primary the sentinels name. Opens the connection
//! lazily, drops it after an error that leaves it in doubt, and (Sentinel)
//! rediscovers the primary then, so the next command follows a failover.
//! Announced addresses are dialled through the config's `dial` map.

use super::redis::open;
use super::{ClientConfig, ClientError};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

/// A Redis server or a Sentinel-managed primary, with a lazily opened
/// connection. Cloning gives a target with no connection of its own yet.
pub struct RedisTarget {
    cfg: ClientConfig,
    sentinel: bool,
    conn: Option<MultiplexedConnection>,
    /// The announced address of the server we are connected to.
    server: Option<String>,
}

impl Clone for RedisTarget {
    fn clone(&self) -> Self {
        RedisTarget {
            cfg: self.cfg.clone(),
            sentinel: self.sentinel,
            conn: None,
            server: None,
        }
    }
}

impl RedisTarget {
    /// The first endpoint of `cfg`, a plain Redis server.
    pub fn fixed(cfg: &ClientConfig) -> RedisTarget {
        RedisTarget {
            cfg: cfg.clone(),
            sentinel: false,
            conn: None,
            server: None,
        }
    }

    /// The primary the sentinels in `cfg.endpoints` name.
    pub fn sentinel(cfg: &ClientConfig) -> RedisTarget {
        RedisTarget {
            sentinel: true,
            ..RedisTarget::fixed(cfg)
        }
    }

    pub fn op_timeout(&self) -> Duration {
        self.cfg.op_timeout
    }

    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// The announced address of the server the open connection goes to.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// The open connection, opening one first if needed. A Sentinel target
    /// asks the sentinels and checks that the named server says it is a
    /// primary (`ROLE`), as Sentinel-aware clients do on connect.
    pub async fn conn(&mut self) -> Result<&mut MultiplexedConnection, ClientError> {
        if self.conn.is_none() {
            let t = self.cfg.op_timeout;
            let announced = if self.sentinel {
                discover(&self.cfg).await?
            } else {
                self.cfg.endpoints[0].clone()
            };
            let addr = self.cfg.dial_addr(&announced);
            if self.sentinel {
                match super::redis_query::role_as(&addr, &self.cfg.auth, t).await {
                    Ok((r, _)) if r == "master" => {}
                    Ok((r, _)) => {
                        return Err(ClientError::Definite(format!(
                            "{announced}, named primary by the sentinels, says its role is {r} (a failover is under way; retry)"
                        )))
                    }
                    Err(e) => {
                        return Err(ClientError::Definite(format!(
                            "ROLE at {announced}: {e}"
                        )))
                    }
                }
            }
            self.conn = Some(open(&addr, &self.cfg.auth, t).await?);
            self.server = Some(announced);
        }
        Ok(self.conn.as_mut().expect("just set"))
    }

    /// Pass a result through; after an error that may have left the
    /// connection in doubt (any error, for Sentinel: e.g. `READONLY` from a
    /// demoted primary) drop the connection so the next call reconnects.
    pub fn check<T>(&mut self, r: Result<T, ClientError>) -> Result<T, ClientError> {
        if let Err(e) = &r {
            if self.sentinel || !e.is_definite() {
                self.conn = None;
                self.server = None;
            }
        }
        r
    }
}

/// The primary's announced address, from the first sentinel in
/// `cfg.endpoints` (dialled through `cfg.dial`) that answers.
pub async fn discover(cfg: &ClientConfig) -> Result<String, ClientError> {
    let t = cfg.op_timeout;
    let mut errs = Vec::new();
    for s in &cfg.endpoints {
        match super::redis_query::ask_primary_as(
            &cfg.dial_addr(s),
            &cfg.sentinel_master,
            &cfg.auth,
            t,
        )
        .await
        {
            Ok(a) => return Ok(a),
            Err(e) => errs.push(format!("{s}: {e}")),
        }
    }
    Err(ClientError::Definite(format!(
        "no sentinel named a primary: {}",
        errs.join("; ")
    )))
}
