//! The async storage client a worker uses (through its Toxiproxy proxy).
//!
//! One request in flight per connection. Any failure after the request may
//! have left the client (timeout, I/O error, connection closed, garbled
//! answer) is indeterminate: the write may or may not have landed, and the
//! worker records `info`. After such a failure the connection is dropped and
//! the next call reconnects, so a late answer to an abandoned request can
//! never be mistaken for the answer to a new one. A failure to connect is
//! definite: nothing was sent.

use super::protocol::{Request, Response, Status};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Client settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Deadline for one call (connecting included): past it the call is
    /// indeterminate ([`CallError::Timeout`]) or, while connecting, a
    /// definite [`CallError::Connect`].
    pub timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeout: Duration::from_secs(5),
        }
    }
}

/// A definite answer from the storage.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Applied. `value` is what a read returned (`null` for a write or an
    /// absent key); `seq` the storage's number for the request; `version`
    /// the key's version after it (writes applied to the key so far).
    Ok {
        value: Value,
        seq: u64,
        version: u64,
    },
    /// Refused by the fence rule; nothing was read or written.
    Rejected { seq: u64, highest: u64 },
    /// A conditional write refused: the key's version is `version`, not
    /// the one the write expected. Nothing was written.
    Conflict { seq: u64, version: u64 },
}

impl Reply {
    pub fn seq(&self) -> u64 {
        match self {
            Reply::Ok { seq, .. } | Reply::Rejected { seq, .. } | Reply::Conflict { seq, .. } => {
                *seq
            }
        }
    }
}

/// A call that got no definite answer, or a definite refusal for a reason
/// other than the fence rule.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Could not connect: nothing was sent (definite failure).
    #[error("cannot connect to the storage at {addr}: {error}")]
    Connect {
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// The server refused the request as malformed: nothing was applied
    /// (definite failure; a bug in the caller).
    #[error("the storage refused the request: {0}")]
    BadRequest(String),
    /// The backend refused the request and applied nothing (definite; a
    /// database error rolls its transaction back).
    #[error("the storage refused the request: {0}")]
    Refused(String),
    /// No answer within the deadline (indeterminate).
    #[error("no answer from the storage within {0:?}")]
    Timeout(Duration),
    /// The connection failed mid-call (indeterminate).
    #[error("storage connection failed: {0}")]
    Io(std::io::Error),
    /// The connection closed before the answer (indeterminate).
    #[error("the storage closed the connection before answering")]
    Closed,
    /// An answer that does not fit the request (indeterminate).
    #[error("unexpected answer from the storage: {0}")]
    Protocol(String),
}

impl CallError {
    /// True when the request may have been applied: record `info`.
    pub fn is_indeterminate(&self) -> bool {
        !matches!(
            self,
            CallError::Connect { .. } | CallError::BadRequest(_) | CallError::Refused(_)
        )
    }

    /// A short error text for the history's `error` field.
    pub fn history_error(&self) -> String {
        match self {
            CallError::Connect { error, .. } => format!("connect: {error}"),
            CallError::BadRequest(m) => format!("bad-request: {m}"),
            CallError::Refused(m) => format!("refused: {m}"),
            CallError::Timeout(_) => "timeout".into(),
            CallError::Io(e) => format!("io: {e}"),
            CallError::Closed => "connection closed".into(),
            CallError::Protocol(m) => format!("protocol: {m}"),
        }
    }
}

struct Conn {
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
}

/// A connection to the storage (or to a proxy in front of it).
pub struct StorageClient {
    addr: SocketAddr,
    config: ClientConfig,
    conn: Option<Conn>,
    next_id: u64,
    line: Vec<u8>,
}

impl StorageClient {
    /// Connect with the default settings (5 s timeout).
    pub async fn connect(addr: SocketAddr) -> Result<StorageClient, CallError> {
        StorageClient::connect_with(addr, ClientConfig::default()).await
    }

    /// Connect now; later calls reconnect by themselves after a failure.
    pub async fn connect_with(
        addr: SocketAddr,
        config: ClientConfig,
    ) -> Result<StorageClient, CallError> {
        let mut client = StorageClient {
            addr,
            config,
            conn: None,
            next_id: 1,
            line: Vec::with_capacity(256),
        };
        let conn = tokio::time::timeout(config.timeout, dial(addr))
            .await
            .map_err(|_| timed_out_connecting(addr))??;
        client.conn = Some(conn);
        Ok(client)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn config(&self) -> ClientConfig {
        self.config
    }

    /// Whether a connection is open (false after an indeterminate failure,
    /// until the next call reconnects).
    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Read the whole value of `key`, optionally fenced.
    pub async fn read(&mut self, key: &str, fence: Option<u64>) -> Result<Reply, CallError> {
        self.call(Request::read(key, fence)).await
    }

    /// Replace the whole value of `key` if its version is still `version`.
    pub async fn write_if(
        &mut self,
        key: &str,
        value: Value,
        fence: Option<u64>,
        version: u64,
    ) -> Result<Reply, CallError> {
        self.call(Request::write_if(key, value, fence, version))
            .await
    }

    /// Replace the whole value of `key`, optionally fenced.
    pub async fn write(
        &mut self,
        key: &str,
        value: Value,
        fence: Option<u64>,
    ) -> Result<Reply, CallError> {
        self.call(Request::write(key, value, fence)).await
    }

    /// Send one request and wait for its answer, within the deadline.
    pub async fn call(&mut self, mut req: Request) -> Result<Reply, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        req.id = Some(id);
        let mut out = serde_json::to_vec(&req).expect("a request always serialises");
        out.push(b'\n');
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        if self.conn.is_none() {
            let conn = tokio::time::timeout_at(deadline, dial(self.addr))
                .await
                .map_err(|_| timed_out_connecting(self.addr))??;
            self.conn = Some(conn);
        }
        let result = match tokio::time::timeout_at(deadline, self.exchange(&out)).await {
            Ok(r) => r.and_then(|resp| to_reply(resp, id)),
            Err(_) => Err(CallError::Timeout(self.config.timeout)),
        };
        if matches!(&result, Err(e) if e.is_indeterminate()) {
            // The stream may still carry this request's late answer.
            self.conn = None;
        }
        result
    }

    async fn exchange(&mut self, out: &[u8]) -> Result<Response, CallError> {
        let conn = self.conn.as_mut().expect("connected before exchange");
        conn.wr.write_all(out).await.map_err(CallError::Io)?;
        self.line.clear();
        let n = conn
            .rd
            .read_until(b'\n', &mut self.line)
            .await
            .map_err(CallError::Io)?;
        if n == 0 || self.line.last() != Some(&b'\n') {
            return Err(CallError::Closed);
        }
        serde_json::from_slice(&self.line).map_err(|e| {
            let text = String::from_utf8_lossy(&self.line);
            CallError::Protocol(format!("{e} in {:?}", text.trim_end()))
        })
    }
}

async fn dial(addr: SocketAddr) -> Result<Conn, CallError> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|error| CallError::Connect { addr, error })?;
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    Ok(Conn {
        rd: BufReader::new(rd),
        wr,
    })
}

fn timed_out_connecting(addr: SocketAddr) -> CallError {
    let error = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
    CallError::Connect { addr, error }
}

fn to_reply(resp: Response, id: u64) -> Result<Reply, CallError> {
    if resp.id != Some(id) {
        return Err(CallError::Protocol(format!(
            "answer for request {:?} while waiting for {id}",
            resp.id
        )));
    }
    let missing = |what: &str| CallError::Protocol(format!("{what} missing in the answer"));
    match resp.status {
        Status::Ok => Ok(Reply::Ok {
            value: resp.value,
            seq: resp.seq.ok_or_else(|| missing("seq"))?,
            version: resp.version.ok_or_else(|| missing("version"))?,
        }),
        Status::VersionConflict => Ok(Reply::Conflict {
            seq: resp.seq.ok_or_else(|| missing("seq"))?,
            version: resp.version.ok_or_else(|| missing("version"))?,
        }),
        Status::StaleFence => Ok(Reply::Rejected {
            seq: resp.seq.ok_or_else(|| missing("seq"))?,
            highest: resp.highest.ok_or_else(|| missing("highest"))?,
        }),
        Status::BadRequest => Err(CallError::BadRequest(resp.message.unwrap_or_default())),
    }
}
