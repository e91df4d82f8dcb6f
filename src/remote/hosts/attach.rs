//! A node's `attach` table (`[node.attach]`): how to find and control a
//! server lockjaw did not start. Exactly one of `unit`, `pidfile` (with
//! an optional `exe` its pid must run) or `exe` with `arg`; `start`
//! (required unless `unit`), `client`, `role`, `log`. Each field is
//! checked here, with errors `FILE:LINE: node N: field attach.F: why`.

use super::node::{remote_path, Errs};
use crate::remote::attach::{AttachRole, AttachSpec, LogSource};
use crate::remote::host::quote;
use crate::remote::Find;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use toml::Spanned;

/// The fields of an `attach` table, each with its place in the file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAttach {
    unit: Option<Spanned<String>>,
    pidfile: Option<Spanned<String>>,
    exe: Option<Spanned<String>>,
    arg: Option<Spanned<String>>,
    start: Option<Spanned<String>>,
    client: Option<Spanned<String>>,
    role: Option<Spanned<String>>,
    log: Option<Spanned<String>>,
}

/// What the checks of one node's `attach` table need of the node.
pub(super) struct NodeFacts<'a> {
    pub who: &'a str,
    pub address: IpAddr,
    pub base_port: Option<u16>,
    pub systemctl: String,
    pub journalctl: String,
}

/// A unit name systemd accepts: `[A-Za-z0-9:_.@\\-]`, not starting with `-`.
fn unit_name(u: &str) -> Result<(), String> {
    let ok = !u.is_empty()
        && !u.starts_with('-')
        && u.len() <= 256
        && u.chars()
            .all(|c| c.is_ascii_alphanumeric() || ":_.@\\-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{u:?} is not a unit name (hint: the name systemctl status shows, e.g. etcd.service)"
        ))
    }
}

/// One line of shell: not empty, no control character (a newline would
/// smuggle a second command past `--plan`'s reader).
fn shell_line(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("is empty".into());
    }
    if s.chars().any(|c| c.is_control()) {
        return Err(format!(
            "{s:?} contains a control character (hint: one line of shell)"
        ));
    }
    Ok(())
}

/// `HOST:PORT` (`[V6]:PORT` for an IPv6 address), port not 0.
fn client(s: &str) -> Result<(), String> {
    if s.parse::<SocketAddr>().is_ok_and(|a| a.port() != 0) {
        return Ok(());
    }
    let bad = || format!("{s:?} is not HOST:PORT (hint: e.g. \"10.0.0.1:2379\")");
    let (h, p) = s.rsplit_once(':').ok_or_else(bad)?;
    let port_ok = p.parse::<u16>().is_ok_and(|p| p != 0);
    let host_ok = !h.is_empty()
        && !h.starts_with('-')
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    if port_ok && host_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

/// The checked `attach` table of node `n.who`.
pub(super) fn attach(
    e: &Errs,
    raw: &Spanned<RawAttach>,
    n: &NodeFacts,
) -> Result<AttachSpec, String> {
    let err = |s: &Spanned<String>, f: &str, why: String| {
        e.field(s, Some(n.who), &format!("attach.{f}"), why)
    };
    let check = |s: &Option<Spanned<String>>, f: &str, c: fn(&str) -> Result<(), String>| match s {
        Some(s) => c(s.get_ref()).map_err(|why| err(s, f, why)),
        None => Ok(()),
    };
    let r = raw.get_ref();
    let line = e.line(raw);
    check(&r.unit, "unit", unit_name)?;
    check(&r.pidfile, "pidfile", remote_path)?;
    check(&r.exe, "exe", remote_path)?;
    check(&r.start, "start", shell_line)?;
    check(&r.arg, "arg", shell_line)?;
    check(&r.client, "client", client)?;
    let find = find(e, r, n.who, line)?;
    let start = match (&r.start, &find) {
        (Some(s), _) => s.get_ref().trim().to_string(),
        (None, Find::Unit { unit }) => format!("{} start {}", quote(&n.systemctl), quote(unit)),
        (None, _) => {
            return Err(e.at(
                line,
                Some(n.who),
                "attach.start",
                "missing (hint: the shell line that starts the server again after a kill and returns once it runs, e.g. start = \"/etc/init.d/etcd start\")",
            ))
        }
    };
    let client = match (&r.client, n.base_port) {
        (Some(c), _) => Some(c.get_ref().clone()),
        (None, Some(p)) => Some(SocketAddr::new(n.address, p).to_string()),
        (None, None) => None,
    };
    let role = match r.role.as_ref().map(|s| (s, s.get_ref().as_str())) {
        None | Some((_, "server")) => AttachRole::Server,
        Some((_, "sentinel")) => AttachRole::Sentinel,
        Some((s, v)) => return Err(err(s, "role", format!("{v:?} is not server or sentinel"))),
    };
    let log = log(e, r, &find, n.who)?;
    Ok(AttachSpec {
        find,
        start,
        client,
        role,
        log,
        systemctl: n.systemctl.clone(),
        journalctl: n.journalctl.clone(),
        line,
    })
}

/// Exactly one of `unit`, `pidfile` (+ `exe`), `exe` + `arg`.
fn find(e: &Errs, r: &RawAttach, who: &str, line: usize) -> Result<Find, String> {
    let err = |s: &Spanned<String>, f: &str, why: &str| {
        e.field(s, Some(who), &format!("attach.{f}"), why)
    };
    let one = "(hint: give exactly one of unit, pidfile, or exe with arg)";
    match (&r.unit, &r.pidfile, &r.exe, &r.arg) {
        (Some(u), None, None, None) => Ok(Find::Unit {
            unit: u.get_ref().clone(),
        }),
        (Some(_), Some(p), _, _) => Err(err(p, "pidfile", &format!("given with unit {one}"))),
        (Some(_), None, Some(x), _) => Err(err(x, "exe", &format!("given with unit {one}"))),
        (Some(_), None, None, Some(a)) => Err(err(a, "arg", "only goes with exe (hint: a unit needs no arg)")),
        (None, Some(_), _, Some(a)) => Err(err(
            a,
            "arg",
            "only goes with exe without pidfile (hint: the pidfile names the process already)",
        )),
        (None, Some(p), x, None) => Ok(Find::Pidfile {
            pidfile: p.get_ref().clone(),
            exe: x.as_ref().map(|x| x.get_ref().clone()),
        }),
        (None, None, Some(x), Some(a)) => Ok(Find::Exe {
            exe: x.get_ref().clone(),
            arg: a.get_ref().split_whitespace().collect::<Vec<_>>().join(" "),
        }),
        (None, None, Some(x), None) => Err(err(
            x,
            "arg",
            "missing: exe needs arg, the argument(s) that tell this node's process from the others (hint: e.g. arg = \"--name=e1\")",
        )),
        (None, None, None, Some(a)) => Err(err(a, "arg", "only goes with exe")),
        (None, None, None, None) => Err(e.at(
            line,
            Some(who),
            "attach",
            format!("says neither unit, pidfile nor exe {one}"),
        )),
    }
}

/// `log`: `journal` (a unit's default) or an absolute path.
fn log(e: &Errs, r: &RawAttach, find: &Find, who: &str) -> Result<LogSource, String> {
    let unit = match find {
        Find::Unit { unit } => Some(unit.clone()),
        _ => None,
    };
    let Some(l) = &r.log else {
        return Ok(unit.map_or(LogSource::None, |unit| LogSource::Journal { unit }));
    };
    let err = |why: String| e.field(l, Some(who), "attach.log", why);
    if l.get_ref() == "journal" {
        return match unit {
            Some(unit) => Ok(LogSource::Journal { unit }),
            None => Err(err(
                "journal needs unit (hint: give the log file's absolute path)".into(),
            )),
        };
    }
    remote_path(l.get_ref()).map_err(|why| {
        err(format!(
            "{why} (hint: \"journal\" or a file's absolute path)"
        ))
    })?;
    Ok(LogSource::File {
        path: l.get_ref().clone(),
    })
}

/// An unknown field or a wrong type inside an `attach` table (under a
/// `[node.attach]` header, or on an `attach = { ... }` line) as `FILE:LINE: node N: field attach.F: why`: the node
/// is the last `[[node]]` above the line (its `name`, else `hostI`).
pub(super) fn in_node(e: &Errs, err: crate::toml_file::FileError) -> String {
    let lines: Vec<&str> = e.src.text.lines().take(err.line).collect();
    let header = lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('['));
    let inline = lines
        .last()
        .is_some_and(|l| l.trim_start().starts_with("attach") && l.contains('{'));
    let table = header.is_some_and(|h| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .replace(' ', "")
            == "node.attach"
    });
    let (Some(field), true) = (&err.field, err.line > 0 && (inline || table)) else {
        return err.to_string();
    };
    let headers = super::node_lines(&e.src.text);
    let Some(i) = headers.iter().rposition(|&h| h <= err.line) else {
        return err.to_string();
    };
    let name = lines[headers[i]..]
        .iter()
        .filter_map(|l| l.trim().strip_prefix("name"))
        .filter_map(|r| r.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .next()
        .unwrap_or_else(|| format!("host{}", i + 1));
    let mut why = err.msg.clone();
    if let Some(h) = &err.hint {
        why.push_str(&format!(" (hint: {h})"));
    }
    e.at(err.line, Some(&name), &format!("attach.{field}"), why)
}
