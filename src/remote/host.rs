//! One multiplexed SSH connection to a host (the `openssh` crate's
//! process mux: one `ssh` ControlMaster per host per run).

use super::{RemoteError, SshTarget};
use std::path::{Path, PathBuf};

/// The directory the ControlMaster sockets live under:
/// `temp_dir()/lockjaw-ssh` (short, so the socket path fits 108 bytes).
pub fn control_root() -> PathBuf {
    std::env::temp_dir().join("lockjaw-ssh")
}

/// One multiplexed SSH connection.
pub struct Host {
    name: String,
    target: SshTarget,
    session: Option<openssh::Session>,
    socket: PathBuf,
}

impl Host {
    /// Connect (ConnectTimeout 5 s, BatchMode, strict known_hosts when
    /// given). The ControlPath lives under `control_dir` and must fit in
    /// 108 bytes.
    pub async fn connect(
        name: &str,
        target: &SshTarget,
        control_dir: &Path,
    ) -> Result<Host, RemoteError> {
        let _ = control_dir;
        Err(RemoteError {
            host: format!("{name} ({target})"),
            msg: "not built yet".into(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// `NAME (TARGET)`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("{} ({})", self.name, self.target)
    }

    /// The ControlMaster's socket (for the SshMaster undo entry).
    pub fn control_socket(&self) -> PathBuf {
        self.socket.clone()
    }

    /// Run `sh -c SCRIPT` on the host; Ok(stdout) on exit 0, Err with
    /// stderr otherwise.
    pub async fn sh(&self, script: &str) -> Result<String, RemoteError> {
        let _ = (script, &self.session);
        Err(RemoteError::on(self, "not built yet"))
    }

    /// Write a file (mkdir -p its parent), mode 0644.
    pub async fn write_file(&self, path: &str, text: &str) -> Result<(), RemoteError> {
        let _ = (path, text);
        Err(RemoteError::on(self, "not built yet"))
    }

    pub async fn read_file(&self, path: &str) -> Result<String, RemoteError> {
        let _ = path;
        Err(RemoteError::on(self, "not built yet"))
    }

    /// What is missing on the host: each program (resolved via PATH unless
    /// absolute), `iptables` if asked, the faketime preload libraries if
    /// asked. Err names every missing tool.
    pub async fn check_tools(
        &self,
        programs: &[String],
        iptables: bool,
        faketime: Option<&str>,
    ) -> Result<(), RemoteError> {
        let _ = (programs, iptables, faketime);
        Err(RemoteError::on(self, "not built yet"))
    }

    /// Close the master (`ssh -O exit`).
    pub async fn close(self) {}
}
