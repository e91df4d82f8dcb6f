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
//! Contract of issue 31 (skeleton written before the work was split): the
//! signatures below are what the cluster and runner layers call.

pub use crate::undo::remote::{Find, ProcStamp};

use super::{Host, RemoteError};
use crate::process::Signal;

/// A node's `attach` table, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachSpec {
    pub find: Find,
    /// The shell line that starts the server again after a kill (a unit:
    /// `systemctl start UNIT` unless the file gives another).
    pub start: String,
    /// `HOST:PORT` clients dial (default: the node's `address` and the
    /// system's usual port, or its `base_port`).
    pub client: String,
    pub role: AttachRole,
    pub log: LogSource,
    /// The line of the `attach` table, for errors.
    pub line: usize,
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

/// The scripts lockjaw sends to an attached node's host, one pure
/// function each (what the async functions below run, and what `--plan`
/// prints).
pub mod script {
    use super::{AttachSpec, ProcStamp};
    use crate::process::Signal;

    /// Print the found processes, one `PID START CGROUP` line each, main
    /// process first (exit 1 with the reason when none or too many match).
    pub fn discover(_a: &AttachSpec) -> String {
        todo!("issue 31: remote attach")
    }

    /// Signal each of `procs` whose pid still has its start time and cgroup.
    pub fn signal(_procs: &[ProcStamp], _sig: Signal) -> String {
        todo!("issue 31: remote attach")
    }

    /// Kill the node's processes (a unit: `systemctl kill -s KILL UNIT`)
    /// and wait until they are gone.
    pub fn kill(_a: &AttachSpec, _procs: &[ProcStamp]) -> String {
        todo!("issue 31: remote attach")
    }

    /// Run the start command.
    pub fn start(_a: &AttachSpec) -> String {
        todo!("issue 31: remote attach")
    }

    /// Print the log lines since `since_unix` (None: no log source).
    pub fn log_since(_a: &AttachSpec, _since_unix: i64) -> Option<String> {
        todo!("issue 31: remote attach")
    }
}

/// Find exactly the processes `a` describes on `host`, keeping only those
/// in the SSH session's network namespace. None, or more candidates than
/// the description allows, is an error naming the host and what was found.
pub async fn discover(_host: &Host, _a: &AttachSpec) -> Result<Found, RemoteError> {
    todo!("issue 31: remote attach")
}

/// Send `sig` to each of `procs` that still carries its start time and
/// cgroup (through the kept-open shell: on a fault's path).
pub async fn signal(
    _host: &Host,
    _procs: &[ProcStamp],
    _sig: Signal,
) -> Result<Signalled, RemoteError> {
    todo!("issue 31: remote attach")
}

/// SIGKILL the node (a unit: `systemctl kill -s KILL`), wait until the
/// found processes are gone.
pub async fn kill(_host: &Host, _a: &AttachSpec, _found: &Found) -> Result<(), RemoteError> {
    todo!("issue 31: remote attach")
}

/// Run the node's start command on its host.
pub async fn start(_host: &Host, _a: &AttachSpec) -> Result<(), RemoteError> {
    todo!("issue 31: remote attach")
}

/// Check the tools the node's faults need on its host: the start
/// command's program, `systemctl` for a unit, `iptables` when `iptables`.
pub async fn check_tools(
    _host: &Host,
    _a: &AttachSpec,
    _iptables: bool,
) -> Result<(), RemoteError> {
    todo!("issue 31: remote attach")
}

/// The log lines of the node since `since_unix` (None without a source).
pub async fn log_since(
    _host: &Host,
    _a: &AttachSpec,
    _since_unix: i64,
) -> Result<Option<String>, RemoteError> {
    todo!("issue 31: remote attach")
}
