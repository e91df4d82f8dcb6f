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
        // The recorded invoke time comes first: a recorded refresh never
        // claims more lease than the keeper believes in.
        let op = begin(&recorder, &key, Some(&owner));
        let sent = Instant::now();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::clock::RunClock;
    use crate::history::{Op, OpType, Process, Sink};
    use std::sync::Mutex;

    /// Answers from a script, then errors forever.
    struct Scripted(Vec<Result<Refreshed, ClientError>>);

    #[async_trait]
    impl Refresh for Scripted {
        async fn refresh(&mut self) -> Result<Refreshed, ClientError> {
            if self.0.is_empty() {
                return Err(ClientError::Indeterminate("unreachable".into()));
            }
            self.0.remove(0)
        }
    }

    #[derive(Default)]
    struct Ops(Mutex<Vec<Op>>);
    impl Sink for Ops {
        fn record(&self, op: Op) {
            self.0.lock().unwrap().push(op);
        }
    }

    fn spec(deadline: Instant, rec: Option<LeaseRecorder>) -> KeepSpec {
        KeepSpec {
            key: "e".into(),
            owner: "o".into(),
            period: Duration::from_millis(20),
            deadline,
            recorder: rec,
        }
    }

    #[tokio::test]
    async fn unanswered_refreshes_end_the_term_at_the_last_answer_plus_the_lease() {
        let ops = Arc::new(Ops::default());
        let rec = LeaseRecorder::new(
            ops.clone(),
            Process::Named("1-lease".into()),
            RunClock::start(),
        );
        let lease = Duration::from_millis(100);
        let start = Instant::now();
        let alive = || Ok(Refreshed::Alive(lease));
        let k = Keeper::start(
            Scripted(vec![alive(), alive()]),
            spec(start + lease, Some(rec)),
            never(),
        );
        let loss = k.watch().wait().await;
        assert_eq!(loss.kind, LossKind::LeaseRanOut);
        // Two answered refreshes, sent after 20 and 40 ms: the term lasts
        // at least until the second one's send time + the lease.
        assert!(loss.at >= start + Duration::from_millis(140), "{loss:?}");
        let ops = ops.0.lock().unwrap();
        let oks = ops.iter().filter(|o| o.kind == OpType::Ok).count();
        assert_eq!(oks, 2, "{ops:?}");
        assert!(ops
            .iter()
            .all(|o| o.f == "renew" && o.owner.as_deref() == Some("o")));
        assert!(
            ops.iter().any(|o| o.kind == OpType::Info),
            "unanswered ones are info"
        );
    }

    #[tokio::test]
    async fn a_refresh_that_finds_the_lease_gone_ends_the_term_at_once() {
        let gone = Refreshed::Gone(LossKind::LeaseExpired, "TTL 0".into());
        let k = Keeper::start(
            Scripted(vec![Ok(gone)]),
            spec(Instant::now() + Duration::from_secs(60), None),
            never(),
        );
        let loss = k.watch().wait().await;
        assert_eq!(
            (loss.kind, loss.detail.as_str()),
            (LossKind::LeaseExpired, "TTL 0")
        );
    }

    #[tokio::test]
    async fn a_gone_signal_ends_the_term_and_stop_does_not_override_it() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let gone: Gone = Box::pin(async move {
            let _ = rx.await;
            (LossKind::KeyDeleted, "deleted".to_string())
        });
        let k = Keeper::start(
            Scripted(vec![]),
            spec(Instant::now() + Duration::from_secs(60), None),
            gone,
        );
        assert!(k.lost().is_none());
        tx.send(()).unwrap();
        let loss = k.watch().wait().await;
        assert_eq!(loss.kind, LossKind::KeyDeleted);
        k.stop(LossKind::Resigned, "resigned");
        assert_eq!(k.lost().unwrap().kind, LossKind::KeyDeleted);
    }

    #[tokio::test]
    async fn dropping_the_keeper_tells_the_watchers() {
        let k = Keeper::start(
            Scripted(vec![]),
            spec(Instant::now() + Duration::from_secs(60), None),
            never(),
        );
        let mut w = k.watch();
        drop(k);
        assert_eq!(w.wait().await.kind, LossKind::Closed);
    }
}
