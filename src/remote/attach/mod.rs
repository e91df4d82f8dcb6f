//! Servers lockjaw did not start (`--attach`): how a node of the hosts
//! file describes its running server (its `attach` table: a systemd unit,
//! a pidfile, or an executable and an argument; the start command; where
//! its log is), and what lockjaw does to it on its host: find exactly the
//! described processes (in the SSH session's own network namespace),
//! signal only processes that still carry the pid, start time and cgroup
//! they were found with, kill (systemd: `systemctl kill -s KILL`), start
//! again, read the log of the run's window.
//!
//! Every command is a shell script made by a pure function of [`script`],
//! so `--plan` prints exactly what a run would send.
//!
//! The outputs of the scripts are read in [`parse`].

pub use crate::undo::remote::{Find, ProcStamp};

use super::{Host, RemoteError};
use crate::process::Signal;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The run directory's copy of the hosts file (mode 0600, written before
/// the cluster is touched): heal takes an attached node's start command
/// from it, never from the undo entry.
pub const RUN_HOSTS_FILE: &str = "hosts.toml";

/// A node's `attach` table, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachSpec {
    pub find: Find,
    /// The shell line that starts the server again after a kill (a unit:
    /// `systemctl start UNIT` unless the file gives another).
    pub start: String,
    /// `HOST:PORT` clients dial, as given, else the node's `address` and
    /// its `base_port`; `None` when neither gives a port: the caller adds
    /// the system's usual one ([`AttachSpec::client_or`]).
    pub client: Option<String>,
    pub role: AttachRole,
    pub log: LogSource,
    /// The `systemctl` to run (the node's `programs`, else `systemctl`).
    pub systemctl: String,
    /// The `journalctl` to run (the node's `programs`, else `journalctl`).
    pub journalctl: String,
    /// The line of the `attach` table, for errors.
    pub line: usize,
}

impl AttachSpec {
    /// What clients dial: `client`, else `address:usual_port`.
    pub fn client_or(&self, address: std::net::IpAddr, usual_port: u16) -> String {
        self.client
            .clone()
            .unwrap_or_else(|| std::net::SocketAddr::new(address, usual_port).to_string())
    }
}

/// What an attached node is to its system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachRole {
    Server,
    /// A Redis Sentinel (`--system sentinel`).
    Sentinel,
}

/// Where an attached server's log is read from, for the run's window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogSource {
    None,
    /// `journalctl -u UNIT --since @UNIX`.
    Journal {
        unit: String,
    },
    /// A file on the host (lines appended during the run are copied).
    File {
        path: String,
    },
}

/// What discovery found for one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The main process first, then its descendants (or the rest of the
    /// unit's cgroup).
    pub procs: Vec<ProcStamp>,
    /// A systemd unit's restart and watchdog settings.
    pub unit: Option<UnitProps>,
    /// What the host says of the main process, for its proof.
    pub facts: Facts,
}

/// What discovery read on the host about the main process, for the proof
/// that it is the node's server (the cluster layer compares it with the
/// server's own answer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Its pid namespace is the SSH shell's (a pid the server reports
    /// means the same process).
    pub same_pid_ns: bool,
    /// Its time namespace is the SSH shell's (a start time it reports is
    /// counted from the same boot).
    pub same_time_ns: bool,
    /// The host's boot time (`btime` of /proc/stat, unix seconds) and
    /// clock ticks per second: a stamp's start in unix seconds.
    pub boot: Option<(u64, u64)>,
    /// Its command line.
    pub cmdline: Vec<String>,
    /// Who holds a listening socket on the node's client address.
    pub listening: Listening,
}

impl Facts {
    /// When the process of `stamp` started, in unix seconds.
    pub fn started_unix(&self, stamp: &ProcStamp) -> Option<f64> {
        let (btime, hz) = self.boot?;
        (hz > 0).then(|| btime as f64 + stamp.start as f64 / hz as f64)
    }
}

/// Who holds a listening TCP socket on a node's client address (or a
/// wildcard address on its port) in the found process's network namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Listening {
    /// Not looked for.
    #[default]
    NotAsked,
    /// A process of the found tree holds it.
    Held { pid: u32, at: SocketAddr },
    /// Another process of the namespace holds it (e.g. a port forward).
    Other {
        pid: u32,
        comm: String,
        at: SocketAddr,
    },
    /// Something listens there, but no process was seen holding it (the
    /// `fd` directories named in `unreadable` could not be read).
    Unheld {
        at: SocketAddr,
        unreadable: Vec<u32>,
    },
    /// Nothing listens on the client address or port.
    Nothing,
    /// The recorded processes are gone.
    Gone,
}

/// A node's client address as its listening socket may show it: the
/// address itself or a wildcard, on its port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listen {
    pub port: u16,
    /// The client address's IPs (a host name: each it resolves to here).
    pub ips: Vec<IpAddr>,
}

impl Listen {
    /// The listen addresses of `client` (`HOST:PORT`); None when it does
    /// not resolve.
    pub fn of(client: &str) -> Option<Listen> {
        use std::net::ToSocketAddrs;
        let addrs: Vec<SocketAddr> = match client.parse::<SocketAddr>() {
            Ok(a) => vec![a],
            Err(_) => client.to_socket_addrs().ok()?.collect(),
        };
        let port = addrs.first()?.port();
        let ips = addrs.iter().map(|a| a.ip()).collect();
        Some(Listen { port, ips })
    }

    /// Each `HEXADDR:HEXPORT` a matching socket shows in `/proc/net/tcp`
    /// or `tcp6`: the IPs, their IPv4-mapped IPv6 form, and the wildcards
    /// (a little-endian host's spelling: each 32-bit word in host order).
    pub fn want(&self) -> Vec<String> {
        let mut ips: Vec<IpAddr> = vec![
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        ];
        for ip in &self.ips {
            ips.push(*ip);
            if let IpAddr::V4(v4) = ip {
                ips.push(IpAddr::V6(v4.to_ipv6_mapped()));
            }
        }
        let mut w: Vec<String> = ips
            .iter()
            .map(|ip| format!("{}:{:04X}", proc_net_hex(ip), self.port))
            .collect();
        w.dedup();
        w
    }
}

/// An IP as `/proc/net/tcp{,6}` prints it on a little-endian host.
fn proc_net_hex(ip: &IpAddr) -> String {
    let bytes = match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    bytes
        .chunks(4)
        .map(|c| format!("{:08X}", u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect()
}

/// `HEXADDR:HEXPORT` of `/proc/net/tcp{,6}` as an address.
pub(crate) fn from_proc_net(s: &str) -> Option<SocketAddr> {
    let (a, p) = s.split_once(':')?;
    let port = u16::from_str_radix(p, 16).ok()?;
    let mut bytes = Vec::new();
    for i in (0..a.len()).step_by(8) {
        let w = u32::from_str_radix(a.get(i..i + 8)?, 16).ok()?;
        bytes.extend(w.to_le_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        16 => {
            let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The settings of a unit that decide what a fault becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitProps {
    /// `Restart=` (`no`, `always`, `on-failure`, ...).
    pub restart: String,
    /// `RestartUSec=` in ms.
    pub restart_ms: u64,
    /// `WatchdogUSec=` in ms (0: none).
    pub watchdog_ms: u64,
}

/// What a signal reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signalled {
    /// Signalled: the pid still had its start time and cgroup.
    pub sent: Vec<ProcStamp>,
    /// Not signalled: gone, or its pid now names another process.
    pub gone: Vec<ProcStamp>,
}

/// Where a log stood when the run began: the host's clock (`date +%s`)
/// and, for a log file, its size in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogMark {
    pub unix: i64,
    pub bytes: Option<u64>,
}

/// Whether a node's server runs (for heal: start it only when not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Running {
    Yes,
    /// None runs, and why discovery found none.
    No(String),
}

mod parse;
pub mod script;
#[cfg(test)]
mod tests;

/// Find exactly the processes `a` describes on `host`, keeping only those
/// in the SSH session's network namespace. None, or more candidates than
/// the description allows, is an error naming the host and what was found.
pub async fn discover(host: &Host, a: &AttachSpec) -> Result<Found, RemoteError> {
    discover_at(host, a, None).await
}

/// [`discover`], and with `listen` which process holds the node's
/// listening socket ([`Facts::listening`]).
pub async fn discover_at(
    host: &Host,
    a: &AttachSpec,
    listen: Option<&Listen>,
) -> Result<Found, RemoteError> {
    let out = host
        .sh(&script::discover_at(a, listen))
        .await
        .map_err(|e| said(e, "finding the server"))?;
    parse::found(&out, matches!(a.find, Find::Unit { .. })).map_err(|e| RemoteError::on(host, e))
}

/// Which process holds the node's listening socket now, among `procs`
/// that still carry their stamps (through the kept-open shell: on a
/// fault's path).
pub async fn listening(
    host: &Host,
    procs: &[ProcStamp],
    listen: &Listen,
) -> Result<Listening, RemoteError> {
    let out = host.quick(&script::listening(procs, listen)).await?;
    Ok(parse::listening(&out))
}

/// Whether a process of `a` runs on `host` (none found: `No`; an
/// ambiguous description or an unreadable host: Err).
pub async fn running(host: &Host, a: &AttachSpec) -> Result<Running, RemoteError> {
    let out = host.sh(&script::running(a)).await?;
    parse::running(&out).map_err(|e| RemoteError::on(host, e))
}

/// Send `sig` to each of `procs` that still carries its start time and
/// cgroup (through the kept-open shell: on a fault's path).
pub async fn signal(
    host: &Host,
    procs: &[ProcStamp],
    sig: Signal,
) -> Result<Signalled, RemoteError> {
    if procs.is_empty() {
        return Ok(Signalled::default());
    }
    let out = host.quick(&script::signal(procs, sig)).await?;
    parse::signalled(&out, procs).map_err(|e| RemoteError::on(host, e))
}

/// SIGKILL the node (a unit: `systemctl kill -s KILL`), wait until the
/// found processes are gone (at most [`script::KILL_WAIT_S`]).
pub async fn kill(host: &Host, a: &AttachSpec, found: &Found) -> Result<(), RemoteError> {
    host.quick(&script::kill(a, &found.procs))
        .await
        .map(drop)
        .map_err(|e| said(e, "killing the server"))
}

/// Run the node's start command on its host, detached from the SSH
/// session; it must return once the server is started (as `systemctl
/// start` does), within [`script::START_TIMEOUT_S`].
pub async fn start(host: &Host, a: &AttachSpec) -> Result<(), RemoteError> {
    host.sh(&script::start(a))
        .await
        .map(drop)
        .map_err(|e| start_failed(e, &a.start))
}

/// A failed start as one plain sentence: "its start command `CMD` exited
/// with 1, printing: what it printed" (its lines joined by " / ").
fn start_failed(mut e: RemoteError, cmd: &str) -> RemoteError {
    let said = e
        .msg
        .find("` exited with ")
        .map(|i| i + "` exited with ".len())
        .and_then(|i| {
            e.msg[i..]
                .split_once(": ")
                .map(|(_, m)| m.trim().to_string())
        });
    let Some(said) = said else {
        e.msg = format!("starting the server with `{cmd}`: {}", e.msg);
        return e;
    };
    let (head, printed) = said.split_once(", printing:").unwrap_or((&said, ""));
    let printed: Vec<&str> = printed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    e.msg = match printed.is_empty() {
        true => format!("its start command `{cmd}` {head}, printing nothing"),
        false => format!(
            "its start command `{cmd}` {head}, printing: {}",
            printed.join(" / ")
        ),
    };
    e
}

/// A script's failure as what it was doing and what it said, without the
/// script's first line `Host` names (`PATH=...`).
fn said(mut e: RemoteError, doing: &str) -> RemoteError {
    let cut = e
        .msg
        .find("` exited with ")
        .map(|i| i + "` exited with ".len());
    if let Some((code, msg)) = cut.and_then(|i| e.msg[i..].split_once(": ")) {
        e.msg = format!("{doing} (exit {code}): {}", msg.trim());
    }
    e
}

/// The programs the node's scripts run on its host.
pub fn tools(a: &AttachSpec) -> Vec<String> {
    let mut t: Vec<String> = [
        "readlink", "awk", "ls", "tr", "cat", "sort", "timeout", "setsid", "mktemp",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // What a fault's dead man's switch runs.
    for d in super::deadman::TOOLS {
        if !t.iter().any(|x| x == d) {
            t.push(d.to_string());
        }
    }
    if matches!(a.find, Find::Unit { .. }) {
        t.push(a.systemctl.clone());
    }
    if matches!(a.log, LogSource::Journal { .. }) {
        t.push(a.journalctl.clone());
    }
    t.extend(parse::start_program(&a.start));
    t.dedup();
    t
}

/// Check the tools the node's faults need on its host: the start
/// command's program, `systemctl` for a unit, `journalctl` for a
/// journal, the scripts' own tools, `iptables` when `iptables`.
pub async fn check_tools(host: &Host, a: &AttachSpec, iptables: bool) -> Result<(), RemoteError> {
    host.check_tools(&tools(a), iptables, None).await
}

/// Where the node's log stands now (None without a log source).
pub async fn log_mark(host: &Host, a: &AttachSpec) -> Result<Option<LogMark>, RemoteError> {
    let Some(s) = script::log_mark(a) else {
        return Ok(None);
    };
    let out = host.sh(&s).await?;
    parse::mark(&out)
        .map(Some)
        .map_err(|e| RemoteError::on(host, e))
}

/// The log lines of the node since `mark` (None without a source).
pub async fn log_since(
    host: &Host,
    a: &AttachSpec,
    mark: &LogMark,
) -> Result<Option<String>, RemoteError> {
    match script::log_since(a, mark) {
        None => Ok(None),
        Some(s) => host.sh(&s).await.map(Some),
    }
}
