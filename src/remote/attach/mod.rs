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
    let out = host
        .sh(&script::discover(a))
        .await
        .map_err(|e| said(e, "finding the server"))?;
    parse::found(&out, matches!(a.find, Find::Unit { .. })).map_err(|e| RemoteError::on(host, e))
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
        .map_err(|e| said(e, &format!("starting the server with `{}`", a.start)))
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
