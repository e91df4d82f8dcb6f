//! redlock lock client (being written).

use super::{ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use std::time::Duration;

pub struct RedlockClient;

impl RedlockClient {
    pub async fn connect(_cfg: &ClientConfig) -> Result<RedlockClient, ClientError> {
        Err(ClientError::Definite("not implemented yet".into()))
    }
}

#[async_trait]
impl LockClient for RedlockClient {
    async fn acquire(
        &mut self,
        _key: &str,
        _ttl: Duration,
        _wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        unimplemented!()
    }
    async fn renew(&mut self, _grant: &Grant) -> Result<bool, ClientError> {
        unimplemented!()
    }
    async fn release(&mut self, _grant: &Grant) -> Result<bool, ClientError> {
        unimplemented!()
    }
}
