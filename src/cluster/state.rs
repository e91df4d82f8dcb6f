//! The cluster state file `DIR/cluster.json`: what lockjaw started (each
//! node with its PID + start time, ports, log, data dir, cgroup, launch
//! command), written right after every spawn so `cluster down` and
//! `lockjaw heal` can stop everything even after lockjaw died mid-start.

use super::node::NodeInfo;
use super::{io_err, ClusterError, System};
use crate::process::{self, Cgroup};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name of the state file inside a cluster directory.
pub const STATE_FILE: &str = "cluster.json";

/// The content of the state file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    pub system: System,
    pub base_port: u16,
    #[serde(default)]
    pub faketime: bool,
    #[serde(default)]
    pub detached: bool,
    pub nodes: Vec<NodeInfo>,
}

/// Path of the state file in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// Write atomically (temp file + rename), so a reader never sees half a file.
pub fn write(dir: &Path, st: &State) -> Result<(), ClusterError> {
    let p = path(dir);
    let tmp = dir.join(format!(".{STATE_FILE}.tmp"));
    let text = serde_json::to_string_pretty(st).expect("the state serialises");
    std::fs::write(&tmp, text + "\n").map_err(|e| io_err(&tmp, e))?;
    std::fs::rename(&tmp, &p).map_err(|e| io_err(&p, e))
}

/// Read the state file in `dir`.
pub fn read(dir: &Path) -> Result<State, ClusterError> {
    let p = path(dir);
    let text = std::fs::read_to_string(&p).map_err(|e| {
        ClusterError::Io(format!(
            "{}: {e} (hint: is {} a directory made by `lockjaw cluster up --dir`?)",
            p.display(),
            dir.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| {
        ClusterError::Io(format!(
            "{}:{}: {e} (hint: the state file is damaged; stop the listed PIDs by hand)",
            p.display(),
            e.line()
        ))
    })
}

/// Stop every process recorded in `dir`'s state file, verified by start
/// time, sentinels first; remove their cgroups. Returns the names of the
/// nodes that were still running. Works after lockjaw itself was killed.
pub fn stop_all(dir: &Path) -> Result<Vec<String>, ClusterError> {
    let mut st = read(dir)?;
    let mut stopped = Vec::new();
    let mut first_err = None;
    for n in st.nodes.iter_mut().rev() {
        if let Some(id) = n.proc {
            if id.group_alive() {
                stopped.push(n.name.clone());
            }
            if let Err(source) = process::stop_recorded(&id, process::DEFAULT_GRACE) {
                first_err.get_or_insert(ClusterError::Process {
                    node: n.name.clone(),
                    source,
                });
                continue;
            }
            n.proc = None;
        }
        if let Some(cg) = &n.cgroup {
            Cgroup::remove_dir(&cg.dir);
        }
    }
    write(dir, &st)?;
    stopped.reverse();
    first_err.map_or(Ok(stopped), Err)
}
