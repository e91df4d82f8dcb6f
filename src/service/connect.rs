//! Connecting a system's clients: the lock, register and election clients
//! its registry entry constructs, after checking there is something to
//! connect to. The worker calls these.

use super::System;
use crate::client::election::ElectionClient;
use crate::client::register::RegisterClient;
use crate::client::{ClientConfig, ClientError, LockClient};

/// Connect a lock client for `system` (its registry entry's constructor).
pub async fn connect(
    system: System,
    cfg: &ClientConfig,
) -> Result<Box<dyn LockClient>, ClientError> {
    need_endpoints(system, cfg)?;
    system.service().connect(cfg).await
}

/// Connect a register client for `system` (read/write/cas on the lock
/// service's own store). Redlock has no single store: a definite error.
pub async fn connect_register(
    system: System,
    cfg: &ClientConfig,
) -> Result<Box<dyn RegisterClient>, ClientError> {
    need_endpoints(system, cfg)?;
    system.service().connect_register(cfg).await
}

/// Connect a leader-election client for `system`: etcd's election API,
/// ZooKeeper's recipe, or a Redis lease key (single server, or the
/// Sentinel-named primary). Redlock is unsupported: a definite error.
pub async fn connect_election(
    system: System,
    cfg: &ClientConfig,
) -> Result<Box<dyn ElectionClient>, ClientError> {
    need_endpoints(system, cfg)?;
    system.service().connect_election(cfg).await
}

fn need_endpoints(system: System, cfg: &ClientConfig) -> Result<(), ClientError> {
    if cfg.endpoints.is_empty() {
        return Err(ClientError::Definite(format!(
            "no endpoints given for {system} (hint: pass --endpoints host:port,...)"
        )));
    }
    Ok(())
}
