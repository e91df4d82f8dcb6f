//! The cluster state file `DIR/cluster.json`: what lockjaw starts (each
//! node with its ports, log, data dir, cgroup, launch command, and its PID
//! and start time once spawned). It is written before the first spawn (the
//! intent: every node and its cgroup) and again right after every spawn,
//! so `cluster down` and `lockjaw heal` can stop everything even after
//! lockjaw died mid-start: what was spawned but not yet recorded is in a
//! node's cgroup, which they empty with `cgroup.kill`.

use super::node::NodeInfo;
use super::{io_err, ClusterError};
use crate::process::{self, cgroup, Cgroup};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name of the state file inside a cluster directory.
pub const STATE_FILE: &str = "cluster.json";

/// The content of the state file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// The `--system` name.
    pub system: String,
    pub base_port: u16,
    #[serde(default)]
    pub faketime: bool,
    #[serde(default)]
    pub detached: bool,
    /// The cgroup group the nodes' cgroups are in (`lockjaw/NAME`), tagged
    /// with this directory as its owner; `None` without cgroups.
    #[serde(default)]
    pub group: Option<String>,
    pub nodes: Vec<NodeInfo>,
    /// Whether the servers may stop all at once ([`super::Servers::stop_together`]);
    /// else, as in files written before it, one after another.
    #[serde(default)]
    pub stop_together: bool,
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

/// Stop every process recorded in `dir`'s state file, sentinels first, and
/// empty and remove the nodes' cgroups and their group. A recorded process
/// is signalled only if it is provably this directory's (start time and
/// cgroup, [`process::Owner`]); a cgroup is touched only if its group
/// carries this directory's owner tag. Returns the names of the nodes that
/// were still running. Works after lockjaw itself was killed, also before
/// a node was recorded as spawned (its cgroup catches it).
pub fn stop_all(dir: &Path) -> Result<Vec<String>, ClusterError> {
    let mut st = read(dir)?;
    let owner = process::Owner::of_dir(dir).map_err(|e| io_err(dir, e))?;
    let root = Cgroup::root();
    let group = st.group.clone().or_else(|| {
        // State files written before the group was recorded.
        let leaf = st.nodes.iter().find_map(|n| n.cgroup.as_ref())?;
        Some(cgroup::split_leaf(&leaf.iptables_path)?.0)
    });
    let mut first_err = None;
    // The group is checked once: a bad tag is reported, not acted upon.
    let group_dir = match (&root, &group) {
        (Some(root), Some(g)) => Cgroup::proven_group(root, g, owner.tag()).unwrap_or_else(|why| {
            first_err.get_or_insert(ClusterError::Io(why));
            None
        }),
        _ => None,
    };
    let mut stopped = Vec::new();
    let mut results = stop_in_batches(&st.nodes, &owner, st.stop_together);
    for (i, n) in st.nodes.iter_mut().enumerate().rev() {
        if let Some((running, r)) = results[i].take() {
            match r {
                Ok(()) => {
                    if running {
                        stopped.push(n.name.clone());
                    }
                    n.proc = None;
                }
                Err(source) => {
                    first_err.get_or_insert(ClusterError::Process {
                        node: n.name.clone(),
                        source,
                    });
                }
            }
        }
        // The node's own leaf of the proven group, never a path the file
        // names by itself.
        let leaf = n
            .cgroup
            .as_ref()
            .and_then(|c| cgroup::split_leaf(&c.iptables_path))
            .filter(|(g, _)| Some(g) == group.as_ref());
        if let (Some(gd), Some((_, leaf))) = (&group_dir, leaf) {
            let d = gd.join(leaf);
            if cgroup::populated(&d) && !stopped.contains(&n.name) {
                // Started but not yet recorded when lockjaw was killed.
                stopped.push(n.name.clone());
            }
            if let Err(e) = Cgroup::remove_tree(&d) {
                first_err.get_or_insert(ClusterError::Io(e));
            }
        }
        // A data directory in the temporary directory (PostgreSQL's), once
        // the proven group's processes are gone: only the one its name
        // gives to this group and node.
        let proven = group_dir
            .is_some()
            .then(|| group.as_deref().and_then(|g| cgroup::group_name(g).ok()))
            .flatten();
        if let (Some(g), true) = (proven, super::tmpdata::is_tmp_data(&n.data_dir)) {
            if let Err(e) = super::tmpdata::remove(&n.data_dir, g, &n.name) {
                first_err.get_or_insert(ClusterError::Io(e));
            }
        }
    }
    if let Some(gd) = &group_dir {
        Cgroup::remove_if_empty(gd);
    }
    write(dir, &st)?;
    stopped.reverse();
    first_err.map_or(Ok(stopped), Err)
}

/// Whether each recorded node was running, and how its stop went: the
/// sentinels first (so they do not fail over while the servers stop),
/// then the servers; with `together`, each batch's nodes at once (a JVM
/// takes a few hundred ms to shut down; one after another they added up),
/// else one after another, the last node first.
type Stopped = Option<(bool, Result<(), process::ProcessError>)>;
fn stop_in_batches(nodes: &[NodeInfo], owner: &process::Owner, together: bool) -> Vec<Stopped> {
    use super::node::NodeRole;
    let mut results: Vec<Stopped> = nodes.iter().map(|_| None).collect();
    let mut batches: Vec<Vec<usize>> = Vec::new();
    for sentinels in [true, false] {
        let of_role = (0..nodes.len())
            .rev()
            .filter(|&i| (nodes[i].role == NodeRole::Sentinel) == sentinels);
        match together {
            true => batches.push(of_role.collect()),
            false => batches.extend(of_role.map(|i| vec![i])),
        }
    }
    for batch in batches {
        std::thread::scope(|s| {
            let stops: Vec<_> = batch
                .iter()
                .filter_map(|&i| nodes[i].proc.map(|id| (i, id)))
                .map(|(i, id)| {
                    let running = owner.owns(&id);
                    let h =
                        s.spawn(move || process::stop_owned(&id, owner, process::DEFAULT_GRACE));
                    (i, running, h)
                })
                .collect();
            for (i, running, h) in stops {
                let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                results[i] = Some((running, r));
            }
        });
    }
    results
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
        let owner = process::Owner::of_dir(d.path()).unwrap();
        // The group of this cluster directory (where the host has cgroups).
        let group = format!("lockjaw/unit-state-{}", std::process::id());
        let gdir = Cgroup::create_group(&group, owner.tag()).unwrap();
        let leaf = gdir.as_ref().map(|g| Cgroup {
            dir: g.join("real"),
            iptables_path: format!("{group}/real"),
        });
        let mut spec = crate::process::Spec::new("sleep").arg("30");
        spec.cgroup = leaf.as_ref().map(|l| l.dir.clone());
        let child = crate::process::spawn(&spec).unwrap();
        // Outside every lockjaw cgroup: never ours, start time or not.
        let outsider =
            crate::process::spawn(&crate::process::Spec::new("sleep").arg("30")).unwrap();
        let mut impostor = child.id();
        impostor.start_time += 1;
        let node = |name: &str, id, cgroup: Option<Cgroup>| NodeInfo {
            name: name.into(),
            role: super::super::NodeRole::Server,
            addr: "127.0.0.1:1".into(),
            ports: Default::default(),
            log: d.path().join("x.log"),
            data_dir: d.path().into(),
            cgroup,
            faketime_file: None,
            launch: None,
            proc: Some(id),
            remote: None,
        };
        let st = State {
            version: 1,
            system: "redis".into(),
            base_port: 1,
            faketime: false,
            detached: true,
            group: gdir.as_ref().map(|_| group.clone()),
            nodes: vec![node("impostor", impostor, None)],
            stop_together: true,
        };
        write(d.path(), &st).unwrap();
        assert!(stop_all(d.path()).unwrap().is_empty());
        assert!(
            child.is_alive(),
            "a PID with another start time was signalled"
        );
        if gdir.is_some() {
            write(
                d.path(),
                &State {
                    nodes: vec![node("outsider", outsider.id(), None)],
                    ..st.clone()
                },
            )
            .unwrap();
            let e = stop_all(d.path()).unwrap_err().to_string();
            assert!(e.contains("not this directory's"), "{e}");
            assert!(
                outsider.is_alive(),
                "a process outside the group was signalled"
            );
        }
        write(
            d.path(),
            &State {
                nodes: vec![node("real", child.id(), leaf.clone())],
                ..st
            },
        )
        .unwrap();
        assert_eq!(stop_all(d.path()).unwrap(), vec!["real".to_string()]);
        assert!(!child.is_alive());
        assert!(read(d.path()).unwrap().nodes[0].proc.is_none());
        if let Some(g) = gdir {
            assert!(!g.exists(), "the group's cgroup directory is left");
        }
        outsider.kill().unwrap();
    }
}
