//! The plan of servers that run as another system user with their data
//! in the temporary directory (PostgreSQL as `postgres`, MariaDB as
//! `mysql`): one `/bin/sh` launch script per node, which creates the data
//! directory on the first start and then `exec`s the server, in the
//! node's cgroup (faults act on the whole cgroup: PostgreSQL's backends
//! call `setsid()`), listening on 127.0.0.1 on one port per node.

use super::node::{Node, NodeInfo, NodeRole, Ports};
use super::{ClusterError, Plan};
use crate::process::Spec;

/// How one system's nodes are launched.
pub(crate) struct Launch<'a> {
    /// Node names are this plus 1, 2, ... (`pg1`, `my1`).
    pub node_prefix: &'a str,
    /// The system user the script runs as.
    pub user: &'a str,
    /// The script: `$1` is `bin`, `$2` the data directory, `$3` the port.
    pub script: &'a str,
    /// The script's `$0` (what `ps` shows).
    pub argv0: &'a str,
    /// The directory of the server's programs, as the script takes it.
    pub bin: String,
}

/// The nodes of plan `p`, launched as `l` says.
pub(crate) fn plan(p: &Plan<'_>, l: &Launch<'_>) -> Result<Vec<Node>, ClusterError> {
    let (spec, dir, n, base, cg) = p.parts();
    let group = spec
        .group
        .clone()
        .unwrap_or_else(|| format!("{}-{base}", spec.system));
    (0..n)
        .map(|i| {
            let name = format!("{}{}", l.node_prefix, i + 1);
            let port = base + i as u16;
            let data = super::tmpdata::dir_for(&group, &name);
            let mut launch = Spec::new("/bin/sh").args([
                "-c".to_string(),
                l.script.into(),
                l.argv0.into(),
                l.bin.clone(),
                data.display().to_string(),
                port.to_string(),
            ]);
            launch.user = Some(l.user.into());
            launch.whole_cgroup = true;
            launch.cwd = Some(super::tmpdata::root());
            launch.log = Some(dir.join("logs").join(format!("{name}.log")));
            Ok(Node::planned(NodeInfo {
                name: name.clone(),
                role: NodeRole::Server,
                addr: format!("127.0.0.1:{port}"),
                ports: Ports {
                    client: port,
                    peer: None,
                    election: None,
                    bus: None,
                },
                log: launch.log.clone().unwrap_or_default(),
                data_dir: data,
                cgroup: cg(&name),
                faketime_file: None,
                launch: Some(launch),
                proc: None,
                remote: None,
            }))
        })
        .collect()
}
