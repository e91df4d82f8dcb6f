//! The undo log of one run ([`UndoLog`]): appending a record (fsynced)
//! before its effect, marking it done, and undoing what is pending,
//! newest first, through the [`Heal`] it was opened with. An error names
//! the log's file and line.

use super::read::parse;
use super::{Heal, RunDir, Scope, Trust, Undo, UndoError, UNDO_FILE};
use crate::process;
use rustix::fs::{Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
pub(super) enum Line {
    Entry { id: u64, undo: Undo },
    Done { done: u64 },
}

/// A pending entry and the line of the log it was read from or written to.
#[derive(Clone)]
pub(super) struct Pending {
    pub(super) line: usize,
    pub(super) undo: Undo,
}

struct State {
    file: File,
    next: u64,
    /// Lines in the file so far.
    lines: usize,
    pending: BTreeMap<u64, Pending>,
    /// Entries this process pushed itself (not read from the file): their
    /// processes are its own children, no proof needed.
    mine: std::collections::HashSet<u64>,
    /// Entries whose undo failed in this process, with why: a second
    /// failure with the same message is told as [`UndoError::repeated`].
    failed: BTreeMap<u64, String>,
    /// Entries not to try again in this process ([`UndoLog::give_up`]):
    /// they stay pending for `lockjaw heal`.
    given_up: std::collections::HashSet<u64>,
}

/// The undo log of one run.
pub struct UndoLog {
    path: PathBuf,
    scope: Scope,
    /// How each record is taken back.
    healer: Arc<dyn Heal>,
    state: Mutex<State>,
    /// Grace between SIGTERM and SIGKILL when stopping processes.
    grace: Mutex<Duration>,
    /// Lines skipped when the log was opened (not UTF-8, not a record).
    skipped: Vec<String>,
    /// What opening the log repaired (a partial last line removed).
    repaired: Vec<String>,
}

impl UndoLog {
    /// Create (or append to) `path`, taking over what is pending in it;
    /// `healer` takes the records back. The file is opened beneath its
    /// directory (no symbolic link) and created without write access for
    /// the group and others.
    pub fn open(path: &Path, healer: Arc<dyn Heal>) -> std::io::Result<UndoLog> {
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .ok_or_else(|| std::io::Error::other("no file name"))?;
        let dir = RunDir::open(parent)?;
        let file = dir.open_file(
            Path::new(name),
            OFlags::RDWR | OFlags::APPEND | OFlags::CREATE,
            Mode::from_bits_truncate(0o644),
        )?;
        UndoLog::read_in(path.to_path_buf(), dir, file, healer, true)
    }

    /// The undo log `file` (opened and checked by the caller) of the run
    /// directory `dir`; `healer` takes the records back.
    pub fn open_in(dir: RunDir, file: File, healer: Arc<dyn Heal>) -> std::io::Result<UndoLog> {
        let path = dir.path().join(UNDO_FILE);
        UndoLog::read_in(path, dir, file, healer, true)
    }

    /// As [`UndoLog::open_in`], but changing nothing (a partial last line
    /// is reported, not removed): for [`UndoLog::plan`]. `file` may be
    /// read-only; nothing may be pushed.
    pub fn inspect_in(dir: RunDir, file: File, healer: Arc<dyn Heal>) -> std::io::Result<UndoLog> {
        let path = dir.path().join(UNDO_FILE);
        UndoLog::read_in(path, dir, file, healer, false)
    }

    fn read_in(
        path: PathBuf,
        dir: RunDir,
        mut file: File,
        healer: Arc<dyn Heal>,
        repair: bool,
    ) -> std::io::Result<UndoLog> {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let parsed = parse(&bytes, &path);
        let mut repaired = Vec::new();
        if let Some((line, keep)) = parsed.torn {
            // Entries are written before their effect, in one write with
            // their newline: a line a kill cut short was never acted on.
            if repair {
                file.set_len(keep)?;
            }
            repaired.push(format!(
                "{}:{line}: {} a partial last line ({} bytes) that a kill cut short; its effect was never applied",
                path.display(),
                if repair { "removed" } else { "would remove" },
                bytes.len() as u64 - keep
            ));
        }
        Ok(UndoLog {
            path,
            scope: Scope {
                dir: Arc::new(dir),
                run_id: None,
            },
            healer,
            state: Mutex::new(State {
                file,
                next: parsed.last_id + 1,
                lines: parsed.lines,
                pending: parsed.pending,
                mine: Default::default(),
                failed: Default::default(),
                given_up: Default::default(),
            }),
            grace: Mutex::new(process::DEFAULT_GRACE),
            skipped: parsed.skipped,
            repaired,
        })
    }

    /// The run's id: an iptables rule is deleted only if it carries it.
    pub fn with_run_id(mut self, id: &str) -> UndoLog {
        self.scope.run_id = Some(id.to_string());
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The run directory and run id its undos are confined to.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Lines of the log skipped when it was read, one message each (file,
    /// line, why).
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// What reading the log repaired (a partial last line removed).
    pub fn repaired(&self) -> &[String] {
        &self.repaired
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shorten the SIGTERM→SIGKILL grace (a second Ctrl-C).
    pub fn set_grace(&self, grace: Duration) {
        *self.grace.lock().unwrap_or_else(|e| e.into_inner()) = grace;
    }

    /// Write `undo` down (fsynced) before its effect is applied; returns its id.
    pub fn push(&self, undo: Undo) -> std::io::Result<u64> {
        let mut s = self.lock();
        let id = s.next;
        s.next += 1;
        let line = serde_json::to_string(&Line::Entry {
            id,
            undo: undo.clone(),
        })?;
        // One write per line, so a SIGKILL cannot split an entry from its
        // newline.
        s.file.write_all(format!("{line}\n").as_bytes())?;
        s.file.sync_data()?;
        s.lines += 1;
        let line = s.lines;
        s.pending.insert(id, Pending { line, undo });
        s.mine.insert(id);
        Ok(id)
    }

    /// Mark `id` undone without acting (its effect ended by itself, e.g. a
    /// worker that exited).
    pub fn forget(&self, id: u64) {
        let mut s = self.lock();
        if s.pending.remove(&id).is_some() {
            let _ = s.file.write_all(format!("{{\"done\":{id}}}\n").as_bytes());
            let _ = s.file.sync_data();
            s.lines += 1;
        }
    }

    /// Undo `id` now (if still pending) and mark it done. An error names the
    /// log's file and line.
    pub async fn undo(&self, id: u64) -> Result<(), UndoError> {
        let Some(p) = self.lock().pending.get(&id).cloned() else {
            return Ok(());
        };
        let grace = *self.grace.lock().unwrap_or_else(|e| e.into_inner());
        let trust = if self.lock().mine.contains(&id) {
            Trust::Mine
        } else {
            Trust::Prove
        };
        let healed = self.healer.heal(&p.undo, &self.scope, trust, grace).await;
        if let Err(msg) = healed {
            let what = p.undo.describe();
            let what = format!("{what} ({}:{})", self.path.display(), p.line);
            let before = self.lock().failed.insert(id, msg.clone());
            let repeated = before.as_deref() == Some(msg.as_str());
            return Err(UndoError {
                what,
                msg,
                repeated,
            });
        }
        self.forget(id);
        Ok(())
    }

    /// Note that taking entry `id` back failed with `msg` outside
    /// [`UndoLog::undo`] (a fault's own stop, which told it) in a way a
    /// second try in this process would only repeat (a start command that
    /// failed): [`UndoLog::drain`] does not try it again, and it stays
    /// pending for `lockjaw heal`. Other failed entries are tried again
    /// at the run's end (a host that was unreachable may answer again).
    pub fn give_up(&self, id: u64, msg: &str) {
        let mut st = self.lock();
        st.failed.insert(id, msg.to_string());
        st.given_up.insert(id);
    }

    /// Whether entry `id` was given up in this process ([`UndoLog::give_up`]).
    pub fn given_up(&self, id: u64) -> bool {
        self.lock().given_up.contains(&id)
    }

    /// The pending entries, oldest first.
    pub fn pending(&self) -> Vec<(u64, Undo)> {
        self.lock()
            .pending
            .iter()
            .map(|(k, p)| (*k, p.undo.clone()))
            .collect()
    }

    /// What [`UndoLog::drain`] would do, newest first, without acting:
    /// each pending entry ("what (file:line)") with the healer's verdict
    /// ([`Heal::refuse`]: `Err` says why it would be refused).
    pub fn plan(&self) -> Vec<(String, Result<(), String>)> {
        let s = self.lock();
        s.pending
            .iter()
            .rev()
            .map(|(id, p)| {
                let trust = if s.mine.contains(id) {
                    Trust::Mine
                } else {
                    Trust::Prove
                };
                let what = format!("{} ({}:{})", p.undo.describe(), self.path.display(), p.line);
                (what, self.healer.refuse(&p.undo, &self.scope, trust))
            })
            .collect()
    }

    /// Undo everything pending, newest first. Keeps going past failures
    /// and returns them; what failed stays pending (for `lockjaw heal`).
    ///
    /// An entry given up in this process ([`UndoLog::give_up`]) is not
    /// tried again (it stays pending, for `lockjaw heal`: a start command
    /// that failed once is not run four times); its error comes back with
    /// `repeated` set, for the caller not to tell it twice. Any other
    /// entry is tried (again), and a failure with the message it failed
    /// with before comes back `repeated` too.
    pub async fn drain(&self) -> Vec<UndoError> {
        let mut errors = Vec::new();
        for (id, p) in self.pending().into_iter().rev() {
            let failed = {
                let st = self.lock();
                st.given_up
                    .contains(&id)
                    .then(|| st.failed.get(&id).cloned().unwrap_or_default())
            };
            if let Some(msg) = failed {
                errors.push(UndoError {
                    what: p.describe(),
                    msg,
                    repeated: true,
                });
                continue;
            }
            if let Err(e) = self.undo(id).await {
                errors.push(e);
            }
        }
        errors
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::undo::read_pending;

    /// A healer that writes down what it was asked to take back, and
    /// refuses a `CLIENT PAUSE` on the address "refuse".
    #[derive(Default)]
    pub(in crate::undo) struct Recorder(pub Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl Heal for Recorder {
        async fn heal(&self, u: &Undo, _: &Scope, _: Trust, _: Duration) -> Result<(), String> {
            if matches!(u, Undo::RedisClientPause { addr } if addr == "refuse") {
                return Err("refused: skipped".into());
            }
            self.0.lock().unwrap().push(u.describe());
            Ok(())
        }
    }

    pub(in crate::undo) fn open(p: &Path) -> UndoLog {
        UndoLog::open(p, Arc::new(Recorder::default())).unwrap()
    }

    fn pause(addr: &str) -> Undo {
        Undo::RedisClientPause { addr: addr.into() }
    }

    #[tokio::test]
    async fn entries_are_pending_until_done_and_drain_in_reverse() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        let log = open(&p);
        let a = log.push(pause("a")).unwrap();
        let b = log.push(pause("b")).unwrap();
        log.undo(b).await.unwrap();
        // A second process (heal) sees only `a` pending.
        let pending = read_pending(&p).unwrap();
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), vec![a]);
        let healer = Arc::new(Recorder::default());
        let again = UndoLog::open(&p, healer.clone()).unwrap();
        let c = again.push(pause("c")).unwrap();
        // Ids keep growing after a reopen.
        assert!(c > b);
        assert!(again.drain().await.is_empty());
        assert_eq!(
            *healer.0.lock().unwrap(),
            ["CLIENT UNPAUSE on c", "CLIENT UNPAUSE on a"]
        );
        assert!(read_pending(&p).unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_refused_entry_stays_pending_and_its_error_names_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let log = open(&d.path().join(UNDO_FILE));
        log.push(pause("refuse")).unwrap();
        log.push(pause("a")).unwrap();
        let errors = log.drain().await;
        assert_eq!(errors.len(), 1, "{errors:?}");
        let e = errors[0].to_string();
        assert!(
            e.starts_with("cannot CLIENT UNPAUSE on refuse (") && e.contains("undo.jsonl:1)"),
            "{e}"
        );
        assert!(e.ends_with(": refused: skipped"), "{e}");
        assert_eq!(log.pending().len(), 1);
    }

    pub(in crate::undo) const PAUSE_1: &str =
        "{\"id\":1,\"undo\":{\"kind\":\"redis-client-pause\",\"addr\":\"a\"}}\n";

    #[test]
    fn a_line_cut_short_by_a_kill_is_removed_and_the_next_entry_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        std::fs::write(&p, format!("{PAUSE_1}{{\"id\":2,\"undo\":{{\"ki")).unwrap();
        let log = open(&p);
        assert!(log.skipped().is_empty());
        assert!(log.repaired()[0].contains("undo.jsonl:2: removed a partial last line"));
        let id = log.push(pause("b")).unwrap();
        assert_eq!(id, 2);
        log.forget(1);
        let pending = read_pending(&p).unwrap();
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), vec![2]);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.ends_with("{\"done\":1}\n"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }
}
