//! Client adapters: a lock library in any language behind newline-delimited
//! JSON on its stdin and stdout (protocol version 1, `docs/adapters.md`).
//!
//! [`AdapterClient`] is a [`LockClient`] that runs the adapter as a child of
//! the worker, in the worker's process group (so pausing or killing the
//! worker's group reaches the library) with a parent-death signal. Each
//! request carries an id; a reader task routes replies to their requests,
//! records the adapter's `renewed` events as `renew` ops over the interval
//! the adapter measured, and its `lost` events as `lost` ops. A request
//! without a reply within the op timeout is `info`; after any `info` the
//! adapter is replaced by a fresh process, since the old one may still hold
//! what the worker gave up on. A protocol error (a line that is not a
//! message, a reply to an id never sent, a grant without its lease) is
//! fatal: the worker stops with an error naming the adapter and the line.
//!
//! [`query`] runs an adapter just for its handshake answer (before a run,
//! and for `compare`'s table).

mod wire;

pub use wire::{excerpt, resolve, FromAdapter, Hello, LeaseStart, Offer, Renewals, MAX_LINE};

use super::{ClientError, Grant, LeaseRecorder, LockClient};
use crate::history::clock::monotonic_raw_ns;
use crate::history::{Op, OpType, Process};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::oneshot;

/// How long an adapter may take to answer the handshake.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// An adapter's answer to the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Offer(Offer),
    Unsupported(String),
}

/// What a fatal protocol error does (the worker: report and exit).
pub type Fatal = Arc<dyn Fn(String) + Send + Sync>;

/// How a worker runs its adapter.
#[derive(Clone)]
pub struct AdapterConfig {
    pub path: PathBuf,
    pub hello: Hello,
    pub op_timeout: Duration,
    /// What the handshake before the run answered; a replacement must
    /// answer the same.
    pub offer: Offer,
    /// Records `renewed` and `lost` events under its process.
    pub events: Option<LeaseRecorder>,
    pub fatal: Fatal,
}

/// Run `path` only to read its handshake answer, then close its stdin and
/// let it go. Errors name the adapter.
pub async fn query(path: &Path, hello: &Hello) -> Result<Answer, String> {
    query_within(path, hello, HELLO_TIMEOUT).await
}

/// [`query`], waiting at most `limit` for the answer.
pub async fn query_within(path: &Path, hello: &Hello, limit: Duration) -> Result<Answer, String> {
    let ctx = Arc::new(Ctx {
        name: format!("adapter {}", path.display()),
        key: hello.key.clone(),
        origin: hello.clock_origin_ns,
        events: None,
        // Only the handshake is read: it never reaches `fatal`.
        fatal: Arc::new(|_| {}),
    });
    let (mut live, answer) = match open(path, &ctx, hello, 1, limit).await {
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
async fn open(
    path: &Path,
    ctx: &Arc<Ctx>,
    hello: &Hello,
    first_id: u64,
    limit: Duration,
) -> Result<(Live, Answer), String> {
    let name = &ctx.name;
    let (mut child, mut stdin, stdout) = spawn(path, name)?;
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

fn handshake_answer(line: &[u8]) -> Result<Answer, String> {
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

fn trim(line: &[u8]) -> &[u8] {
    let mut l = line;
    while let [rest @ .., b'\n' | b'\r'] = l {
        l = rest;
    }
    l
}

/// Start the adapter: stdin and stdout piped, stderr the worker's (its
/// log); in the caller's process group; SIGKILLed when the caller dies.
fn spawn(path: &Path, name: &str) -> Result<(Child, ChildStdin, ChildStdout), String> {
    let mut cmd = tokio::process::Command::new(path);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let parent = std::process::id();
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
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

async fn send_line(stdin: &mut ChildStdin, m: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(m)?;
    line.push(b'\n');
    stdin.write_all(&line).await?;
    stdin.flush().await
}

/// Read one line of at most [`MAX_LINE`] bytes; 0 at the end of the stream.
async fn read_line(r: &mut BufReader<ChildStdout>, buf: &mut Vec<u8>) -> Result<usize, String> {
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

async fn exit_status(child: &mut Child) -> String {
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(s)) => s.to_string(),
        _ => "its stdout closed".to_string(),
    }
}

/// A reply routed to its request.
#[derive(Debug)]
enum Reply {
    Ok {
        fields: Map<String, Value>,
        line: String,
    },
    Fail(String),
    Info(String),
    /// The adapter's stdout closed.
    Gone,
}

enum Slot {
    Waiting(oneshot::Sender<Reply>),
    TimedOut,
}

/// One adapter process's open requests.
struct Conn {
    slots: HashMap<u64, Slot>,
    /// The ids this process was sent: `first..=last`.
    first: u64,
    last: Option<u64>,
    hello: Option<oneshot::Sender<Result<Answer, String>>>,
}

/// What the reader task needs.
struct Ctx {
    name: String,
    key: String,
    origin: u64,
    events: Option<LeaseRecorder>,
    fatal: Fatal,
}

impl Ctx {
    fn fatal(&self, line_no: u64, what: String) {
        (self.fatal)(format!("{}: stdout line {line_no}: {what}", self.name));
    }
}

struct Live {
    child: Child,
    stdin: ChildStdin,
    conn: Arc<Mutex<Conn>>,
}

/// A lock client that is an adapter process (see the module comment).
pub struct AdapterClient {
    cfg: AdapterConfig,
    ctx: Arc<Ctx>,
    live: Option<Live>,
    next_id: u64,
}

impl AdapterClient {
    /// Start the adapter and complete its handshake. An error (it does not
    /// start, exits, answers badly or differently from before the run) is
    /// fatal for the worker.
    pub async fn start(cfg: AdapterConfig) -> Result<AdapterClient, String> {
        let ctx = Arc::new(Ctx {
            name: format!(
                "adapter {} (worker {})",
                cfg.path.display(),
                cfg.hello.worker
            ),
            key: cfg.hello.key.clone(),
            origin: cfg.hello.clock_origin_ns,
            events: cfg.events.clone(),
            fatal: cfg.fatal.clone(),
        });
        let mut c = AdapterClient {
            cfg,
            ctx,
            live: None,
            next_id: 1,
        };
        c.launch().await?;
        Ok(c)
    }

    /// The running adapter process, if any.
    pub fn pid(&self) -> Option<u32> {
        self.live.as_ref().and_then(|l| l.child.id())
    }

    async fn launch(&mut self) -> Result<(), String> {
        let (live, answer) = open(
            &self.cfg.path,
            &self.ctx,
            &self.cfg.hello,
            self.next_id,
            HELLO_TIMEOUT,
        )
        .await?;
        let name = &self.ctx.name;
        match answer {
            Answer::Offer(o) if o == self.cfg.offer => {}
            Answer::Offer(o) => {
                return Err(format!(
                    "{name}: answered the handshake differently from before the run \
                     ({o:?}, before: {:?})",
                    self.cfg.offer
                ))
            }
            Answer::Unsupported(why) => {
                return Err(format!(
                    "{name}: declares --system {} unsupported: {why}",
                    self.cfg.hello.system
                ))
            }
        }
        self.live = Some(live);
        Ok(())
    }

    /// Kill the adapter (only it: not the worker's group) and forget it;
    /// the next request starts a fresh one.
    async fn replace(&mut self, why: &str) {
        if let Some(mut l) = self.live.take() {
            eprintln!(
                "{}: replacing the adapter process after {why}",
                self.ctx.name
            );
            let _ = l.child.start_kill();
            let _ = l.child.wait().await;
        }
    }

    /// Send one request and wait for its reply.
    async fn call(
        &mut self,
        kind: &str,
        key: &str,
        ttl: Option<Duration>,
        wait: Option<Duration>,
        owner: Option<&str>,
    ) -> Result<(Map<String, Value>, String), ClientError> {
        if self.live.is_none() {
            if let Err(e) = self.launch().await {
                (self.cfg.fatal)(e.clone());
                return Err(ClientError::Indeterminate(e));
            }
        }
        let live = self.live.as_mut().expect("launched above");
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = oneshot::channel();
        {
            let mut c = live.conn.lock().unwrap_or_else(|e| e.into_inner());
            c.slots.insert(id, Slot::Waiting(tx));
            c.last = Some(id);
        }
        let req = wire::Request {
            id,
            kind,
            key,
            ttl_ms: ttl.map(|d| d.as_millis() as u64),
            wait_ms: wait.map(|d| d.as_millis() as u64),
            owner,
        };
        if let Err(e) = send_line(&mut live.stdin, &req).await {
            self.replace("a failed write").await;
            return Err(ClientError::Indeterminate(format!(
                "cannot send {kind} to the adapter: {e}"
            )));
        }
        let reply = match tokio::time::timeout(self.cfg.op_timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Reply::Gone,
            Err(_) => {
                live.conn
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .slots
                    .insert(id, Slot::TimedOut);
                self.replace("a request without a reply").await;
                return Err(ClientError::Indeterminate(format!(
                    "{kind}: no reply from the adapter within {:?}",
                    self.cfg.op_timeout
                )));
            }
        };
        match reply {
            Reply::Ok { fields, line } => Ok((fields, line)),
            Reply::Fail(e) => Err(ClientError::Definite(e)),
            Reply::Info(e) => {
                self.replace("an info reply").await;
                Err(ClientError::Indeterminate(e))
            }
            Reply::Gone => {
                let status = match self.live.as_mut() {
                    Some(l) => exit_status(&mut l.child).await,
                    None => "gone".into(),
                };
                self.replace("its exit").await;
                Err(ClientError::Indeterminate(format!(
                    "{kind}: the adapter exited before replying ({status})"
                )))
            }
        }
    }

    /// A reply lacking a field the checks need: fatal.
    fn refuse(&self, kind: &str, line: &str, why: &str) -> ClientError {
        let msg = format!(
            "{}: its reply to {kind} {line} is refused: {why}",
            self.ctx.name
        );
        (self.cfg.fatal)(msg.clone());
        ClientError::Indeterminate(msg)
    }

    fn owner_of(fields: &Map<String, Value>) -> Option<String> {
        match fields.get("owner") {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    }
}

impl Drop for AdapterClient {
    fn drop(&mut self) {
        if let Some(l) = self.live.as_mut() {
            let _ = l.child.start_kill();
        }
    }
}

#[async_trait]
impl LockClient for AdapterClient {
    async fn acquire(
        &mut self,
        key: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let (fields, line) = match self.call("acquire", key, Some(ttl), Some(wait), None).await {
            Ok(r) => r,
            Err(ClientError::Definite(e)) if e == "held" || e.is_empty() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(owner) = Self::owner_of(&fields) else {
            return Err(self.refuse(
                "acquire",
                &line,
                "no `owner` (the lease's identity: token, session or lease id)",
            ));
        };
        let Some(lease_ms) = fields.get("lease_ms").and_then(Value::as_u64) else {
            return Err(self.refuse(
                "acquire",
                &line,
                "no `lease_ms`: a leased grant without its length would be judged as a \
                 lock without a lease, and every takeover after expiry flagged",
            ));
        };
        let fence = fields.get("fence").and_then(Value::as_u64);
        if self.cfg.offer.fence && fence.is_none() {
            return Err(self.refuse(
                "acquire",
                &line,
                "no `fence`, though its handshake said every grant carries one",
            ));
        }
        Ok(Some(Grant {
            key: key.to_string(),
            owner,
            fence: fence.filter(|_| self.cfg.offer.fence),
            lease: Duration::from_millis(lease_ms),
            acquire_sets_ttl: self.cfg.offer.lease == LeaseStart::Acquire,
        }))
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        match self
            .call("renew", &grant.key, None, None, Some(&grant.owner))
            .await
        {
            Ok(_) => Ok(true),
            Err(ClientError::Definite(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        match self
            .call("release", &grant.key, None, None, Some(&grant.owner))
            .await
        {
            Ok(_) => Ok(true),
            Err(ClientError::Definite(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn can_probe(&self) -> bool {
        true
    }

    async fn probe(&mut self, grant: &Grant) -> Result<Option<Duration>, ClientError> {
        match self
            .call("probe", &grant.key, None, None, Some(&grant.owner))
            .await
        {
            Ok((fields, line)) => match fields.get("lease_ms").and_then(Value::as_u64) {
                Some(ms) => Ok(Some(Duration::from_millis(ms))),
                None => Err(self.refuse(
                    "probe",
                    &line,
                    "no `lease_ms` (how long the lease certainly lasts from the send)",
                )),
            },
            Err(ClientError::Definite(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Read the adapter's stdout until it closes: route replies, record
/// events, report protocol errors.
async fn read_loop(stdout: ChildStdout, conn: Arc<Mutex<Conn>>, ctx: Arc<Ctx>) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        match read_line(&mut reader, &mut buf).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                let hello = conn.lock().unwrap_or_else(|e| e.into_inner()).hello.take();
                match hello {
                    Some(tx) => {
                        let _ = tx.send(Err(e));
                    }
                    None => ctx.fatal(line_no + 1, e),
                }
                break;
            }
        }
        line_no += 1;
        let line = trim(&buf);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // The first line answers the handshake, whatever it holds.
        let hello = conn.lock().unwrap_or_else(|e| e.into_inner()).hello.take();
        if let Some(tx) = hello {
            let _ = tx.send(handshake_answer(line));
            continue;
        }
        let msg = match FromAdapter::parse(line) {
            Ok(m) => m,
            Err(e) => {
                ctx.fatal(line_no, format!("{e}: {}", excerpt(line)));
                return;
            }
        };
        if let Err(e) = handle(&conn, &ctx, msg, line) {
            ctx.fatal(line_no, e);
            return;
        }
    }
    let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
    c.hello = None;
    for (_, s) in c.slots.drain() {
        if let Slot::Waiting(tx) = s {
            let _ = tx.send(Reply::Gone);
        }
    }
}

/// One message: a protocol error is returned.
fn handle(conn: &Mutex<Conn>, ctx: &Ctx, msg: FromAdapter, line: &[u8]) -> Result<(), String> {
    let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
    let (id, reply) = match msg {
        FromAdapter::HelloOk(_) | FromAdapter::Unsupported { .. } => {
            return Err(format!("a second handshake answer: {}", excerpt(line)))
        }
        FromAdapter::Renewed {
            key,
            owner,
            lease_ms,
            sent_ns,
            done_ns,
        } => {
            drop(c);
            return renewed(ctx, key, owner, lease_ms, sent_ns, done_ns, line);
        }
        FromAdapter::Lost { key, owner, reason } => {
            drop(c);
            lost(ctx, key, owner, reason);
            return Ok(());
        }
        FromAdapter::Ok { id, fields } => (
            id,
            Reply::Ok {
                fields,
                line: String::from_utf8_lossy(line).into_owned(),
            },
        ),
        FromAdapter::Fail { id, error } => (id, Reply::Fail(error.unwrap_or_default())),
        FromAdapter::Info { id, error } => (
            id,
            Reply::Info(error.unwrap_or_else(|| "info without an error".into())),
        ),
    };
    match c.slots.remove(&id) {
        Some(Slot::Waiting(tx)) => {
            if tx.send(reply).is_err() {
                eprintln!("{}: late reply ignored: {}", ctx.name, excerpt(line));
            }
            Ok(())
        }
        Some(Slot::TimedOut) => {
            eprintln!(
                "{}: late reply to request {id} ignored: {}",
                ctx.name,
                excerpt(line)
            );
            Ok(())
        }
        None if c.last.is_some_and(|l| (c.first..=l).contains(&id)) => {
            Err(format!("a second reply to request {id}: {}", excerpt(line)))
        }
        None => Err(format!(
            "a reply to id {id}, which it was never sent: {}",
            excerpt(line)
        )),
    }
}

/// A background renewal: a `renew` op over the interval the adapter
/// measured on the host's monotonic clock.
fn renewed(
    ctx: &Ctx,
    key: Option<String>,
    owner: String,
    lease_ms: u64,
    sent_ns: u64,
    done_ns: u64,
    line: &[u8],
) -> Result<(), String> {
    let now = monotonic_raw_ns();
    let bad = if sent_ns > done_ns {
        Some("`sent_ns` is after `done_ns`")
    } else if done_ns > now {
        Some("`done_ns` is in the future (hint: both are CLOCK_MONOTONIC in ns: Python time.monotonic_ns(), Node process.hrtime.bigint(), Java System.nanoTime())")
    } else if sent_ns < ctx.origin {
        Some("`sent_ns` is before the run started (`clock_origin_ns`)")
    } else {
        None
    };
    if let Some(why) = bad {
        return Err(format!("renewed event refused: {why}: {}", excerpt(line)));
    }
    let Some(rec) = &ctx.events else {
        return Ok(());
    };
    let process = rec.process.clone();
    let key = key.unwrap_or_else(|| ctx.key.clone());
    let mut inv = Op::new(
        sent_ns - ctx.origin,
        process.clone(),
        OpType::Invoke,
        "renew",
    );
    inv.key = Some(key.clone());
    inv.owner = Some(owner.clone());
    let mut ok = Op::new(done_ns - ctx.origin, process, OpType::Ok, "renew");
    ok.key = Some(key);
    ok.owner = Some(owner);
    ok.lease_ms = Some(lease_ms);
    rec.sink.record(inv);
    rec.sink.record(ok);
    Ok(())
}

/// The library says the lock is gone: a `lost` op of the owner (a release
/// the holder did not ask for).
fn lost(ctx: &Ctx, key: Option<String>, owner: String, reason: Option<String>) {
    let Some(rec) = &ctx.events else {
        return;
    };
    let t = monotonic_raw_ns().saturating_sub(ctx.origin);
    let process: Process = rec.process.clone();
    let key = key.unwrap_or_else(|| ctx.key.clone());
    let mut inv = Op::new(t, process.clone(), OpType::Invoke, LOST);
    inv.key = Some(key.clone());
    inv.owner = Some(owner.clone());
    let mut ok = inv.clone();
    ok.kind = OpType::Ok;
    ok.value = reason.map(Value::String).unwrap_or(Value::Null);
    rec.sink.record(inv);
    rec.sink.record(ok);
}

/// The `f` of the op a `lost` event records.
pub const LOST: &str = "lost";

#[cfg(test)]
mod tests;
