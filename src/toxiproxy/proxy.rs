//! One proxy at run time: its listener, its live connections and its toxics.
//!
//! Enabling binds the listen address (port 0 picks a free port) and starts an
//! accept loop; every accepted client gets one task (see `link`). Disabling
//! stops the accept loop, aborts every connection task and waits until they
//! are gone, so when [`Proxy::stop`] returns the listener is closed (new
//! clients are refused) and no byte held by a toxic will be delivered later.
//!
//! While disabled, the proxy keeps its port reserved with a bound socket
//! that does not listen: connections are refused, yet the kernel will not
//! hand the port to an outgoing connection or a bind to port 0, so
//! re-enabling does not fail with "address in use" (a deliberate bind to
//! that very port with SO_REUSEADDR could still take it).

use super::link::{self, ToxicEntry, ToxicList};
use super::model;
use super::tap::TapSlot;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Toxic ids are unique in the process, so state never leaks between toxics.
static NEXT_TOXIC_ID: AtomicU64 = AtomicU64::new(1);

/// The most connections one proxy holds at once (unless the server was
/// started with another bound); one more is accepted and closed at once,
/// counted and logged. A loop the upstream check cannot
/// see (a hop through another host, a name resolved later) then stops at
/// this bound instead of exhausting the process's descriptors.
pub const MAX_CONNECTIONS: usize = 1024;

/// How long re-binding our own port is retried (see [`Proxy::start`]).
const REBIND_GRACE: Duration = Duration::from_secs(3);

pub(crate) fn next_toxic_id() -> u64 {
    NEXT_TOXIC_ID.fetch_add(1, Ordering::Relaxed)
}

pub(crate) struct Proxy {
    pub name: String,
    /// As given, or the bound address once the proxy has been enabled.
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
    /// In creation order; the API lists upstream toxics first.
    toxics: Vec<ToxicEntry>,
    toxics_tx: watch::Sender<ToxicList>,
    running: Option<Running>,
    /// Holds the port while disabled (bound, not listening).
    reserve: Option<Socket>,
    /// The address this proxy last listened on (its own port).
    held: Option<String>,
    /// The most connections it holds at once.
    max_connections: usize,
    /// The server's wire tap, read at each accepted connection.
    tap: TapSlot,
    /// Connection numbers for the tap: from 0, kept across restarts.
    numbers: Arc<AtomicU64>,
}

struct Running {
    accept: JoinHandle<()>,
    conns: Arc<Mutex<Conns>>,
}

#[derive(Default)]
struct Conns {
    next: u64,
    live: HashMap<u64, JoinHandle<()>>,
    /// Connections closed at once: the bound was reached.
    refused: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        // Backstop only (the collection is dropped): `Proxy::stop` is the plan.
        self.accept.abort();
        for h in lock(&self.conns).live.values() {
            h.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Proxy {
    pub fn new(
        name: String,
        listen: String,
        upstream: String,
        max_connections: usize,
        tap: TapSlot,
    ) -> Self {
        let (toxics_tx, _) = watch::channel(Arc::new(Vec::new()));
        Proxy {
            name,
            listen,
            upstream,
            enabled: false,
            toxics: Vec::new(),
            toxics_tx,
            running: None,
            reserve: None,
            held: None,
            max_connections,
            tap,
            numbers: Arc::default(),
        }
    }

    /// Bind and start accepting. Errors are worded as Toxiproxy's (Go's):
    /// `listen tcp ADDR: bind: address already in use`.
    ///
    /// Re-binding our own port can briefly fail when another thread of this
    /// process has just forked: the child holds a copy of the old listener
    /// until it execs (the sockets are close-on-exec). That case is retried
    /// for a short while; a port taken by someone else fails at once.
    pub async fn start(&mut self) -> io::Result<()> {
        if self.running.is_some() {
            return Ok(());
        }
        let ours = self.held.as_deref() == Some(self.listen.as_str());
        let deadline = Instant::now() + REBIND_GRACE;
        let std_listener = loop {
            match bind(&self.listen) {
                Ok(l) => break l,
                Err(e)
                    if ours
                        && e.kind() == io::ErrorKind::AddrInUse
                        && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(e) => return Err(e),
            }
        };
        self.reserve = None;
        self.listen = std_listener.local_addr()?.to_string();
        self.held = Some(self.listen.clone());
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let conns = Arc::new(Mutex::new(Conns::default()));
        let accept = tokio::spawn(accept_loop(
            listener,
            Arc::from(self.name.as_str()),
            Arc::from(self.upstream.as_str()),
            self.toxics_tx.subscribe(),
            conns.clone(),
            self.max_connections,
            (self.tap.clone(), self.numbers.clone()),
        ));
        self.running = Some(Running { accept, conns });
        self.enabled = true;
        Ok(())
    }

    /// Close the listener and every connection, and wait until they are gone.
    pub async fn stop(&mut self) {
        self.enabled = false;
        let Some(mut run) = self.running.take() else {
            return;
        };
        run.accept.abort();
        let _ = (&mut run.accept).await;
        self.reserve = self.reserve_port().await;
        let handles: Vec<JoinHandle<()>> = lock(&run.conns).live.drain().map(|(_, h)| h).collect();
        for h in &handles {
            h.abort();
        }
        for h in handles {
            let _ = h.await;
        }
    }

    /// Reserve our port (retrying briefly while a forked child may still
    /// hold a copy of the listener); None if it cannot be had.
    async fn reserve_port(&self) -> Option<Socket> {
        let addr: SocketAddr = self.listen.parse().ok()?;
        for _ in 0..20 {
            match reserve(addr) {
                Ok(s) => return Some(s),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// Point the proxy elsewhere (call while stopped); a new listen address
    /// releases the reserved port.
    pub fn set_addresses(&mut self, listen: String, upstream: String) {
        if listen != self.listen {
            self.reserve = None;
        }
        self.listen = listen;
        self.upstream = upstream;
    }

    /// Live connections (for tests and diagnostics).
    pub fn connections(&self) -> usize {
        self.running
            .as_ref()
            .map_or(0, |r| lock(&r.conns).live.len())
    }

    /// Connections closed at once since the proxy was last enabled,
    /// because its bound ([`MAX_CONNECTIONS`]) was reached.
    pub fn refused(&self) -> u64 {
        self.running.as_ref().map_or(0, |r| lock(&r.conns).refused)
    }

    pub fn to_wire(&self) -> model::Proxy {
        model::Proxy {
            name: self.name.clone(),
            listen: self.listen.clone(),
            upstream: self.upstream.clone(),
            enabled: self.enabled,
            toxics: self.toxics_wire(),
        }
    }

    /// Toxics in API order: upstream ones, then downstream ones.
    pub fn toxics_wire(&self) -> Vec<model::Toxic> {
        let ups = self
            .toxics
            .iter()
            .filter(|t| t.stream == model::Stream::Upstream);
        let downs = self
            .toxics
            .iter()
            .filter(|t| t.stream == model::Stream::Downstream);
        ups.chain(downs).map(toxic_wire).collect()
    }

    pub fn toxic(&self, name: &str) -> Option<&ToxicEntry> {
        self.toxics.iter().find(|t| t.name == name)
    }

    pub fn add_toxic(&mut self, entry: ToxicEntry) {
        self.toxics.push(entry);
        self.publish();
    }

    /// Replace the toxic with the same id; returns false when it is gone.
    pub fn replace_toxic(&mut self, entry: ToxicEntry) -> bool {
        let Some(slot) = self.toxics.iter_mut().find(|t| t.id == entry.id) else {
            return false;
        };
        *slot = entry;
        self.publish();
        true
    }

    pub fn remove_toxic(&mut self, name: &str) -> bool {
        let before = self.toxics.len();
        self.toxics.retain(|t| t.name != name);
        let removed = self.toxics.len() != before;
        if removed {
            self.publish();
        }
        removed
    }

    pub fn clear_toxics(&mut self) {
        if !self.toxics.is_empty() {
            self.toxics.clear();
            self.publish();
        }
    }

    fn publish(&self) {
        self.toxics_tx.send_replace(Arc::new(self.toxics.clone()));
    }
}

/// A toxic as the API shows it; one-shots carry their read-only `fired`.
pub(crate) fn toxic_wire(t: &ToxicEntry) -> model::Toxic {
    let mut attributes = t.kind.attributes();
    if let Some(p) = &t.pattern {
        p.write(&mut attributes);
    }
    if t.kind.is_one_shot() {
        attributes.insert(
            model::FIRED.to_string(),
            serde_json::Value::from(u8::from(t.shot.fired())),
        );
        if matches!(t.kind, model::ToxicKind::MatchNext { .. }) {
            let frozen = u8::from(t.shot.frozen());
            attributes.insert("frozen".to_string(), serde_json::Value::from(frozen));
            if let Some(r) = t.shot.reply() {
                attributes.insert("reply".to_string(), serde_json::Value::from(r));
            }
        }
        if t.shot.fired() {
            attributes.insert(
                model::STRUCK.to_string(),
                t.shot
                    .struck()
                    .map_or(serde_json::Value::Null, serde_json::Value::from),
            );
        }
    }
    model::Toxic {
        attributes,
        name: t.name.clone(),
        kind: t.kind.type_name().to_string(),
        stream: t.stream,
        toxicity: t.toxicity,
    }
}

/// The addresses a listen spec means, IPv4 first (as Go's resolver orders
/// `localhost`): an empty host (":8080") means every interface, an empty
/// spec a free loopback port.
fn listen_addrs(listen: &str) -> io::Result<Vec<SocketAddr>> {
    let spec = if listen.is_empty() {
        "127.0.0.1:0".to_string()
    } else if listen.starts_with(':') {
        format!("0.0.0.0{listen}")
    } else {
        listen.to_string()
    };
    let mut addrs: Vec<SocketAddr> = spec
        .to_socket_addrs()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("listen tcp: address {spec}: {}", go_text(&e)),
            )
        })?
        .collect();
    addrs.sort_by_key(|a| !a.is_ipv4());
    Ok(addrs)
}

/// The address a listen spec resolves to (the first of [`listen_addrs`]),
/// as the API shows a bound proxy's `listen`; None if it does not resolve.
pub(crate) fn resolve_listen(listen: &str) -> Option<String> {
    listen_addrs(listen)
        .ok()?
        .first()
        .map(SocketAddr::to_string)
}

/// An OS error in Go's words: `address already in use`, not `Address
/// already in use (os error 98)`.
fn go_text(e: &io::Error) -> String {
    let text = match e.raw_os_error() {
        Some(code) => {
            let full = io::Error::from_raw_os_error(code).to_string();
            full.split(" (os error").next().unwrap_or(&full).to_string()
        }
        None => e.to_string(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// Bind like Go's `net.Listen("tcp", addr)`, with Go's error text:
/// `listen tcp 127.0.0.1:3310: bind: address already in use` (the resolved
/// address, the failing step, the OS error).
fn bind(listen: &str) -> io::Result<std::net::TcpListener> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on");
    for addr in listen_addrs(listen)? {
        let bound = socket(addr).and_then(|s| {
            s.listen(1024).map_err(step(addr, "listen"))?;
            Ok(s)
        });
        match bound {
            Ok(s) => {
                s.set_nonblocking(true)?;
                return Ok(s.into());
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// An error of one step of listening on `addr`, in Go's words.
fn step(addr: SocketAddr, what: &'static str) -> impl Fn(io::Error) -> io::Error {
    move |e| {
        io::Error::new(
            e.kind(),
            format!("listen tcp {addr}: {what}: {}", go_text(&e)),
        )
    }
}

/// A TCP socket bound to `addr` with SO_REUSEADDR (so a listener can bind
/// next to a reserve that does not listen); errors as [`step`] words them.
fn socket(addr: SocketAddr) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(step(addr, "socket"))?;
    s.set_reuse_address(true)
        .map_err(step(addr, "setsockopt"))?;
    s.bind(&addr.into()).map_err(step(addr, "bind"))?;
    Ok(s)
}

/// Hold `addr` without listening: connections to it are refused.
fn reserve(addr: SocketAddr) -> io::Result<Socket> {
    socket(addr)
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    name: Arc<str>,
    upstream: Arc<str>,
    toxics: watch::Receiver<ToxicList>,
    conns: Arc<Mutex<Conns>>,
    max: usize,
    (tap, numbers): (TapSlot, Arc<AtomicU64>),
) {
    // The scripts seen on this proxy's connections (EVALSHA matching).
    let scripts: super::frames::Scripts = Arc::default();
    loop {
        let client = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors and the like: back off, keep serving.
                tracing::warn!(error = %e, "toxiproxy: accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // Hold the lock across spawn so the task's own removal comes after
        // its insertion.
        let mut set = lock(&conns);
        if set.live.len() >= max {
            set.refused += 1;
            if set.refused % max as u64 == 1 {
                tracing::warn!(
                    proxy = %name,
                    upstream = %upstream,
                    refused = set.refused,
                    "toxiproxy: {max} connections open, closing a new one \
                     (is the upstream a loop back into a proxy?)"
                );
            }
            drop(client);
            continue;
        }
        let _ = client.set_nodelay(true);
        let id = set.next;
        set.next += 1;
        let (up, rx, mine) = (upstream.clone(), toxics.clone(), conns.clone());
        let scripts = scripts.clone();
        let number = numbers.fetch_add(1, Ordering::Relaxed);
        let tapped = tap
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|t| t.conn(&name, number));
        let task = tokio::spawn(async move {
            link::serve(client, up, rx, scripts, tapped).await;
            lock(&mine).live.remove(&id);
        });
        set.live.insert(id, task);
    }
}
