//! Whole-host network cuts as iptables rules on a host, and libfaketime
//! control files there.

use super::{Host, RemoteError};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// The chain of a [`RemoteRule`]: packets from the peer, or to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemoteChain {
    #[serde(rename = "INPUT")]
    Input,
    #[serde(rename = "OUTPUT")]
    Output,
}

/// A whole-host cut between a host and one peer address:
/// `iptables -I INPUT -s PEER ... -j DROP` or `-I OUTPUT -d PEER ...`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRule {
    pub chain: RemoteChain,
    pub peer: IpAddr,
    /// `lockjaw:<run-id> partition-node <node>`.
    pub comment: String,
}

impl RemoteRule {
    /// Whether run `run_id` can have written this rule.
    pub fn check(&self, run_id: Option<&str>) -> Result<(), String> {
        let _ = run_id;
        Err("not built yet".into())
    }
}

/// Insert the rule on the host.
pub async fn insert_rule(host: &Host, r: &RemoteRule) -> Result<(), RemoteError> {
    let _ = r;
    Err(RemoteError::on(host, "not built yet"))
}

/// Delete the rule on the host; a rule that is not there counts as deleted.
pub async fn delete_rule(host: &Host, r: &RemoteRule) -> Result<(), RemoteError> {
    let _ = r;
    Err(RemoteError::on(host, "not built yet"))
}

/// The libfaketime control file `file` on the host: read the previous
/// offset, write `offset` (the syntax `Node::set_clock_offset` accepts).
pub async fn set_clock(host: &Host, file: &str, offset: &str) -> Result<String, RemoteError> {
    let _ = (file, offset);
    Err(RemoteError::on(host, "not built yet"))
}
