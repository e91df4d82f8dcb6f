//! Taking back what a run did on another host ([`Undo::Remote`]) and
//! ending a ControlMaster a killed lockjaw left ([`Undo::SshMaster`]).
//!
//! [`Undo::Remote`]: crate::undo::Undo::Remote
//! [`Undo::SshMaster`]: crate::undo::Undo::SshMaster

use crate::remote::SshTarget;
use crate::undo::RemoteEffect;
use std::path::Path;
use std::time::Duration;

/// Reconnect to `target` (a fresh master in a temporary control
/// directory), check `effect` is this run's, take it back, close.
pub(super) async fn undo(
    host: &str,
    target: &SshTarget,
    effect: &RemoteEffect,
    run_id: Option<&str>,
    grace: Duration,
) -> Result<(), String> {
    let _ = (host, target, effect, run_id, grace);
    Err("not built yet".into())
}

/// `ssh -S SOCKET -O exit x`: a socket that is gone is undone.
pub(super) async fn end_master(socket: &Path) -> Result<(), String> {
    let _ = socket;
    Err("not built yet".into())
}
