//! The passive wire tap: with `lockjaw run --tap-wire`, every framed
//! message on every proxy of the embedded Toxiproxy (each request, and the
//! reply paired with it) is written to `wire.jsonl` in the run directory,
//! one [`WireRecord`] per line, its moment on the run clock. Nothing is
//! held or changed. `lockjaw explore` learns from it what a client sends.
//!
//! How: the run sets one [`Tap`] on its embedded server
//! ([`super::ServerHandle::set_tap`]); each connection accepted after that
//! gets a [`ConnTap`], and the reader of each direction hands it every
//! whole message as the framer cut it ([`super::frames`]), at the moment
//! the proxy had it whole (before any toxic acts on it). The record goes
//! through a bounded channel (`try_send`: the data path never waits and
//! wakes no one; a full channel drops the record and counts it) to one
//! writer thread that polls it, and writes whole lines through a buffer,
//! flushed when the channel is idle for 200 ms and at [`Tap::close`].
//!
//! A connection the proxy cannot frame (etcd's gRPC, TLS, SQL, lockjaw's
//! storage) gets one record with `proto` = `opaque` and `name` saying why
//! (`TLS`, `HTTP/2 (gRPC)`, ...), when its first unframed bytes pass.
//!
//! A run killed with SIGKILL may lose the buffered lines and leave the
//! last line torn: [`read`] skips a last line that has no newline and does
//! not parse, and refuses any other bad line.

use super::frames::{Framer, Msg, Proto};
use super::model::Stream;
use crate::history::clock::RunClock;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The file a tapped run writes, in its run directory.
pub const FILE: &str = "wire.jsonl";

/// Which way a message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dir {
    /// Client to server.
    Request,
    /// Server to client (paired with its request by `seq`).
    Reply,
}

/// One framed message a proxy saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireRecord {
    /// Run clock (ns since the run's start), when the proxy had it whole.
    pub t_ns: u64,
    /// The proxy's name (`lockjaw-<run>-w<slot>-<node>`, `...-storage`).
    pub proxy: String,
    /// The connection's number on its proxy (from 0).
    pub conn: u64,
    pub dir: Dir,
    /// `redis` or `zookeeper`; `opaque` for the one record of a connection
    /// that could not be framed (its `name` says why).
    pub proto: String,
    /// Redis: the command, upper case; ZooKeeper: the op name. A reply
    /// carries its request's.
    pub name: String,
    /// The request's number on its connection (a reply: its request's).
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    /// `EVAL`/`EVALSHA`: the script's first words (at most 60 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keepalive: bool,
    /// A reply: `ok`, `error`, `nil`, `int:<n>`, `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Request arguments that equal a known owner token are not recorded;
    /// true when the request carried the worker's current token.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub token: bool,
}

/// The worker slot and the node (or `storage`) of a proxy name
/// (`lockjaw-<run>-w<slot>-<node>`).
pub fn link_of(proxy: &str) -> Option<(usize, String)> {
    let (_, rest) = proxy.rsplit_once("-w").and_then(|(a, b)| {
        let (slot, node) = b.split_once('-')?;
        Some((a, (slot, node)))
    })?;
    Some((rest.0.parse().ok()?, rest.1.to_string()))
}

/// Read `wire.jsonl`; errors name the file and line. A torn last line
/// (no newline at its end and not a record: the run was killed while
/// writing it) is skipped; every other line must be a record.
pub fn read(path: &Path) -> Result<Vec<WireRecord>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            " (hint: `lockjaw run --tap-wire` writes it)"
        } else {
            ""
        };
        format!("{}: cannot read: {e}{hint}", path.display())
    })?;
    let torn_at = (!text.is_empty() && !text.ends_with('\n')).then(|| text.lines().count());
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(r) => out.push(r),
            Err(_) if torn_at == Some(i + 1) => {}
            Err(e) => {
                return Err(format!(
                    "{}:{}: not a wire record: {e} (hint: the file is written by \
                     `lockjaw run --tap-wire`; only a torn last line is skipped)",
                    path.display(),
                    i + 1
                ))
            }
        }
    }
    Ok(out)
}

/// How many records may wait for the writer; past this, new ones are
/// dropped (and counted) rather than slowing the data path.
const QUEUE: usize = 1 << 16;
/// The writer flushes its buffer when no record came for this long.
const IDLE_FLUSH: Duration = Duration::from_millis(200);
/// How often the writer looks at an empty queue.
const POLL: Duration = Duration::from_millis(5);
/// A token shorter than this is not looked for (it would match by chance).
const MIN_TOKEN: usize = 6;
/// `words`: at most this many bytes of a script.
const WORDS: usize = 60;

/// The tap a server's proxies read when a connection is accepted.
pub(crate) type TapSlot = Arc<RwLock<Option<Arc<Tap>>>>;

/// What a reply said: RESP's type and first line, a ZooKeeper error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Ok,
    Error,
    Nil,
    Int(i64),
    Other,
}

impl Reply {
    fn text(self) -> String {
        match self {
            Reply::Ok => "ok".into(),
            Reply::Error => "error".into(),
            Reply::Nil => "nil".into(),
            Reply::Int(n) => format!("int:{n}"),
            Reply::Other => "other".into(),
        }
    }
}

/// One message as the data path hands it to the writer.
struct Seen {
    t_ns: u64,
    proxy: Arc<str>,
    conn: u64,
    dir: Dir,
    proto: &'static str,
    msg: Msg,
    reply: Option<Reply>,
    token: bool,
}

enum Event {
    Seen(Box<Seen>),
    End,
}

/// How the writer ended.
struct WriterEnd {
    lines: u64,
    error: Option<String>,
}

/// What a closed tap wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tapped {
    pub records: u64,
    /// Records dropped because the writer fell behind.
    pub dropped: u64,
}

/// A run's wire tap: the file, the writer thread, the workers' tokens.
pub struct Tap {
    path: PathBuf,
    clock: RunClock,
    tx: Mutex<Option<SyncSender<Event>>>,
    /// Worker slot → the owner token it was last granted.
    tokens: RwLock<HashMap<usize, Bytes>>,
    dropped: AtomicU64,
    writer: Mutex<Option<std::thread::JoinHandle<WriterEnd>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Tap {
    /// Create `path` (truncated) and start the writer; times are on `clock`.
    pub fn open(path: &Path, clock: RunClock) -> Result<Arc<Tap>, String> {
        let file = std::fs::File::create(path)
            .map_err(|e| format!("{}: cannot create the wire tap's file: {e}", path.display()))?;
        let (tx, rx) = sync_channel(QUEUE);
        let writer = std::thread::Builder::new()
            .name("lockjaw-wire-tap".into())
            .spawn(move || write_loop(rx, file))
            .map_err(|e| format!("cannot start the wire tap's writer: {e}"))?;
        Ok(Arc::new(Tap {
            path: path.to_path_buf(),
            clock,
            tx: Mutex::new(Some(tx)),
            tokens: RwLock::new(HashMap::new()),
            dropped: AtomicU64::new(0),
            writer: Mutex::new(Some(writer)),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Worker `slot` was granted `token`: from now on its requests that
    /// carry it are marked `token` (until its next grant).
    pub fn set_token(&self, slot: usize, token: &str) {
        if token.len() < MIN_TOKEN {
            return;
        }
        let mut t = self.tokens.write().unwrap_or_else(|p| p.into_inner());
        t.insert(slot, Bytes::copy_from_slice(token.as_bytes()));
    }

    /// The tap of one new connection of proxy `proxy`; None once closed.
    pub(crate) fn conn(self: &Arc<Self>, proxy: &Arc<str>, conn: u64) -> Option<ConnTap> {
        let tx = lock(&self.tx).clone()?;
        Some(ConnTap {
            tap: self.clone(),
            tx,
            proxy: proxy.clone(),
            conn,
            slot: link_of(proxy).map(|(s, _)| s),
            opaque: Arc::new(AtomicBool::new(false)),
            framed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Take no more records, write out those waiting, close the file.
    /// Idempotent: a second call returns zeros.
    pub fn close(&self) -> Result<Tapped, String> {
        if let Some(tx) = lock(&self.tx).take() {
            let _ = tx.send(Event::End);
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        let Some(h) = lock(&self.writer).take() else {
            return Ok(Tapped::default());
        };
        let end = h
            .join()
            .map_err(|_| format!("{}: the wire tap's writer panicked", self.path.display()))?;
        match end.error {
            Some(e) => Err(format!("{}: {e}", self.path.display())),
            None => Ok(Tapped {
                records: end.lines,
                dropped,
            }),
        }
    }

    fn carries_token(&self, slot: Option<usize>, data: &[u8]) -> bool {
        let Some(slot) = slot else { return false };
        let t = self.tokens.read().unwrap_or_else(|p| p.into_inner());
        t.get(&slot)
            .is_some_and(|tok| data.windows(tok.len()).any(|w| w == &tok[..]))
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        // Backstop (a run that failed before its end): the writer flushes
        // what it has and stops.
        if let Some(tx) = lock(&self.tx).take() {
            let _ = tx.try_send(Event::End);
        }
    }
}

/// One connection's tap, cloned for its two directions.
#[derive(Clone)]
pub(crate) struct ConnTap {
    tap: Arc<Tap>,
    tx: SyncSender<Event>,
    proxy: Arc<str>,
    conn: u64,
    slot: Option<usize>,
    /// Its opaque record was sent (once per connection).
    opaque: Arc<AtomicBool>,
    /// A framed message passed (unframed bytes after that: framing lost).
    framed: Arc<AtomicBool>,
}

impl ConnTap {
    /// A whole message (`msg`), or unframed bytes (None), as `framer` cut
    /// them.
    pub fn saw(&self, framer: &Framer, data: &[u8], msg: Option<&Msg>) {
        if msg.is_none() && self.opaque.load(Ordering::Relaxed) {
            return;
        }
        let t_ns = self.tap.clock.now();
        let dir = framer.dir();
        let d = match dir {
            Stream::Upstream => Dir::Request,
            Stream::Downstream => Dir::Reply,
        };
        let (proto, msg, reply, token) = match msg {
            Some(m) => {
                self.framed.store(true, Ordering::Relaxed);
                let proto = match framer.proto() {
                    Proto::ZooKeeper => "zookeeper",
                    _ => "redis",
                };
                let reply = (d == Dir::Reply).then(|| reply_of(proto, m, data));
                let token = d == Dir::Request && self.tap.carries_token(self.slot, data);
                (proto, m.clone(), reply, token)
            }
            None => {
                if self.opaque.swap(true, Ordering::Relaxed) {
                    return;
                }
                let why = if self.framed.load(Ordering::Relaxed) {
                    "framing lost"
                } else {
                    why_opaque(dir, data)
                };
                (
                    "opaque",
                    super::frames::paired_msg(why, 0, false),
                    None,
                    false,
                )
            }
        };
        let seen = Seen {
            t_ns,
            proxy: self.proxy.clone(),
            conn: self.conn,
            dir: d,
            proto,
            msg,
            reply,
            token,
        };
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Event::Seen(Box::new(seen))) {
            self.tap.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Why a connection's first unframed bytes are not framed.
fn why_opaque(dir: Stream, b: &[u8]) -> &'static str {
    if dir == Stream::Downstream {
        return "the server spoke first (MySQL, MariaDB)";
    }
    match b {
        [0x16, 0x03, ..] => "TLS",
        _ if b.starts_with(b"PRI * HTTP/2.0") => "HTTP/2 (gRPC)",
        [_, _, _, _, 0, 3, 0, 0, ..] => "PostgreSQL",
        [_, _, _, _, 0x04, 0xd2, 0x16, 0x2f, ..] => "PostgreSQL (TLS request)",
        [b'{', ..] => "JSON lines (lockjaw's storage)",
        _ if b
            .split(|&c| c == b'\n')
            .next()
            .is_some_and(|l| l.windows(6).any(|w| w == b" HTTP/")) =>
        {
            "HTTP/1"
        }
        _ => "not a protocol the proxy frames",
    }
}

/// What a reply says.
pub(crate) fn reply_of(proto: &str, m: &Msg, b: &[u8]) -> Reply {
    if proto == "zookeeper" {
        if &*m.name == "connect" || b.len() < 20 {
            return Reply::Ok;
        }
        return match i32::from_be_bytes([b[16], b[17], b[18], b[19]]) {
            0 => Reply::Ok,
            _ => Reply::Error,
        };
    }
    let line = b
        .split(|&c| c == b'\r')
        .next()
        .and_then(|l| l.get(1..))
        .unwrap_or_default();
    match b.first() {
        Some(b'+') if line.eq_ignore_ascii_case(b"OK") => Reply::Ok,
        Some(b'-' | b'!') => Reply::Error,
        Some(b'_') => Reply::Nil,
        Some(b'$' | b'*') if line == b"-1" => Reply::Nil,
        Some(b':') => std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(Reply::Other, Reply::Int),
        _ => Reply::Other,
    }
}

/// A script's first words: whitespace collapsed, at most [`WORDS`] bytes.
pub(crate) fn words(script: &[u8]) -> String {
    let text = String::from_utf8_lossy(script);
    let mut out = String::new();
    for w in text.split_whitespace() {
        let sep = usize::from(!out.is_empty());
        if out.len() + sep + w.len() > WORDS {
            let room = WORDS.saturating_sub(out.len() + sep);
            if room > 0 {
                let mut cut = room;
                while !w.is_char_boundary(cut) {
                    cut -= 1;
                }
                if cut > 0 {
                    out.push_str(&" "[..sep]);
                    out.push_str(&w[..cut]);
                }
            }
            break;
        }
        out.push_str(&" "[..sep]);
        out.push_str(w);
    }
    out
}

impl Seen {
    fn record(self) -> WireRecord {
        WireRecord {
            t_ns: self.t_ns,
            proxy: self.proxy.to_string(),
            conn: self.conn,
            dir: self.dir,
            proto: self.proto.to_string(),
            name: self.msg.name.to_string(),
            seq: self.msg.seq,
            words: self.msg.script.as_deref().map(words),
            sha1: self.msg.sha1,
            keepalive: self.msg.keepalive,
            reply: self.reply.map(Reply::text),
            token: self.token,
        }
    }
}

/// The writer thread: one line per record, through a buffer flushed when
/// idle and at the end. It polls the queue ([`POLL`]) rather than waiting
/// on it, so a sender never has to wake it: the data path pays for no
/// wake-up. A write error is kept (the rest is drained, so senders never
/// block) and reported at close.
fn write_loop(rx: Receiver<Event>, file: std::fs::File) -> WriterEnd {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, file);
    let mut end = WriterEnd {
        lines: 0,
        error: None,
    };
    let mut line = Vec::with_capacity(256);
    let put = |r: std::io::Result<()>, end: &mut WriterEnd| {
        if let (Err(e), None) = (r, &end.error) {
            end.error = Some(format!("cannot write: {e}"));
        }
    };
    let mut idle = Duration::ZERO;
    loop {
        match rx.try_recv() {
            Ok(Event::Seen(s)) => {
                idle = Duration::ZERO;
                line.clear();
                if serde_json::to_writer(&mut line, &s.record()).is_ok() {
                    line.push(b'\n');
                    // One write of a whole line: a kill leaves at most the
                    // last line torn.
                    put(w.write_all(&line), &mut end);
                    end.lines += 1;
                }
            }
            Err(TryRecvError::Empty) => {
                if idle < IDLE_FLUSH && idle + POLL >= IDLE_FLUSH {
                    put(w.flush(), &mut end);
                }
                idle += POLL;
                std::thread::sleep(POLL);
            }
            Ok(Event::End) | Err(TryRecvError::Disconnected) => break,
        }
    }
    put(w.flush(), &mut end);
    end
}

#[cfg(test)]
#[path = "tap_tests.rs"]
mod tests;
