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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_state_file_names_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(path(d.path()), "{\n  \"version\": 1,\n  oops\n}").unwrap();
        let e = read(d.path()).unwrap_err().to_string();
        assert!(e.contains("cluster.json:3"), "{e}");
        let e = read(&d.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("hint"), "{e}");
    }

    #[test]
    fn stop_all_stops_recorded_processes_only_if_they_are_ours() {
        let d = tempfile::tempdir().unwrap();
        let child = crate::process::spawn(&crate::process::Spec::new("sleep").arg("30")).unwrap();
        let mut impostor = child.id();
        impostor.start_time += 1;
        let node = |name: &str, id| NodeInfo {
            name: name.into(),
            role: super::super::NodeRole::Server,
            addr: "127.0.0.1:1".into(),
            ports: Default::default(),
            log: d.path().join("x.log"),
            data_dir: d.path().into(),
            cgroup: None,
            faketime_file: None,
            launch: None,
            proc: Some(id),
        };
        let st = State {
            version: 1,
            system: System::Redis,
            base_port: 1,
            faketime: false,
            detached: true,
            nodes: vec![node("impostor", impostor)],
        };
        write(d.path(), &st).unwrap();
        assert!(stop_all(d.path()).unwrap().is_empty());
        assert!(
            child.is_alive(),
            "a PID with another start time was signalled"
        );
        write(
            d.path(),
            &State {
                nodes: vec![node("real", child.id())],
                ..st
            },
        )
        .unwrap();
        assert_eq!(stop_all(d.path()).unwrap(), vec!["real".to_string()]);
        assert!(!child.is_alive());
        assert!(read(d.path()).unwrap().nodes[0].proc.is_none());
    }
}
