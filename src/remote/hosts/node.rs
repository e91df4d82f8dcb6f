//! One `[[node]]` of a hosts file, checked field by field: the raw TOML
//! fields with their places in the file, and one step per field that
//! either gives its value (the node's own, else `[defaults]`) or an error
//! naming the file, line, node and field.

use super::{HostSpec, SystemNames, DEFAULT_DATA_DIR};
use crate::process::faketime::FAKETIME_PRELOAD;
use crate::remote::SshTarget;
use crate::toml_file::Source;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The fields of a `[[node]]` (and of `[defaults]`, which may not set
/// `name` or `host`), each with its place in the file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    pub name: Option<Spanned<String>>,
    pub host: Option<Spanned<String>>,
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
    pub attach: Option<Spanned<super::attach::RawAttach>>,
}

/// Errors of one file: `file:line: node N: field F: why`.
pub(super) struct Errs<'a> {
    pub src: &'a Source,
    /// Whether `identity_file` and `known_hosts` must exist here (not in
    /// a run directory's copy of the file, read by heal).
    pub files: bool,
}

impl Errs<'_> {
    pub fn line<T>(&self, s: &Spanned<T>) -> usize {
        let at = s.span().start.min(self.src.text.len());
        self.src.text[..at].matches('\n').count() + 1
    }

    pub fn at(
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

    pub fn field<T>(
        &self,
        s: &Spanned<T>,
        node: Option<&str>,
        field: &str,
        why: impl std::fmt::Display,
    ) -> String {
        self.at(self.line(s), node, field, why)
    }
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
pub(super) fn remote_path(s: &str) -> Result<(), String> {
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

/// A field's value: the node's, else `[defaults]`'.
type Field<'a, T> = Option<&'a Spanned<T>>;

/// The checks of one node: the file's errors and the node's name.
struct Check<'a> {
    e: &'a Errs<'a>,
    who: Option<&'a str>,
}

/// One node: its fields, else the defaults', checked in the order the
/// docs list them (the first bad one is reported).
pub(super) fn node(
    e: &Errs,
    base: &Path,
    d: &Raw,
    n: &Raw,
    i: usize,
    line: usize,
) -> Result<HostSpec, String> {
    let name = node_name(e, n, i)?;
    let c = Check {
        e,
        who: Some(name.as_str()),
    };
    macro_rules! pick {
        ($f:ident) => {
            n.$f.as_ref().or(d.$f.as_ref())
        };
    }
    let host = c.host(n.host.as_ref(), line)?;
    let address = c.address(host, pick!(address))?;
    let user = c.user(pick!(user))?;
    let port = c.ssh_port(pick!(ssh_port))?;
    let identity_file = c.file(base, pick!(identity_file), "identity_file")?;
    let known_hosts = c.file(base, pick!(known_hosts), "known_hosts")?;
    let data_dir = c.data_dir(pick!(data_dir))?;
    let faketime_preload = c.faketime_preload(pick!(faketime_preload))?;
    let systems = c.systems(pick!(systems))?;
    let base_port = c.base_port(pick!(base_port))?;
    let programs = c.programs(pick!(programs))?;
    let prog = |p: &str| programs.get(p).cloned().unwrap_or_else(|| p.to_string());
    let attach = match &n.attach {
        None => None,
        Some(a) => Some(super::attach::attach(
            e,
            a,
            &super::attach::NodeFacts {
                who: &name,
                address,
                base_port,
                systemctl: prog("systemctl"),
                journalctl: prog("journalctl"),
            },
        )?),
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
        attach,
    })
}

/// The node's `name`, or `host<N>` for the N-th node without one.
fn node_name(e: &Errs, n: &Raw, i: usize) -> Result<String, String> {
    let Some(s) = &n.name else {
        return Ok(format!("host{}", i + 1));
    };
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
    Ok(s.get_ref().clone())
}

impl Check<'_> {
    fn err<T>(&self, s: &Spanned<T>, field: &str, why: impl std::fmt::Display) -> String {
        self.e.field(s, self.who, field, why)
    }

    /// `host`, the SSH destination: required, one plain word.
    fn host<'r>(
        &self,
        host: Field<'r, String>,
        line: usize,
    ) -> Result<&'r Spanned<String>, String> {
        let host = host.ok_or_else(|| {
            self.e.at(
                line,
                self.who,
                "host",
                "missing (hint: host = \"the SSH destination, a name or an address\")",
            )
        })?;
        plain_word(host.get_ref()).map_err(|why| self.err(host, "host", why))?;
        Ok(host)
    }

    /// `address`, else `host` if it is an IP address; one servers can bind.
    fn address(&self, host: &Spanned<String>, a: Field<String>) -> Result<IpAddr, String> {
        let address = match a {
            Some(a) => a.get_ref().parse::<IpAddr>().map_err(|_| {
                self.err(a, "address", format!("{:?} is not an IP address", a.get_ref()))
            })?,
            None => host.get_ref().parse::<IpAddr>().map_err(|_| {
                self.err(
                    host,
                    "address",
                    format!(
                        "missing, and host {:?} is not an IP address (hint: add address = \"the IP the servers bind and peers dial\")",
                        host.get_ref()
                    ),
                )
            })?,
        };
        if address.is_unspecified() || address.is_multicast() {
            let at = a.map_or(self.e.line(host), |a| self.e.line(a));
            return Err(self.e.at(
                at,
                self.who,
                "address",
                format!("{address} is not an address servers can bind"),
            ));
        }
        Ok(address)
    }

    fn user(&self, u: Field<String>) -> Result<Option<String>, String> {
        let Some(u) = u else { return Ok(None) };
        plain_word(u.get_ref()).map_err(|why| self.err(u, "user", why))?;
        Ok(Some(u.get_ref().clone()))
    }

    fn ssh_port(&self, p: Field<u16>) -> Result<Option<u16>, String> {
        match p {
            Some(p) if *p.get_ref() == 0 => Err(self.err(p, "ssh_port", "is 0")),
            p => Ok(p.map(|p| *p.get_ref())),
        }
    }

    /// A local file, relative to the hosts file's directory; it must exist.
    fn file(&self, base: &Path, f: Field<String>, field: &str) -> Result<Option<PathBuf>, String> {
        let Some(f) = f else { return Ok(None) };
        if f.get_ref().is_empty() {
            return Err(self.err(f, field, "is empty"));
        }
        let p = base.join(f.get_ref());
        if self.e.files && !p.is_file() {
            return Err(self.err(f, field, format!("{}: no such file", p.display())));
        }
        Ok(Some(p))
    }

    fn data_dir(&self, s: Field<String>) -> Result<String, String> {
        let Some(s) = s else {
            return Ok(DEFAULT_DATA_DIR.to_string());
        };
        remote_path(s.get_ref()).map_err(|why| self.err(s, "data_dir", why))?;
        // `/`, `//` or `/./` would put the run directory in the root, and
        // an empty path after trimming makes it relative to the SSH home.
        let parts: Vec<&str> = s
            .get_ref()
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if parts.is_empty() {
            return Err(self.err(
                s,
                "data_dir",
                format!(
                    "{:?} is the root directory (hint: name a directory of its own, e.g. {DEFAULT_DATA_DIR})",
                    s.get_ref()
                ),
            ));
        }
        Ok(format!("/{}", parts.join("/")))
    }

    fn faketime_preload(&self, s: Field<String>) -> Result<String, String> {
        let Some(s) = s else {
            return Ok(FAKETIME_PRELOAD.to_string());
        };
        let libs: Vec<&str> = s.get_ref().split_whitespace().collect();
        if libs.is_empty() {
            return Err(self.err(s, "faketime_preload", "is empty"));
        }
        for l in &libs {
            remote_path(l).map_err(|why| self.err(s, "faketime_preload", why))?;
        }
        Ok(libs.join(" "))
    }

    /// `systems`, as names: which are systems is the caller's to check
    /// against the registry ([`SystemNames`] keeps the line for that).
    fn systems(&self, s: Field<Vec<String>>) -> Result<Option<SystemNames>, String> {
        let Some(s) = s else { return Ok(None) };
        if s.get_ref().is_empty() {
            return Err(self.err(
                s,
                "systems",
                "is empty (hint: leave it out to allow any system)",
            ));
        }
        Ok(Some(SystemNames {
            names: s.get_ref().clone(),
            line: self.e.line(s),
        }))
    }

    fn base_port(&self, p: Field<u16>) -> Result<Option<u16>, String> {
        match p {
            Some(p) if *p.get_ref() == 0 || *p.get_ref() > u16::MAX - 2 => Err(self.err(
                p,
                "base_port",
                format!(
                    "{} leaves no room for the peer and election ports (+1, +2): use 1 to {}",
                    p.get_ref(),
                    u16::MAX - 2
                ),
            )),
            p => Ok(p.map(|p| *p.get_ref())),
        }
    }

    fn programs(
        &self,
        m: Field<BTreeMap<String, String>>,
    ) -> Result<BTreeMap<String, String>, String> {
        let Some(m) = m else {
            return Ok(BTreeMap::new());
        };
        for (k, v) in m.get_ref() {
            if v.is_empty()
                || v.chars().any(|c| c.is_whitespace() || c.is_control())
                || v.starts_with('-')
            {
                return Err(self.err(
                    m,
                    "programs",
                    format!("{k} = {v:?} is not a path or program name"),
                ));
            }
        }
        Ok(m.get_ref().clone())
    }
}
