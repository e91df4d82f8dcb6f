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
//! A utility below the runner and the nemeses (both write to it); how each
//! effect is taken back is in [`execute`].

mod beneath;
mod execute;
pub mod iptables;
mod netns;
mod read;

pub use beneath::{check_private, explain, RunDir};
pub use execute::{execute, Trust};
use read::parse;
pub use read::read_pending;

use crate::process::{self, ProcId};
use rustix::fs::{Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
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
    /// data directories. `dir` is the run directory or lies beneath it.
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
    /// An iptables rule of this run: `iptables -D` with the arguments
    /// rebuilt from its fields.
    Iptables(iptables::Rule),
    /// A libfaketime control file beneath the run directory: write the
    /// previous offset back.
    Clock { file: PathBuf, previous: String },
    /// `CLIENT PAUSE` on a Redis server: `CLIENT UNPAUSE`.
    RedisClientPause { addr: String },
    /// A node's cgroup frozen (`cgroup.freeze`; PostgreSQL, whose backends
    /// leave the process group): thaw it. `cgroup` is the path under the
    /// cgroup v2 root, `lockjaw/<run-id>/<node>`; only a leaf of the
    /// run's own group is touched.
    Frozen { what: String, cgroup: String },
    /// Tables (sequences, functions) a run created in a user's PostgreSQL
    /// (`--postgres-url`): drop every object named `prefix*`, where
    /// `prefix` is `lockjaw_<run-id>_` of this run. `file` (beneath the
    /// run directory, mode 0600) holds the URL with its password.
    PostgresTables { file: PathBuf, prefix: String },
    /// An effect on another machine (`--hosts`): reconnect to `target`
    /// and take `effect` back. `host` is the node's name, for messages.
    Remote {
        host: String,
        target: crate::remote::SshTarget,
        effect: RemoteEffect,
    },
    /// An SSH ControlMaster lockjaw started: `ssh -O exit -S SOCKET`. Only
    /// a socket under `temp_dir()/lockjaw-ssh/`.
    SshMaster { socket: PathBuf },
    /// A network namespace of a test bed (`ljbed*`): SIGKILL every process
    /// whose network namespace it is, wait until they are gone, and
    /// delete it (`ip netns del`).
    Netns { name: String },
    /// A network link of a test bed (its bridge or a host's veth, `ljbed*`):
    /// delete it (`ip link del`).
    Link { name: String },
}

/// What a run did on a host, and so what heal takes back there. Every
/// string is checked to be this run's before it is used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "kebab-case")]
pub enum RemoteEffect {
    /// Processes with `LOCKJAW_TAG=<tag>` (`lockjaw-<run-id>-<node>`):
    /// CONT, TERM, grace, KILL.
    Processes { tag: String },
    /// Processes of the tag stopped with SIGSTOP: SIGCONT them.
    Paused { tag: String },
    /// An iptables rule on the host: delete it.
    Iptables(crate::remote::RemoteRule),
    /// A libfaketime control file on the host (beneath a directory named
    /// `lockjaw-<run-id>`): write the previous offset back.
    Clock { file: String, previous: String },
    /// The run's data directory on the host (named `lockjaw-<run-id>` or
    /// beneath one): remove it.
    DataDir { dir: String },
}

impl Undo {
    /// Whether this is a fault a nemesis applied (healed when the faults
    /// end, before the workers stop), not a part of the run's set-up
    /// (processes, the cluster, the cgroup group, proxies: taken back at
    /// teardown). Exhaustive, so a new kind must choose.
    pub fn is_fault(&self) -> bool {
        match self {
            Undo::Process { .. }
            | Undo::Cluster { .. }
            | Undo::Cgroup { .. }
            | Undo::Proxy { .. }
            | Undo::PostgresTables { .. }
            | Undo::SshMaster { .. }
            | Undo::Netns { .. }
            | Undo::Link { .. } => false,
            Undo::Remote { effect, .. } => matches!(
                effect,
                RemoteEffect::Paused { .. }
                    | RemoteEffect::Iptables(_)
                    | RemoteEffect::Clock { .. }
            ),
            Undo::Paused { .. }
            | Undo::Toxic { .. }
            | Undo::ProxyDisabled { .. }
            | Undo::Iptables(_)
            | Undo::Clock { .. }
            | Undo::RedisClientPause { .. }
            | Undo::Frozen { .. } => true,
        }
    }

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
            Undo::Iptables(r) => format!(
                "delete the iptables rule {:?} (cgroup {:?})",
                r.comment, r.cgroup
            ),
            Undo::Clock { file, previous } => {
                format!("set the clock in {} back to {previous:?}", file.display())
            }
            Undo::RedisClientPause { addr } => format!("CLIENT UNPAUSE on {addr}"),
            Undo::Frozen { what, cgroup } => format!("thaw {what} (cgroup {cgroup})"),
            Undo::PostgresTables { prefix, .. } => {
                format!("drop the tables {prefix}* in the --postgres-url database")
            }
            Undo::Remote { host, effect, .. } => format!("on host {host}, {}", effect.describe()),
            Undo::SshMaster { socket } => {
                format!("end the SSH ControlMaster {}", socket.display())
            }
            Undo::Netns { name } => {
                format!("kill the processes of network namespace {name} and delete it")
            }
            Undo::Link { name } => format!("delete network link {name}"),
        }
    }
}

impl RemoteEffect {
    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self {
            RemoteEffect::Processes { tag } => format!("stop the processes tagged {tag}"),
            RemoteEffect::Paused { tag } => format!("continue the processes tagged {tag}"),
            RemoteEffect::Iptables(r) => format!("delete the iptables rule {:?}", r.comment),
            RemoteEffect::Clock { file, previous } => {
                format!("set the clock in {file} back to {previous:?}")
            }
            RemoteEffect::DataDir { dir } => format!("remove {dir}"),
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

/// What an undo may act on: the run directory (every path it touches lies
/// beneath it) and the run's id (every iptables rule it deletes carries it).
#[derive(Debug)]
pub struct Scope {
    pub dir: std::sync::Arc<RunDir>,
    pub run_id: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Line {
    Entry { id: u64, undo: Undo },
    Done { done: u64 },
}

/// A pending entry and the line of the log it was read from or written to.
#[derive(Clone)]
pub(crate) struct Pending {
    line: usize,
    undo: Undo,
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
}

/// The undo log of one run.
pub struct UndoLog {
    path: PathBuf,
    scope: Scope,
    state: Mutex<State>,
    /// Grace between SIGTERM and SIGKILL when stopping processes.
    grace: Mutex<Duration>,
    /// Lines skipped when the log was opened (not UTF-8, not a record).
    skipped: Vec<String>,
    /// What opening the log repaired (a partial last line removed).
    repaired: Vec<String>,
}

impl UndoLog {
    /// Create (or append to) `path`, taking over what is pending in it.
    /// The file is opened beneath its directory (no symbolic link) and
    /// created without write access for the group and others.
    pub fn open(path: &Path) -> std::io::Result<UndoLog> {
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
        UndoLog::read_in(path.to_path_buf(), dir, file)
    }

    /// The undo log `file` (opened and checked by the caller) of the run
    /// directory `dir`.
    pub fn open_in(dir: RunDir, file: File) -> std::io::Result<UndoLog> {
        let path = dir.path().join(UNDO_FILE);
        UndoLog::read_in(path, dir, file)
    }

    fn read_in(path: PathBuf, dir: RunDir, mut file: File) -> std::io::Result<UndoLog> {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let parsed = parse(&bytes, &path);
        let mut repaired = Vec::new();
        if let Some((line, keep)) = parsed.torn {
            // Entries are written before their effect, in one write with
            // their newline: a line a kill cut short was never acted on.
            file.set_len(keep)?;
            repaired.push(format!(
                "{}:{line}: removed a partial last line ({} bytes) that a kill cut short; its effect was never applied",
                path.display(),
                bytes.len() as u64 - keep
            ));
        }
        Ok(UndoLog {
            path,
            scope: Scope {
                dir: std::sync::Arc::new(dir),
                run_id: None,
            },
            state: Mutex::new(State {
                file,
                next: parsed.last_id + 1,
                lines: parsed.lines,
                pending: parsed.pending,
                mine: Default::default(),
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
        if let Err(mut e) = execute(&p.undo, &self.scope, trust, grace).await {
            e.what = format!("{} ({}:{})", e.what, self.path.display(), p.line);
            return Err(e);
        }
        self.forget(id);
        Ok(())
    }

    /// The pending entries, oldest first.
    pub fn pending(&self) -> Vec<(u64, Undo)> {
        self.lock()
            .pending
            .iter()
            .map(|(k, p)| (*k, p.undo.clone()))
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
            .push(Undo::RedisClientPause { addr: "x".into() })
            .unwrap();
        assert!(c > b);
    }

    pub(super) const PAUSE_1: &str =
        "{\"id\":1,\"undo\":{\"kind\":\"redis-client-pause\",\"addr\":\"a\"}}\n";

    #[test]
    fn a_line_cut_short_by_a_kill_is_removed_and_the_next_entry_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        std::fs::write(&p, format!("{PAUSE_1}{{\"id\":2,\"undo\":{{\"ki")).unwrap();
        let log = UndoLog::open(&p).unwrap();
        assert!(log.skipped().is_empty());
        assert!(log.repaired()[0].contains("undo.jsonl:2: removed a partial last line"));
        let id = log
            .push(Undo::RedisClientPause { addr: "b".into() })
            .unwrap();
        assert_eq!(id, 2);
        log.forget(1);
        let pending = read_pending(&p).unwrap();
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), vec![2]);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.ends_with("{\"done\":1}\n"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[tokio::test]
    async fn a_clock_file_outside_the_run_directory_is_not_written() {
        let t = tempfile::tempdir().unwrap();
        let (run, outside) = (t.path().join("run"), t.path().join("victim"));
        std::fs::create_dir_all(run.join("faketime")).unwrap();
        std::fs::write(&outside, "keep\n").unwrap();
        std::os::unix::fs::symlink(&outside, run.join("faketime/link.offset")).unwrap();
        let log = UndoLog::open(&run.join(UNDO_FILE)).unwrap();
        let mut ids = Vec::new();
        for file in [
            outside.clone(),
            run.join("../victim"),
            run.join("faketime/link.offset"),
        ] {
            let previous = "+0".to_string();
            ids.push(log.push(Undo::Clock { file, previous }).unwrap());
        }
        let good = run.join("faketime/n1.offset");
        std::fs::write(&good, "+4.000s\n").unwrap();
        let previous = "+0".to_string();
        log.push(Undo::Clock {
            file: good.clone(),
            previous,
        })
        .unwrap();
        let bad_offset = "-F\n@2000-01-01".to_string();
        let g2 = good.clone();
        log.push(Undo::Clock {
            file: g2,
            previous: bad_offset,
        })
        .unwrap();
        let errors = log.drain().await;
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(
            errors.iter().all(|e| e.msg.ends_with("skipped")),
            "{errors:?}"
        );
        assert!(
            errors[3].to_string().contains("undo.jsonl:1)"),
            "{errors:?}"
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
        assert_eq!(std::fs::read_to_string(&good).unwrap(), "+0\n");
        assert_eq!(log.pending().len(), 4);
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

    #[tokio::test]
    async fn an_unreachable_embedded_toxiproxy_counts_as_healed() {
        // Port 1 on loopback refuses connections.
        let u = Undo::Toxic {
            url: "http://127.0.0.1:1".into(),
            proxy: "p".into(),
            toxic: "t".into(),
            embedded: true,
        };
        let d = tempfile::tempdir().unwrap();
        let scope = Scope {
            dir: std::sync::Arc::new(RunDir::open(d.path()).unwrap()),
            run_id: None,
        };
        execute(&u, &scope, Trust::Prove, Duration::ZERO)
            .await
            .unwrap();
        let external = Undo::Toxic {
            url: "http://127.0.0.1:1".into(),
            proxy: "p".into(),
            toxic: "t".into(),
            embedded: false,
        };
        assert!(execute(&external, &scope, Trust::Prove, Duration::ZERO)
            .await
            .is_err());
    }
}
