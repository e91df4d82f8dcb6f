//! Loading `--hosts FILE` for a run: the remote layer reads and checks
//! the file, this checks the `systems` each node allows against the
//! registry (the remote layer keeps them as names) and picks the nodes
//! the run's system gets.

use crate::remote::{HostSpec, HostsFile};
use crate::service::{systems, System};
use std::path::Path;

/// The hosts of `path` a run of `system` starts its servers on: `nodes`
/// of them, else the system's default count. Errors name the file, line,
/// node and field.
pub fn load(path: &Path, system: System, nodes: Option<usize>) -> Result<Vec<HostSpec>, String> {
    let mut file = HostsFile::read(path)?;
    check_systems(&mut file)?;
    let hosts = file.for_system(
        system.name(),
        nodes.unwrap_or_else(|| system.default_nodes()),
    )?;
    refuse_attached(&file, &hosts)?;
    Ok(hosts)
}

/// Without `--attach`, no chosen node may describe a running server.
fn refuse_attached(file: &HostsFile, hosts: &[HostSpec]) -> Result<(), String> {
    match hosts.iter().find(|h| h.attach.is_some()) {
        Some(h) => Err(h.field_error(
            &file.path,
            h.attach.as_ref().map_or(h.line, |a| a.line),
            "attach",
            "these servers run already; lockjaw would pause, kill, restart and cut them off: add --attach",
        )),
        None => Ok(()),
    }
}

/// `--attach`: every node of `path` whose `systems` allow `system`, each
/// with an `attach` table (attached and started nodes are not mixed).
pub fn load_attached(path: &Path, system: System) -> Result<Vec<HostSpec>, String> {
    let mut file = HostsFile::read(path)?;
    check_systems(&mut file)?;
    let hosts: Vec<HostSpec> = file
        .nodes
        .iter()
        .filter(|h| h.allows(system.name()))
        .cloned()
        .collect();
    if hosts.is_empty() {
        return Err(format!(
            "{}: no node allows --system {} (hint: add \"{}\" to the nodes' systems)",
            file.path.display(),
            system.name(),
            system.name()
        ));
    }
    if let Some(h) = hosts.iter().find(|h| h.attach.is_none()) {
        return Err(h.field_error(
            &file.path,
            h.line,
            "attach",
            "missing: with --attach every node of the system describes its running server (hint: add a [node.attach] table with unit, pidfile or exe; lockjaw does not mix attached and started nodes)",
        ));
    }
    Ok(hosts)
}

/// Each name in a node's `systems` must name a system of the registry
/// (in any case); it is rewritten as the registry spells it.
fn check_systems(file: &mut HostsFile) -> Result<(), String> {
    for node in &mut file.nodes {
        let Some(allowed) = &node.systems else {
            continue;
        };
        let mut names = Vec::new();
        for name in &allowed.names {
            let Ok(sys) = <System as clap::ValueEnum>::from_str(name, true) else {
                let known: Vec<&str> = systems().iter().map(|s| s.name()).collect();
                let why = format!("{name:?} is not a system (one of {})", known.join(", "));
                return Err(node.field_error(&file.path, allowed.line, "systems", &why));
            };
            names.push(sys.name().to_string());
        }
        if let Some(s) = &mut node.systems {
            s.names = names;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(text: &str) -> Result<HostsFile, String> {
        let mut f = HostsFile::parse(Path::new("hosts.toml"), text)?;
        check_systems(&mut f).map(|()| f)
    }

    #[test]
    fn a_name_that_is_no_system_names_file_line_node_and_field() {
        let e = checked("[[node]]\nhost = \"1.2.3.4\"\nsystems = [\"etc\"]\n").unwrap_err();
        assert!(
            e.starts_with(
                "hosts.toml:3: node host1: field systems: \"etc\" is not a system (one of redis, "
            ),
            "{e}"
        );
        let e = checked("[defaults]\nsystems = [\"redis\", \"x\"]\n[[node]]\nhost = \"1.2.3.4\"\n")
            .unwrap_err();
        assert!(
            e.starts_with("hosts.toml:2: node host1: field systems: \"x\" is not a system"),
            "{e}"
        );
    }

    #[test]
    fn names_in_any_case_are_spelled_as_the_registry_does() {
        let f = checked("[[node]]\nhost = \"1.2.3.4\"\nsystems = [\"Etcd\"]\n").unwrap();
        assert!(f.nodes[0].allows("etcd"));
        assert_eq!(f.for_system("etcd", 1).unwrap().len(), 1);
    }
}
