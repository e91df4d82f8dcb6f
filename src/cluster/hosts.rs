//! A cluster on other hosts (`--hosts FILE`): one data node per host of the
//! hosts file, planned by the system's registry entry with the host's
//! address, ports and directory (`DATA_DIR/lockjaw-<run-id>` there), started
//! over SSH as a process tagged `LOCKJAW_TAG=lockjaw-<run-id>-<node>`.
//!
//! Before anything starts, lockjaw connects to every host (one
//! ControlMaster each, at most 5 s) and checks its tools: the server
//! programs, `iptables` when a fault cuts hosts off, libfaketime when one
//! moves clocks. Every effect is in the undo log before it happens: the
//! master's socket (right after the connection, the earliest it is known),
//! the run's directory on the host, the tagged processes. The node handle
//! ([`super::Node`]) pauses, kills, restarts and moves the clock of a
//! remote node through the same connection. Clients never run there:
//! workers stay on this host and dial the nodes through their proxies.

use super::node::RemoteNode;
use super::{At, Cluster, ClusterError, ClusterSpec, Mode, Plan, RemoteFiles};
use crate::remote::{control_root, Host, HostSpec, RemoteError};
use crate::undo::{RemoteEffect, Undo, UndoLog};
use std::path::PathBuf;
use std::sync::Arc;

/// What starting a cluster on hosts needs beyond its spec.
pub struct OnHosts<'a> {
    /// One host per data node ([`crate::remote::HostsFile::for_system`]).
    pub hosts: &'a [HostSpec],
    pub run_id: &'a str,
    pub undo: &'a UndoLog,
    /// A fault will cut hosts off (`iptables` must be there).
    pub iptables: bool,
}

/// The tag of node `name`'s processes in run `run_id`.
pub fn tag(run_id: &str, name: &str) -> String {
    format!("lockjaw-{run_id}-{name}")
}

/// The run's directory on a host.
pub fn run_dir_on(h: &HostSpec, run_id: &str) -> PathBuf {
    PathBuf::from(&h.data_dir).join(format!("lockjaw-{run_id}"))
}

fn remote_err(e: RemoteError) -> ClusterError {
    ClusterError::Unhealthy {
        node: e.host,
        msg: e.msg,
    }
}

/// Connect to every host at once; every master's socket goes into the
/// undo log as soon as it exists.
pub async fn connect_all(
    hosts: &[HostSpec],
    undo: &UndoLog,
) -> Result<Vec<Arc<Host>>, ClusterError> {
    let root = control_root();
    let all = futures::future::join_all(
        hosts
            .iter()
            .map(|h| Host::connect(&h.name, &h.target, &root)),
    )
    .await;
    let mut out = Vec::new();
    let mut first_err = None;
    for r in all {
        match r {
            Ok(h) => {
                undo.push(Undo::SshMaster {
                    socket: h.control_socket(),
                })
                .map_err(|e| ClusterError::Io(format!("cannot write the undo log: {e}")))?;
                out.push(h.shared());
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(remote_err(e)),
        None => Ok(out),
    }
}

impl Cluster {
    /// Start a cluster of `spec.system` on `on.hosts` and wait until it is
    /// healthy. On any error what started is stopped again.
    pub async fn start_on_hosts(
        spec: &ClusterSpec,
        on: OnHosts<'_>,
    ) -> Result<Cluster, ClusterError> {
        let system = spec.system;
        if on.hosts.is_empty() {
            return Err(ClusterError::Usage(
                "--hosts: no host to start a node on".into(),
            ));
        }
        let dir = std::path::absolute(&spec.dir).map_err(|e| super::io_err(&spec.dir, e))?;
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| super::io_err(&dir, e))?;
        let ats: Vec<At> = on
            .hosts
            .iter()
            .map(|h| At {
                ip: h.address.to_string(),
                base_port: h.base_port.unwrap_or(system.host_base_port()),
                dir: run_dir_on(h, on.run_id),
            })
            .collect();
        let files = RemoteFiles::default();
        let no_cgroup = |_: &str| None;
        let mut nodes = system.plan(&Plan {
            spec,
            dir: &dir,
            n: on.hosts.len(),
            base: 0,
            cg: &no_cgroup,
            at: Some(&ats),
            files: Some(&files),
        })?;
        let hosts = connect_all(on.hosts, on.undo).await?;
        let files = files.into_inner();
        for (i, (n, h)) in nodes.iter_mut().zip(on.hosts).enumerate() {
            n.remote = Some(RemoteNode {
                host: hosts[i].clone(),
                spec: h.clone(),
                tag: tag(on.run_id, &n.name),
                files: files
                    .iter()
                    .filter(|(k, _, _)| *k == i)
                    .map(|(_, p, t)| (p.to_string_lossy().into_owned(), t.clone()))
                    .collect(),
            });
        }
        let checks = nodes.iter().map(|n| {
            let r = n.remote.as_ref().expect("set above");
            // The server, and what a fault's dead man's switch runs.
            let programs: Vec<String> = n
                .launch
                .iter()
                .map(|l| r.spec.program(&l.program))
                .chain(crate::remote::deadman::TOOLS.iter().map(|t| t.to_string()))
                .collect();
            let faketime = n
                .faketime_file
                .is_some()
                .then_some(r.spec.faketime_preload.as_str());
            async move { r.host.check_tools(&programs, on.iptables, faketime).await }
        });
        for r in futures::future::join_all(checks).await {
            r.map_err(remote_err)?;
        }
        let cluster = Cluster {
            system,
            mode: Mode::Owned,
            dir: Some(dir),
            base_port: 0,
            faketime: spec.faketime,
            detached: false,
            group: None,
            auth: Default::default(),
            nodes,
            closed: std::sync::Mutex::new(false),
            spawned_in: None,
        };
        cluster.write_state()?;
        for (n, at) in cluster.nodes.iter().zip(&ats) {
            let r = n.remote.as_ref().expect("set above");
            let will = |effect| {
                on.undo
                    .push(r.undo(effect))
                    .map_err(|e| ClusterError::Io(format!("cannot write the undo log: {e}")))
            };
            will(RemoteEffect::DataDir {
                dir: at.dir.to_string_lossy().into_owned(),
            })?;
            will(RemoteEffect::Processes { tag: r.tag.clone() })?;
        }
        cluster.spawn_or_close(spec).await
    }

    /// Copy each remote node's log into the cluster's `logs/` here (a
    /// bug report carries them), best effort.
    pub(crate) fn fetch_remote_logs(&self) {
        let Some(dir) = &self.dir else {
            return;
        };
        for n in self.nodes.iter().filter(|n| n.attached.is_none()) {
            let Some(r) = &n.remote else {
                continue;
            };
            let log = n.log.to_string_lossy().into_owned();
            if let Ok(text) = super::node::block_on(r.host.read_file(&log)) {
                let local = dir.join("logs").join(format!("{}.log", n.name));
                let _ = super::write_file(&local, &text);
            }
        }
    }
}
