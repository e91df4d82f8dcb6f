//! The embedded Toxiproxy-compatible HTTP server: routes, handlers, and a
//! handle to run it in-process ([`spawn`]) next to the rest of lockjaw.
//!
//! Paths, JSON field names, status codes, error texts and headers follow
//! Shopify's Toxiproxy 2.x: create proxy 201, create toxic 200, deletes and
//! `/reset` 204; errors as `{"error":...,"status":...}` plus a newline,
//! `text/plain` (Go's `http.Error`): 400 bad body, missing field, invalid
//! stream or toxic type; 404 unknown proxy or toxic; 409 duplicates; 500 when
//! a listen address cannot be bound. Every response carries a fresh
//! `X-Toxiproxy-Request-Id` (an xid, as Shopify's server since 2.5.0).

use super::client::{ClientError, HttpClient};
use super::collection::{ApiError, Collection};
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{oneshot, Mutex};
use tokio::task::JoinHandle;

/// The version `/version` reports: the Toxiproxy API level we follow, and
/// who we really are (semver build metadata).
pub const VERSION: &str = concat!("2.12.0+lockjaw-", env!("CARGO_PKG_VERSION"));

type Shared = Arc<Mutex<Collection>>;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {error}{hint}", hint = bind_hint(error, addr))]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

fn bind_hint(e: &std::io::Error, addr: &SocketAddr) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            " (hint: the port is taken, perhaps by a Toxiproxy already running: use it with \
             --toxiproxy http://{addr}, or pick another --port)"
        ),
        std::io::ErrorKind::AddrNotAvailable => {
            " (hint: --host must be an address of this machine, e.g. 127.0.0.1)".to_string()
        }
        _ => String::new(),
    }
}

/// A running embedded server. Dropping it stops the server in the
/// background; [`ServerHandle::shutdown`] stops it and waits until every
/// proxy listener and connection is closed.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    state: Shared,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, e.g. `http://127.0.0.1:34567`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client for this server.
    pub fn client(&self) -> Result<HttpClient, ClientError> {
        HttpClient::new(&self.url())
    }

    /// Live connections of one proxy, or None if there is no such proxy.
    pub async fn connections(&self, proxy: &str) -> Option<usize> {
        self.state.lock().await.connections(proxy)
    }

    /// Connections one proxy closed at once for having its bound
    /// ([`super::MAX_CONNECTIONS`]) open, or None if there is no such proxy.
    pub async fn refused_connections(&self, proxy: &str) -> Option<u64> {
        self.state.lock().await.refused(proxy)
    }

    /// Report every framed message of the connections proxies accept from
    /// now on to `tap` (None: stop; connections already open keep theirs).
    pub async fn set_tap(&self, tap: Option<Arc<super::tap::Tap>>) {
        let slot = self.state.lock().await.tap.clone();
        *slot.write().unwrap_or_else(|p| p.into_inner()) = tap;
    }

    /// Stop serving, close every proxy and wait for it. Idempotent.
    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Start the server on `addr` (port 0 picks a free port). Must be called
/// inside a tokio runtime; the server runs on it until shut down.
pub async fn spawn(addr: SocketAddr) -> Result<ServerHandle, ServerError> {
    spawn_bounded(addr, super::MAX_CONNECTIONS).await
}

/// [`spawn`] with another bound on each proxy's connections (tests: a
/// loop reaches a small bound sooner, with fewer sockets).
pub async fn spawn_bounded(
    addr: SocketAddr,
    max_connections: usize,
) -> Result<ServerHandle, ServerError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| ServerError::Bind { addr, error })?;
    let bound = listener
        .local_addr()
        .map_err(|error| ServerError::Bind { addr, error })?;
    let state: Shared = Arc::new(Mutex::new(Collection::new(bound, max_connections.max(1))));
    let app = router(state.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let owned = state.clone();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = stopped.await;
        });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "toxiproxy: HTTP server failed");
        }
        owned.lock().await.shutdown().await;
    });
    Ok(ServerHandle {
        addr: bound,
        stop: Some(stop),
        task: Some(task),
        state,
    })
}

/// Start the server on a free loopback port.
pub async fn spawn_loopback() -> Result<ServerHandle, ServerError> {
    spawn(SocketAddr::from(([127, 0, 0, 1], 0))).await
}

fn router(state: Shared) -> Router {
    Router::new()
        .route("/reset", post(reset))
        .route("/proxies", get(proxy_index).post(proxy_create))
        .route("/populate", post(populate))
        .route(
            "/proxies/{proxy}",
            get(proxy_show)
                .post(proxy_update)
                .patch(proxy_update)
                .delete(proxy_delete),
        )
        .route(
            "/proxies/{proxy}/toxics",
            get(toxic_index).post(toxic_create),
        )
        .route(
            "/proxies/{proxy}/toxics/{toxic}",
            get(toxic_show)
                .post(toxic_update)
                .patch(toxic_update)
                .delete(toxic_delete),
        )
        .route("/version", get(version))
        .fallback(not_found)
        .layer(middleware::from_fn(stop_browsers))
        .layer(middleware::from_fn(request_id))
        .with_state(state)
}

/// The header Shopify's server sets on every response (since 2.5.0).
pub const REQUEST_ID_HEADER: &str = "x-toxiproxy-request-id";

/// Like Toxiproxy: a new request id on every response.
async fn request_id(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    if let Ok(v) = header::HeaderValue::from_str(&xid::new().to_string()) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    resp
}

/// Go's `http.Error`: the text and a newline, as text/plain.
fn go_error(status: StatusCode, text: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        format!("{text}\n"),
    )
        .into_response()
}

/// An unknown path, as Go's `http.NotFound` answers it.
async fn not_found() -> Response {
    go_error(StatusCode::NOT_FOUND, "404 page not found")
}

/// Like Toxiproxy: refuse browsers, so a web page cannot drive the API.
async fn stop_browsers(req: Request, next: Next) -> Response {
    let browser = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("Mozilla/"));
    if browser {
        return go_error(StatusCode::FORBIDDEN, "User agent not allowed");
    }
    next.run(req).await
}

fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => error(ApiError {
            status: 500,
            message: e.to_string(),
        }),
    }
}

/// An API error as Shopify's server writes it: the JSON body through Go's
/// `http.Error` (text/plain, a trailing newline).
fn error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = super::model::ErrorBody {
        error: e.message,
        status: e.status,
    };
    match serde_json::to_string(&body) {
        Ok(text) => go_error(status, &text),
        Err(_) => go_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}

fn reply<T: Serialize>(status: StatusCode, r: Result<T, ApiError>) -> Response {
    match r {
        Ok(v) => json(status, &v),
        Err(e) => error(e),
    }
}

fn no_content(r: Result<(), ApiError>) -> Response {
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error(e),
    }
}

async fn reset(State(s): State<Shared>) -> Response {
    no_content(s.lock().await.reset().await)
}

async fn proxy_index(State(s): State<Shared>) -> Response {
    json(StatusCode::OK, &s.lock().await.list())
}

async fn proxy_create(State(s): State<Shared>, body: Bytes) -> Response {
    reply(StatusCode::CREATED, s.lock().await.create(&body).await)
}

async fn populate(State(s): State<Shared>, body: Bytes) -> Response {
    match s.lock().await.populate(&body).await {
        Ok(done) => json(StatusCode::CREATED, &done),
        Err((e, done)) => {
            // Unlike the other errors, JSON with the proxies applied so far.
            #[derive(Serialize)]
            struct Failed {
                error: String,
                status: u16,
                proxies: Vec<super::model::Proxy>,
            }
            let status =
                StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = Failed {
                error: e.message,
                status: e.status,
                proxies: done.proxies,
            };
            json(status, &body)
        }
    }
}

async fn proxy_show(State(s): State<Shared>, Path(proxy): Path<String>) -> Response {
    reply(StatusCode::OK, s.lock().await.show(&proxy))
}

async fn proxy_update(State(s): State<Shared>, Path(proxy): Path<String>, body: Bytes) -> Response {
    reply(StatusCode::OK, s.lock().await.update(&proxy, &body).await)
}

async fn proxy_delete(State(s): State<Shared>, Path(proxy): Path<String>) -> Response {
    no_content(s.lock().await.delete(&proxy).await)
}

async fn toxic_index(State(s): State<Shared>, Path(proxy): Path<String>) -> Response {
    reply(StatusCode::OK, s.lock().await.toxics(&proxy))
}

async fn toxic_create(State(s): State<Shared>, Path(proxy): Path<String>, body: Bytes) -> Response {
    reply(StatusCode::OK, s.lock().await.add_toxic(&proxy, &body))
}

async fn toxic_show(
    State(s): State<Shared>,
    Path((proxy, toxic)): Path<(String, String)>,
) -> Response {
    reply(StatusCode::OK, s.lock().await.toxic(&proxy, &toxic))
}

async fn toxic_update(
    State(s): State<Shared>,
    Path((proxy, toxic)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    reply(
        StatusCode::OK,
        s.lock().await.update_toxic(&proxy, &toxic, &body),
    )
}

async fn toxic_delete(
    State(s): State<Shared>,
    Path((proxy, toxic)): Path<(String, String)>,
) -> Response {
    no_content(s.lock().await.remove_toxic(&proxy, &toxic))
}

async fn version() -> Response {
    let body = format!("{{\"version\": \"{VERSION}\"}}\n");
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json;charset=utf-8")],
        body,
    )
        .into_response()
}

/// `lockjaw toxiproxy`: serve the API on `addr` in the foreground until
/// SIGINT or SIGTERM.
pub fn serve_until_signal(addr: SocketAddr) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // Handlers first: a signal right after the URL is printed must stop
        // the server cleanly.
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut server = spawn(addr).await?;
        println!("lockjaw toxiproxy: Toxiproxy API on {}", server.url());
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        server.shutdown().await;
        Ok(())
    })
}
