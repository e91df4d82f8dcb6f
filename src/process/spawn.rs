//! Starting children: the [`Spec`] of what to run, [`spawn`] (own process
//! group; optional parent-death signal from the long-lived spawner thread;
//! optional cgroup v2; stdout/stderr appended to a log), and the [`Child`]
//! handle with pause, resume, kill, graceful stop and idempotent close.

use super::{stop_with, Cgroup, ProcId, ProcessError, Signal};
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What to start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub program: String,
    pub args: Vec<String>,
    /// Extra environment variables (added to lockjaw's own).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// stdout and stderr are appended here; `None` discards them.
    #[serde(default)]
    pub log: Option<PathBuf>,
    /// SIGKILL the child when lockjaw exits (forked from the spawner thread).
    #[serde(default)]
    pub die_with_parent: bool,
    /// Absolute path of a cgroup v2 leaf to start the child in (created if
    /// missing; its parent must exist); the child joins it before it
    /// execs, so nothing it runs is ever outside it. See [`Cgroup`].
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
    /// Pipe stdout to lockjaw ([`Child::take_stdout`]) instead of the log
    /// (stderr still goes to the log), e.g. a worker's op stream.
    #[serde(default)]
    pub pipe_stdout: bool,
    /// Pipe stdin from lockjaw ([`Child::take_stdin`]) instead of
    /// `/dev/null`, e.g. a worker's commands.
    #[serde(default)]
    pub pipe_stdin: bool,
    /// Run as this system user (uid, gid and supplementary groups set
    /// between fork and exec, after the child joined its cgroup, which
    /// only root may write): servers that refuse root, as PostgreSQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Its children leave its process group (PostgreSQL's backends call
    /// `setsid()`): pause, kill and stop act on its whole cgroup
    /// (`cgroup.freeze`, `cgroup.kill`) instead of its process group.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_cgroup: bool,
}

impl Spec {
    pub fn new(program: impl Into<String>) -> Spec {
        Spec {
            program: program.into(),
            ..Spec::default()
        }
    }

    pub fn arg(mut self, a: impl Into<String>) -> Spec {
        self.args.push(a.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, it: I) -> Spec {
        self.args.extend(it.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Spec {
        self.env.push((k.into(), v.into()));
        self
    }

    /// The command line as one printable string.
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Spawner threads: a child's parent-death signal fires when the thread
/// that forked it exits, so children with one are forked by threads that
/// live as long as lockjaw. Several, so a run's many workers start side by
/// side (each fork waits for its child's exec).
const SPAWNERS: usize = 4;

/// The long-lived threads that fork children with a parent-death signal.
fn spawner() -> &'static Mutex<mpsc::Sender<Job>> {
    static TX: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        for i in 0..SPAWNERS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("lockjaw-spawner-{i}"))
                .spawn(move || loop {
                    // The lock is held only while waiting for a job.
                    let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                })
                .expect("cannot start a spawner thread");
        }
        Mutex::new(tx)
    })
}

/// Start a child as `spec` says, in its own process group.
pub fn spawn(spec: &Spec) -> Result<Child, ProcessError> {
    let mut cmd = build_command(spec)?;
    let child = if spec.die_with_parent {
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(cmd.spawn());
        });
        spawner()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(job)
            .expect("the spawner thread never exits");
        rx.recv().expect("the spawner thread answers every job")
    } else {
        cmd.spawn()
    }
    .map_err(|source| ProcessError::Spawn {
        program: spec.program.clone(),
        source,
    })?;
    let pid = child.id() as i32;
    // The child cannot have exited and been reaped: we hold its handle.
    let id = ProcId::of(pid).unwrap_or(ProcId { pid, start_time: 0 });
    Ok(Child {
        id,
        name: spec.program.clone(),
        inner: Mutex::new(Some(child)),
        cgroup: spec.cgroup.clone(),
        closed: Mutex::new(false),
        detached: false,
    })
}

fn build_command(spec: &Spec) -> Result<Command, ProcessError> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args).stdin(Stdio::null()).process_group(0);
    // libpq's password variable: lockjaw passes `--postgres-url`'s
    // password in a private file, so no process it starts needs it.
    cmd.env_remove("PGPASSWORD");
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    match &spec.log {
        Some(path) => {
            let f = open_log(path)?;
            let f2 = f.try_clone().map_err(|source| ProcessError::Log {
                path: path.clone(),
                source,
            })?;
            cmd.stdout(f).stderr(f2);
        }
        None => {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    if spec.pipe_stdout {
        cmd.stdout(Stdio::piped());
    }
    if spec.pipe_stdin {
        cmd.stdin(Stdio::piped());
    }
    let procs = match &spec.cgroup {
        Some(dir) => {
            // The leaf only: its group must exist already (created and
            // tagged with its owner, see `Cgroup::create_group`), so a
            // child never lands in a group nothing can prove is the run's.
            match std::fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(ProcessError::Cgroup {
                        path: dir.clone(),
                        source,
                    })
                }
            }
            let p = dir.join("cgroup.procs");
            Some(CString::new(p.as_os_str().as_encoded_bytes()).expect("no NUL in a path"))
        }
        None => None,
    };
    // The parent is this process (the spawn runs here): its pid, taken
    // before the fork, tells the child whether it was orphaned meanwhile
    // (comparing with 1 would be wrong where lockjaw itself is pid 1).
    let pdeath = spec
        .die_with_parent
        .then(|| std::process::id() as libc::pid_t);
    let user = match &spec.user {
        Some(name) => Some(lookup_user(name).map_err(|source| ProcessError::Spawn {
            program: spec.program.clone(),
            source,
        })?),
        None => None,
    };
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe syscalls on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || pre_exec_hook(procs.as_ref(), user.as_ref(), pdeath));
    }
    Ok(cmd)
}

/// A system user's ids, looked up before the fork.
#[derive(Debug)]
struct User {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
}

/// `getpwnam_r` and `getgrouplist` (no crate in the tree wraps them).
fn lookup_user(name: &str) -> std::io::Result<User> {
    let missing = || {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no system user {name:?} (hint: install the package that creates it)"),
        )
    };
    let cname = CString::new(name).map_err(|_| missing())?;
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r writes into `pw` and `buf`, both of the sizes given.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        )
    };
    if rc != 0 || out.is_null() {
        return Err(missing());
    }
    let mut groups = vec![0 as libc::gid_t; 256];
    let mut n = groups.len() as libc::c_int;
    // SAFETY: getgrouplist fills at most `n` entries of `groups`.
    let rc = unsafe { libc::getgrouplist(cname.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut n) };
    groups.truncate(if rc < 0 { 1 } else { n.max(0) as usize });
    if rc < 0 {
        groups[0] = pw.pw_gid;
    }
    Ok(User {
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        groups,
    })
}

/// What a child lockjaw starts through a command built elsewhere (tokio's)
/// does between fork and exec: join the cgroup whose `cgroup.procs` is
/// `procs` (see [`procs_file`]), then die with `parent`, as [`spawn`]'s
/// children do.
///
/// # Safety
/// Call only between fork and exec (`pre_exec`), with `procs` prepared
/// before the fork.
pub unsafe fn in_child(procs: Option<&CString>, parent: libc::pid_t) -> std::io::Result<()> {
    pre_exec_hook(procs, None, Some(parent))
}

/// The `cgroup.procs` file of cgroup `dir`, ready for [`in_child`].
pub fn procs_file(dir: &Path) -> CString {
    CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
        .expect("no NUL in a cgroup path")
}

fn pre_exec_hook(
    procs: Option<&CString>,
    user: Option<&User>,
    pdeath: Option<libc::pid_t>,
) -> std::io::Result<()> {
    // SAFETY (whole fn): raw syscalls only; no allocation, no locks.
    unsafe {
        if let Some(p) = procs {
            let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Writing "0" moves the writing process itself.
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            if n != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        // After the cgroup (root-owned) and before the death signal (a
        // change of credentials clears it).
        if let Some(u) = user {
            if libc::setgroups(u.groups.len(), u.groups.as_ptr()) != 0
                || libc::setgid(u.gid) != 0
                || libc::setuid(u.uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(parent) = pdeath {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl: then we were reparented.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
    }
    Ok(())
}

fn open_log(path: &Path) -> Result<File, ProcessError> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| ProcessError::Log {
            path: path.to_path_buf(),
            source,
        })
}

/// A started child: signals go to its whole process group after checking
/// its identity; `close` (idempotent, also run by Drop) stops it gracefully.
#[derive(Debug)]
pub struct Child {
    id: ProcId,
    name: String,
    inner: Mutex<Option<std::process::Child>>,
    cgroup: Option<PathBuf>,
    closed: Mutex<bool>,
    detached: bool,
}

/// The grace period `close` and Drop give a child between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3);

impl Child {
    pub fn id(&self) -> ProcId {
        self.id
    }

    pub fn pid(&self) -> i32 {
        self.id.pid
    }

    /// The read end of its stdout, once (`Spec::pipe_stdout`).
    pub fn take_stdout(&self) -> Option<std::process::ChildStdout> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.as_mut().and_then(|c| c.stdout.take())
    }

    /// The write end of its stdin, once (`Spec::pipe_stdin`).
    pub fn take_stdin(&self) -> Option<std::process::ChildStdin> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.as_mut().and_then(|c| c.stdin.take())
    }

    /// The cgroup directory it was started in, if any.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    /// Reap the child if it exited; `Some(status)` once it has.
    pub fn try_wait(&self) -> Option<ExitStatus> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// True while the child runs (stopped counts as running).
    pub fn is_alive(&self) -> bool {
        self.try_wait().is_none() && self.id.is_alive()
    }

    /// SIGSTOP the group.
    pub fn pause(&self) -> Result<bool, ProcessError> {
        self.id.signal_group(Signal::Stop)
    }

    /// SIGCONT the group.
    pub fn resume(&self) -> Result<bool, ProcessError> {
        self.id.signal_group(Signal::Cont)
    }

    /// SIGKILL the group and wait until it is gone.
    pub fn kill(&self) -> Result<(), ProcessError> {
        stop_with(&self.id, Duration::ZERO, &mut || {
            self.try_wait();
        })
    }

    /// SIGCONT, SIGTERM, `grace`, SIGKILL to the group; waits until gone.
    pub fn stop(&self, grace: Duration) -> Result<(), ProcessError> {
        stop_with(&self.id, grace, &mut || {
            self.try_wait();
        })
    }

    /// Wait up to `limit` for the child to exit by itself.
    pub fn wait_timeout(&self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stop the child (graceful, [`DEFAULT_GRACE`]) and remove its cgroup.
    /// Idempotent; a detached child is left running.
    pub fn close(&self) -> Result<(), ProcessError> {
        let mut closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        if *closed || self.detached {
            return Ok(());
        }
        self.stop(DEFAULT_GRACE)?;
        if let Some(cg) = &self.cgroup {
            Cgroup::remove_dir(cg);
        }
        *closed = true;
        Ok(())
    }

    /// Leave the child running when this handle is closed or dropped
    /// (`cluster up`); `stop` and `kill` still work.
    pub fn detach(&mut self) {
        self.detached = true;
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("closing {} (pid {}): {e}", self.name, self.id.pid);
        }
    }
}
