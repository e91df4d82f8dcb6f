//! The passive wire tap: with `lockjaw run --tap-wire`, every framed
//! message on every proxy of the embedded Toxiproxy (each request, and the
//! reply paired with it) is written to `wire.jsonl` in the run directory,
//! one [`WireRecord`] per line, its moment on the run clock. Nothing is
//! held or changed. `lockjaw explore` learns from it what a client sends.
//!
//! CONTRACT (issue 41): the record and `read` are fixed; the tap is filled
//! in by the wire-tap work.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file a tapped run writes, in its run directory.
pub const FILE: &str = "wire.jsonl";

/// Which way a message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dir {
    /// Client to server.
    Request,
    /// Server to client (paired with its request by `seq`).
    Reply,
}

/// One framed message a proxy saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireRecord {
    /// Run clock (ns since the run's start), when the proxy had it whole.
    pub t_ns: u64,
    /// The proxy's name (`lockjaw-<run>-w<slot>-<node>`, `...-storage`).
    pub proxy: String,
    /// The connection's number on its proxy (from 0).
    pub conn: u64,
    pub dir: Dir,
    /// `redis` or `zookeeper`.
    pub proto: String,
    /// Redis: the command, upper case; ZooKeeper: the op name. A reply
    /// carries its request's.
    pub name: String,
    /// The request's number on its connection (a reply: its request's).
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    /// `EVAL`/`EVALSHA`: the script's first words (at most 60 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keepalive: bool,
    /// A reply: `ok`, `error`, `nil`, `int:<n>`, `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Request arguments that equal a known owner token are not recorded;
    /// true when the request carried the worker's current token.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub token: bool,
}

/// The worker slot and the node (or `storage`) of a proxy name
/// (`lockjaw-<run>-w<slot>-<node>`).
pub fn link_of(proxy: &str) -> Option<(usize, String)> {
    let (_, rest) = proxy.rsplit_once("-w").and_then(|(a, b)| {
        let (slot, node) = b.split_once('-')?;
        Some((a, (slot, node)))
    })?;
    Some((rest.0.parse().ok()?, rest.1.to_string()))
}

/// Read `wire.jsonl`; errors name the file and line.
pub fn read(path: &Path) -> Result<Vec<WireRecord>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| format!("{}:{}: not a wire record: {e}", path.display(), i + 1))
        })
        .collect()
}
