//! ZooKeeper register: one persistent znode per key, `/registers/<key>`
//! (`/` and `%` in keys escaped), holding the value as a decimal string.
//!
//! - read = `sync` + `getData` (ZooKeeper serves reads from the connected
//!   server, which may lag; `sync` first is its documented way to read the
//!   latest value). No node = `None`.
//! - write = `setData` (any version); on `NoNode`, `create`; on a racing
//!   create (`NodeExists`), `setData` again.
//! - cas(old, new) = `sync` + `getData`; if the value is not `old` (or the
//!   node is absent) the answer is `false`, taken at that read; else
//!   `setData(new, version)` with the version just read: it succeeds only
//!   if nothing was written since the read, so the value was `old` right
//!   before it (`true`). `BadVersion` means another write slipped in: it
//!   wrote nothing, so read and try again (a write of the same value in
//!   between must not turn into a false `false`), at most
//!   [`CAS_ATTEMPTS`] times; then a definite error.
//!
//! Errors: answers from the server are definite; a lost connection or a
//! timeout during `setData`/`create` is indeterminate; every error of a read
//! (also the read inside a cas, before anything is written) is definite.

use super::{parse, read_error, RegisterClient};
use crate::client::zookeeper::{classify, connect_string, open_session};
use crate::client::{timed, ClientConfig, ClientError};
use async_trait::async_trait;
use std::time::Duration;
use zookeeper_client as zk;

/// The parent of every register node.
pub const ROOT: &str = "/registers";
/// How often a cas retries after losing a version race (and a write after
/// losing a create race).
pub const CAS_ATTEMPTS: usize = 20;
/// The session timeout asked for (the server clamps it).
const SESSION: Duration = Duration::from_secs(4);

/// The znode of a register key (keys never nest).
pub fn register_path(key: &str) -> String {
    format!("{ROOT}/{}", key.replace('%', "%25").replace('/', "%2F"))
}

pub struct ZkRegister {
    connect: String,
    t: Duration,
    auth: std::sync::Arc<crate::auth::Auth>,
    client: Option<(zk::Client, crate::client::zookeeper::Bridged)>,
}

fn terminal(c: &zk::Client) -> bool {
    matches!(
        c.state(),
        zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
    )
}

impl ZkRegister {
    pub async fn connect(cfg: &ClientConfig) -> Result<ZkRegister, ClientError> {
        let mut r = ZkRegister {
            connect: connect_string(cfg),
            t: cfg.op_timeout,
            auth: cfg.auth.clone(),
            client: None,
        };
        r.client().await?;
        Ok(r)
    }

    /// A live session (a new one after the old one expired), with the
    /// register root created.
    async fn client(&mut self) -> Result<zk::Client, ClientError> {
        if let Some((c, _)) = &self.client {
            if !terminal(c) {
                return Ok(c.clone());
            }
        }
        let (c, bridge) = open_session(&self.connect, SESSION, self.t, &self.auth).await?;
        let opts = zk::CreateMode::Persistent.with_acls(crate::client::zookeeper::acls(&self.auth));
        timed(self.t, "mkdir", async {
            c.mkdir(ROOT, &opts).await.map_err(|e| classify("mkdir", e))
        })
        .await?;
        self.client = Some((c.clone(), bridge));
        Ok(c)
    }

    /// `sync` then `getData`: the value and its version, `None` if absent.
    async fn get(&self, c: &zk::Client, key: &str) -> Result<Option<(i64, i32)>, ClientError> {
        let path = register_path(key);
        timed(self.t, "read", async {
            c.sync(&path).await.map_err(|e| classify("sync", e))?;
            match c.get_data(&path).await {
                Ok((data, stat)) => Ok(Some((parse(key, &data)?, stat.version))),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(classify("getData", e)),
            }
        })
        .await
        .map_err(read_error)
    }
}

/// `setData` at `version` (`None`: any); `Ok(false)` on `BadVersion`,
/// `Err(NoNode)` passed through as `Ok(None)`.
async fn set(
    c: &zk::Client,
    path: &str,
    value: i64,
    version: Option<i32>,
    t: Duration,
) -> Result<Option<bool>, ClientError> {
    timed(t, "setData", async {
        match c
            .set_data(path, value.to_string().as_bytes(), version)
            .await
        {
            Ok(_) => Ok(Some(true)),
            Err(zk::Error::BadVersion) => Ok(Some(false)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(classify("setData", e)),
        }
    })
    .await
}

#[async_trait]
impl RegisterClient for ZkRegister {
    async fn read(&mut self, key: &str) -> Result<Option<i64>, ClientError> {
        let c = self.client().await.map_err(read_error)?;
        Ok(self.get(&c, key).await?.map(|(v, _)| v))
    }

    async fn write(&mut self, key: &str, value: i64) -> Result<(), ClientError> {
        let c = self.client().await?;
        let path = register_path(key);
        let opts = zk::CreateMode::Persistent.with_acls(crate::client::zookeeper::acls(&self.auth));
        // Each round ends in a definite non-write (NoNode, NodeExists) or
        // returns: a node deleted and re-created under us every time.
        for _ in 0..CAS_ATTEMPTS {
            if set(&c, &path, value, None, self.t).await?.is_some() {
                return Ok(());
            }
            let created = timed(self.t, "create", async {
                match c.create(&path, value.to_string().as_bytes(), &opts).await {
                    Ok(_) => Ok(true),
                    Err(zk::Error::NodeExists) => Ok(false),
                    Err(e) => Err(classify("create", e)),
                }
            })
            .await?;
            if created {
                return Ok(());
            }
        }
        Err(ClientError::Definite(format!(
            "write of {path}: deleted and re-created under us {CAS_ATTEMPTS} times in a row; nothing written"
        )))
    }

    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError> {
        let c = self.client().await?;
        let path = register_path(key);
        for _ in 0..CAS_ATTEMPTS {
            let Some((v, version)) = self.get(&c, key).await? else {
                return Ok(false);
            };
            if v != old {
                return Ok(false);
            }
            match set(&c, &path, new, Some(version), self.t).await? {
                Some(true) => return Ok(true),
                // Written in between (BadVersion) or deleted: nothing of
                // ours was written; look again.
                Some(false) | None => continue,
            }
        }
        Err(ClientError::Definite(format!(
            "cas on {path}: the version changed under us {CAS_ATTEMPTS} times in a row; nothing written"
        )))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn register_keys_never_nest() {
        assert_eq!(super::register_path("a/b"), "/registers/a%2Fb");
        assert_eq!(super::register_path("a%2Fb"), "/registers/a%252Fb");
    }
}
