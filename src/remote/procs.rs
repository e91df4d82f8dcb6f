//! Server processes on a host, found by `LOCKJAW_TAG=<tag>` in their
//! environment (tag = `lockjaw-<run-id>-<node>`), so a restart, a kill of
//! lockjaw between spawn and record, or PID reuse never confuse them.

use super::{Host, RemoteError};
use crate::process::Signal;
use std::time::Duration;

/// What to start on a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteLaunch {
    pub tag: String,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Remote path of the log, appended to.
    pub log: String,
}

/// Start the process (setsid, detached, stdin /dev/null); returns its pid.
pub async fn start(host: &Host, l: &RemoteLaunch) -> Result<u32, RemoteError> {
    let _ = l;
    Err(RemoteError::on(host, "not built yet"))
}

/// Send `sig` to every process of the tag; returns how many.
pub async fn signal(host: &Host, tag: &str, sig: Signal) -> Result<usize, RemoteError> {
    let _ = (tag, sig);
    Err(RemoteError::on(host, "not built yet"))
}

/// CONT, TERM, up to `grace`, KILL, wait until gone (at most 10 s).
pub async fn stop(host: &Host, tag: &str, grace: Duration) -> Result<(), RemoteError> {
    let _ = (tag, grace);
    Err(RemoteError::on(host, "not built yet"))
}

/// Whether a process of the tag runs.
pub async fn alive(host: &Host, tag: &str) -> Result<bool, RemoteError> {
    let _ = tag;
    Err(RemoteError::on(host, "not built yet"))
}

/// Whether every process of the tag is stopped (state `T`).
pub async fn stopped(host: &Host, tag: &str) -> Result<bool, RemoteError> {
    let _ = tag;
    Err(RemoteError::on(host, "not built yet"))
}
