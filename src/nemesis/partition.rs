//! `partition-node`: one server cut off from its peers with iptables rules
//! in the OUTPUT chain that match the sender's cgroup (every node runs in a
//! cgroup v2 of its own) and the receiver's port. Clients are not cut: they
//! reach the node through Toxiproxy, which runs in lockjaw's cgroup.
//!
//! For the cut node A and every other node B (servers and sentinels):
//! - A's packets to B's peer ports and B's packets to A's peer ports are
//!   dropped (no new connection forms; the dialler's side of an existing
//!   one goes quiet);
//! - for every connection already established between A and B, the other
//!   direction (acceptor → dialler's ephemeral port, found through
//!   `/proc/net/tcp*` and the nodes' socket inodes) gets a rule of its own,
//!   so no data keeps flowing one way.
//!
//! Peer ports: etcd's peer port, ZooKeeper's quorum and election ports; for
//! Redis under Sentinel the client port (replication and sentinels use it);
//! for Redis Cluster the bus port and the client port: the cut node loses
//! its gossip and failover votes with every other node and its replication
//! link too (a primary cut off from its replica as from the other
//! primaries, as a network partition would cut it).
//! Every rule is a typed [`Rule`], written to the undo log before it is
//! inserted, and carries the comment `lockjaw:<run-id> partition-node
//! <node>`, so `lockjaw heal` and a look at `iptables -S OUTPUT` find them,
//! and two runs on one host never take each other's rules for their own:
//! heal deletes only rules whose comment and cgroup carry its run's id.

use super::node::{keep_or_revert, pick};
use super::{Ctx, Fault, Nemesis, NemesisError};
use crate::cluster::{Cluster, Node};
use crate::undo::iptables::Rule;
use crate::undo::{RemoteEffect, Undo};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::Path;

/// How often a stop asks who leads while the node is still cut off.
const LEADER_POLLS: u32 = 5;

/// Whether this host can cut a node off: a writable cgroup v2 hierarchy
/// (each node gets its own cgroup) and a working `iptables`.
pub fn host_ready() -> Result<(), String> {
    if crate::process::Cgroup::root().is_none() {
        return Err("this host has no writable cgroup v2 hierarchy to put each node in (hint: run as root on a host with cgroup2 mounted, e.g. at /sys/fs/cgroup or /sys/fs/cgroup/unified)".into());
    }
    match std::process::Command::new("iptables").args(["-w", "-S", "OUTPUT"]).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "iptables -S OUTPUT failed: {} (hint: partition-node needs root and the iptables package)",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "cannot run iptables: {e} (hint: install the iptables package)"
        )),
    }
}

/// The ports a node's peers use to reach it.
pub fn peer_ports(n: &Node) -> Vec<u16> {
    match (n.ports.peer, n.ports.bus) {
        (Some(p), _) => std::iter::once(p).chain(n.ports.election).collect(),
        (None, Some(bus)) => vec![bus, n.ports.client],
        (None, None) => vec![n.ports.client],
    }
}

/// The comment every rule of run `run_id` carries.
pub fn rule_tag(run_id: &str, node: &str) -> String {
    format!("lockjaw:{run_id} partition-node {node}")
}

/// Established TCP connections of the processes in a cgroup:
/// (local port, remote port).
pub fn connections(cgroup_dir: &Path) -> Vec<(u16, u16)> {
    let inodes = socket_inodes(cgroup_dir);
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        out.extend(
            parse_tcp_table(&text, TCP_ESTABLISHED)
                .into_iter()
                .filter(|(_, _, inode)| inodes.contains(inode))
                .map(|(l, r, _)| (l, r)),
        );
    }
    out
}

fn socket_inodes(cgroup_dir: &Path) -> HashSet<u64> {
    let pids = std::fs::read_to_string(cgroup_dir.join("cgroup.procs")).unwrap_or_default();
    let mut inodes = HashSet::new();
    for pid in pids.split_whitespace() {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let link = link.to_string_lossy();
            if let Some(n) = link
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.parse().ok())
            {
                inodes.insert(n);
            }
        }
    }
    inodes
}

/// The `st` column of an established connection in `/proc/net/tcp`.
pub const TCP_ESTABLISHED: &str = "01";
/// The `st` column of a listening socket in `/proc/net/tcp`.
pub const TCP_LISTEN: &str = "0A";

/// (local port, remote port, inode) of every row in `state` (e.g.
/// [`TCP_ESTABLISHED`]) of a `/proc/net/tcp` or `tcp6` table.
pub fn parse_tcp_table(text: &str, state: &str) -> Vec<(u16, u16, u64)> {
    let port = |addr: &str| {
        addr.rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 || f[3] != state {
                return None;
            }
            Some((port(f[1])?, port(f[2])?, f[9].parse().ok()?))
        })
        .collect()
}

/// The rules that cut `a` off from `b`: ports first, then the open
/// connections' uncovered directions.
fn port_rules(a: &Node, b: &Node, tag: &str) -> Result<Vec<Rule>, String> {
    let (ca, cb) = (cgroup_of(a)?, cgroup_of(b)?);
    Ok(vec![
        Rule::drop_tcp(&ca.iptables_path, None, &peer_ports(b), tag),
        Rule::drop_tcp(&cb.iptables_path, None, &peer_ports(a), tag),
    ])
}

fn connection_rules(a: &Node, b: &Node, tag: &str) -> Result<Vec<Rule>, String> {
    let (ca, cb) = (cgroup_of(a)?, cgroup_of(b)?);
    let (pa, pb) = (peer_ports(a), peer_ports(b));
    let theirs: HashSet<(u16, u16)> = connections(&cb.dir).into_iter().collect();
    let mut rules = Vec::new();
    for (la, ra) in connections(&ca.dir) {
        if !theirs.contains(&(ra, la)) {
            continue;
        }
        // A dialled B: A → B is dropped by port; drop B → A too.
        if pb.contains(&ra) {
            rules.push(Rule::drop_tcp(&cb.iptables_path, Some(ra), &[la], tag));
        }
        // B dialled A: B → A is dropped by port; drop A → B too.
        if pa.contains(&la) {
            rules.push(Rule::drop_tcp(&ca.iptables_path, Some(la), &[ra], tag));
        }
    }
    Ok(rules)
}

fn cgroup_of(n: &Node) -> Result<&crate::process::Cgroup, String> {
    n.cgroup.as_ref().ok_or_else(|| {
        format!(
            "node {} runs in no cgroup of its own (hint: partition-node needs a writable cgroup v2 hierarchy, e.g. /sys/fs/cgroup/unified, and root)",
            n.name
        )
    })
}

/// `iptables -I <args>` (the rule goes first in its chain).
pub async fn insert(args: &[String]) -> Result<(), String> {
    let out = tokio::process::Command::new("iptables")
        .arg("-w")
        .arg("-I")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("cannot run iptables: {e} (hint: install the iptables package)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables -I {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Cut one server off from every other node.
pub struct PartitionNode;

impl PartitionNode {
    async fn apply(
        ctx: &mut Ctx,
        fault: &str,
        ids: &mut Vec<u64>,
        rules: Vec<Rule>,
    ) -> Result<usize, NemesisError> {
        let n = rules.len();
        for rule in rules {
            let r = match ctx.will(fault, Undo::Iptables(rule.clone())) {
                Ok(id) => insert(&rule.args())
                    .await
                    .map(|_| id)
                    .map_err(|e| NemesisError::new(fault, e)),
                Err(e) => Err(e),
            };
            keep_or_revert(ctx, fault, ids, r).await?;
        }
        Ok(n)
    }
}

/// `partition-node` on hosts: on the cut node's host, drop every packet
/// from and to each peer's address (INPUT and OUTPUT rules with the run's
/// comment, each in the undo log first, after the dead man's switch that
/// deletes them should lockjaw not come back). lockjaw's proxies, on the control
/// host, still reach it. Then a peer's host tries a new connection to the
/// cut node's peer port (1 s), and the result is recorded with the leader
/// before the cut.
async fn cut_host(
    ctx: &mut Ctx,
    cluster: &Cluster,
    a: &Node,
    r: &crate::cluster::RemoteNode,
) -> Result<Fault, NemesisError> {
    use crate::remote::{insert_rule, RemoteChain, RemoteRule};
    let fault = "partition-node";
    let err = |m: String| NemesisError::new(fault, m);
    let leader_before = match cluster.leader_of(&ctx.lock_key).await {
        Ok(Some(n)) => Some(n.name.clone()),
        _ => None,
    };
    let tag = rule_tag(&ctx.run_id, &a.name);
    let peers = others(cluster, &a.name);
    let mut rules = Vec::new();
    for b in &peers {
        let ip = b
            .remote
            .as_ref()
            .map(|p| p.spec.address)
            .ok_or_else(|| err(format!("node {} is not on a host", b.name)))?;
        if ip == r.spec.address {
            return Err(err(format!(
                "nodes {} and {} share the address {ip}, so one cannot be cut off from the other (hint: give each node a host of its own in the hosts file)",
                a.name, b.name
            )));
        }
        for chain in [RemoteChain::Input, RemoteChain::Output] {
            rules.push(RemoteRule {
                chain,
                peer: ip,
                comment: tag.clone(),
            });
        }
    }
    let entries: Vec<Undo> = rules
        .iter()
        .map(|rule| r.undo(RemoteEffect::Iptables(rule.clone())))
        .collect();
    ctx.deadman.hold = Some(ctx.spec.duration(ctx.ttl));
    super::deadman::arm(ctx, fault, &a.name, &entries).await?;
    let invoked_at = ctx.clock.now();
    let mut ids = Vec::new();
    for (rule, entry) in rules.iter().zip(entries) {
        let res = match ctx.will(fault, entry) {
            Ok(id) => insert_rule(&r.host, rule)
                .await
                .map(|_| id)
                .map_err(|e| err(e.to_string())),
            Err(e) => Err(e),
        };
        if let Err(e) = keep_or_revert(ctx, fault, &mut ids, res).await {
            super::deadman::disarm(ctx, &a.name).await;
            return Err(e);
        }
    }
    let probe = match peers
        .first()
        .and_then(|b| b.remote.as_ref().map(|p| (b, p)))
    {
        Some((b, p)) => {
            let port = peer_ports(a)[0];
            let to = format!("{}:{port}", r.spec.address);
            let (connected, result) = try_connect(&p.host, &r.spec.address.to_string(), port).await;
            json!({ "from": b.name, "to": to, "connected": connected, "result": result })
        }
        None => Value::Null,
    };
    Ok(Fault {
        invoked_at,
        undo: ids,
        hold: ctx.spec.duration(ctx.ttl),
        target: json!({
            "target": ctx.spec.target.name(),
            "node": a.name,
            "host": r.spec.name,
            "peers": peers.iter().map(|n| n.name.clone()).collect::<Vec<_>>(),
            "host_rules": rules.len(),
            "leader_before": leader_before,
            "peer_probe": probe,
        }),
        state: json!({ "node": a.name }),
    })
}

/// From `host`, open a TCP connection to `ip:port` (at most 1 s):
/// (connected, what happened).
async fn try_connect(host: &crate::remote::Host, ip: &str, port: u16) -> (bool, String) {
    let script = format!(
        "if timeout 1 bash -c 'exec 3<>/dev/tcp/{ip}/{port}' 2>/dev/null; then echo connected; else echo \"failed (exit $?)\"; fi"
    );
    match host.sh(&script).await {
        Ok(out) => {
            let out = out.trim().to_string();
            (out == "connected", out)
        }
        Err(e) => (false, format!("probe not run: {e}")),
    }
}

fn others<'a>(cluster: &'a Cluster, name: &str) -> Vec<&'a Node> {
    cluster.nodes().iter().filter(|n| n.name != name).collect()
}

#[async_trait]
impl Nemesis for PartitionNode {
    fn name(&self) -> &'static str {
        "partition-node"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.is_stopping() {
            return Ok(None);
        }
        let fault = self.name();
        let err = |m: String| NemesisError::new(fault, m);
        let name = pick(ctx, fault, ctx.spec.target)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| err("no node to cut off".into()))?;
        super::attached::guard(ctx, fault, std::slice::from_ref(&name))?;
        let cluster = ctx.cluster.clone();
        let a = cluster.node(&name).map_err(|e| err(e.to_string()))?;
        if let Some(r) = &a.remote {
            return cut_host(ctx, &cluster, a, r).await.map(Some);
        }
        let tag = rule_tag(&ctx.run_id, &name);
        let peers = others(&cluster, &name);
        let mut by_port = Vec::new();
        for b in &peers {
            by_port.extend(port_rules(a, b, &tag).map_err(err)?);
        }
        let invoked_at = ctx.clock.now();
        let mut ids = Vec::new();
        let ports = Self::apply(ctx, fault, &mut ids, by_port).await?;
        // No new connection can form now: the open ones are all there is.
        let mut by_conn = Vec::new();
        for b in &peers {
            match connection_rules(a, b, &tag) {
                Ok(r) => by_conn.extend(r),
                Err(e) => {
                    let _ = ctx.revert(fault, &ids).await;
                    return Err(err(e));
                }
            }
        }
        let conns = Self::apply(ctx, fault, &mut ids, by_conn).await?;
        Ok(Some(Fault {
            invoked_at,
            undo: ids,
            hold: ctx.spec.duration(ctx.ttl),
            target: json!({
                "target": ctx.spec.target.name(),
                "node": name,
                "peers": peers.iter().map(|n| n.name.clone()).collect::<Vec<_>>(),
                "port_rules": ports,
                "connection_rules": conns,
            }),
            state: json!({ "node": name }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        // Who leads while the node is still cut off (before healing). One
        // poll may find no member answering as leader on a loaded machine
        // (a status request past its timeout, an election in progress):
        // ask again, a few times, before the cut is healed.
        let mut leader = None;
        for attempt in 0..LEADER_POLLS {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            if let Ok(Some(n)) = ctx.cluster.leader_of(&ctx.lock_key).await {
                leader = Some(n.name.clone());
                break;
            }
        }
        ctx.revert(self.name(), &fault.undo).await?;
        let node = fault.state["node"].as_str().unwrap_or_default().to_string();
        let switch = super::deadman::disarm_all(ctx, &[node]).await;
        Ok(super::deadman::merged(
            json!({ "leader_while_cut": leader, "healed_rules": fault.undo.len() }),
            switch,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn established_rows_of_both_tables_parse() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:AFC9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0 100 0 0 10 0\n\
   1: 0100007F:AFC9 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2222 1 0 20 4 30 10 -1\n";
        assert_eq!(
            parse_tcp_table(v4, TCP_ESTABLISHED),
            vec![(0xAFC9, 0xD431, 2222)]
        );
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0000000000000000FFFF00000100007F:AFCA 0000000000000000FFFF00000100007F:AFCB 01 00000000:00000000 00:00000000 00000000     0        0 3333 1 0 20 4 30 10 -1\n";
        assert_eq!(
            parse_tcp_table(v6, TCP_ESTABLISHED),
            vec![(0xAFCA, 0xAFCB, 3333)]
        );
    }

    #[test]
    fn our_own_connections_are_found_through_proc() {
        // This test process's own cgroup holds a connection we open.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _s = l.accept().unwrap();
        let inodes = socket_inodes(Path::new("/nonexistent"));
        assert!(inodes.is_empty());
        let mut all = Vec::new();
        for t in ["/proc/net/tcp", "/proc/net/tcp6"] {
            all.extend(parse_tcp_table(
                &std::fs::read_to_string(t).unwrap(),
                TCP_ESTABLISHED,
            ));
        }
        assert!(all.iter().any(|(l, _, _)| *l == port), "the accepted side");
        assert!(all.iter().any(|(_, r, _)| *r == port), "the dialling side");
    }
}
