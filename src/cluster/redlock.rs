//! Redlock's servers: N independent Redis nodes (no replication between
//! them), started exactly as single Redis nodes are (see `redis.rs`). The
//! algorithm itself lives in the client (`client/redlock.rs`).

/// Redlock nodes by default (quorum 3).
pub const DEFAULT_NODES: usize = 5;
