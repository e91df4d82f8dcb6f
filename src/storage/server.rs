//! The storage server: a TCP listener on its own thread and tokio runtime,
//! one task per connection, and the [`StorageHandle`] the controller keeps.
//!
//! The server runs on a dedicated thread so that it works the same whether
//! the caller is async or not, and so that a busy controller runtime never
//! delays it. Each request is numbered and checked against the fence rule at
//! the moment its line is complete, under one lock: a write that a paused
//! client sent long ago, delivered late by a proxy, is judged when it lands.

use super::protocol::{Request, Response, Status, MAX_LINE};
use super::store::{Outcome, StorageSnapshot, Store};
use super::{Fencing, StorageConfig};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// The storage server could not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(
        "storage: cannot listen on {addr}: {error} (hint: pick a free port, or port 0 for any)"
    )]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("storage: cannot start its runtime thread: {0}")]
    Runtime(std::io::Error),
}

/// Counters of a running server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StorageStats {
    /// Requests applied.
    pub accepted: u64,
    /// Requests refused with `stale-fence`.
    pub rejected: u64,
    /// Lines that were not valid requests (answered `bad-request`).
    pub malformed: u64,
    /// The last sequence number handed out.
    pub last_seq: u64,
    /// Connections open right now.
    pub open_connections: usize,
}

/// State shared by the connection tasks and the handle.
struct Shared {
    store: Mutex<Store>,
    malformed: AtomicU64,
    open: AtomicUsize,
    /// One permit per byte of unfinished request lines the server may hold
    /// over all connections.
    partial: Arc<Semaphore>,
    max_partial: usize,
}

impl Shared {
    fn store(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock cannot leave the store half-updated
        // in a way that matters more than losing the server; keep serving.
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Parse, number, apply: the whole life of one request line.
    fn handle_line(&self, line: &[u8]) -> Response {
        let req = match Request::parse(line) {
            Ok(r) => r,
            Err(msg) => {
                self.malformed.fetch_add(1, Ordering::Relaxed);
                return Response::bad_request(line, msg);
            }
        };
        let outcome = self.store().apply(&req);
        let (status, seq, value, highest, version) = match outcome {
            Outcome::Ok {
                seq,
                value,
                version,
            } => (Status::Ok, seq, value, None, Some(version)),
            Outcome::StaleFence { seq, highest } => {
                (Status::StaleFence, seq, Value::Null, Some(highest), None)
            }
            Outcome::VersionConflict { seq, version } => (
                Status::VersionConflict,
                seq,
                Value::Null,
                None,
                Some(version),
            ),
        };
        Response {
            id: req.id,
            status,
            seq: Some(seq),
            value,
            highest,
            version,
            message: None,
        }
    }
}

/// Requests from the handle to the accept loop.
enum Control {
    /// Close every open connection, keep listening; reply when all are closed.
    DisconnectAll(std_mpsc::SyncSender<()>),
    /// Stop listening and close every connection.
    Shutdown,
}

/// A running storage server. Dropping it shuts the server down.
pub struct StorageHandle {
    addr: SocketAddr,
    fencing: Fencing,
    shared: Arc<Shared>,
    control: mpsc::UnboundedSender<Control>,
    thread: Option<JoinHandle<()>>,
}

/// Start a storage server listening on `addr` (use port 0 for any free port;
/// [`StorageHandle::addr`] tells which). Returns once the socket is bound.
pub fn spawn(addr: SocketAddr, config: StorageConfig) -> Result<StorageHandle, SpawnError> {
    let listener =
        std::net::TcpListener::bind(addr).map_err(|error| SpawnError::Bind { addr, error })?;
    let bound = listener
        .local_addr()
        .map_err(|error| SpawnError::Bind { addr, error })?;
    listener
        .set_nonblocking(true)
        .map_err(|error| SpawnError::Bind { addr, error })?;
    let shared = Arc::new(Shared {
        store: Mutex::new(Store::new(config.fencing, &config.initial)),
        malformed: AtomicU64::new(0),
        open: AtomicUsize::new(0),
        partial: Arc::new(Semaphore::new(
            config.max_partial_bytes.min(Semaphore::MAX_PERMITS),
        )),
        max_partial: config.max_partial_bytes,
    });
    let (control, rx) = mpsc::unbounded_channel();
    let task_shared = shared.clone();
    // The runtime is built and dropped on the server thread, never on the
    // caller's (which may be inside another runtime).
    let (ready_tx, ready_rx) = std_mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name("lockjaw-storage".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("lockjaw-storage")
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return drop(ready_tx.send(Err(e))),
            };
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(l) => {
                        let _ = ready_tx.send(Ok(()));
                        accept_loop(l, task_shared, rx).await;
                    }
                    Err(e) => drop(ready_tx.send(Err(e))),
                }
            });
        })
        .map_err(SpawnError::Runtime)?;
    let ready = ready_rx.recv().unwrap_or_else(|_| {
        Err(std::io::Error::other(
            "the server thread ended while starting",
        ))
    });
    if let Err(e) = ready {
        let _ = thread.join();
        return Err(SpawnError::Runtime(e));
    }
    tracing::debug!(
        "storage listening on {bound} (fencing {:?})",
        config.fencing
    );
    Ok(StorageHandle {
        addr: bound,
        fencing: config.fencing,
        shared,
        control,
        thread: Some(thread),
    })
}

impl StorageHandle {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn fencing(&self) -> Fencing {
        self.fencing
    }

    /// The current value of `key` (`null` when absent), read directly.
    pub fn value(&self, key: &str) -> Value {
        self.shared.store().value(key)
    }

    /// A copy of the whole state, read directly (not a recorded request).
    pub fn snapshot(&self) -> StorageSnapshot {
        self.shared.store().snapshot()
    }

    pub fn stats(&self) -> StorageStats {
        let snap = self.shared.store().snapshot();
        StorageStats {
            accepted: snap.accepted,
            rejected: snap.rejected,
            malformed: self.shared.malformed.load(Ordering::Relaxed),
            last_seq: snap.last_seq,
            open_connections: self.open_connections(),
        }
    }

    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// Bytes of unfinished request lines held right now, over all
    /// connections (at most [`StorageConfig::max_partial_bytes`]).
    pub fn partial_bytes(&self) -> usize {
        let s = &self.shared;
        s.max_partial.min(Semaphore::MAX_PERMITS) - s.partial.available_permits()
    }

    /// Close every connection open now and return once they are closed;
    /// the server keeps listening. Bytes still buffered in those connections
    /// (e.g. a delayed write held by a proxy) are discarded, never applied.
    /// Blocks the calling thread briefly.
    pub fn disconnect_all(&self) {
        let (tx, rx) = std_mpsc::sync_channel(1);
        if self.control.send(Control::DisconnectAll(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    /// Stop listening, close every connection, and stop the server thread.
    /// Idempotent; blocks the calling thread until the thread has ended.
    pub fn shutdown(&mut self) {
        let _ = self.control.send(Control::Shutdown);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::warn!("storage: server thread panicked");
            }
        }
    }
}

impl Drop for StorageHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut control: mpsc::UnboundedReceiver<Control>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            res = listener.accept() => match res {
                Ok((stream, peer)) => {
                    tracing::trace!("storage: connection from {peer}");
                    let guard = OpenGuard::new(shared.clone());
                    conns.spawn(serve_connection(stream, guard));
                }
                Err(e) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tracing::warn!("storage: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            cmd = control.recv() => match cmd {
                Some(Control::DisconnectAll(done)) => {
                    conns.shutdown().await;
                    let _ = done.send(());
                }
                Some(Control::Shutdown) | None => {
                    drop(listener);
                    conns.shutdown().await;
                    return;
                }
            },
        }
    }
}

/// Counts a connection as open from accept until its task ends, however it
/// ends (an abort before the task's first poll included: the guard lives in
/// the task's future, not in its body).
struct OpenGuard(Arc<Shared>);

impl OpenGuard {
    fn new(shared: Arc<Shared>) -> OpenGuard {
        shared.open.fetch_add(1, Ordering::SeqCst);
        OpenGuard(shared)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serve one connection: read a line, answer it, repeat until EOF or error.
async fn serve_connection(stream: TcpStream, guard: OpenGuard) {
    let shared = &guard.0;
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match read_line(&mut rd, &mut line, shared).await {
            // EOF, possibly in the middle of a line: a partial request is
            // never applied.
            Ok(false) => return,
            Ok(true) => {}
            Err(msg) => {
                shared.malformed.fetch_add(1, Ordering::Relaxed);
                let _ = wr
                    .write_all(&Response::bad_request(b"", msg).to_line())
                    .await;
                return;
            }
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let answer = shared.handle_line(text).to_line();
        if wr.write_all(&answer).await.is_err() {
            return;
        }
    }
}

/// Read one request line (with its newline) into `line`: true when it is
/// complete, false at EOF or a read error. While the line is unfinished
/// its bytes hold permits of the server-wide bound; they are given back
/// when the line completes or the connection ends. An error (the line is
/// over [`MAX_LINE`], or the bound is reached) closes the connection.
async fn read_line(
    rd: &mut BufReader<OwnedReadHalf>,
    line: &mut Vec<u8>,
    shared: &Shared,
) -> Result<bool, String> {
    let mut held: Option<OwnedSemaphorePermit> = None;
    loop {
        let chunk = match rd.fill_buf().await {
            Ok([]) | Err(_) => return Ok(false),
            Ok(c) => c,
        };
        let newline = chunk.iter().position(|&b| b == b'\n');
        let take = newline.map_or(chunk.len(), |i| i + 1);
        let content = line.len() + take - usize::from(newline.is_some());
        if content > MAX_LINE {
            rd.consume(take);
            return Err(format!(
                "request line longer than {MAX_LINE} bytes; closing"
            ));
        }
        if newline.is_none() {
            let n = u32::try_from(take).unwrap_or(u32::MAX);
            match shared.partial.clone().try_acquire_many_owned(n) {
                Ok(p) => match &mut held {
                    Some(h) => h.merge(p),
                    None => held = Some(p),
                },
                Err(_) => {
                    rd.consume(take);
                    return Err(format!(
                        "unfinished request lines of all connections would pass {} bytes; closing",
                        shared.max_partial
                    ));
                }
            }
        }
        line.extend_from_slice(&chunk[..take]);
        rd.consume(take);
        if newline.is_some() {
            return Ok(true);
        }
    }
}
