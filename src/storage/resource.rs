//! The protected resource as the workers and the final read see it: one
//! request in, one definite answer or a [`CallError`] out. lockjaw's own
//! storage service ([`StorageClient`]) implements it, and so can any other
//! backend (a database table), so the steppers, the history recording in
//! [`super::record`] and the runner's final read stay the same whatever
//! holds the protected value.
//!
//! The request is the storage protocol's [`Request`]: new kinds of request
//! or new fields land there, not in this trait.

use super::client::{CallError, Reply, StorageClient};
use super::protocol::Request;
use async_trait::async_trait;

/// Something that applies storage requests in one order and numbers them.
#[async_trait]
pub trait Resource: Send {
    /// Apply one request and wait for its answer. An `Err` that
    /// [`CallError::is_indeterminate`] may have been applied.
    async fn call(&mut self, req: Request) -> Result<Reply, CallError>;
}

#[async_trait]
impl Resource for StorageClient {
    async fn call(&mut self, req: Request) -> Result<Reply, CallError> {
        StorageClient::call(self, req).await
    }
}
