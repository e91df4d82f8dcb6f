//! etcd register: a linearizable `get` (etcd's default, not serializable),
//! `put`, and compare-and-set as one transaction: if the key's value equals
//! `old` then put `new`. A txn on an absent key fails its compare. Values
//! are decimal strings under the key as given.

use super::{parse, read_error, RegisterClient};
use crate::client::etcd::{classify, open};
use crate::client::{timed, ClientConfig, ClientError};
use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp};
use std::time::Duration;

pub struct EtcdRegister {
    client: Client,
    t: Duration,
}

impl EtcdRegister {
    pub async fn connect(cfg: &ClientConfig) -> Result<EtcdRegister, ClientError> {
        Ok(EtcdRegister {
            client: open(cfg, Some(cfg.op_timeout)).await?,
            t: cfg.op_timeout,
        })
    }
}

#[async_trait]
impl RegisterClient for EtcdRegister {
    async fn read(&mut self, key: &str) -> Result<Option<i64>, ClientError> {
        let c = &mut self.client;
        timed(self.t, "get", async {
            let r = c.get(key, None).await.map_err(|e| classify("get", e))?;
            r.kvs().first().map(|kv| parse(key, kv.value())).transpose()
        })
        .await
        .map_err(read_error)
    }

    async fn write(&mut self, key: &str, value: i64) -> Result<(), ClientError> {
        let c = &mut self.client;
        timed(self.t, "put", async {
            c.put(key, value.to_string(), None)
                .await
                .map(drop)
                .map_err(|e| classify("put", e))
        })
        .await
    }

    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError> {
        let txn = Txn::new()
            .when([Compare::value(key, CompareOp::Equal, old.to_string())])
            .and_then([TxnOp::put(key, new.to_string(), None)]);
        let c = &mut self.client;
        timed(self.t, "cas txn", async {
            c.txn(txn)
                .await
                .map(|r| r.succeeded())
                .map_err(|e| classify("cas txn", e))
        })
        .await
    }
}
