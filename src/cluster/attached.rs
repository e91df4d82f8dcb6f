//! A cluster of servers lockjaw did not start (`--hosts FILE --attach`):
//! every node of the file allowing the system, each with an `attach`
//! table. Before the run: one SSH connection per host (its master in the
//! undo log), the tools the faults need, discovery of exactly the
//! described processes (an `AttachedFound` entry per node, before any
//! fault), and every node answering its health check with the cluster
//! ready (a leader elected), then each found process proven to be its
//! node's server ([`super::proof`]). The servers are never stopped at the end
//! ([`Mode::Adopted`]); the run ends by checking that each answers again
//! and copying its log lines of the run's window.

use super::hosts::connect_all;
use super::node::{AttachedNode, RemoteNode};
use super::{Cluster, ClusterError, ClusterSpec, Mode, Node};
use crate::remote::HostSpec;
use crate::undo::UndoLog;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What attaching to a cluster needs beyond its spec.
pub struct OnAttached<'a> {
    /// Every node of the file allowing the system, each with `attach`.
    pub hosts: &'a [HostSpec],
    pub undo: &'a UndoLog,
    /// A fault will cut hosts off (`iptables` must be there).
    pub iptables: bool,
}

/// How long each node may take to answer before the run (polled).
const HEALTHY_WITHIN: Duration = Duration::from_secs(3);

fn undo_err(e: std::io::Error) -> ClusterError {
    ClusterError::Io(format!("cannot write the undo log: {e}"))
}

fn node_of(h: &HostSpec, a: Arc<AttachedNode>, host: RemoteNode) -> Node {
    let mut n = Node::dialled(h.name.clone(), a.role(), &a.client);
    n.remote = Some(host);
    n.attached = Some(a);
    n
}

impl Cluster {
    /// Attach to the running servers of `on.hosts` and check that the
    /// cluster is healthy; nothing on the hosts is changed.
    pub async fn adopt(spec: &ClusterSpec, on: OnAttached<'_>) -> Result<Cluster, ClusterError> {
        if on.hosts.is_empty() {
            return Err(ClusterError::Usage(
                "--attach: the hosts file has no node for this system".into(),
            ));
        }
        let dir = std::path::absolute(&spec.dir).map_err(|e| super::io_err(&spec.dir, e))?;
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| super::io_err(&dir, e))?;
        let hosts = connect_all(on.hosts, on.undo).await?;
        let found = futures::future::join_all(hosts.iter().zip(on.hosts).map(|(host, h)| {
            AttachedNode::discover(host.clone(), h.clone(), spec.system.host_base_port())
        }))
        .await;
        let mut nodes = Vec::new();
        for ((f, h), host) in found.into_iter().zip(on.hosts).zip(&hosts) {
            let a = Arc::new(f.map_err(|e| ClusterError::Unhealthy {
                node: h.name.clone(),
                msg: format!("discovery: {e}"),
            })?);
            // Before anything is done to it: what heal proves against.
            on.undo.push(a.found_entry()).map_err(undo_err)?;
            let r = RemoteNode {
                host: host.clone(),
                spec: h.clone(),
                tag: "attached".into(),
                files: Vec::new(),
            };
            nodes.push(node_of(h, a, r));
        }
        let checks = nodes.iter().map(|n| {
            let a = n.attached.as_ref().expect("set above");
            async move { a.check_tools(on.iptables).await }
        });
        for r in futures::future::join_all(checks).await {
            r.map_err(|e| ClusterError::Unhealthy {
                node: e.host.clone(),
                msg: e.msg,
            })?;
        }
        let cluster = Cluster {
            system: spec.system,
            mode: Mode::Adopted,
            auth: spec.auth.clone(),
            dir: Some(dir),
            base_port: 0,
            faketime: false,
            detached: true,
            group: None,
            nodes,
            closed: std::sync::Mutex::new(false),
            spawned_in: None,
        };
        cluster.healthy_before(spec.health_timeout).await?;
        cluster.prove_attached().await?;
        Ok(cluster)
    }

    /// Prove each attached node's found processes are its server (its own
    /// answer, else its listening socket; [`super::proof`]), before any
    /// fault: the first that cannot be proven is refused with why.
    pub async fn prove_attached(&self) -> Result<(), ClusterError> {
        let proofs = self.nodes.iter().filter_map(|n| {
            let a = n.attached.as_ref()?;
            Some(async move { (n, a.prove(self.system, &self.auth, true).await) })
        });
        for (n, r) in futures::future::join_all(proofs).await {
            r.map_err(|msg| ClusterError::Unhealthy {
                node: n.name.clone(),
                msg,
            })?;
        }
        Ok(())
    }

    /// Every node answers (each polled for at most [`HEALTHY_WITHIN`]: a
    /// cluster that is not healthy is refused, not waited for; one slow
    /// answer on a loaded machine is not a sick node) and the cluster is
    /// ready (a leader elected, within `timeout`).
    async fn healthy_before(&self, timeout: Duration) -> Result<(), ClusterError> {
        if let Some((node, why)) = self.unanswering(HEALTHY_WITHIN).await.into_iter().next() {
            return Err(ClusterError::Unhealthy {
                node,
                msg: unhealthy(&why),
            });
        }
        self.system
            .wait_cluster_ready(self, Instant::now() + timeout, timeout)
            .await
    }

    /// Refuse to run over keys that exist already: the run's lock key
    /// carries its id, so any key under it is another's (or a replay).
    /// Asked of the first server that answers; a system that cannot say
    /// is not asked.
    pub async fn no_keys_under(&self, prefix: &str) -> Result<(), ClusterError> {
        let t = Duration::from_secs(2);
        let mut last = String::from("no server");
        for n in self.servers() {
            match self.system.keys_with_prefix(&n.addr, prefix, &self.auth, t).await {
                Ok(None) | Ok(Some(0)) => return Ok(()),
                Ok(Some(k)) => {
                    return Err(ClusterError::Usage(format!(
                        "{k} key(s) under {prefix:?} exist on the cluster already: refused (hint: they are not this run's; remove them, or run again for a new run id)"
                    )))
                }
                Err(e) => last = e,
            }
        }
        Err(ClusterError::Query {
            endpoint: self.client_endpoints().join(","),
            msg: format!("cannot list the keys under {prefix:?}: {last}"),
        })
    }

    /// The attached nodes that do not answer their health check within
    /// `timeout` (each polled), with why.
    pub async fn unanswering(&self, timeout: Duration) -> Vec<(String, String)> {
        let deadline = Instant::now() + timeout;
        let waits = self.nodes.iter().map(|n| async move {
            loop {
                match self.probe(n).await {
                    Ok(()) => return None,
                    Err(why) if Instant::now() >= deadline => {
                        return Some((n.name.clone(), format!("{}: {why}", n.addr)))
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        });
        futures::future::join_all(waits)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Copy each attached node's log lines since it was found into
    /// `logs/NODE.log`; the nodes whose log could not be read, with why.
    pub async fn copy_attached_logs(&self) -> Vec<String> {
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        for n in &self.nodes {
            let Some(a) = &n.attached else {
                continue;
            };
            match a.log_since().await {
                Ok(Some(text)) => {
                    let local = dir.join("logs").join(format!("{}.log", n.name));
                    if let Err(e) = super::write_file(&local, &text) {
                        problems.push(format!("node {}: {e}", n.name));
                    }
                }
                Ok(None) => {}
                Err(e) => problems.push(format!("node {}: its log: {e}", n.name)),
            }
        }
        problems
    }
}

/// Why an attached node that does not answer its health check is refused
/// (`why`: `ADDR: what the probe said`): a server that wants credentials
/// says so, with the hint of `--auth`.
fn unhealthy(why: &str) -> String {
    use crate::client::redis_query::{AUTH_HINT, NEEDS_PASSWORD};
    if why.contains(NEEDS_PASSWORD) {
        return format!("{why} (hint: {AUTH_HINT})");
    }
    format!(
        "{why}: does not answer its health check within {HEALTHY_WITHIN:?} (hint: lockjaw attaches only to a healthy cluster; bring the node back first)"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_server_that_wants_a_password_is_told_with_the_auth_hint() {
        let m =
            super::unhealthy("10.0.0.3:6379: needs a password (NOAUTH Authentication required.)");
        assert_eq!(m, "10.0.0.3:6379: needs a password (NOAUTH Authentication required.) (hint: give the credentials with --auth FILE (docs/auth.md))");
        let m = super::unhealthy("10.0.0.3:6379: connection refused");
        assert!(m.contains("bring the node back first"), "{m}");
    }
}
