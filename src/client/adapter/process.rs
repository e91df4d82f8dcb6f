//! The adapter's child process and its handshake: start it (in the
//! worker's process group, with a parent-death signal), write request
//! lines to its stdin, read bounded lines from its stdout, and answer
//! [`query`] (a handshake alone, before a run and for `compare`'s table).

use super::route::{read_loop, Conn};
use super::wire::excerpt;
use super::{Answer, Ctx, Env, FromAdapter, Hello, HELLO_TIMEOUT, MAX_LINE};
use crate::process::Cgroup;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::oneshot;

/// Run `path` only to read its handshake answer, then close its stdin and
/// let it go. Errors name the adapter.
pub async fn query(path: &Path, env: &Env, hello: &Hello) -> Result<Answer, String> {
    query_in_env(path, env, hello, HELLO_TIMEOUT).await
}

/// [`query`], waiting at most `limit` for the answer.
pub async fn query_within(path: &Path, hello: &Hello, limit: Duration) -> Result<Answer, String> {
    query_in_env(path, &Vec::new(), hello, limit).await
}

/// [`query`] with `env`, waiting at most `limit`.
async fn query_in_env(
    path: &Path,
    env: &Env,
    hello: &Hello,
    limit: Duration,
) -> Result<Answer, String> {
    let name = format!("adapter {}", path.display());
    let jail = Jail::new(&name)?;
    let answer = ask_once(path, env, hello, limit, jail.leaf()).await;
    // Whatever it answered, nothing of it may outlive the handshake.
    let left = jail.close();
    match (answer, left) {
        (Err(e), _) => Err(e),
        (Ok(_), Some(left)) => Err(format!(
            "{name} left {left} running after its handshake (killed now; the run does not start) \
             (hint: an adapter's children must end with it: no setsid/daemon, exit at the end of stdin)"
        )),
        (Ok(a), None) => Ok(a),
    }
}

/// The handshake itself, the adapter in `leaf` (if any).
async fn ask_once(
    path: &Path,
    env: &Env,
    hello: &Hello,
    limit: Duration,
    leaf: Option<&Path>,
) -> Result<Answer, String> {
    let ctx = Arc::new(Ctx {
        name: format!("adapter {}", path.display()),
        key: hello.key.clone(),
        origin: hello.clock_origin_ns,
        events: None,
        reported_only: false,
        // Only the handshake is read: it never reaches `fatal`.
        fatal: Arc::new(|_| {}),
        granted: Default::default(),
    });
    let (mut live, answer) = match open_in(path, env, &ctx, hello, 1, limit, leaf).await {
        Ok(x) => x,
        Err(e) => return Err(e),
    };
    // An adapter that answered exits at the end of its stdin.
    drop(live.stdin);
    if tokio::time::timeout(Duration::from_secs(2), live.child.wait())
        .await
        .is_err()
    {
        let _ = live.child.start_kill();
        let _ = live.child.wait().await;
    }
    Ok(answer)
}

/// Start the adapter, its reader task, and the handshake; its answer
/// within `limit`. On an error the process is killed (dropped).
pub(super) async fn open(
    path: &Path,
    env: &Env,
    ctx: &Arc<Ctx>,
    hello: &Hello,
    first_id: u64,
    limit: Duration,
) -> Result<(Live, Answer), String> {
    open_in(path, env, ctx, hello, first_id, limit, None).await
}

/// [`open`], the adapter started in the cgroup `leaf` when given.
async fn open_in(
    path: &Path,
    env: &Env,
    ctx: &Arc<Ctx>,
    hello: &Hello,
    first_id: u64,
    limit: Duration,
    leaf: Option<&Path>,
) -> Result<(Live, Answer), String> {
    let name = &ctx.name;
    let (mut child, mut stdin, stdout) = spawn(path, env, name, leaf)?;
    let (htx, hrx) = oneshot::channel();
    let conn = Arc::new(Mutex::new(Conn {
        slots: HashMap::new(),
        first: first_id,
        last: None,
        hello: Some(htx),
    }));
    tokio::spawn(read_loop(stdout, conn.clone(), ctx.clone()));
    // An adapter that exited already may have said why on its stdout:
    // read that before blaming the closed pipe.
    match send_line(&mut stdin, hello).await {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(format!("{name}: cannot send the handshake: {e}"))
        }
        _ => {}
    }
    let answer = match tokio::time::timeout(limit, hrx).await {
        Err(_) => Err(format!(
            "{name}: no answer to the handshake within {limit:?}"
        )),
        Ok(Err(_)) => Err(format!(
            "{name}: exited during the handshake ({}) (hint: run it by hand and paste \
             the hello line from docs/adapters.md to see its error)",
            exit_status(&mut child).await
        )),
        Ok(Ok(a)) => a.map_err(|e| format!("{name}: stdout line 1: {e}")),
    }?;
    Ok((Live { child, stdin, conn }, answer))
}

pub(super) fn handshake_answer(line: &[u8]) -> Result<Answer, String> {
    match FromAdapter::parse(trim(line)) {
        Ok(FromAdapter::HelloOk(o)) => Ok(Answer::Offer(o)),
        Ok(FromAdapter::Unsupported { reason }) => Ok(Answer::Unsupported(reason)),
        Ok(other) => Err(format!(
            "answered the handshake with {} (expected hello_ok or unsupported): {}",
            kind_of(&other),
            excerpt(line)
        )),
        Err(e) => Err(format!("{e}: {}", excerpt(line))),
    }
}

fn kind_of(m: &FromAdapter) -> &'static str {
    match m {
        FromAdapter::HelloOk(_) => "hello_ok",
        FromAdapter::Unsupported { .. } => "unsupported",
        FromAdapter::Ok { .. } => "an ok reply",
        FromAdapter::Fail { .. } => "a fail reply",
        FromAdapter::Info { .. } => "an info reply",
        FromAdapter::Renewed { .. } => "a renewed event",
        FromAdapter::Lost { .. } => "a lost event",
    }
}

pub(super) fn trim(line: &[u8]) -> &[u8] {
    let mut l = line;
    while let [rest @ .., b'\n' | b'\r'] = l {
        l = rest;
    }
    l
}

/// Start the adapter: stdin and stdout piped, stderr the worker's (its
/// log); in the caller's process group (and cgroup, or `leaf`: joined
/// before exec, so nothing it starts is outside); SIGKILLed when the
/// caller dies; with `env` set (`None`: removed).
fn spawn(
    path: &Path,
    env: &Env,
    name: &str,
    leaf: Option<&Path>,
) -> Result<(Child, ChildStdin, ChildStdout), String> {
    let procs = leaf.map(crate::process::procs_file);
    let mut cmd = tokio::process::Command::new(path);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: `in_child` makes only async-signal-safe calls, on memory
    // prepared before the fork.
    unsafe {
        cmd.pre_exec(move || crate::process::in_child(procs.as_ref(), parent));
    }
    let mut child = cmd.spawn().map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound && path.exists() {
            " (hint: the interpreter its `#!` line names is missing)"
        } else {
            ""
        };
        format!("{name}: cannot start: {e}{hint}")
    })?;
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    Ok((child, stdin, stdout))
}

/// A cgroup of its own for a handshake adapter (`lockjaw/hello-PID-N`,
/// the adapter in its leaf `adapter`), so whatever it starts, even a
/// `setsid` double-forked daemon, can be seen and killed after the
/// handshake. None without a writable cgroup v2 (then the adapter runs in
/// lockjaw's own, as before).
struct Jail {
    group: Option<std::path::PathBuf>,
    leaf: Option<std::path::PathBuf>,
}

impl Jail {
    fn new(name: &str) -> Result<Jail, String> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let rel = format!(
            "{}/hello-{}-{n}",
            crate::process::cgroup::TOP,
            std::process::id()
        );
        let tag = format!("handshake {}", std::process::id());
        let group = Cgroup::create_group(&rel, &tag)
            .map_err(|e| format!("{name}: cannot make a cgroup for its handshake: {e}"))?;
        let leaf = match &group {
            Some(g) => {
                let l = g.join("adapter");
                std::fs::create_dir_all(&l).map_err(|e| {
                    format!(
                        "{name}: cannot make a cgroup for its handshake: {}: {e}",
                        l.display()
                    )
                })?;
                Some(l)
            }
            None => None,
        };
        Ok(Jail { group, leaf })
    }

    fn leaf(&self) -> Option<&Path> {
        self.leaf.as_deref()
    }

    /// Kill what is left and remove the cgroup; what was left, as text
    /// (`2 processes: pid 12 (sleep 600), ...`), if anything.
    fn close(mut self) -> Option<String> {
        let leaf = self.leaf.take()?;
        let left = left_in(&leaf);
        if let Some(g) = self.group.take() {
            crate::process::Cgroup::remove_dir(&g);
        }
        left
    }
}

impl Drop for Jail {
    fn drop(&mut self) {
        if let Some(g) = self.group.take() {
            crate::process::Cgroup::remove_dir(&g);
        }
    }
}

/// The processes still in `leaf`, each with its command line.
fn left_in(leaf: &Path) -> Option<String> {
    let procs = std::fs::read_to_string(leaf.join("cgroup.procs")).unwrap_or_default();
    let left: Vec<String> = procs
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            format!("pid {pid} ({})", cmd.trim())
        })
        .collect();
    match left.len() {
        0 => None,
        1 => Some(format!("a process: {}", left[0])),
        n => Some(format!("{n} processes: {}", left.join(", "))),
    }
}

pub(super) async fn send_line(
    stdin: &mut ChildStdin,
    m: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(m)?;
    line.push(b'\n');
    stdin.write_all(&line).await?;
    stdin.flush().await
}

/// Read one line of at most [`MAX_LINE`] bytes; 0 at the end of the stream.
pub(super) async fn read_line(
    r: &mut BufReader<ChildStdout>,
    buf: &mut Vec<u8>,
) -> Result<usize, String> {
    buf.clear();
    let n = r
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', buf)
        .await
        .map_err(|e| format!("cannot read its stdout: {e}"))?;
    if buf.len() > MAX_LINE {
        return Err(format!(
            "a line longer than {} bytes on its stdout: {}",
            MAX_LINE,
            excerpt(buf)
        ));
    }
    Ok(n)
}

pub(super) async fn exit_status(child: &mut Child) -> String {
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(s)) => s.to_string(),
        _ => "its stdout closed".to_string(),
    }
}

/// A running adapter process: its stdin and its open requests.
pub(super) struct Live {
    pub(super) child: Child,
    pub(super) stdin: ChildStdin,
    pub(super) conn: Arc<Mutex<Conn>>,
}
