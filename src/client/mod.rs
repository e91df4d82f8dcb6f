//! Lock clients: one small trait, one file per lock service.
//!
//! A client acquires a named lock with a requested ttl and gets back a
//! [`Grant`] saying what the server actually granted: the lease length, the
//! owner id (lease, session or token id), the fencing token where the service
//! has one, and whether the acquire itself started the lease. Background
//! lease refreshes (etcd keep-alives, ZooKeeper's post-grant `sync`) are
//! recorded by the client itself through a [`crate::history::Sink`] under
//! the worker's lease process (e.g. `"3-lease"`), as `renew` ops.

use async_trait::async_trait;
use std::time::Duration;

/// What the lock service granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub key: String,
    /// Lease, session or token id; grants are compared by owner.
    pub owner: String,
    /// Fencing token, if the service has one (not Redlock).
    pub fence: Option<u64>,
    /// The lease length the server actually granted (not the requested one).
    pub lease: Duration,
    /// True when the acquire itself started the lease (Redis `SET .. PX`);
    /// false when the lease started earlier (etcd lease grant, ZK session).
    pub acquire_sets_ttl: bool,
}

/// Why an operation did not complete normally.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The operation certainly did not take effect (recorded as `fail`).
    #[error("{0}")]
    Definite(String),
    /// It may or may not have taken effect: a timeout, a lost connection
    /// after the request was written (recorded as `info`).
    #[error("{0}")]
    Indeterminate(String),
}

impl ClientError {
    pub fn is_definite(&self) -> bool {
        matches!(self, ClientError::Definite(_))
    }
}

/// One lock service client. Implementations live in one file per system.
#[async_trait]
pub trait LockClient: Send {
    /// Try to acquire `key` with the requested ttl, waiting at most `wait`
    /// for a holder to go away. `Ok(None)`: not granted (the lock is held).
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError>;

    /// Extend the grant's lease. `Ok(false)`: the lease is gone.
    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError>;

    /// Release the grant. `Ok(false)`: it was no longer held by us.
    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError>;
}
