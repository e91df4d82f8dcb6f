//! Message framing for the protocol-aware one-shots: which protocol a
//! proxied connection speaks (sniffed from its first upstream bytes),
//! where each request and reply ends, what each is, and which request a
//! reply answers. Hand-written (no maintained Rust crate does incremental
//! RESP framing for both directions without allocating whole values).
//!
//! - Redis: RESP2 arrays of bulk strings and inline commands upstream;
//!   every RESP2 and RESP3 reply type downstream (simple, error, integer,
//!   bulk, arrays, null, double, boolean, blob error, verbatim, big
//!   number, map, set, push). Replies pair with requests in order. Not
//!   paired: RESP3 pushes (`>`), and everything on a connection after
//!   `SUBSCRIBE`, `PSUBSCRIBE`, `SSUBSCRIBE`, `MONITOR` or `CLIENT REPLY`
//!   (replies stop being one per request); RESP3 attributes and streamed
//!   strings end the framing of that connection.
//! - ZooKeeper: a 4-byte length, then (after the connect request) the xid
//!   and the op type; replies pair by xid; xid -2 is a ping, -1 a watch
//!   event (unpaired).
//! - Anything else (TLS, HTTP/2 as etcd's gRPC, PostgreSQL, MariaDB, a
//!   parse error, a message over 1 MiB): opaque from then on; chunks
//!   pass as read, without labels.
//!
//! A [`Framer`] per direction buffers a message until it is complete and
//! then hands it on as one chunk, so a toxic acting on a chunk acts on
//! exactly one message. Bytes are never changed or reordered.

use super::model::Stream;
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// A message that keeps waiting for its end past this is not framed:
/// the connection turns opaque.
const MAX_MESSAGE: usize = 1 << 20;

/// What the proxy knows of one message (a chunk on a framed connection).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Msg {
    /// Redis: the command name, upper case (`SET`, `EVALSHA`); ZooKeeper:
    /// the op name (`create`, `delete`, `ping`). A reply carries its
    /// request's name.
    pub name: Arc<str>,
    /// The request's number on its connection (a reply: its request's).
    pub seq: u64,
    /// A ping or keep-alive (or its reply): one-shots pass over it.
    pub keepalive: bool,
    /// A reply paired with its request; false for pushes, watch events and
    /// everything on a connection whose replies stopped pairing.
    pub paired: bool,
    /// `EVAL`, `SCRIPT LOAD`: the script; `EVALSHA`: the script the proxy
    /// saw loaded earlier with that SHA1, if it did.
    pub script: Option<Bytes>,
    /// `EVALSHA`: its SHA1; `EVAL`, `SCRIPT LOAD`: the script's.
    pub sha1: Option<String>,
}

/// The protocol of a connection, as far as the proxy can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proto {
    /// Nothing read yet.
    Unknown,
    Redis,
    ZooKeeper,
    /// Not framed (unknown or unreadable protocol, or framing lost).
    Opaque,
}

/// State both directions of one connection share.
#[derive(Debug)]
pub(crate) struct ConnFrames {
    pub proto: Proto,
    next_seq: u64,
    /// Redis: the requests waiting for their replies, in order.
    waiting: VecDeque<Msg>,
    /// ZooKeeper: requests by xid; the connect request pairs with the
    /// first reply.
    by_xid: HashMap<i32, Msg>,
    connect_up: bool,
    connect_down: bool,
    /// Redis: replies no longer pair one to one.
    unpaired: bool,
}

/// SHA1 → script, for the scripts a proxy saw (`EVAL`, `SCRIPT LOAD`) on
/// any of its connections.
pub(crate) type Scripts = Arc<Mutex<HashMap<String, Bytes>>>;

impl ConnFrames {
    pub fn new() -> Arc<Mutex<ConnFrames>> {
        Arc::new(Mutex::new(ConnFrames {
            proto: Proto::Unknown,
            next_seq: 0,
            waiting: VecDeque::new(),
            by_xid: HashMap::new(),
            connect_up: false,
            connect_down: false,
            unpaired: false,
        }))
    }
}

/// One direction's framer.
pub(crate) struct Framer {
    dir: Stream,
    buf: BytesMut,
    conn: Arc<Mutex<ConnFrames>>,
    scripts: Scripts,
}

/// Parsing needs more bytes, or the bytes are not this protocol.
enum Parse<T> {
    Done(usize, T),
    More,
    Bad,
}

impl Framer {
    pub fn new(dir: Stream, conn: Arc<Mutex<ConnFrames>>, scripts: Scripts) -> Framer {
        Framer {
            dir,
            buf: BytesMut::new(),
            conn,
            scripts,
        }
    }

    /// Take bytes just read; returns the pieces to pass on now, each a
    /// whole message with its description, or raw bytes (None) on an
    /// opaque connection.
    pub fn push(&mut self, data: Bytes) -> Vec<(Bytes, Option<Msg>)> {
        let shared = self.conn.clone();
        let mut conn = shared.lock().unwrap_or_else(|p| p.into_inner());
        if conn.proto == Proto::Opaque && self.buf.is_empty() {
            return vec![(data, None)];
        }
        self.buf.extend_from_slice(&data);
        let mut out = Vec::new();
        loop {
            if self.buf.is_empty() {
                break;
            }
            if conn.proto == Proto::Unknown {
                conn.proto = match self.dir {
                    Stream::Upstream => match sniff(&self.buf) {
                        Some(p) => p,
                        None => break,
                    },
                    // The server spoke first: neither Redis nor ZooKeeper.
                    Stream::Downstream => Proto::Opaque,
                };
            }
            let step = match conn.proto {
                Proto::Redis => self.redis(&mut conn),
                Proto::ZooKeeper => self.zookeeper(&mut conn),
                Proto::Unknown | Proto::Opaque => Parse::Bad,
            };
            match step {
                Parse::Done(n, msg) => out.push((self.buf.split_to(n).freeze(), Some(msg))),
                Parse::More if self.buf.len() <= MAX_MESSAGE => break,
                Parse::More | Parse::Bad => {
                    conn.proto = Proto::Opaque;
                    out.push((self.buf.split().freeze(), None));
                }
            }
        }
        out
    }

    #[cfg(test)]
    pub fn push_slice(&mut self, data: &[u8]) -> Vec<(Bytes, Option<Msg>)> {
        self.push(Bytes::copy_from_slice(data))
    }

    /// The direction this framer reads.
    pub fn dir(&self) -> Stream {
        self.dir
    }

    /// The connection's protocol as far as it is known.
    pub fn proto(&self) -> Proto {
        self.conn.lock().unwrap_or_else(|p| p.into_inner()).proto
    }

    /// What is left at the end of the stream, as it is.
    pub fn rest(&mut self) -> Option<Bytes> {
        (!self.buf.is_empty()).then(|| self.buf.split().freeze())
    }

    fn redis(&mut self, conn: &mut ConnFrames) -> Parse<Msg> {
        match self.dir {
            Stream::Upstream => {
                let (n, args) = match redis_request(&self.buf) {
                    Parse::Done(n, a) => (n, a),
                    Parse::More => return Parse::More,
                    Parse::Bad => return Parse::Bad,
                };
                let msg = self.request_msg(conn, &args);
                let name = msg.name.clone();
                // Redis answers nothing to an empty inline line.
                if !name.is_empty() {
                    conn.waiting.push_back(msg.clone());
                }
                let sub = args.get(1).map(|a| a.to_ascii_uppercase());
                if matches!(
                    &*name,
                    "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE" | "MONITOR"
                ) || (&*name == "CLIENT" && sub.as_deref() == Some(b"REPLY".as_slice()))
                {
                    conn.unpaired = true;
                }
                Parse::Done(n, msg)
            }
            Stream::Downstream => {
                let n = match resp_value(&self.buf, 0, 0) {
                    Parse::Done(n, ()) => n,
                    Parse::More => return Parse::More,
                    Parse::Bad => return Parse::Bad,
                };
                let push = self.buf[0] == b'>';
                let req = if push || conn.unpaired {
                    None
                } else {
                    conn.waiting.pop_front()
                };
                if req.is_none() && !push {
                    conn.unpaired = true;
                }
                Parse::Done(n, reply_msg(req, if push { "push" } else { "unpaired" }))
            }
        }
    }

    /// A request's description; remembers the scripts it carries.
    fn request_msg(&self, conn: &mut ConnFrames, args: &[Bytes]) -> Msg {
        let name = args
            .first()
            .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
            .unwrap_or_default();
        let arg1 = args.get(1).cloned();
        let is_load = name == "SCRIPT"
            && arg1
                .as_ref()
                .is_some_and(|a| a.eq_ignore_ascii_case(b"LOAD"));
        let (mut script, mut sha1) = (None, None);
        if name == "EVAL" || name == "EVAL_RO" || is_load {
            let s = if is_load { args.get(2).cloned() } else { arg1 };
            if let Some(s) = s {
                let h = sha1_smol::Sha1::from(&s[..]).digest().to_string();
                let mut scripts = self.scripts.lock().unwrap_or_else(|p| p.into_inner());
                if scripts.len() < 4096 {
                    scripts.insert(h.clone(), s.clone());
                }
                (script, sha1) = (Some(s), Some(h));
            }
        } else if name == "EVALSHA" || name == "EVALSHA_RO" {
            if let Some(h) = arg1 {
                let h = String::from_utf8_lossy(&h).to_ascii_lowercase();
                let scripts = self.scripts.lock().unwrap_or_else(|p| p.into_inner());
                script = scripts.get(&h).cloned();
                sha1 = Some(h);
            }
        }
        conn.next_seq += 1;
        Msg {
            keepalive: name == "PING",
            name: name.into(),
            seq: conn.next_seq,
            paired: true,
            script,
            sha1,
        }
    }

    fn zookeeper(&mut self, conn: &mut ConnFrames) -> Parse<Msg> {
        let b = &self.buf;
        if b.len() < 4 {
            return Parse::More;
        }
        let len = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let Ok(len) = usize::try_from(len) else {
            return Parse::Bad;
        };
        if len > MAX_MESSAGE {
            return Parse::Bad;
        }
        let n = 4 + len;
        if b.len() < n {
            return Parse::More;
        }
        let int = |at: usize| {
            (n >= at + 4).then(|| i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
        };
        let msg = match self.dir {
            Stream::Upstream if !conn.connect_up => {
                conn.connect_up = true;
                conn.next_seq += 1;
                // Session traffic, like pings: one-shots pass over it.
                let m = paired_msg("connect", conn.next_seq, true);
                conn.by_xid.insert(i32::MIN, m.clone());
                m
            }
            Stream::Upstream => {
                let (Some(xid), Some(op)) = (int(4), int(8)) else {
                    return Parse::Bad;
                };
                conn.next_seq += 1;
                let m = paired_msg(zk_op(op), conn.next_seq, xid == -2 || op == 11);
                conn.by_xid.insert(xid, m.clone());
                m
            }
            Stream::Downstream => {
                let xid = if conn.connect_down {
                    match int(4) {
                        Some(x) => x,
                        None => return Parse::Bad,
                    }
                } else {
                    conn.connect_down = true;
                    i32::MIN
                };
                let req = if xid == -1 {
                    None
                } else {
                    conn.by_xid.remove(&xid)
                };
                reply_msg(req, "watch-event")
            }
        };
        Parse::Done(n, msg)
    }
}

/// A message paired with its request or reply (no script, no SHA1).
pub(super) fn paired_msg(name: &str, seq: u64, keepalive: bool) -> Msg {
    Msg {
        name: name.into(),
        seq,
        keepalive,
        paired: true,
        script: None,
        sha1: None,
    }
}

/// A reply: its request's description, or an unpaired message.
fn reply_msg(req: Option<Msg>, unpaired: &str) -> Msg {
    match req {
        Some(m) => Msg { script: None, ..m },
        None => Msg {
            name: unpaired.into(),
            seq: 0,
            keepalive: false,
            paired: false,
            script: None,
            sha1: None,
        },
    }
}

/// The protocol a connection's first upstream bytes speak; None: too few
/// bytes to tell.
fn sniff(b: &[u8]) -> Option<Proto> {
    match b[0] {
        b'*' => Some(Proto::Redis),
        c if c.is_ascii_alphabetic() => {
            // An inline Redis command, unless the first line is HTTP's.
            let line_end = b.iter().position(|&c| c == b'\n');
            match line_end {
                None if b.len() < 1024 => None,
                None => Some(Proto::Opaque),
                Some(e) => {
                    let http = b[..e].windows(6).any(|w| w == b" HTTP/");
                    Some(if http { Proto::Opaque } else { Proto::Redis })
                }
            }
        }
        0 if b.len() < 8 => None,
        // ZooKeeper's connect request: its length, then protocol version 0.
        0 if b[4..8] == [0, 0, 0, 0] => Some(Proto::ZooKeeper),
        _ => Some(Proto::Opaque),
    }
}

/// ZooKeeper's op codes and their names (the names a reply, a `struck`
/// and a `strike-command` on ZooKeeper links use).
pub const ZOOKEEPER_OPS: &[(i32, &str)] = &[
    (0, "notification"),
    (1, "create"),
    (2, "delete"),
    (3, "exists"),
    (4, "getData"),
    (5, "setData"),
    (6, "getACL"),
    (7, "setACL"),
    (8, "getChildren"),
    (9, "sync"),
    (11, "ping"),
    (12, "getChildren2"),
    (13, "check"),
    (14, "multi"),
    (15, "create2"),
    (16, "reconfig"),
    (17, "checkWatches"),
    (18, "removeWatches"),
    (19, "createContainer"),
    (20, "deleteContainer"),
    (21, "createTTL"),
    (22, "multiRead"),
    (100, "auth"),
    (101, "setWatches"),
    (102, "sasl"),
    (103, "getEphemerals"),
    (104, "getAllChildrenNumber"),
    (105, "setWatches2"),
    (106, "addWatch"),
    (107, "whoAmI"),
    (-10, "createSession"),
    (-11, "closeSession"),
];

/// ZooKeeper's op code, by name (`unknown` for a code not in the table).
fn zk_op(op: i32) -> &'static str {
    ZOOKEEPER_OPS
        .iter()
        .find(|(c, _)| *c == op)
        .map_or("unknown", |(_, n)| n)
}

/// The line starting at `at` (without its CRLF) and where the next begins.
fn line(b: &[u8], at: usize) -> Parse<(usize, usize)> {
    match b[at..].windows(2).position(|w| w == b"\r\n") {
        Some(i) => Parse::Done(at + i + 2, (at, at + i)),
        None if b.len() - at > 64 * 1024 => Parse::Bad,
        None => Parse::More,
    }
}

fn number(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// A request: a RESP array of bulk strings, or an inline command line.
/// Returns its length and its arguments.
fn redis_request(b: &[u8]) -> Parse<Vec<Bytes>> {
    if b[0] != b'*' {
        let Some(e) = b.iter().position(|&c| c == b'\n') else {
            return if b.len() > 64 * 1024 {
                Parse::Bad
            } else {
                Parse::More
            };
        };
        let text = &b[..e];
        let args = text
            .split(|c| c.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .take(3)
            .map(Bytes::copy_from_slice)
            .collect();
        return Parse::Done(e + 1, args);
    }
    let (mut at, (s, e)) = match line(b, 0) {
        Parse::Done(n, r) => (n, r),
        Parse::More => return Parse::More,
        Parse::Bad => return Parse::Bad,
    };
    let Some(count) = number(&b[s + 1..e]).filter(|c| (0..=1 << 20).contains(c)) else {
        return Parse::Bad;
    };
    let mut args = Vec::new();
    for i in 0..count {
        if at >= b.len() {
            return Parse::More;
        }
        if b[at] != b'$' {
            return Parse::Bad;
        }
        let (body, (s, e)) = match line(b, at) {
            Parse::Done(n, r) => (n, r),
            Parse::More => return Parse::More,
            Parse::Bad => return Parse::Bad,
        };
        let Some(len) = number(&b[s + 1..e]).and_then(|l| usize::try_from(l).ok()) else {
            return Parse::Bad;
        };
        if b.len() < body + len + 2 {
            return Parse::More;
        }
        if &b[body + len..body + len + 2] != b"\r\n" {
            return Parse::Bad;
        }
        if i < 3 {
            args.push(Bytes::copy_from_slice(&b[body..body + len]));
        }
        at = body + len + 2;
    }
    Parse::Done(at, args)
}

/// One RESP2/RESP3 value starting at `at`; returns where it ends.
fn resp_value(b: &[u8], at: usize, depth: u32) -> Parse<()> {
    if at >= b.len() {
        return Parse::More;
    }
    if depth > 64 {
        return Parse::Bad;
    }
    let (next, (s, e)) = match line(b, at) {
        Parse::Done(n, r) => (n, r),
        Parse::More => return Parse::More,
        Parse::Bad => return Parse::Bad,
    };
    let head = &b[s + 1..e];
    match b[at] {
        b'+' | b'-' | b':' | b',' | b'(' | b'#' | b'_' => Parse::Done(next, ()),
        b'$' | b'!' | b'=' => {
            let Some(len) = number(head) else {
                return Parse::Bad;
            };
            if len < 0 {
                return Parse::Done(next, ());
            }
            let len = len as usize;
            if b.len() < next + len + 2 {
                return Parse::More;
            }
            if &b[next + len..next + len + 2] != b"\r\n" {
                return Parse::Bad;
            }
            Parse::Done(next + len + 2, ())
        }
        b'*' | b'~' | b'>' | b'%' => {
            let Some(n) = number(head) else {
                return Parse::Bad;
            };
            let n = if b[at] == b'%' {
                n.saturating_mul(2)
            } else {
                n
            };
            let mut pos = next;
            for _ in 0..n.max(0) {
                pos = match resp_value(b, pos, depth + 1) {
                    Parse::Done(p, ()) => p,
                    other => return other,
                };
            }
            Parse::Done(pos, ())
        }
        _ => Parse::Bad,
    }
}

#[cfg(test)]
#[path = "frames_tests.rs"]
mod tests;
