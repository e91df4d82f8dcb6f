//! The data path of one proxied connection: two directions, each a reader
//! that timestamps chunks into a queue and a writer that applies the
//! direction's toxics to every chunk before writing it on.
//!
//! Toxic changes reach live connections through a `watch` channel. A chunk
//! waiting in a toxic (latency, bandwidth, slicer, reset_peer) is re-planned
//! with the new toxics as soon as they change, so removing a latency toxic
//! flushes the held data at once instead of dropping it; removing a timeout
//! toxic that was in force closes the connection (its data was dropped, the
//! stream has a hole), as Shopify's server does. Closing happens by dropping
//! the whole connection task; nothing queued is delivered after that.
//!
//! The one-shot toxics (lockjaw extensions `hold_next`, `reset_next`) act on
//! the first chunk that reaches them after they were added, on whichever
//! connection of the proxy gets there first: the connections share the
//! toxic's [`Shot`] and claim it atomically, so exactly one chunk is held
//! (or reset) per toxic. Chunks read before the toxic was added never claim
//! it.
//!
//! Every connection is framed ([`super::frames`]): on a Redis or ZooKeeper
//! connection each chunk is one whole request or reply, described (command
//! or op name, the request a reply answers). There a one-shot passes over
//! pings and keep-alives (they do not claim it), and records what it struck
//! (`Shot::struck`). The `match_next` toxic claims only a request its
//! [`Pattern`] matches, and never on an unframed connection.

use super::frames::{ConnFrames, Framer, Msg, Scripts};
use super::matcher::Pattern;
use super::model::{MatchAction, Stream, ToxicKind};
use super::tap::ConnTap;
use bytes::{Buf, Bytes, BytesMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant};

/// One toxic as a proxy holds it, shared with all its connections.
#[derive(Clone, Debug)]
pub(crate) struct ToxicEntry {
    /// Stable for the toxic's life; connections keep per-toxic state by it.
    pub id: u64,
    /// Changes on every update (a new toxicity roll, as in Toxiproxy).
    pub rev: u64,
    pub name: String,
    pub stream: Stream,
    pub toxicity: f32,
    pub kind: ToxicKind,
    /// `match_next`: what it matches.
    pub pattern: Option<Arc<Pattern>>,
    /// When the toxic was added and whether it fired (one-shot kinds);
    /// kept across updates.
    pub shot: Arc<Shot>,
}

/// The per-proxy state of a one-shot toxic, shared by all connections.
#[derive(Debug)]
pub(crate) struct Shot {
    /// Chunks read before this instant are not "the next" chunk.
    created: Instant,
    /// `match_next` with a window: chunks read after this never claim it.
    expires: Option<Instant>,
    fired: AtomicBool,
    /// What the chunk that claimed it was (framed connections only).
    struck: Mutex<Option<String>>,
    /// `match_next` acting on the reply: (connection, request number).
    target: Mutex<Option<(u64, u64)>>,
    /// `match_next` `freeze-after-reply`: the matched request's reply is
    /// on its way; every later upstream chunk of the proxy is held.
    frozen: AtomicBool,
    /// `match_next` acting on the reply: the reply's first line (at most
    /// 64 bytes), e.g. `:1` for a `SETNX` that set the key.
    reply: Mutex<Option<String>>,
}

impl Shot {
    /// A toxic added now.
    #[cfg(test)]
    pub fn new() -> Arc<Shot> {
        Shot::for_kind(&ToxicKind::Noop)
    }

    /// A toxic of `kind` added now (a `match_next` window starts now).
    pub fn for_kind(kind: &ToxicKind) -> Arc<Shot> {
        let created = Instant::now();
        let expires = match *kind {
            ToxicKind::MatchNext { window, .. } if window > 0 => Some(created + ms(window)),
            _ => None,
        };
        Arc::new(Shot {
            created,
            expires,
            fired: AtomicBool::new(false),
            struck: Mutex::new(None),
            target: Mutex::new(None),
            frozen: AtomicBool::new(false),
            reply: Mutex::new(None),
        })
    }

    /// Whether a chunk has claimed the toxic.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// What the claiming chunk was: a request's command or op name (a
    /// reply: its request's); None if unframed or not fired.
    pub fn struck(&self) -> Option<String> {
        self.struck
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `reset-after`, `freeze-after-reply`: the first line of the matched
    /// request's reply, once it arrived.
    pub fn reply(&self) -> Option<String> {
        self.reply.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `freeze-after-reply`: the matched request's reply went on.
    pub fn frozen(&self) -> bool {
        self.frozen.load(Ordering::Acquire)
    }

    /// Claim the toxic for a chunk that arrived `at`; true for exactly one
    /// caller over the toxic's life, and only for a chunk read after it was
    /// added.
    #[cfg(test)]
    fn claim(&self, at: Instant) -> bool {
        self.claim_for(at, None, 0)
    }

    /// [`Shot::claim`] for a chunk carrying `msg` on connection `conn`,
    /// recording what it struck.
    fn claim_for(&self, at: Instant, msg: Option<&Msg>, conn: u64) -> bool {
        if at < self.created || self.expires.is_some_and(|e| at > e) {
            return false;
        }
        // Record before publishing `fired`, so a reader that sees it fired
        // sees what it struck.
        let mut struck = self.struck.lock().unwrap_or_else(|p| p.into_inner());
        let won = self
            .fired
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            if let Some(m) = msg {
                *struck = Some(m.name.to_string());
                *self.target.lock().unwrap_or_else(|p| p.into_inner()) = Some((conn, m.seq));
            }
        }
        won
    }

    /// Whether `msg` on `conn` is the reply to the matched request.
    fn is_target_reply(&self, msg: Option<&Msg>, conn: u64) -> bool {
        let Some(m) = msg.filter(|m| m.paired) else {
            return false;
        };
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) == Some((conn, m.seq))
    }
}

/// The toxics of a proxy in API order (upstream first, then downstream).
pub(crate) type ToxicList = Arc<Vec<ToxicEntry>>;

/// Read size, like Go's io.Copy buffer in Toxiproxy.
const READ_BUF: usize = 32 * 1024;
/// Chunks a direction may hold (Toxiproxy buffers 1024 in a latency toxic).
const QUEUE: usize = 1024;

struct Chunk {
    data: Bytes,
    at: Instant,
    seed: u64,
    /// The message this chunk is, on a framed connection.
    msg: Option<Msg>,
}

/// Connection numbers, for a `match_next` that acts on a reply.
static CONN_IDS: AtomicU64 = AtomicU64::new(1);

/// How a direction ended; a reset makes the whole connection send RST.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Eof,
    Close,
    Reset,
    Broken,
}

/// Serve one accepted client: dial the upstream and pump both directions
/// until either ends; then close both sockets (with RST after reset_peer).
pub(crate) async fn serve(
    mut client: TcpStream,
    upstream: Arc<str>,
    toxics: watch::Receiver<ToxicList>,
    scripts: Scripts,
    tap: Option<ConnTap>,
) {
    let mut server = match TcpStream::connect(&*upstream).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(upstream = %upstream, error = %e, "toxiproxy: cannot connect to upstream");
            return;
        }
    };
    let _ = server.set_nodelay(true);
    let conn = CONN_IDS.fetch_add(1, Ordering::Relaxed);
    let frames = ConnFrames::new();
    let framer = |dir| Framer::new(dir, frames.clone(), scripts.clone());
    let end = {
        let (cr, cw) = client.split();
        let (sr, sw) = server.split();
        let up_toxics = LinkToxics::new(Stream::Upstream, toxics.clone()).on(conn);
        let down_toxics = LinkToxics::new(Stream::Downstream, toxics).on(conn);
        let up = pump(cr, sw, framer(Stream::Upstream), up_toxics, tap.clone());
        let down = pump(sr, cw, framer(Stream::Downstream), down_toxics, tap);
        tokio::select! {
            e = up => e,
            e = down => e,
        }
    };
    if end == End::Reset {
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
}

async fn pump(
    mut r: ReadHalf<'_>,
    mut w: WriteHalf<'_>,
    framer: Framer,
    toxics: LinkToxics,
    tap: Option<ConnTap>,
) -> End {
    let (tx, mut queue) = mpsc::channel::<Chunk>(QUEUE);
    let reader = async {
        read_chunks(&mut r, framer, tx, tap).await;
        // EOF: dropping `tx` tells the writer; keep the branch alive.
        std::future::pending::<()>().await
    };
    tokio::select! {
        end = write_chunks(&mut queue, &mut w, toxics) => end,
        () = reader => End::Broken,
    }
}

/// Read, frame, and queue: one chunk per whole message on a framed
/// connection, one per read otherwise. The wire tap, if any, sees each
/// message as it is queued.
async fn read_chunks(
    r: &mut ReadHalf<'_>,
    mut framer: Framer,
    tx: mpsc::Sender<Chunk>,
    tap: Option<ConnTap>,
) {
    let mut buf = BytesMut::with_capacity(READ_BUF);
    loop {
        if buf.capacity() - buf.len() < READ_BUF / 8 {
            buf.reserve(READ_BUF);
        }
        match r.read_buf(&mut buf).await {
            Ok(0) | Err(_) => {
                // The stream ended inside a message: pass what came.
                if let Some(rest) = framer.rest() {
                    let _ = tx.send(new_chunk(rest, None)).await;
                }
                return;
            }
            Ok(_) => {}
        }
        for (data, msg) in framer.push(buf.split().freeze()) {
            if let Some(t) = &tap {
                t.saw(&framer, &data, msg.as_ref());
            }
            if tx.send(new_chunk(data, msg)).await.is_err() {
                return;
            }
        }
    }
}

fn new_chunk(data: Bytes, msg: Option<Msg>) -> Chunk {
    Chunk {
        data,
        at: Instant::now(),
        seed: rand::random(),
        msg,
    }
}

async fn write_chunks(
    queue: &mut mpsc::Receiver<Chunk>,
    w: &mut WriteHalf<'_>,
    mut toxics: LinkToxics,
) -> End {
    loop {
        if toxics.refresh() {
            return End::Close;
        }
        let expiry = toxics.timeout_expiry();
        let next = tokio::select! {
            biased;
            close = toxics.next_change() => {
                if close { return End::Close; }
                continue;
            }
            () = sleep_opt(expiry) => return End::Close,
            c = queue.recv() => c,
        };
        let Some(chunk) = next else {
            return toxics.slow_close().await;
        };
        if let Some(end) = deliver(chunk, w, &mut toxics).await {
            return end;
        }
    }
}

/// Push one chunk through the toxics, piece by piece; `Some` ends the link.
async fn deliver(chunk: Chunk, w: &mut WriteHalf<'_>, toxics: &mut LinkToxics) -> Option<End> {
    let mut data = chunk.data.clone();
    let mut piece = 0u64;
    let mut last_write: Option<Instant> = None;
    loop {
        if toxics.refresh() {
            return Some(End::Close);
        }
        let now = Instant::now();
        let (when, write) = match toxics.plan(&chunk, data.len(), piece, last_write, now) {
            Plan::Drop => {
                toxics.passed();
                return None;
            }
            Plan::Close => return Some(End::Close),
            Plan::Reset(when) => (when, None),
            Plan::Write {
                when,
                len,
                close_after,
            } => (when, Some((len, close_after))),
        };
        if when > now {
            tokio::select! {
                () = sleep_until(when) => {}
                close = toxics.next_change() => {
                    if close { return Some(End::Close); }
                    continue;
                }
            }
        }
        let Some((len, close_after)) = write else {
            return Some(End::Reset);
        };
        if w.write_all(&data[..len]).await.is_err() {
            return Some(End::Broken);
        }
        let t = Instant::now();
        toxics.wrote(len, t);
        last_write = Some(t);
        data.advance(len);
        piece += 1;
        if close_after {
            return Some(End::Close);
        }
        if data.is_empty() {
            return None;
        }
    }
}

async fn sleep_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => sleep_until(d).await,
        None => std::future::pending().await,
    }
}

enum Plan {
    /// The chunk is blackholed.
    Drop,
    /// Close the connection now (limit reached).
    Close,
    /// Reset the connection at this instant.
    Reset(Instant),
    /// Write the first `len` bytes at `when`; close after if `close_after`.
    Write {
        when: Instant,
        len: usize,
        close_after: bool,
    },
}

/// The toxics of one direction of one connection, with per-connection state.
struct LinkToxics {
    stream: Stream,
    /// The connection's number (for `match_next` on the reply).
    conn: u64,
    rx: watch::Receiver<ToxicList>,
    active: Vec<Active>,
}

struct Active {
    id: u64,
    rev: u64,
    /// The toxicity roll: does this toxic act on this connection?
    on: bool,
    kind: ToxicKind,
    /// limit_data: bytes written so far.
    sent: i64,
    /// timeout: when the connection closes without data.
    deadline: Option<Instant>,
    /// reset_peer: when data first reached the toxic; hold_next: when the
    /// chunk this connection holds arrived.
    armed: Option<Instant>,
    /// hold_next, reset_next: this connection is done with the toxic (its
    /// held chunk went out, or another connection's chunk claimed it).
    spent: bool,
    /// hold_next, reset_next: the state shared with the other connections.
    shot: Arc<Shot>,
    /// match_next: what it matches.
    pattern: Option<Arc<Pattern>>,
    /// bandwidth: when the last piece went out.
    last_out: Option<Instant>,
}

impl Active {
    /// One-shot toxics: the arrival instant of the chunk this connection
    /// holds, claiming the toxic for `chunk` if nobody has yet; None once
    /// the toxic is spent here or taken elsewhere.
    fn one_shot(&mut self, chunk: &Chunk, conn: u64) -> Option<Instant> {
        if self.spent {
            return None;
        }
        if self.armed.is_none() {
            // On a framed connection pings and keep-alives never claim a
            // one-shot; a matcher claims only what it matches, and only
            // on a framed connection.
            let eligible = match (&chunk.msg, &self.pattern) {
                (Some(m), _) if m.keepalive => false,
                (Some(m), Some(p)) => p.matches(m),
                (None, Some(_)) => false,
                (_, None) => true,
            };
            if !eligible {
                return None;
            }
            if !self.shot.claim_for(chunk.at, chunk.msg.as_ref(), conn) {
                // Taken by another chunk, or this one is older than the
                // toxic: a later chunk may still claim it unless it fired.
                self.spent = self.shot.fired();
                return None;
            }
            self.armed = Some(chunk.at);
        }
        self.armed
    }
}

impl LinkToxics {
    fn new(stream: Stream, mut rx: watch::Receiver<ToxicList>) -> Self {
        let list = rx.borrow_and_update().clone();
        let mut t = LinkToxics {
            stream,
            conn: 0,
            rx,
            active: Vec::new(),
        };
        t.apply(&list);
        t
    }

    /// The same toxics, for connection number `conn`.
    fn on(mut self, conn: u64) -> Self {
        self.conn = conn;
        self
    }

    /// Take a change that arrived while we were not waiting; true = close.
    fn refresh(&mut self) -> bool {
        if !self.rx.has_changed().unwrap_or(false) {
            return false;
        }
        let list = self.rx.borrow_and_update().clone();
        self.apply(&list)
    }

    /// Wait for the next change and take it; true = close.
    async fn next_change(&mut self) -> bool {
        if self.rx.changed().await.is_err() {
            // The proxy is gone; its owner aborts this task.
            std::future::pending::<()>().await;
        }
        let list = self.rx.borrow_and_update().clone();
        self.apply(&list)
    }

    /// Rebuild the active list, keeping state by toxic id. Returns true when
    /// a timeout toxic in force was removed (the connection must close).
    fn apply(&mut self, list: &ToxicList) -> bool {
        let now = Instant::now();
        let mut old = std::mem::take(&mut self.active);
        // A matcher acts in both directions: on the request upstream, on
        // its reply downstream.
        let mine = |e: &&ToxicEntry| {
            e.stream == self.stream || matches!(e.kind, ToxicKind::MatchNext { .. })
        };
        for e in list.iter().filter(mine) {
            let prev = old
                .iter()
                .position(|a| a.id == e.id)
                .map(|i| old.swap_remove(i));
            let a = match prev {
                Some(a) if a.rev == e.rev => a,
                Some(a) => Active {
                    rev: e.rev,
                    on: roll(e.toxicity),
                    kind: e.kind,
                    deadline: timeout_deadline(e.kind, now),
                    ..a
                },
                None => Active {
                    id: e.id,
                    rev: e.rev,
                    on: roll(e.toxicity),
                    kind: e.kind,
                    sent: 0,
                    deadline: timeout_deadline(e.kind, now),
                    armed: None,
                    spent: false,
                    shot: e.shot.clone(),
                    pattern: e.pattern.clone(),
                    last_out: None,
                },
            };
            self.active.push(a);
        }
        old.iter()
            .any(|a| a.on && matches!(a.kind, ToxicKind::Timeout { .. }))
    }

    fn timeout_expiry(&self) -> Option<Instant> {
        self.active
            .iter()
            .filter(|a| a.on)
            .filter_map(|a| a.deadline)
            .min()
    }

    /// The source closed: wait out slow_close (if any), then end.
    async fn slow_close(&mut self) -> End {
        let start = Instant::now();
        loop {
            let delay = self
                .active
                .iter()
                .filter(|a| a.on)
                .filter_map(|a| match a.kind {
                    ToxicKind::SlowClose { delay } => Some(delay),
                    _ => None,
                })
                .max();
            let Some(delay) = delay else { return End::Eof };
            tokio::select! {
                () = sleep_until(start + ms(delay)) => return End::Eof,
                close = self.next_change() => if close { return End::Close },
            }
        }
    }

    fn plan(
        &mut self,
        chunk: &Chunk,
        len: usize,
        piece: u64,
        last_write: Option<Instant>,
        now: Instant,
    ) -> Plan {
        let mut when = now;
        let mut len = len;
        for a in self.active.iter_mut().filter(|a| a.on) {
            match a.kind {
                ToxicKind::Timeout { timeout } => {
                    if timeout > 0 {
                        a.deadline = Some(now + ms(timeout));
                    }
                    return Plan::Drop;
                }
                ToxicKind::ResetPeer { timeout } => {
                    let armed = *a.armed.get_or_insert(now);
                    return Plan::Reset(armed + ms(timeout));
                }
                ToxicKind::LimitData { bytes } => {
                    let left = bytes - a.sent;
                    if left <= 0 {
                        return Plan::Close;
                    }
                    len = len.min(usize::try_from(left).unwrap_or(usize::MAX));
                }
                ToxicKind::Latency { latency, jitter } => {
                    let d = latency + jitter_sample(chunk.seed ^ a.id, jitter);
                    when = when.max(chunk.at + ms(d));
                }
                ToxicKind::Bandwidth { rate } if rate > 0 => {
                    // At most 100 ms worth of data per write, as Toxiproxy.
                    len = len.min(usize::try_from(rate.saturating_mul(100)).unwrap_or(usize::MAX));
                }
                ToxicKind::Slicer {
                    average_size,
                    size_variation,
                    delay,
                } if average_size > 0 => {
                    len = len.min(slice_len(chunk.seed, piece, average_size, size_variation));
                    if let (true, Some(lw)) = (piece > 0, last_write) {
                        when = when.max(lw + Duration::from_micros(delay.max(0) as u64));
                    }
                }
                _ => {}
            }
        }
        // One-shots last: a chunk a toxic above drops or resets is not
        // "the next chunk" that went through.
        let (conn, up) = (self.conn, self.stream == Stream::Upstream);
        for a in self.active.iter_mut().filter(|a| a.on) {
            let kind = a.kind;
            match kind {
                ToxicKind::HoldNext { hold }
                | ToxicKind::MatchNext {
                    action: MatchAction::Hold,
                    hold,
                    ..
                } if up || !matches!(kind, ToxicKind::MatchNext { .. }) => {
                    if let Some(arrived) = a.one_shot(chunk, conn) {
                        when = when.max(hold_until(arrived, hold, now));
                    }
                }
                ToxicKind::ResetNext
                | ToxicKind::MatchNext {
                    action: MatchAction::ResetBefore,
                    ..
                } if (up || kind == ToxicKind::ResetNext) && a.one_shot(chunk, conn).is_some() => {
                    return Plan::Reset(now);
                }
                ToxicKind::MatchNext { action, .. } => {
                    if let Some(p) = on_reply(a, action, up, chunk, conn, now) {
                        return p;
                    }
                    if up && a.shot.frozen() {
                        when = when.max(now + HOLD_FOREVER);
                    }
                }
                _ => {}
            }
        }
        let mut close_after = false;
        for a in self.active.iter().filter(|a| a.on) {
            match a.kind {
                ToxicKind::Bandwidth { rate } if rate > 0 => {
                    let start = a.last_out.map_or(when, |t| when.max(t));
                    when = start + Duration::from_micros(len as u64 * 1000 / rate as u64);
                }
                ToxicKind::LimitData { bytes } => close_after |= a.sent + len as i64 >= bytes,
                _ => {}
            }
        }
        Plan::Write {
            when,
            len,
            close_after,
        }
    }

    fn wrote(&mut self, len: usize, at: Instant) {
        for a in self.active.iter_mut().filter(|a| a.on) {
            match a.kind {
                ToxicKind::LimitData { .. } => a.sent += len as i64,
                ToxicKind::Bandwidth { .. } => a.last_out = Some(at),
                _ => {}
            }
        }
        self.passed();
    }

    /// The current chunk went out (or was dropped): a one-shot holding it
    /// is done on this connection.
    fn passed(&mut self) {
        for a in &mut self.active {
            if a.kind.is_one_shot() && a.armed.is_some() {
                a.spent = true;
            }
        }
    }
}

/// When a held chunk that arrived `arrived` goes out; hold 0: when the
/// toxic is removed or updated.
fn hold_until(arrived: Instant, hold: i64, now: Instant) -> Instant {
    if hold > 0 {
        arrived + ms(hold)
    } else {
        now + HOLD_FOREVER
    }
}

/// `match_next` acting around the reply (`reset-after`,
/// `freeze-after-reply`): upstream the match is claimed and forwarded;
/// downstream its reply resets the connection, or freezes the proxy's
/// upstream before it is written (so nothing the client sends after
/// seeing it gets through).
fn on_reply(
    a: &mut Active,
    action: MatchAction,
    up: bool,
    chunk: &Chunk,
    conn: u64,
    now: Instant,
) -> Option<Plan> {
    if !matches!(
        action,
        MatchAction::ResetAfter | MatchAction::FreezeAfterReply
    ) {
        return None;
    }
    if up {
        a.one_shot(chunk, conn);
        return None;
    }
    if a.spent || !a.shot.is_target_reply(chunk.msg.as_ref(), conn) {
        return None;
    }
    a.spent = true;
    let head = &chunk.data[..chunk.data.len().min(64)];
    let line = head.split(|&c| c == b'\r').next().unwrap_or_default();
    *a.shot.reply.lock().unwrap_or_else(|p| p.into_inner()) =
        Some(String::from_utf8_lossy(line).into_owned());
    if action == MatchAction::ResetAfter {
        return Some(Plan::Reset(now));
    }
    a.shot.frozen.store(true, Ordering::Release);
    None
}

/// How far off "hold until removed" plans (re-planned on every change).
const HOLD_FOREVER: Duration = Duration::from_secs(24 * 3600);

fn roll(toxicity: f32) -> bool {
    toxicity >= 1.0 || rand::random::<f32>() < toxicity
}

fn timeout_deadline(kind: ToxicKind, now: Instant) -> Option<Instant> {
    match kind {
        ToxicKind::Timeout { timeout } if timeout > 0 => Some(now + ms(timeout)),
        _ => None,
    }
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}

fn mix(mut z: u64) -> u64 {
    // splitmix64: a cheap, well-spread hash for per-chunk random choices.
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform in [-jitter, jitter), fixed per (chunk, toxic).
fn jitter_sample(seed: u64, jitter: i64) -> i64 {
    if jitter <= 0 {
        return 0;
    }
    (mix(seed) % (2 * jitter as u64)) as i64 - jitter
}

/// average ± variation bytes (at least 1), fixed per (chunk, piece).
fn slice_len(seed: u64, piece: u64, average: i64, variation: i64) -> usize {
    let var = variation.clamp(0, average - 1);
    let off =
        (mix(seed ^ piece.wrapping_mul(0x2545_f491_4f6c_dd1d)) % (2 * var as u64 + 1)) as i64 - var;
    (average + off).max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range_and_is_stable() {
        for seed in 0..1000u64 {
            let j = jitter_sample(seed, 7);
            assert!((-7..7).contains(&j));
            assert_eq!(j, jitter_sample(seed, 7));
        }
        assert_eq!(jitter_sample(3, 0), 0);
    }

    #[test]
    fn slices_are_within_variation() {
        for seed in 0..1000u64 {
            let n = slice_len(seed, seed % 5, 10, 3);
            assert!((7..=13).contains(&n), "{n}");
        }
        // variation larger than the average still gives positive sizes
        assert!(slice_len(1, 0, 2, 50) >= 1);
    }

    fn entry(kind: ToxicKind) -> ToxicEntry {
        ToxicEntry {
            id: 1,
            rev: 0,
            name: "t".into(),
            stream: Stream::Downstream,
            toxicity: 1.0,
            kind,
            pattern: None,
            shot: Shot::new(),
        }
    }

    /// One connection's downstream toxics, following `rx`.
    fn conn(rx: &watch::Receiver<ToxicList>) -> LinkToxics {
        LinkToxics::new(Stream::Downstream, rx.clone())
    }

    fn chunk(at: Instant) -> Chunk {
        Chunk {
            data: Bytes::from_static(b"+OK\r\n"),
            at,
            seed: 0,
            msg: None,
        }
    }

    /// When the plan writes the chunk, or None for a reset.
    fn planned(t: &mut LinkToxics, c: &Chunk, now: Instant) -> Option<Instant> {
        match t.plan(c, c.data.len(), 0, None, now) {
            Plan::Write { when, .. } => Some(when),
            Plan::Reset(_) => None,
            Plan::Drop | Plan::Close => panic!("a one-shot neither drops nor closes"),
        }
    }

    #[test]
    fn hold_next_holds_one_chunk_on_one_connection() {
        let before = Instant::now();
        let e = entry(ToxicKind::HoldNext { hold: 500 });
        let shot = e.shot.clone();
        let (tx, rx) = watch::channel(Arc::new(vec![e]));
        let (mut a, mut b) = (conn(&rx), conn(&rx));
        let now = Instant::now();
        // A chunk read before the toxic was added passes and fires nothing.
        assert_eq!(planned(&mut a, &chunk(before), now), Some(now));
        assert!(!shot.fired());
        let first = chunk(now);
        assert_eq!(planned(&mut a, &first, now), Some(now + ms(500)));
        assert!(shot.fired());
        // Re-planned (a change elsewhere), the same chunk stays held.
        assert_eq!(planned(&mut a, &first, now), Some(now + ms(500)));
        // Another connection's chunk passes: one shot per proxy.
        assert_eq!(planned(&mut b, &chunk(now), now), Some(now));
        // Once the held chunk went out, later chunks pass on its connection.
        a.wrote(first.data.len(), now + ms(500));
        let later = now + ms(600);
        assert_eq!(planned(&mut a, &chunk(later), later), Some(later));
        drop(tx);
    }

    #[test]
    fn hold_zero_waits_for_an_update_or_removal() {
        let e = entry(ToxicKind::HoldNext { hold: 0 });
        let (tx, rx) = watch::channel(Arc::new(vec![e.clone()]));
        let mut a = conn(&rx);
        let now = Instant::now();
        let c = chunk(now);
        let held = planned(&mut a, &c, now).unwrap();
        assert!(held >= now + HOLD_FOREVER, "held until removed");
        // Updated to 200 ms: due 200 ms after the chunk arrived.
        let updated = ToxicEntry {
            rev: 1,
            kind: ToxicKind::HoldNext { hold: 200 },
            ..e
        };
        tx.send_replace(Arc::new(vec![updated]));
        assert!(!a.refresh());
        assert_eq!(planned(&mut a, &c, now), Some(now + ms(200)));
        // Removed: goes out at once.
        tx.send_replace(Arc::new(Vec::new()));
        assert!(!a.refresh());
        assert_eq!(planned(&mut a, &c, now), Some(now));
    }

    #[test]
    fn reset_next_resets_one_connection_once() {
        let e = entry(ToxicKind::ResetNext);
        let shot = e.shot.clone();
        let (_tx, rx) = watch::channel(Arc::new(vec![e]));
        let (mut a, mut b) = (conn(&rx), conn(&rx));
        let now = Instant::now();
        assert_eq!(planned(&mut a, &chunk(now), now), None, "reset");
        assert!(shot.fired());
        assert_eq!(planned(&mut b, &chunk(now), now), Some(now));
    }

    fn msg(name: &str, seq: u64, keepalive: bool) -> Option<Msg> {
        Some(super::super::frames::paired_msg(name, seq, keepalive))
    }

    fn framed(at: Instant, data: &'static [u8], m: Option<Msg>) -> Chunk {
        Chunk {
            data: Bytes::from_static(data),
            at,
            seed: 0,
            msg: m,
        }
    }

    /// A `match_next` on the upstream, with its pattern.
    fn matcher(action: MatchAction, command: &str, window: i64) -> ToxicEntry {
        let kind = ToxicKind::MatchNext {
            action,
            hold: 0,
            window,
        };
        let attrs = serde_json::json!({ "command": command });
        ToxicEntry {
            stream: Stream::Upstream,
            pattern: Some(Arc::new(
                Pattern::from_attrs(attrs.as_object().unwrap()).unwrap(),
            )),
            shot: Shot::for_kind(&kind),
            kind,
            ..entry(ToxicKind::Noop)
        }
    }

    fn links(e: ToxicEntry, conn: u64) -> (LinkToxics, LinkToxics, watch::Sender<ToxicList>) {
        let (tx, rx) = watch::channel(Arc::new(vec![e]));
        let up = LinkToxics::new(Stream::Upstream, rx.clone()).on(conn);
        let down = LinkToxics::new(Stream::Downstream, rx).on(conn);
        (up, down, tx)
    }

    #[test]
    fn one_shots_pass_over_pings_and_record_what_they_struck() {
        let e = ToxicEntry {
            stream: Stream::Upstream,
            ..entry(ToxicKind::ResetNext)
        };
        let shot = e.shot.clone();
        let (mut up, _, _tx) = links(e, 1);
        let now = Instant::now();
        let ping = framed(now, b"PING\r\n", msg("PING", 1, true));
        assert_eq!(planned(&mut up, &ping, now), Some(now), "a ping passes");
        assert!(!shot.fired());
        let del = framed(now, b"DEL k\r\n", msg("DEL", 2, false));
        assert_eq!(planned(&mut up, &del, now), None, "reset");
        assert_eq!(shot.struck().as_deref(), Some("DEL"));
        // Unframed chunks still claim plain one-shots, with nothing struck.
        let e = ToxicEntry {
            stream: Stream::Upstream,
            ..entry(ToxicKind::ResetNext)
        };
        let shot = e.shot.clone();
        let (mut up, _, _tx) = links(e, 1);
        let now = Instant::now();
        assert_eq!(planned(&mut up, &chunk(now), now), None);
        assert_eq!((shot.fired(), shot.struck()), (true, None));
    }

    #[test]
    fn a_matcher_holds_or_resets_only_what_it_matches() {
        let e = matcher(MatchAction::Hold, "DEL", 0);
        let shot = e.shot.clone();
        let (mut up, _, _tx) = links(e, 1);
        let (mut up2, _, _tx2) = links(matcher(MatchAction::ResetBefore, "DEL", 0), 1);
        let now = Instant::now();
        let get = framed(now, b"GET k\r\n", msg("GET", 1, false));
        let del = framed(now, b"DEL k\r\n", msg("DEL", 2, false));
        assert_eq!(planned(&mut up, &chunk(now), now), Some(now), "unframed");
        assert_eq!(planned(&mut up, &get, now), Some(now));
        assert!(planned(&mut up, &del, now).unwrap() >= now + HOLD_FOREVER);
        assert_eq!(shot.struck().as_deref(), Some("DEL"));
        assert_eq!(planned(&mut up2, &get, now), Some(now));
        assert_eq!(
            planned(&mut up2, &del, now),
            None,
            "reset before forwarding"
        );
    }

    #[test]
    fn a_matcher_window_expires() {
        let e = matcher(MatchAction::ResetBefore, "DEL", 50);
        let shot = e.shot.clone();
        let (mut up, _, _tx) = links(e, 1);
        let late = Instant::now() + ms(100);
        let del = framed(late, b"DEL k\r\n", msg("DEL", 1, false));
        assert_eq!(planned(&mut up, &del, late), Some(late));
        assert!(!shot.fired());
    }

    #[test]
    fn reset_after_strikes_the_reply_of_the_matched_request_only() {
        let e = matcher(MatchAction::ResetAfter, "SETNX", 0);
        let shot = e.shot.clone();
        let (tx, rx) = watch::channel(Arc::new(vec![e]));
        let mut up = LinkToxics::new(Stream::Upstream, rx.clone()).on(1);
        let mut down = LinkToxics::new(Stream::Downstream, rx.clone()).on(1);
        let mut other_down = LinkToxics::new(Stream::Downstream, rx).on(2);
        let now = Instant::now();
        let req = framed(now, b"SETNX k v\r\n", msg("SETNX", 3, false));
        assert_eq!(planned(&mut up, &req, now), Some(now), "forwarded");
        assert!(shot.fired());
        let reply = framed(now, b":1\r\n", msg("SETNX", 3, false));
        let earlier = framed(now, b"+OK\r\n", msg("GET", 2, false));
        assert_eq!(planned(&mut down, &earlier, now), Some(now));
        assert_eq!(
            planned(&mut other_down, &reply, now),
            Some(now),
            "other link"
        );
        assert_eq!(planned(&mut down, &reply, now), None, "the reply is lost");
        assert_eq!(shot.reply().as_deref(), Some(":1"));
        drop(tx);
    }

    #[test]
    fn freeze_after_reply_holds_every_later_request_of_the_proxy() {
        let e = matcher(MatchAction::FreezeAfterReply, "SETNX", 0);
        let shot = e.shot.clone();
        let (tx, rx) = watch::channel(Arc::new(vec![e]));
        let mut up = LinkToxics::new(Stream::Upstream, rx.clone()).on(1);
        let mut down = LinkToxics::new(Stream::Downstream, rx.clone()).on(1);
        let mut other_up = LinkToxics::new(Stream::Upstream, rx).on(2);
        let now = Instant::now();
        let req = framed(now, b"SETNX k v\r\n", msg("SETNX", 1, false));
        assert_eq!(planned(&mut up, &req, now), Some(now));
        up.wrote(req.data.len(), now);
        assert!(!shot.frozen());
        let reply = framed(now, b":1\r\n", msg("SETNX", 1, false));
        assert_eq!(
            planned(&mut down, &reply, now),
            Some(now),
            "the reply passes"
        );
        assert!(shot.frozen(), "frozen before the reply is written");
        let next = framed(now, b"PEXPIRE k 10\r\n", msg("PEXPIRE", 2, false));
        assert!(planned(&mut up, &next, now).unwrap() >= now + HOLD_FOREVER);
        let ping = framed(now, b"PING\r\n", msg("PING", 1, true));
        assert!(planned(&mut other_up, &ping, now).unwrap() >= now + HOLD_FOREVER);
        // Taken back (after the nemesis cut the connections): nothing held.
        tx.send_replace(Arc::new(Vec::new()));
        assert!(!up.refresh());
        assert_eq!(planned(&mut up, &next, now), Some(now));
    }

    #[test]
    fn racing_claims_fire_exactly_once() {
        for _ in 0..50 {
            let shot = Shot::new();
            let at = Instant::now();
            let wins: usize = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|_| s.spawn(|| usize::from(shot.claim(at))))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum()
            });
            assert_eq!(wins, 1);
        }
    }

    #[test]
    fn toxicity_bounds() {
        assert!(roll(1.0));
        assert!(!roll(0.0));
    }
}
