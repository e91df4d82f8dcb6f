//! Lock services on other machines, reached over SSH: the hosts file
//! ([`hosts`]), one multiplexed SSH connection per host ([`Host`], through
//! the `openssh` crate's process mux), server processes found by the
//! `LOCKJAW_TAG` in their environment ([`start`], [`signal`], [`stop`]),
//! whole-host iptables cuts ([`RemoteRule`]) and libfaketime control files
//! ([`set_clock`]). Every effect is written to the undo log as an
//! [`crate::undo::Undo::Remote`] entry first, so `lockjaw heal` can
//! reconnect and take it back after a SIGKILL.
//!
//! Sits beside `cluster` (which starts clusters on hosts through it) and
//! below the runner; the undo log uses it to heal remote effects.

pub(crate) mod host;
pub mod hosts;
pub(crate) mod procs;
mod rule;
mod shell;

pub use host::{control_root, live, quote, Host};
pub use hosts::{HostSpec, HostsFile};
pub use procs::{alive, signal, start, stop, stopped, RemoteLaunch};
pub use rule::{delete_rule, insert_rule, set_clock, RemoteChain, RemoteRule};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// How to reach a host again (stored in undo entries, so heal can reconnect).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshTarget {
    /// The SSH destination (name or address).
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<PathBuf>,
    /// Checked strictly when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<PathBuf>,
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        f.write_str(&self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// Something that went wrong on (or on the way to) a host.
#[derive(Debug, thiserror::Error)]
#[error("host {host}: {msg}")]
pub struct RemoteError {
    /// `NAME (TARGET)`.
    pub host: String,
    pub msg: String,
}

impl RemoteError {
    pub(crate) fn on(host: &Host, msg: impl Into<String>) -> RemoteError {
        RemoteError {
            host: host.label(),
            msg: msg.into(),
        }
    }
}
