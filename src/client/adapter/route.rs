//! Request routing: the reader task reads the adapter's stdout until it
//! closes, hands the handshake answer to whoever waits for it, routes each
//! reply to the request with its id, passes events on to [`super::events`],
//! and turns a protocol error into the worker's fatal error.

use super::events::{lost, renewed};
use super::process::{handshake_answer, read_line, trim};
use super::wire::excerpt;
use super::{Answer, Ctx, FromAdapter};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::BufReader;
use tokio::process::ChildStdout;
use tokio::sync::oneshot;

/// A reply routed to its request.
#[derive(Debug)]
pub(super) enum Reply {
    Ok {
        fields: Map<String, Value>,
        line: String,
    },
    Fail(String),
    Info(String),
    /// The adapter's stdout closed.
    Gone,
}

pub(super) enum Slot {
    /// A request waiting for its reply; an acquire's `ok` grants its owner.
    Waiting {
        tx: oneshot::Sender<Reply>,
        acquire: bool,
    },
    TimedOut,
}

/// One adapter process's open requests.
pub(super) struct Conn {
    pub(super) slots: HashMap<u64, Slot>,
    /// The ids this process was sent: `first..=last`.
    pub(super) first: u64,
    pub(super) last: Option<u64>,
    pub(super) hello: Option<oneshot::Sender<Result<Answer, String>>>,
}

/// Read the adapter's stdout until it closes: route replies, record
/// events, report protocol errors.
pub(super) async fn read_loop(stdout: ChildStdout, conn: Arc<Mutex<Conn>>, ctx: Arc<Ctx>) {
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
        if let Slot::Waiting { tx, .. } = s {
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
        Some(Slot::Waiting { tx, acquire }) => {
            // Before the reply is handed on: a `renewed` event read right
            // after it must find the owner granted.
            if let (true, Reply::Ok { fields, .. }) = (acquire, &reply) {
                if let Some(owner) = super::owner_of(fields) {
                    ctx.granted
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(owner);
                }
            }
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
