//! What a registry entry plans a cluster from ([`Plan`]): the spec, the
//! port block, and where each data node runs (loopback or a host, [`At`]).

use super::{redis, write_file, ClusterError, ClusterSpec};
use std::path::{Path, PathBuf};

/// Where one data node of a cluster on hosts (`--hosts`) runs: the
/// address it binds and advertises, its first port, and its directory on
/// that host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct At {
    pub ip: String,
    pub base_port: u16,
    pub dir: PathBuf,
}

/// Files a plan for hosts needs on them: (node index, path there, text).
pub type RemoteFiles = std::cell::RefCell<Vec<(usize, PathBuf, String)>>;

/// What a registry entry plans a cluster from: a local one on loopback,
/// or one data node per host (`at`).
#[derive(Clone, Copy)]
pub struct Plan<'a> {
    pub spec: &'a ClusterSpec,
    /// The cluster's directory (absolute).
    pub dir: &'a Path,
    /// Data nodes.
    pub n: usize,
    /// First port.
    pub base: u16,
    /// The cgroup of a node by name, when the spec asks for cgroups.
    pub cg: redis::CgroupFor<'a>,
    /// One entry per data node when the nodes run on hosts; `None` = on
    /// this host's loopback.
    pub at: Option<&'a [At]>,
    /// Where files for the hosts go (written there before each start).
    pub files: Option<&'a RemoteFiles>,
}

impl<'a> Plan<'a> {
    /// (spec, dir, nodes, base port, cgroups).
    pub fn parts(&self) -> (&'a ClusterSpec, &'a Path, usize, u16, redis::CgroupFor<'a>) {
        (self.spec, self.dir, self.n, self.base, self.cg)
    }

    /// The address node `i` binds and advertises.
    pub fn ip(&self, i: usize) -> String {
        self.at
            .map_or_else(|| "127.0.0.1".to_string(), |a| a[i].ip.clone())
    }

    /// Port `k` of node `i`: locally `base + stride × i + k`, on a host
    /// that host's first port + `k`.
    pub fn port(&self, i: usize, stride: u16, k: u16) -> u16 {
        match self.at {
            None => self.base + stride * i as u16 + k,
            Some(a) => a[i].base_port + k,
        }
    }

    /// The directory node `i`'s data, logs and files go under.
    pub fn dir_of(&self, i: usize) -> PathBuf {
        self.at
            .map_or_else(|| self.dir.to_path_buf(), |a| a[i].dir.clone())
    }

    /// Write a file node `i` needs: now, or on its host before it starts.
    pub fn write(&self, i: usize, path: &Path, text: &str) -> Result<(), ClusterError> {
        match self.files {
            None => write_file(path, text),
            Some(f) => {
                f.borrow_mut()
                    .push((i, path.to_path_buf(), text.to_string()));
                Ok(())
            }
        }
    }
}
