//! Network faults through the Toxiproxy 2.x HTTP API: an embedded
//! Toxiproxy-compatible server and the client the rest of lockjaw drives it
//! with.
//!
//! - [`server::spawn`] starts the embedded server in-process (port 0 for a
//!   free port) and returns a [`server::ServerHandle`] with its URL.
//! - [`client::ToxiproxyApi`] covers every endpoint; [`client::HttpClient`]
//!   implements it over HTTP, so the embedded server and an external
//!   Toxiproxy (`--toxiproxy http://host:8474`) are interchangeable.
//! - [`model`] holds the wire types (proxies, toxics, their JSON shapes).
//!
//! The proxy core is our own tokio proxy (`proxy`, `link`): the `noxious`
//! crate was tried and dropped because removing a latency toxic silently
//! lost the bytes it held and its latency compounded on pipelined chunks.

pub mod cli;
pub mod client;
mod collection;
mod frames;
mod link;
mod loops;
mod matcher;
pub mod model;
mod proxy;
pub mod server;
pub mod tap;

pub use client::{ClientError, HttpClient, ToxiproxyApi};
pub use collection::MAX_NAME_BYTES;
pub use frames::ZOOKEEPER_OPS;
pub use matcher::{command_flaw, COMMAND_HINT};
pub use model::{MatchAction, NewProxy, Proxy, ProxyUpdate, Stream, Toxic, ToxicKind, ToxicUpdate};
pub use proxy::MAX_CONNECTIONS;
pub use server::{spawn, spawn_bounded, spawn_loopback, ServerError, ServerHandle};
