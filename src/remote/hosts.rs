//! The hosts file (`--hosts FILE`, TOML): the machines lockjaw starts
//! servers on, reached over SSH. An optional `[defaults]` table gives any
//! node field but `name` and `host`; each `[[node]]` is one machine. See
//! `docs/remote.md` for every field.
//!
//! Errors name the file, the line and the field:
//! `hosts.toml:7: node h2: field address: "x" is not an IP address`.

use super::SshTarget;
use crate::service::System;
use crate::toml_file::{self, Source};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use toml::Spanned;

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
    pub systems: Option<Vec<System>>,
    pub base_port: Option<u16>,
    pub data_dir: String,
    pub programs: BTreeMap<String, String>,
    pub faketime_preload: String,
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

    /// Whether `system` may run here.
    pub fn allows(&self, system: System) -> bool {
        self.systems.as_ref().map_or(true, |s| s.contains(&system))
    }
}

/// The fields of a `[[node]]` (and of `[defaults]`, which may not set
/// `name` or `host`), each with its place in the file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<Spanned<String>>,
    host: Option<Spanned<String>>,
    address: Option<Spanned<String>>,
    user: Option<Spanned<String>>,
    ssh_port: Option<Spanned<u16>>,
    identity_file: Option<Spanned<String>>,
    known_hosts: Option<Spanned<String>>,
    data_dir: Option<Spanned<String>>,
    faketime_preload: Option<Spanned<String>>,
    systems: Option<Spanned<Vec<String>>>,
    base_port: Option<Spanned<u16>>,
    programs: Option<Spanned<BTreeMap<String, String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: Option<Raw>,
    #[serde(default)]
    node: Vec<Raw>,
}

/// Errors of one file: `file:line: node N: field F: why`.
struct Errs<'a> {
    src: &'a Source,
}

impl Errs<'_> {
    fn line<T>(&self, s: &Spanned<T>) -> usize {
        let at = s.span().start.min(self.src.text.len());
        self.src.text[..at].matches('\n').count() + 1
    }

    fn at(
        &self,
        line: usize,
        node: Option<&str>,
        field: &str,
        why: impl std::fmt::Display,
    ) -> String {
        let mut m = self.src.name.clone();
        if line > 0 {
            m.push_str(&format!(":{line}"));
        }
        match node {
            Some(n) => m.push_str(&format!(": node {n}")),
            None => m.push_str(": [defaults]"),
        }
        format!("{m}: field {field}: {why}")
    }

    fn field<T>(
        &self,
        s: &Spanned<T>,
        node: Option<&str>,
        field: &str,
        why: impl std::fmt::Display,
    ) -> String {
        self.at(self.line(s), node, field, why)
    }
}

/// The 1-based lines of the `[[node]]` headers, in order.
fn node_lines(text: &str) -> Vec<usize> {
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

/// A name lockjaw accepts for a node: `[a-z0-9-]+`.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 32
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A word passed to ssh or a remote shell as one argument: not empty, no
/// leading `-` (it would read as an option), no whitespace or control
/// characters.
fn plain_word(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("is empty".into());
    }
    if s.starts_with('-') {
        return Err(format!("{s:?} starts with '-'"));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{s:?} contains a space or a control character"));
    }
    Ok(())
}

/// An absolute path with no `..` and no space or control character.
fn remote_path(s: &str) -> Result<(), String> {
    if !s.starts_with('/') {
        return Err(format!("{s:?} is not an absolute path"));
    }
    if s.split('/').any(|c| c == "..") {
        return Err(format!("{s:?} contains .."));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{s:?} contains a space or a control character"));
    }
    Ok(())
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
        let src = Source {
            name: path.display().to_string(),
            text: text.to_string(),
        };
        let raw: RawFile = toml_file::parse(&src).map_err(|e| e.to_string())?;
        let e = Errs { src: &src };
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

    /// The first `n` (default: the system's default node count) nodes
    /// whose `systems` allow `system`; an error if there are too few.
    pub fn for_system(&self, system: System, n: Option<usize>) -> Result<Vec<HostSpec>, String> {
        let want = n.unwrap_or_else(|| system.default_nodes());
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
                system.name(),
                fit.len(),
                self.nodes.len(),
                system.name()
            ));
        }
        Ok(fit)
    }
}

/// One node: its fields, else the defaults', checked.
fn node(
    e: &Errs,
    base: &Path,
    d: &Raw,
    n: &Raw,
    i: usize,
    line: usize,
) -> Result<HostSpec, String> {
    let name = match &n.name {
        Some(s) => {
            if !valid_name(s.get_ref()) {
                return Err(e.field(
                    s,
                    Some(s.get_ref()),
                    "name",
                    format!(
                        "{:?} is not of [a-z0-9-]+ (at most 32 characters)",
                        s.get_ref()
                    ),
                ));
            }
            s.get_ref().clone()
        }
        None => format!("host{}", i + 1),
    };
    let who = Some(name.as_str());
    let host = n.host.as_ref().ok_or_else(|| {
        e.at(
            line,
            who,
            "host",
            "missing (hint: host = \"the SSH destination, a name or an address\")",
        )
    })?;
    plain_word(host.get_ref()).map_err(|why| e.field(host, who, "host", why))?;
    // A field of the node, else of [defaults].
    macro_rules! pick {
        ($f:ident) => {
            n.$f.as_ref().or(d.$f.as_ref())
        };
    }
    let address = match pick!(address) {
        Some(a) => a
            .get_ref()
            .parse::<IpAddr>()
            .map_err(|_| e.field(a, who, "address", format!("{:?} is not an IP address", a.get_ref())))?,
        None => host.get_ref().parse::<IpAddr>().map_err(|_| {
            e.field(
                host,
                who,
                "address",
                format!(
                    "missing, and host {:?} is not an IP address (hint: add address = \"the IP the servers bind and peers dial\")",
                    host.get_ref()
                ),
            )
        })?,
    };
    if address.is_unspecified() || address.is_multicast() {
        let at = pick!(address).map_or(e.line(host), |a| e.line(a));
        return Err(e.at(
            at,
            who,
            "address",
            format!("{address} is not an address servers can bind"),
        ));
    }
    let user = match pick!(user) {
        Some(u) => {
            plain_word(u.get_ref()).map_err(|why| e.field(u, who, "user", why))?;
            Some(u.get_ref().clone())
        }
        None => None,
    };
    let port = match pick!(ssh_port) {
        Some(p) if *p.get_ref() == 0 => return Err(e.field(p, who, "ssh_port", "is 0")),
        p => p.map(|p| *p.get_ref()),
    };
    let file = |f: Option<&Spanned<String>>, field: &str| -> Result<Option<PathBuf>, String> {
        let Some(f) = f else { return Ok(None) };
        if f.get_ref().is_empty() {
            return Err(e.field(f, who, field, "is empty"));
        }
        let p = base.join(f.get_ref());
        if !p.is_file() {
            return Err(e.field(f, who, field, format!("{}: no such file", p.display())));
        }
        Ok(Some(p))
    };
    let identity_file = file(pick!(identity_file), "identity_file")?;
    let known_hosts = file(pick!(known_hosts), "known_hosts")?;
    let data_dir = match pick!(data_dir) {
        Some(s) => {
            remote_path(s.get_ref()).map_err(|why| e.field(s, who, "data_dir", why))?;
            s.get_ref().trim_end_matches('/').to_string()
        }
        None => DEFAULT_DATA_DIR.to_string(),
    };
    let faketime_preload = match pick!(faketime_preload) {
        Some(s) => {
            let libs: Vec<&str> = s.get_ref().split_whitespace().collect();
            if libs.is_empty() {
                return Err(e.field(s, who, "faketime_preload", "is empty"));
            }
            for l in &libs {
                remote_path(l).map_err(|why| e.field(s, who, "faketime_preload", why))?;
            }
            libs.join(" ")
        }
        None => crate::process::faketime::FAKETIME_PRELOAD.to_string(),
    };
    let systems = match pick!(systems) {
        Some(s) => {
            if s.get_ref().is_empty() {
                return Err(e.field(
                    s,
                    who,
                    "systems",
                    "is empty (hint: leave it out to allow any system)",
                ));
            }
            let mut out = Vec::new();
            for name in s.get_ref() {
                let sys = <System as clap::ValueEnum>::from_str(name, true).map_err(|_| {
                    let known: Vec<&str> =
                        crate::service::systems().iter().map(|s| s.name()).collect();
                    e.field(
                        s,
                        who,
                        "systems",
                        format!("{name:?} is not a system (one of {})", known.join(", ")),
                    )
                })?;
                out.push(sys);
            }
            Some(out)
        }
        None => None,
    };
    let base_port = match pick!(base_port) {
        Some(p) if *p.get_ref() == 0 || *p.get_ref() > u16::MAX - 2 => {
            return Err(e.field(
                p,
                who,
                "base_port",
                format!(
                    "{} leaves no room for the peer and election ports (+1, +2): use 1 to {}",
                    p.get_ref(),
                    u16::MAX - 2
                ),
            ))
        }
        p => p.map(|p| *p.get_ref()),
    };
    let programs = match pick!(programs) {
        Some(m) => {
            for (k, v) in m.get_ref() {
                if v.is_empty()
                    || v.chars().any(|c| c.is_whitespace() || c.is_control())
                    || v.starts_with('-')
                {
                    return Err(e.field(
                        m,
                        who,
                        "programs",
                        format!("{k} = {v:?} is not a path or program name"),
                    ));
                }
            }
            m.get_ref().clone()
        }
        None => BTreeMap::new(),
    };
    Ok(HostSpec {
        name,
        line,
        target: SshTarget {
            host: host.get_ref().clone(),
            port,
            user,
            identity_file,
            known_hosts,
        },
        address,
        systems,
        base_port,
        data_dir,
        programs,
        faketime_preload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HostsFile, String> {
        HostsFile::parse(Path::new("hosts.toml"), text)
    }

    const GOOD: &str = r#"# two hosts
[defaults]
user = "root"
ssh_port = 2222
data_dir = "/var/tmp/lj/"

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
        assert_eq!(a.systems, Some(vec![System::Etcd, System::Redis]));
        assert_eq!((a.base_port, b.systems.clone()), (Some(20000), None));
        assert_eq!(b.program("etcd"), "/opt/etcd/bin/etcd");
        assert_eq!(a.program("etcd"), "etcd");
        assert_eq!(
            a.faketime_preload,
            crate::process::faketime::FAKETIME_PRELOAD
        );
    }

    #[test]
    fn for_system_takes_the_first_nodes_that_allow_it() {
        let f = parse(GOOD).unwrap();
        let two = f.for_system(System::Etcd, Some(2)).unwrap();
        assert_eq!(two.len(), 2);
        let z = f.for_system(System::Zookeeper, Some(1)).unwrap();
        assert_eq!(z[0].name, "host2");
        let e = f.for_system(System::Zookeeper, Some(2)).unwrap_err();
        assert!(
            e.contains("hosts.toml: --system zookeeper needs 2 nodes, but only 1"),
            "{e}"
        );
        let e = f.for_system(System::Etcd, None).unwrap_err();
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
            ("[[node]]\nhost = \"1.2.3.4\"\nsystems = [\"etc\"]\n", "hosts.toml:3: node host1: field systems: \"etc\" is not a system"),
            ("[[node]]\nhost = \"1.2.3.4\"\nsystems = []\n", "hosts.toml:3: node host1: field systems: is empty"),
            ("[[node]]\nhost = \"-oProxyCommand=x\"\n", "hosts.toml:2: node host1: field host: \"-oProxyCommand=x\" starts with '-'"),
            ("[[node]]\nname = \"a\"\n", "hosts.toml:1: node a: field host: missing"),
            ("[defaults]\nhost = \"1.2.3.4\"\n[[node]]\nhost = \"1.2.3.4\"\n", "hosts.toml:2: [defaults]: field host: is not allowed in [defaults]"),
            ("[defaults]\ndata_dir = \"var/x\"\n[[node]]\nhost = \"1.2.3.4\"\n", "hosts.toml:2: node host1: field data_dir: \"var/x\" is not an absolute path"),
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
