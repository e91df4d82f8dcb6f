//! The protected storage: a fenced register/counter/set service on loopback.
//!
//! The resource a lock guards. Workers reach it through Toxiproxy with
//! [`client::StorageClient`], behind the [`Resource`] trait that other
//! backends implement too; the controller embeds the server with
//! [`server::spawn`]. Each request reads or writes a whole JSON value per key
//! and may carry the client's fencing token. The server numbers every request
//! it handles (`seq`, strictly increasing over all keys) and, with fencing on,
//! refuses a request whose fence is below the highest fence the key has seen
//! on any request, reads included. [`record`] turns client calls into history
//! ops; [`protocol`] is the wire format; [`store`] the state machine.

pub mod cli;
pub mod client;
pub mod mariadb;
pub mod postgres;
pub mod protocol;
pub mod record;
pub mod resource;
pub mod serve;
pub mod server;
mod sql_answer;
pub mod store;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub use client::{CallError, ClientConfig, Reply, StorageClient};
pub use resource::Resource;
pub use server::{spawn, SpawnError, StorageHandle, StorageStats};
pub use store::StorageSnapshot;

/// Whether the storage enforces the fence rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Fencing {
    /// Refuse requests whose fence is below the key's highest seen fence.
    On,
    /// Accept every request (still numbered).
    Off,
}

impl Fencing {
    pub fn is_on(self) -> bool {
        self == Fencing::On
    }
}

/// How an embedded storage server starts.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageConfig {
    pub fencing: Fencing,
    /// Initial values per key (e.g. `counter` → 0, `set` → []); every other
    /// key starts absent (`null`).
    pub initial: BTreeMap<String, Value>,
    /// Bytes of unfinished request lines held over all connections at most
    /// ([`protocol::MAX_PARTIAL`] by default).
    pub max_partial_bytes: usize,
}

impl StorageConfig {
    /// A config with no initial values.
    pub fn new(fencing: Fencing) -> StorageConfig {
        StorageConfig {
            fencing,
            initial: BTreeMap::new(),
            max_partial_bytes: protocol::MAX_PARTIAL,
        }
    }

    /// Set `key`'s initial value.
    pub fn with_initial(mut self, key: impl Into<String>, value: Value) -> StorageConfig {
        self.initial.insert(key.into(), value);
        self
    }
}
