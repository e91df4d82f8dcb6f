//! What the log asks of whoever takes an effect back: the [`Heal`] trait
//! (implemented above the log, by the runner's heal), what an entry may
//! act on ([`Scope`]), how far it is trusted ([`Trust`]), and the error a
//! failed undo reports ([`UndoError`]).

use super::{RunDir, Undo};
use std::sync::Arc;
use std::time::Duration;

/// How to take one record back. The log owns this trait and is handed an
/// implementation when it is opened; the implementation lives above the
/// modules whose effects it undoes (processes, clusters, proxies, hosts).
#[async_trait::async_trait]
pub trait Heal: Send + Sync {
    /// Take `undo` back, acting only within `scope` and signalling only
    /// what `trust` allows; SIGTERM gets `grace` before SIGKILL. Must be
    /// idempotent: an effect that is already gone counts as undone. The
    /// error says why it is not undone (ending in "skipped" when the
    /// record was refused).
    async fn heal(
        &self,
        undo: &Undo,
        scope: &Scope,
        trust: Trust,
        grace: Duration,
    ) -> Result<(), String>;

    /// Why `undo` would be refused (the checks `heal` makes before it
    /// acts, made without acting: `lockjaw heal --dry-run`); Ok when it
    /// would be taken back. The default refuses nothing.
    fn refuse(&self, _undo: &Undo, _scope: &Scope, _trust: Trust) -> Result<(), String> {
        Ok(())
    }
}

/// Where an entry comes from, and so what it may signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Pushed by this process (its own children): as recorded.
    Mine,
    /// Read from the undo file of the run directory (`lockjaw heal`): a
    /// process is signalled only if it is provably the run's (start time
    /// and the run's cgroup, [`crate::process::Owner`]).
    Prove,
}

/// What an undo may act on: the run directory (every path it touches lies
/// beneath it) and the run's id (every iptables rule it deletes carries it).
#[derive(Debug)]
pub struct Scope {
    pub dir: Arc<RunDir>,
    pub run_id: Option<String>,
}

/// Why an effect could not be undone.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what}: {msg}")]
pub struct UndoError {
    pub what: String,
    pub msg: String,
    /// The same entry failed before in this process with this error:
    /// already told.
    pub repeated: bool,
}
