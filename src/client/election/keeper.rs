//! The background task that keeps a term's lease alive and says when the
//! term ended: one refresh every period (each recorded as a `renew` op), a
//! local deadline (send time of the last answered refresh + the lease it
//! answered), and a system-specific "gone" signal (a key-deletion watch, a
//! session-state change). The first of these to end the term wins.

use super::{Loss, LossKind, LossWatch};
use crate::client::{begin, finish, ClientError, LeaseRecorder};
use async_trait::async_trait;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::sleep_until;

/// What one refresh found.
pub(crate) enum Refreshed {
    /// Still ours, for this long from when the refresh was sent.
    Alive(Duration),
    /// The term is over.
    Gone(LossKind, String),
}

/// One system's lease refresh.
#[async_trait]
pub(crate) trait Refresh: Send + 'static {
    async fn refresh(&mut self) -> Result<Refreshed, ClientError>;
}

/// Resolves when the system itself signals the end of the term.
pub(crate) type Gone = BoxFuture<'static, (LossKind, String)>;

/// A signal that never comes.
pub(crate) fn never() -> Gone {
    Box::pin(std::future::pending())
}

/// What the keeper keeps.
pub(crate) struct KeepSpec {
    /// The election name (the `key` of recorded renews).
    pub key: String,
    /// The lease's owner id (the `owner` of recorded renews).
    pub owner: String,
    pub period: Duration,
    /// Until when the lease is known to last (send time of the request
    /// that started or last refreshed it + its lease).
    pub deadline: Instant,
    pub recorder: Option<LeaseRecorder>,
}

/// A running keeper. Dropping it stops the refreshes.
pub(crate) struct Keeper {
    tx: Arc<watch::Sender<Option<Loss>>>,
    task: JoinHandle<()>,
}

fn lose(tx: &watch::Sender<Option<Loss>>, kind: LossKind, at: Instant, detail: String) {
    tx.send_if_modified(|v| {
        if v.is_some() {
            return false;
        }
        *v = Some(Loss { kind, at, detail });
        true
    });
}

impl Keeper {
    pub fn start(r: impl Refresh, spec: KeepSpec, gone: Gone) -> Keeper {
        let tx = Arc::new(watch::channel(None).0);
        let task = tokio::spawn(run(r, spec, gone, tx.clone()));
        Keeper { tx, task }
    }

    pub fn watch(&self) -> LossWatch {
        LossWatch(self.tx.subscribe())
    }

    pub fn lost(&self) -> Option<Loss> {
        self.tx.borrow().clone()
    }

    /// Stop refreshing; the term ends as `kind` unless it ended already.
    pub fn stop(&self, kind: LossKind, detail: &str) {
        self.task.abort();
        lose(&self.tx, kind, Instant::now(), detail.to_string());
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop(LossKind::Closed, "the election client was dropped");
    }
}

async fn run(
    mut r: impl Refresh,
    spec: KeepSpec,
    mut gone: Gone,
    tx: Arc<watch::Sender<Option<Loss>>>,
) {
    let KeepSpec {
        key,
        owner,
        period,
        mut deadline,
        recorder,
    } = spec;
    let ran_out = |at: Instant| {
        lose(
            &tx,
            LossKind::LeaseRanOut,
            at,
            "no refresh was answered within the lease".into(),
        )
    };
    let mut next = Instant::now() + period;
    loop {
        let until = tokio::time::Instant::from_std(deadline);
        tokio::select! {
            _ = sleep_until(until) => return ran_out(deadline),
            (k, d) = &mut gone => return lose(&tx, k, Instant::now(), d),
            _ = sleep_until(tokio::time::Instant::from_std(next)) => {}
        }
        let sent = Instant::now();
        let op = begin(&recorder, &key, Some(&owner));
        let res = tokio::select! {
            res = r.refresh() => res,
            _ = sleep_until(until) => {
                let why = "no answer before the lease ran out";
                finish(op, &Err(ClientError::Indeterminate(why.into())));
                return ran_out(deadline);
            }
            (k, d) = &mut gone => {
                let why = "abandoned: the term ended meanwhile";
                finish(op, &Err(ClientError::Indeterminate(why.into())));
                return lose(&tx, k, Instant::now(), d);
            }
        };
        match res {
            Ok(Refreshed::Alive(d)) => {
                finish(op, &Ok(d));
                deadline = deadline.max(sent + d);
            }
            Ok(Refreshed::Gone(k, d)) => {
                finish(op, &Err(ClientError::Definite(d.clone())));
                return lose(&tx, k, Instant::now(), d);
            }
            Err(e) => finish(op, &Err(e)),
        }
        next = sent + period;
    }
}
