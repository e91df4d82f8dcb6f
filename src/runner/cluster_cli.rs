//! The arguments of `lockjaw cluster up|status|down`; what each does is in
//! [`crate::cluster::ops`]. It sits above the cluster layer because it
//! names the systems (`--system`), which the registry knows.

use crate::cluster::{ops, ClusterSpec};
use crate::exit::Exit;
use crate::service::{self, System};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a local cluster, wait until it is healthy, print its endpoints.
    /// It keeps running after lockjaw exits, until `cluster down`.
    Up(UpArgs),
    /// Show the nodes of a cluster: PID, running/paused/gone, role.
    Status(DirArgs),
    /// Stop every process of a cluster (from its state file).
    Down(DirArgs),
}

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    #[arg(long, value_enum)]
    pub system: System,
    /// Data nodes, 1 to 15 (default: redis 1, redlock 5, sentinel 3 =
    /// primary + 2 replicas, plus 3 sentinels; etcd 3; zookeeper 3).
    #[arg(long, value_parser = super::cli::nodes_flag)]
    pub nodes: Option<usize>,
    /// First port (default: redis 17000, redlock 17100, sentinel 17200,
    /// etcd 17300, zookeeper 17400).
    #[arg(long, value_parser = super::cli::base_port_flag)]
    pub base_port: Option<u16>,
    /// Directory for data, logs and the state file (default: .lockjaw/SYSTEM).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Start Redis nodes under libfaketime with a per-node clock control file.
    #[arg(long)]
    pub faketime: bool,
    /// Seconds to wait for the cluster to become healthy.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

#[derive(clap::Args, Debug)]
pub struct DirArgs {
    /// The cluster's directory (default: every cluster under .lockjaw/).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

pub fn cluster(args: ClusterArgs) -> Exit {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return crate::exit::fail(&anyhow::anyhow!("cannot start the async runtime: {e}"))
        }
    };
    let r = match args.command {
        ClusterCommand::Up(a) => {
            let dir = a
                .dir
                .unwrap_or_else(|| Path::new(".lockjaw").join(a.system.name()));
            if let Err(e) = service::can_start(a.system, a.faketime) {
                return crate::exit::fail(&anyhow::anyhow!(e));
            }
            let mut spec = ClusterSpec::new(a.system.servers(), &dir);
            spec.nodes = a.nodes;
            spec.base_port = a.base_port;
            spec.faketime = a.faketime;
            spec.detached = true;
            spec.health_timeout = Duration::from_secs(a.timeout);
            rt.block_on(ops::up(&spec))
        }
        ClusterCommand::Status(a) => rt.block_on(ops::status(a.dir, System::find_servers)),
        ClusterCommand::Down(a) => ops::down(a.dir),
    };
    r.unwrap_or_else(|e| crate::exit::fail(&e))
}
