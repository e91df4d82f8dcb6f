//! One proxy at run time: its listener, its live connections and its toxics.
//!
//! Enabling binds the listen address (port 0 picks a free port) and starts an
//! accept loop; every accepted client gets one task (see `link`). Disabling
//! stops the accept loop, aborts every connection task and waits until they
//! are gone, so when [`Proxy::stop`] returns the listener is closed (new
//! clients are refused) and no byte held by a toxic will be delivered later.

use super::link::{self, ToxicEntry, ToxicList};
use super::model;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Toxic ids are unique in the process, so state never leaks between toxics.
static NEXT_TOXIC_ID: AtomicU64 = AtomicU64::new(1);

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
}

struct Running {
    accept: JoinHandle<()>,
    conns: Arc<Mutex<Conns>>,
}

#[derive(Default)]
struct Conns {
    next: u64,
    live: HashMap<u64, JoinHandle<()>>,
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
    pub fn new(name: String, listen: String, upstream: String) -> Self {
        let (toxics_tx, _) = watch::channel(Arc::new(Vec::new()));
        Proxy {
            name,
            listen,
            upstream,
            enabled: false,
            toxics: Vec::new(),
            toxics_tx,
            running: None,
        }
    }

    /// Bind and start accepting. Errors name the address, like Toxiproxy's
    /// `listen tcp ADDR: ...`.
    pub fn start(&mut self) -> io::Result<()> {
        if self.running.is_some() {
            return Ok(());
        }
        let std_listener = bind(&self.listen)
            .map_err(|e| io::Error::new(e.kind(), format!("listen tcp {}: {e}", self.listen)))?;
        self.listen = std_listener.local_addr()?.to_string();
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let conns = Arc::new(Mutex::new(Conns::default()));
        let accept = tokio::spawn(accept_loop(
            listener,
            Arc::from(self.upstream.as_str()),
            self.toxics_tx.subscribe(),
            conns.clone(),
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
        let handles: Vec<JoinHandle<()>> = lock(&run.conns).live.drain().map(|(_, h)| h).collect();
        for h in &handles {
            h.abort();
        }
        for h in handles {
            let _ = h.await;
        }
    }

    /// Live connections (for tests and diagnostics).
    pub fn connections(&self) -> usize {
        self.running
            .as_ref()
            .map_or(0, |r| lock(&r.conns).live.len())
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

pub(crate) fn toxic_wire(t: &ToxicEntry) -> model::Toxic {
    model::Toxic {
        attributes: t.kind.attributes(),
        name: t.name.clone(),
        kind: t.kind.type_name().to_string(),
        stream: t.stream,
        toxicity: t.toxicity,
    }
}

/// Bind like Go's `net.Listen("tcp", addr)`: an empty host (":8080") means
/// every interface; an empty address means a free loopback port.
fn bind(listen: &str) -> io::Result<std::net::TcpListener> {
    let addr = if listen.is_empty() {
        "127.0.0.1:0".to_string()
    } else if listen.starts_with(':') {
        format!("0.0.0.0{listen}")
    } else {
        listen.to_string()
    };
    let l = std::net::TcpListener::bind(addr.as_str())?;
    l.set_nonblocking(true)?;
    Ok(l)
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    upstream: Arc<str>,
    toxics: watch::Receiver<ToxicList>,
    conns: Arc<Mutex<Conns>>,
) {
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
        let _ = client.set_nodelay(true);
        // Hold the lock across spawn so the task's own removal comes after
        // its insertion.
        let mut set = lock(&conns);
        let id = set.next;
        set.next += 1;
        let (up, rx, mine) = (upstream.clone(), toxics.clone(), conns.clone());
        let task = tokio::spawn(async move {
            link::serve(client, up, rx).await;
            lock(&mine).live.remove(&id);
        });
        set.live.insert(id, task);
    }
}
