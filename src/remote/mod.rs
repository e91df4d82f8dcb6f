//! Lock services on other machines, reached over SSH: the hosts file
//! ([`hosts`]), one multiplexed SSH connection per host ([`Host`], through
//! the `openssh` crate's process mux), server processes found by the
//! `LOCKJAW_TAG` in their environment ([`start`], [`signal`], [`stop`]),
//! whole-host iptables cuts ([`RemoteRule`]), libfaketime control files
//! ([`set_clock`]) and the dead man's switch a fault leaves on its host
//! ([`deadman`]). Every effect is written to the undo log as an
//! [`crate::undo::Undo::Remote`] entry first, so `lockjaw heal` can
//! reconnect and take it back after a SIGKILL.
//!
//! Sits below `cluster` (which starts clusters on hosts through it); the
//! runner's heal uses it to take remote effects back. The plain data the
//! undo log records ([`SshTarget`], [`RemoteRule`]) is the log's.

pub mod attach;
pub mod deadman;
pub(crate) mod host;
pub mod hosts;
pub(crate) mod procs;
mod rule;
mod shell;

pub use crate::undo::remote::{Find, ProcStamp, RemoteChain, RemoteRule, SshTarget};
pub use host::{control_root, live, quote, Host};
pub use hosts::{HostSpec, HostsFile};
pub use procs::{alive, signal, start, stop, stopped, RemoteLaunch};
pub use rule::{clock_back_script, delete_rule, insert_rule, rule_script, set_clock};

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
