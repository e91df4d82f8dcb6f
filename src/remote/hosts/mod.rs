//! The hosts file (`--hosts FILE`, TOML): the machines lockjaw starts
//! servers on, reached over SSH. An optional `[defaults]` table gives any
//! node field but `name` and `host`; each `[[node]]` is one machine. See
//! `docs/remote.md` for every field.
//!
//! Errors name the file, the line and the field:
//! `hosts.toml:7: node h2: field address: "x" is not an IP address`.
//! Each node's fields are checked in [`node`]; the `systems` a node
//! allows stay names here, checked against the registry by the runner,
//! which loads the file.

mod attach;
mod node;

use super::SshTarget;
use crate::toml_file::{self, Source};
pub use node::valid_name;
use node::{node, Errs, Raw};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Where lockjaw makes `lockjaw-<run-id>/` on a host unless told.
pub const DEFAULT_DATA_DIR: &str = "/var/tmp/lockjaw";

/// A parsed hosts file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostsFile {
    pub path: PathBuf,
    pub nodes: Vec<HostSpec>,
}

/// One `[[node]]`, with the `[defaults]` merged in and its paths absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    /// The line of its `[[node]]` header.
    pub line: usize,
    pub target: SshTarget,
    /// The IP the servers bind and advertise.
    pub address: IpAddr,
    /// Which systems may run here; `None`: any.
    pub systems: Option<SystemNames>,
    pub base_port: Option<u16>,
    pub data_dir: String,
    pub programs: BTreeMap<String, String>,
    pub faketime_preload: String,
    /// Its `attach` table: a server lockjaw did not start and attaches to
    /// (`--attach`); `None`: lockjaw starts the node's server.
    pub attach: Option<crate::remote::attach::AttachSpec>,
}

impl HostSpec {
    /// The path to run for a program name (its `programs` entry, else the
    /// name, found through the host's PATH).
    pub fn program(&self, name: &str) -> String {
        self.programs
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }

    /// Whether the system named `system` may run here.
    pub fn allows(&self, system: &str) -> bool {
        self.systems
            .as_ref()
            .map_or(true, |s| s.names.iter().any(|n| n == system))
    }

    /// An error about this node's field `field` at `line` of hosts file
    /// `path`: `file:line: node N: field F: why`.
    pub fn field_error(&self, path: &Path, line: usize, field: &str, why: &str) -> String {
        format!(
            "{}:{line}: node {}: field {field}: {why}",
            path.display(),
            self.name
        )
    }
}

/// A node's `systems` field: the names as written, and its line (the
/// node's own or the `[defaults]`'), for an error about a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemNames {
    pub names: Vec<String>,
    pub line: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: Option<Raw>,
    #[serde(default)]
    node: Vec<Raw>,
}

/// The 1-based lines of the `[[node]]` headers, in order.
pub(super) fn node_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start();
            t.strip_prefix("[[")
                .and_then(|r| r.split_once("]]"))
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == "node")
        })
        .map(|(i, _)| i + 1)
        .collect()
}

impl HostsFile {
    /// Read and check `path`; errors are `file:line: node N: field F: why`.
    pub fn read(path: &Path) -> Result<HostsFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the hosts file: {e}", path.display()))?;
        HostsFile::parse(path, &text)
    }

    /// Check the text of hosts file `path`.
    pub fn parse(path: &Path, text: &str) -> Result<HostsFile, String> {
        HostsFile::parse_with(path, text, true)
    }

    /// Check the text of a copy of a hosts file (a run directory's
    /// `hosts.toml`, read by heal): as [`HostsFile::parse`], but the
    /// `identity_file` and `known_hosts` it names need not exist beside it.
    pub fn parse_copy(path: &Path, text: &str) -> Result<HostsFile, String> {
        HostsFile::parse_with(path, text, false)
    }

    fn parse_with(path: &Path, text: &str, files: bool) -> Result<HostsFile, String> {
        let src = Source {
            name: path.display().to_string(),
            text: text.to_string(),
        };
        let e = Errs { src: &src, files };
        let raw: RawFile = toml_file::parse(&src).map_err(|err| attach::in_node(&e, err))?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let base = std::path::absolute(base).map_err(|err| {
            format!(
                "{}: cannot make its directory absolute: {err}",
                path.display()
            )
        })?;
        let defaults = raw.defaults.unwrap_or_default();
        if let Some(a) = &defaults.attach {
            return Err(e.at(
                e.line(a),
                None,
                "attach",
                "is not allowed in [defaults]: each node attaches to its own server (hint: give each [[node]] its own [node.attach] table)",
            ));
        }
        for (f, v) in [("name", &defaults.name), ("host", &defaults.host)] {
            if let Some(v) = v {
                return Err(e.field(
                    v,
                    None,
                    f,
                    "is not allowed in [defaults] (hint: set it in each [[node]])",
                ));
            }
        }
        if raw.node.is_empty() {
            return Err(format!(
                "{}: no [[node]] (hint: add one [[node]] with host = \"...\" per machine)",
                src.name
            ));
        }
        let headers = node_lines(text);
        let mut nodes = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, n) in raw.node.iter().enumerate() {
            let line = headers.get(i).copied().unwrap_or(0);
            let spec = node(&e, &base, &defaults, n, i, line)?;
            if !seen.insert(spec.name.clone()) {
                let l = n.name.as_ref().map_or(line, |s| e.line(s));
                return Err(e.at(
                    l,
                    Some(&spec.name),
                    "name",
                    format!("{:?} is used by an earlier node", spec.name),
                ));
            }
            nodes.push(spec);
        }
        Ok(HostsFile {
            path: path.to_path_buf(),
            nodes,
        })
    }

    /// The first `want` nodes whose `systems` allow the system named
    /// `system`; an error if there are too few.
    pub fn for_system(&self, system: &str, want: usize) -> Result<Vec<HostSpec>, String> {
        let fit: Vec<HostSpec> = self
            .nodes
            .iter()
            .filter(|h| h.allows(system))
            .take(want)
            .cloned()
            .collect();
        if fit.len() < want {
            return Err(format!(
                "{}: --system {} needs {want} nodes, but only {} of its {} nodes allow it (hint: add nodes, or add \"{}\" to their systems)",
                self.path.display(),
                system,
                fit.len(),
                self.nodes.len(),
                system
            ));
        }
        Ok(fit)
    }
}

#[cfg(test)]
mod attach_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::faketime::FAKETIME_PRELOAD;

    fn parse(text: &str) -> Result<HostsFile, String> {
        HostsFile::parse(Path::new("hosts.toml"), text)
    }

    const GOOD: &str = r#"# two hosts
[defaults]
user = "root"
ssh_port = 2222
data_dir = "/var//tmp/./lj/"

[[node]]
name = "h1"
host = "10.213.0.11"
systems = ["etcd", "redis"]
base_port = 20000

[[node]]
host = "db2.example"
address = "10.213.0.12"
ssh_port = 22
programs = { etcd = "/opt/etcd/bin/etcd" }
"#;

    #[test]
    fn defaults_merge_into_nodes() {
        let f = parse(GOOD).unwrap();
        let [a, b] = &f.nodes[..] else { panic!() };
        assert_eq!(
            (a.name.as_str(), a.line, b.name.as_str(), b.line),
            ("h1", 7, "host2", 13)
        );
        assert_eq!(a.target.user.as_deref(), Some("root"));
        assert_eq!((a.target.port, b.target.port), (Some(2222), Some(22)));
        assert_eq!(a.address.to_string(), "10.213.0.11");
        assert_eq!(b.address.to_string(), "10.213.0.12");
        assert_eq!(a.data_dir, "/var/tmp/lj");
        assert_eq!(
            a.systems.as_ref().map(|s| (s.names.clone(), s.line)),
            Some((vec!["etcd".to_string(), "redis".to_string()], 10))
        );
        assert!(a.allows("etcd") && !a.allows("zookeeper") && b.allows("zookeeper"));
        assert_eq!((a.base_port, b.systems.clone()), (Some(20000), None));
        assert_eq!(b.program("etcd"), "/opt/etcd/bin/etcd");
        assert_eq!(a.program("etcd"), "etcd");
        assert_eq!(a.faketime_preload, FAKETIME_PRELOAD);
    }

    #[test]
    fn for_system_takes_the_first_nodes_that_allow_it() {
        let f = parse(GOOD).unwrap();
        let two = f.for_system("etcd", 2).unwrap();
        assert_eq!(two.len(), 2);
        let z = f.for_system("zookeeper", 1).unwrap();
        assert_eq!(z[0].name, "host2");
        let e = f.for_system("zookeeper", 2).unwrap_err();
        assert!(
            e.contains("hosts.toml: --system zookeeper needs 2 nodes, but only 1"),
            "{e}"
        );
        let e = f.for_system("etcd", 3).unwrap_err();
        assert!(e.contains("needs 3 nodes"), "{e}");
    }

    /// Each bad value names the file, its line, the node and the field.
    #[test]
    fn each_error_names_file_line_node_and_field() {
        let cases: &[(&str, &str)] = &[
            ("[[node]]\nname = \"h2\"\nhost = \"x\"\naddress = \"x\"\n", "hosts.toml:4: node h2: field address: \"x\" is not an IP address"),
            ("[[node]]\nhost = \"box\"\n", "hosts.toml:2: node host1: field address: missing, and host \"box\" is not an IP address"),
            ("[[node]]\nname = \"H 1\"\nhost = \"1.2.3.4\"\n", "hosts.toml:2: node H 1: field name:"),
            ("[[node]]\nhost = \"1.2.3.4\"\n[[node]]\nname = \"host1\"\nhost = \"1.2.3.5\"\n", "hosts.toml:4: node host1: field name: \"host1\" is used by an earlier node"),
            ("[[node]]\nhost = \"1.2.3.4\"\nsystems = []\n", "hosts.toml:3: node host1: field systems: is empty"),
            ("[[node]]\nhost = \"-oProxyCommand=x\"\n", "hosts.toml:2: node host1: field host: \"-oProxyCommand=x\" starts with '-'"),
            ("[[node]]\nname = \"a\"\n", "hosts.toml:1: node a: field host: missing"),
            ("[defaults]\nhost = \"1.2.3.4\"\n[[node]]\nhost = \"1.2.3.4\"\n", "hosts.toml:2: [defaults]: field host: is not allowed in [defaults]"),
            ("[defaults]\ndata_dir = \"var/x\"\n[[node]]\nhost = \"1.2.3.4\"\n", "hosts.toml:2: node host1: field data_dir: \"var/x\" is not an absolute path"),
            ("[[node]]\nname = \"h1\"\nhost = \"1.2.3.4\"\ndata_dir = \"/\"\n", "hosts.toml:4: node h1: field data_dir: \"/\" is the root directory"),
            ("[defaults]\ndata_dir = \"//./\"\n[[node]]\nhost = \"1.2.3.4\"\n", "hosts.toml:2: node host1: field data_dir: \"//./\" is the root directory"),
            ("[[node]]\nhost = \"1.2.3.4\"\ndata_dir = \"\"\n", "hosts.toml:3: node host1: field data_dir: \"\" is not an absolute path"),
            ("[[node]]\nhost = \"1.2.3.4\"\nbase_port = 65535\n", "hosts.toml:3: node host1: field base_port: 65535 leaves no room"),
            ("[[node]]\nhost = \"1.2.3.4\"\nssh_port = 0\n", "hosts.toml:3: node host1: field ssh_port: is 0"),
            ("[[node]]\nhost = \"1.2.3.4\"\nidentity_file = \"no-such-key\"\n", "hosts.toml:3: node host1: field identity_file: "),
            ("[[node]]\nhost = \"1.2.3.4\"\nuser = \"\"\n", "hosts.toml:3: node host1: field user: is empty"),
            ("[[node]]\nhost = \"0.0.0.0\"\n", "hosts.toml:2: node host1: field address: 0.0.0.0 is not an address"),
            ("[[node]]\nhost = \"1.2.3.4\"\nprograms = { etcd = \"\" }\n", "hosts.toml:3: node host1: field programs: etcd = \"\""),
            ("[[node]]\nhost = \"1.2.3.4\"\nfaketime_preload = \"lib.so\"\n", "hosts.toml:3: node host1: field faketime_preload: \"lib.so\" is not an absolute path"),
            // Syntax, unknown fields and wrong types go through toml_file.
            ("[[node]]\nhost = \"1.2.3.4\"\nadress = \"1.2.3.4\"\n", "hosts.toml:3: field `adress`: unknown field"),
            ("[[node]]\nhost = \"1.2.3.4\"\nssh_port = \"22\"\n", "hosts.toml:3: field `ssh_port`:"),
            ("", "hosts.toml: no [[node]]"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(want), "{text:?}:\n got  {e}\n want {want}");
        }
    }

    #[test]
    fn relative_files_are_relative_to_the_hosts_file() {
        let d = std::env::temp_dir().join(format!("lockjaw-hosts-test-{}", std::process::id()));
        std::fs::create_dir_all(d.join("bed")).unwrap();
        std::fs::write(d.join("bed/id"), "k").unwrap();
        std::fs::write(d.join("bed/kh"), "k").unwrap();
        let p = d.join("hosts.toml");
        std::fs::write(&p, "[defaults]\nidentity_file = \"bed/id\"\nknown_hosts = \"bed/kh\"\n[[node]]\nhost = \"127.0.0.1\"\n").unwrap();
        let f = HostsFile::read(&p);
        std::fs::remove_dir_all(&d).unwrap();
        let t = &f.unwrap().nodes[0].target;
        assert_eq!(t.identity_file.as_deref(), Some(d.join("bed/id").as_path()));
        assert_eq!(t.known_hosts.as_deref(), Some(d.join("bed/kh").as_path()));
        let e = HostsFile::read(&d.join("gone.toml")).unwrap_err();
        assert!(e.contains("gone.toml: cannot read the hosts file"), "{e}");
    }
}
