//! The undo log (`undo.jsonl` in the run directory): every effect a run has
//! on the world, written down before it is applied, so that every exit path
//! can take it back, and `lockjaw heal DIR` can after a SIGKILL.
//!
//! The file is JSON Lines, append-only, fsynced after every line:
//!
//! ```text
//! {"id":1,"undo":{"kind":"cluster","dir":"/…/histories/run"}}
//! {"id":2,"undo":{"kind":"process","what":"worker 0","proc":{"pid":4242,"start_time":81234}}}
//! {"id":3,"undo":{"kind":"paused","what":"worker 0","proc":{"pid":4242,"start_time":81234}}}
//! {"done":3}
//! ```
//!
//! An entry without a later `{"done": id}` is pending. [`UndoLog::drain`]
//! (and `lockjaw heal`) undoes the pending ones in reverse order, so a
//! SIGSTOP is continued before its process is stopped, a toxic is removed
//! before its proxy. Undoing is idempotent: an effect that is already gone
//! (a process that exited, a toxic already removed, an embedded Toxiproxy
//! that died with lockjaw) counts as undone.
//!
//! A line that is not UTF-8 or not a record is skipped alone and reported
//! ([`UndoLog::skipped`]); a last line without its newline (a kill cut it
//! short, before its effect) is removed when the log is opened.
//!
//! The entries are data, not orders: paths are acted on only beneath the
//! run directory ([`RunDir`], `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`), iptables rules only when their typed fields
//! carry the run's id ([`iptables::Rule::check`]), network namespaces and
//! links only when their names are a test bed's (`ljbed*`, [`netns`]).
//!
//! A utility below everything that writes to it: it imports only
//! `process`. How each effect is taken back is not here but in a
//! [`Heal`] the log is opened with (the runner's heal implements it), so
//! the log knows no cluster, proxy, host or protocol.
//!
//! The files: [`record`] (the kinds of effect), [`remote`] (the data of an
//! effect on another host), [`iptables`] (a local rule as typed fields),
//! `heal` (the trait and what it may act on), `log` (appending and
//! draining), `read` (parsing a log line by line), `beneath` (`openat2`
//! confinement to the run directory).

mod beneath;
mod heal;
pub mod iptables;
mod log;
mod read;
pub mod record;
pub mod remote;

pub use beneath::{check_private, explain, RunDir};
pub use heal::{Heal, Scope, Trust, UndoError};
pub use log::UndoLog;
use log::{Line, Pending};
pub use read::read_pending;
pub use record::{RemoteEffect, Undo};

/// File name of the undo log in a run directory.
pub const UNDO_FILE: &str = "undo.jsonl";
