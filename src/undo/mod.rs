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
//! A utility below the runner and the nemeses (both write to it); how each
//! effect is taken back is in [`execute`].

mod execute;

pub use execute::{execute, Trust};

use crate::process::{self, ProcId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// File name of the undo log in a run directory.
pub const UNDO_FILE: &str = "undo.jsonl";

/// One effect and how to take it back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Undo {
    /// A process (group) lockjaw started: SIGCONT, SIGTERM, grace, SIGKILL.
    Process { what: String, proc: ProcId },
    /// A process group lockjaw stopped with SIGSTOP: SIGCONT it.
    Paused { what: String, proc: ProcId },
    /// A local cluster: stop every process its state file (`DIR/cluster.json`)
    /// lists, empty and remove the nodes' cgroups, and remove the nodes'
    /// data directories.
    Cluster { dir: PathBuf },
    /// The run's cgroup group (`lockjaw/<run-id>`), which every process
    /// the run starts joins: kill what is left in it and remove it, leaves
    /// first. Only if it carries the run directory's owner tag.
    Cgroup { group: String },
    /// A toxic on a proxy: remove it.
    Toxic {
        url: String,
        proxy: String,
        toxic: String,
        /// On lockjaw's embedded server, which dies with lockjaw.
        embedded: bool,
    },
    /// A disabled proxy: enable it again.
    ProxyDisabled {
        url: String,
        proxy: String,
        embedded: bool,
    },
    /// A proxy lockjaw created: delete it.
    Proxy {
        url: String,
        proxy: String,
        embedded: bool,
    },
    /// An iptables rule: `iptables -D <args>`.
    Iptables { args: Vec<String> },
    /// A libfaketime control file: write the previous offset back.
    Clock { file: PathBuf, previous: String },
    /// `CLIENT PAUSE` on a Redis server: `CLIENT UNPAUSE`.
    RedisClientPause { addr: String },
}

impl Undo {
    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self {
            Undo::Process { what, proc } => format!("stop {what} (pid {})", proc.pid),
            Undo::Paused { what, proc } => format!("continue {what} (pid {})", proc.pid),
            Undo::Cluster { dir } => format!("stop the cluster in {}", dir.display()),
            Undo::Cgroup { group } => format!("empty and remove cgroup {group}"),
            Undo::Toxic { proxy, toxic, .. } => format!("remove toxic {toxic} from {proxy}"),
            Undo::ProxyDisabled { proxy, .. } => format!("enable proxy {proxy}"),
            Undo::Proxy { proxy, .. } => format!("delete proxy {proxy}"),
            Undo::Iptables { args } => format!("iptables -D {}", args.join(" ")),
            Undo::Clock { file, previous } => {
                format!("set the clock in {} back to {previous}", file.display())
            }
            Undo::RedisClientPause { addr } => format!("CLIENT UNPAUSE on {addr}"),
        }
    }
}

/// Why an effect could not be undone.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what}: {msg}")]
pub struct UndoError {
    pub what: String,
    pub msg: String,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Entry { id: u64, undo: Undo },
    Done { done: u64 },
}

struct State {
    file: File,
    next: u64,
    pending: BTreeMap<u64, Undo>,
    /// Entries this process pushed itself (not read from the file): their
    /// processes are its own children, no proof needed.
    mine: std::collections::HashSet<u64>,
}

/// The undo log of one run.
pub struct UndoLog {
    path: PathBuf,
    /// The run directory (the log's): what entries read from the file may
    /// signal must be provably its ([`process::Owner`]).
    dir: PathBuf,
    state: Mutex<State>,
    /// Grace between SIGTERM and SIGKILL when stopping processes.
    grace: Mutex<Duration>,
}

impl UndoLog {
    /// Create (or append to) `path`, taking over what is pending in it.
    pub fn open(path: &Path) -> std::io::Result<UndoLog> {
        let pending = if path.exists() {
            read_pending(path)?
        } else {
            BTreeMap::new()
        };
        let next = pending.keys().next_back().map_or(1, |k| k + 1);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)?;
        // A line cut short by a SIGKILL mid-write must not swallow the next
        // one: end it before appending.
        if !ends_with_newline(&mut file)? {
            file.write_all(b"\n")?;
        }
        Ok(UndoLog {
            path: path.to_path_buf(),
            dir: match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            },
            state: Mutex::new(State {
                file,
                next: next.max(last_id(path).unwrap_or(0) + 1),
                pending,
                mine: Default::default(),
            }),
            grace: Mutex::new(process::DEFAULT_GRACE),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
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
        s.pending.insert(id, undo);
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
        }
    }

    /// Undo `id` now (if still pending) and mark it done.
    pub async fn undo(&self, id: u64) -> Result<(), UndoError> {
        let (u, mine) = {
            let s = self.lock();
            let Some(u) = s.pending.get(&id).cloned() else {
                return Ok(());
            };
            (u, s.mine.contains(&id))
        };
        let grace = *self.grace.lock().unwrap_or_else(|e| e.into_inner());
        let trust = if mine {
            Trust::Mine(&self.dir)
        } else {
            Trust::Prove(&self.dir)
        };
        execute(&u, trust, grace).await?;
        self.forget(id);
        Ok(())
    }

    /// The pending entries, oldest first.
    pub fn pending(&self) -> Vec<(u64, Undo)> {
        self.lock()
            .pending
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// Undo everything pending, newest first. Keeps going past failures
    /// and returns them; what failed stays pending (for `lockjaw heal`).
    pub async fn drain(&self) -> Vec<UndoError> {
        let mut errors = Vec::new();
        for (id, _) in self.pending().into_iter().rev() {
            if let Err(e) = self.undo(id).await {
                errors.push(e);
            }
        }
        errors
    }
}

/// Whether the file is empty or its last byte is a newline.
fn ends_with_newline(f: &mut File) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    if f.metadata()?.len() == 0 {
        return Ok(true);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    f.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

fn read_lines(path: &Path) -> std::io::Result<Vec<Line>> {
    let f = File::open(path)?;
    let mut out = Vec::new();
    for line in BufReader::new(f).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        // A line cut short by a SIGKILL mid-write is skipped: its effect
        // was never applied (entries are written before the effect).
        if let Ok(l) = serde_json::from_str::<Line>(&line) {
            out.push(l);
        }
    }
    Ok(out)
}

fn last_id(path: &Path) -> Option<u64> {
    read_lines(path)
        .ok()?
        .iter()
        .filter_map(|l| match l {
            Line::Entry { id, .. } => Some(*id),
            Line::Done { .. } => None,
        })
        .max()
}

/// The pending entries of an undo file.
pub fn read_pending(path: &Path) -> std::io::Result<BTreeMap<u64, Undo>> {
    let mut pending = BTreeMap::new();
    for l in read_lines(path)? {
        match l {
            Line::Entry { id, undo } => {
                pending.insert(id, undo);
            }
            Line::Done { done } => {
                pending.remove(&done);
            }
        }
    }
    Ok(pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_are_pending_until_done_and_drain_in_reverse() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        let log = UndoLog::open(&p).unwrap();
        let f1 = d.path().join("a.offset");
        let f2 = d.path().join("b.offset");
        std::fs::write(&f1, "+30s\n").unwrap();
        std::fs::write(&f2, "+10s\n").unwrap();
        let a = log
            .push(Undo::Clock {
                file: f1.clone(),
                previous: "+0".into(),
            })
            .unwrap();
        let b = log
            .push(Undo::Clock {
                file: f2.clone(),
                previous: "+0".into(),
            })
            .unwrap();
        log.undo(b).await.unwrap();
        assert_eq!(std::fs::read_to_string(&f2).unwrap(), "+0\n");
        // A second process (heal) sees only `a` pending.
        let pending = read_pending(&p).unwrap();
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), vec![a]);
        let again = UndoLog::open(&p).unwrap();
        assert!(again.drain().await.is_empty());
        assert_eq!(std::fs::read_to_string(&f1).unwrap(), "+0\n");
        assert!(read_pending(&p).unwrap().is_empty());
        // Ids keep growing after a reopen.
        let c = again
            .push(Undo::Iptables {
                args: vec!["x".into()],
            })
            .unwrap();
        assert!(c > b);
    }

    #[test]
    fn a_line_cut_short_by_a_kill_does_not_swallow_the_next_entry() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        std::fs::write(
            &p,
            "{\"id\":1,\"undo\":{\"kind\":\"iptables\",\"args\":[\"a\"]}}\n{\"id\":2,\"undo\":{\"ki",
        )
        .unwrap();
        let log = UndoLog::open(&p).unwrap();
        let id = log
            .push(Undo::Iptables {
                args: vec!["b".into()],
            })
            .unwrap();
        assert_eq!(id, 2);
        log.forget(1);
        let pending = read_pending(&p).unwrap();
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), vec![2]);
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .ends_with("{\"done\":1}\n"));
    }

    #[tokio::test]
    async fn a_paused_process_is_continued_and_a_started_one_stopped() {
        let d = tempfile::tempdir().unwrap();
        let log = UndoLog::open(&d.path().join(UNDO_FILE)).unwrap();
        let child = process::spawn(&process::Spec::new("sleep").arg("30")).unwrap();
        let id = child.id();
        log.push(Undo::Process {
            what: "sleep".into(),
            proc: id,
        })
        .unwrap();
        let paused = log
            .push(Undo::Paused {
                what: "sleep".into(),
                proc: id,
            })
            .unwrap();
        child.pause().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !id.is_stopped() {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        log.undo(paused).await.unwrap();
        assert!(!id.is_stopped());
        log.set_grace(Duration::from_millis(200));
        assert!(log.drain().await.is_empty());
        child.try_wait();
        assert!(!id.is_alive());
        assert!(log.pending().is_empty());
    }

    #[test]
    fn a_torn_last_line_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        std::fs::write(
            &p,
            "{\"id\":1,\"undo\":{\"kind\":\"iptables\",\"args\":[\"a\"]}}\n{\"id\":2,\"und",
        )
        .unwrap();
        assert_eq!(read_pending(&p).unwrap().len(), 1);
    }

    #[tokio::test]
    async fn an_unreachable_embedded_toxiproxy_counts_as_healed() {
        let d = tempfile::tempdir().unwrap();
        // Port 1 on loopback refuses connections.
        let u = Undo::Toxic {
            url: "http://127.0.0.1:1".into(),
            proxy: "p".into(),
            toxic: "t".into(),
            embedded: true,
        };
        execute(&u, Trust::Prove(d.path()), Duration::ZERO)
            .await
            .unwrap();
        let external = Undo::Toxic {
            url: "http://127.0.0.1:1".into(),
            proxy: "p".into(),
            toxic: "t".into(),
            embedded: false,
        };
        assert!(execute(&external, Trust::Prove(d.path()), Duration::ZERO)
            .await
            .is_err());
    }
}
