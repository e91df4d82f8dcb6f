//! The Redis Cluster protocol outside the lock: a key's hash slot (CRC16
//! with `{hash tags}`), the `MOVED` / `ASK` / `TRYAGAIN` redirections a
//! node answers with, and what `CLUSTER SLOTS`, `CLUSTER NODES` and
//! `CLUSTER INFO` say (who serves a slot, each node's role and master).
//!
//! The CRC16 is written here: the `redis` crate computes it only behind
//! its `cluster` feature, and not publicly.

use crate::auth::Auth;
use std::time::Duration;

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum
/// Redis Cluster hashes keys with.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: the text between the first `{` and
/// the first `}` after it, when that is not empty; else the whole key.
pub fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(len) = key[open + 1..].find('}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key`.
pub fn key_slot(key: &str) -> u16 {
    crc16(hash_tag(key).as_bytes()) % SLOTS
}

/// The lock's key on a Redis Cluster for the workload's key `key`:
/// `{key}`, so that its fence key ([`cluster_fence_key`]) hashes to the
/// same slot and one script may touch both.
pub fn cluster_lock_key(key: &str) -> String {
    format!("{{{key}}}")
}

/// The fence counter's key, in the lock key's slot.
pub fn cluster_fence_key(key: &str) -> String {
    format!("{{{key}}}:fence")
}

/// Whether the lock and fence keys of `key` share a slot (all but keys
/// that begin with `}`: their tag `{}` is empty).
pub fn one_slot(key: &str) -> bool {
    key_slot(&cluster_lock_key(key)) == key_slot(&cluster_fence_key(key))
}

/// A reply that proves the command did not run on the node that sent it,
/// and says where to send it instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `MOVED slot host:port`: the slot is served by that node now.
    Moved { slot: u16, addr: String },
    /// `ASK slot host:port`: the slot is migrating; send `ASKING` and the
    /// command to that node, once.
    Ask { slot: u16, addr: String },
    /// `TRYAGAIN`: the keys are split by a migration under way; retry.
    TryAgain,
}

impl Redirect {
    /// Parse an error reply's code and detail (`"MOVED"`, `"3999
    /// 127.0.0.1:6381"`). An empty host (`":6381"`, a node that does not
    /// know its own address) is taken from `from`, the node that answered.
    pub fn parse(code: &str, detail: &str, from: &str) -> Option<Redirect> {
        if code == "TRYAGAIN" {
            return Some(Redirect::TryAgain);
        }
        let mut it = detail.split_ascii_whitespace();
        let slot: u16 = it.next()?.parse().ok()?;
        let addr = it.next()?;
        let (host, port) = addr.rsplit_once(':')?;
        port.parse::<u16>().ok()?;
        let host = match host {
            "" | "?" => from.rsplit_once(':').map_or(from, |(h, _)| h),
            h => h,
        };
        let addr = format!("{host}:{port}");
        match code {
            "MOVED" => Some(Redirect::Moved { slot, addr }),
            "ASK" => Some(Redirect::Ask { slot, addr }),
            _ => None,
        }
    }

    /// The redirection a `redis` crate error carries, if it is one.
    pub fn of(e: &redis::RedisError, from: &str) -> Option<Redirect> {
        Redirect::parse(e.code()?, e.detail().unwrap_or_default(), from)
    }
}

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    pub id: String,
    /// `host:port` (the client port; the bus port and hostname dropped).
    pub addr: String,
    pub myself: bool,
    pub primary: bool,
    /// Flagged `fail` or `fail?`.
    pub failing: bool,
    /// The id of its primary (replicas).
    pub master: Option<String>,
    /// Slot ranges it serves (primaries), e.g. `(0, 5460)`.
    pub slots: Vec<(u16, u16)>,
}

impl NodeLine {
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Parse `CLUSTER NODES`; lines that do not parse are skipped.
pub fn parse_nodes(text: &str) -> Vec<NodeLine> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let addr = f[1].split(['@', ',']).next()?.to_string();
            let flags: Vec<&str> = f[2].split(',').collect();
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|a| (a, a)),
                })
                .collect();
            Some(NodeLine {
                id: f[0].to_string(),
                addr,
                myself: flags.contains(&"myself"),
                primary: flags.contains(&"master"),
                failing: flags.contains(&"fail") || flags.contains(&"fail?"),
                master: (f[3] != "-").then(|| f[3].to_string()),
                slots,
            })
        })
        .collect()
}

/// `cmd` at `addr`, as `auth`'s user (and over its TLS) when given.
async fn query<V: redis::FromRedisValue>(
    addr: &str,
    cmd: &redis::Cmd,
    auth: &Auth,
    t: Duration,
) -> Result<V, String> {
    let mut c = super::redis_query::connect_as(addr, auth, t).await?;
    tokio::time::timeout(t, cmd.query_async(&mut c))
        .await
        .map_err(|_| format!("{addr}: no answer within {t:?}"))?
        .map_err(|e| format!("{addr}: {}", super::redis_query::said(&e)))
}

/// [`nodes_as`] without credentials.
pub async fn nodes(addr: &str, t: Duration) -> Result<Vec<NodeLine>, String> {
    nodes_as(addr, &Auth::default(), t).await
}

/// [`info_as`] without credentials.
pub async fn info(
    addr: &str,
    t: Duration,
) -> Result<std::collections::HashMap<String, String>, String> {
    info_as(addr, &Auth::default(), t).await
}

/// [`replication_as`] without credentials.
pub async fn replication(
    addr: &str,
    t: Duration,
) -> Result<std::collections::HashMap<String, String>, String> {
    replication_as(addr, &Auth::default(), t).await
}

/// [`failover_as`] without credentials.
pub async fn failover(addr: &str, how: &str, t: Duration) -> Result<String, String> {
    failover_as(addr, how, &Auth::default(), t).await
}

/// `CLUSTER NODES` as the node at `addr` sees the cluster.
pub async fn nodes_as(addr: &str, auth: &Auth, t: Duration) -> Result<Vec<NodeLine>, String> {
    let text: String = query(addr, redis::cmd("CLUSTER").arg("NODES"), auth, t).await?;
    Ok(parse_nodes(&text))
}

/// `CLUSTER INFO` as `field → value`.
pub async fn info_as(
    addr: &str,
    auth: &Auth,
    t: Duration,
) -> Result<std::collections::HashMap<String, String>, String> {
    let text: String = query(addr, redis::cmd("CLUSTER").arg("INFO"), auth, t).await?;
    Ok(fields(&text))
}

/// `INFO replication` as `field → value`.
pub async fn replication_as(
    addr: &str,
    auth: &Auth,
    t: Duration,
) -> Result<std::collections::HashMap<String, String>, String> {
    let text: String = query(addr, redis::cmd("INFO").arg("replication"), auth, t).await?;
    Ok(fields(&text))
}

fn fields(text: &str) -> std::collections::HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The primary serving `slot`, as the node at `addr` sees it (announced
/// address); `None` when no primary serves it there.
pub async fn slot_owner_as(
    addr: &str,
    slot: u16,
    auth: &Auth,
    t: Duration,
) -> Result<Option<String>, String> {
    let ns = nodes_as(addr, auth, t).await?;
    Ok(ns
        .into_iter()
        .find(|n| n.primary && n.serves(slot))
        .map(|n| n.addr))
}

/// The settings a Redis Cluster's verdicts depend on (`CONFIG GET`):
/// failure detection, persistence, what a node serves while the cluster
/// is down, and whether writes wait for replicas.
pub async fn settings_as(
    addr: &str,
    auth: &Auth,
    t: Duration,
) -> Result<Vec<(String, String)>, String> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET");
    for k in [
        "cluster-node-timeout",
        "cluster-replica-validity-factor",
        "cluster-require-full-coverage",
        "cluster-allow-reads-when-down",
        "appendonly",
        "appendfsync",
        "min-replicas-to-write",
    ] {
        cmd.arg(k);
    }
    let m: std::collections::BTreeMap<String, String> = query(addr, &cmd, auth, t).await?;
    Ok(m.into_iter().collect())
}

/// `CLUSTER FAILOVER [FORCE|TAKEOVER]` (`how` empty for the coordinated
/// one) at the replica at `addr`: its reply.
pub async fn failover_as(
    addr: &str,
    how: &str,
    auth: &Auth,
    t: Duration,
) -> Result<String, String> {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("FAILOVER");
    if !how.is_empty() {
        cmd.arg(how);
    }
    query(addr, &cmd, auth, t).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_the_redis_cluster_specification() {
        // The check value of CRC16/XMODEM, and the spec's examples.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("bar"), 5061);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("{user1000}.followers"), key_slot("user1000"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_eq!(hash_tag("foo{}{bar}"), "foo{}{bar}");
        assert_eq!(hash_tag("foo{{bar}}zap"), "{bar");
        assert_eq!(hash_tag("foo{bar}{zap}"), "bar");
        assert_eq!(hash_tag("no tag"), "no tag");
    }

    #[test]
    fn the_fence_key_shares_the_lock_keys_slot() {
        for k in ["lockjaw", "a", "x{y}z", "a}b", "{"] {
            assert!(one_slot(k), "{k:?}");
        }
        // `{}x}`: an empty tag, so the whole keys are hashed.
        assert!(!one_slot("}x"));
        assert_eq!(cluster_lock_key("lockjaw"), "{lockjaw}");
    }

    #[test]
    fn redirections_parse_with_their_slot_and_address() {
        let from = "127.0.0.1:7000";
        assert_eq!(
            Redirect::parse("MOVED", "3999 127.0.0.1:6381", from),
            Some(Redirect::Moved {
                slot: 3999,
                addr: "127.0.0.1:6381".into()
            })
        );
        assert_eq!(
            Redirect::parse("ASK", "3999 10.0.0.2:7001", from),
            Some(Redirect::Ask {
                slot: 3999,
                addr: "10.0.0.2:7001".into()
            })
        );
        // A node that does not know a peer's address names only its port.
        assert_eq!(
            Redirect::parse("MOVED", "12 :7005", from),
            Some(Redirect::Moved {
                slot: 12,
                addr: "127.0.0.1:7005".into()
            })
        );
        assert_eq!(
            Redirect::parse("TRYAGAIN", "Multiple keys ...", from),
            Some(Redirect::TryAgain)
        );
        assert_eq!(Redirect::parse("MOVED", "x 127.0.0.1:1", from), None);
        assert_eq!(Redirect::parse("MOVED", "1 127.0.0.1", from), None);
        assert_eq!(
            Redirect::parse("CLUSTERDOWN", "The cluster is down", from),
            None
        );
    }

    #[test]
    fn cluster_nodes_lines_give_roles_masters_and_slots() {
        let text = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002,host2 master - 0 1426238316232 2 connected 5461-10922
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 16383 [93->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 slave,fail 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 5 connected
";
        let n = parse_nodes(text);
        assert_eq!(n.len(), 4);
        assert_eq!(n[0].master.as_deref(), Some(n[2].id.as_str()));
        assert!(!n[0].primary && n[1].primary && n[2].myself);
        assert_eq!(n[1].addr, "127.0.0.1:30002");
        assert_eq!(n[2].slots, vec![(0, 5460), (16383, 16383)]);
        assert!(n[2].serves(16383) && n[2].serves(0) && !n[2].serves(5461));
        assert!(n[3].failing && !n[1].failing);
    }
}
