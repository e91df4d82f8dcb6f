//! Leader-election clients, in the lock-client family: one small trait,
//! one file per mechanism (etcd's election API, ZooKeeper's leader-election
//! recipe, a Redis lease key), and the history vocabulary (`record`).
//!
//! A won campaign is a [`Term`]: the same shape as a lock [`Grant`] (`key` =
//! the election's name, `owner` = lease/session/token id, `fence`, the
//! granted `lease`, `acquire_sets_ttl`), so the lock-safety checks apply to
//! terms unchanged. While a term lasts the client keeps its lease alive in
//! the background (etcd keep-alives, ZooKeeper node checks, Redis
//! compare-and-pexpire), every third of the lease, and records each refresh
//! through the config's [`super::LeaseRecorder`] as a `renew` op. A leader
//! learns that its term ended through a [`LossWatch`]: the lease is gone
//! (a refresh found it expired or taken), the session expired, the leader
//! key was deleted, or no refresh was answered for a whole lease (then the
//! loss is dated at the instant the lease may have run out: the send time
//! of the last answered refresh plus the lease, never later than the
//! server's own expiry).

use super::{ClientError, Grant};
use async_trait::async_trait;
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub mod etcd;
mod keeper;
pub mod record;
pub mod redis;
pub mod zookeeper;

/// A term of leadership: a [`Grant`] whose `key` is the election's name.
pub type Term = Grant;

/// Whom an observer believes leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The leader's lease, session or token id (a [`Term`]'s `owner`).
    pub owner: String,
    /// The leader's fence (a [`Term`]'s `fence`).
    pub fence: Option<u64>,
}

/// Why a term ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossKind {
    /// A refresh found the lease gone (etcd TTL 0) or the key no longer
    /// ours (Redis compare-and-pexpire answered 0).
    LeaseExpired,
    /// No refresh was answered for a whole lease: it may have run out.
    LeaseRanOut,
    /// The ZooKeeper session expired or was closed.
    SessionExpired,
    /// The leader's key (etcd) or node (ZooKeeper) was deleted.
    KeyDeleted,
    /// This client resigned.
    Resigned,
    /// The client was dropped.
    Closed,
}

impl LossKind {
    /// The name recorded in the `lost-leadership` op's `value`.
    pub fn as_str(self) -> &'static str {
        match self {
            LossKind::LeaseExpired => "lease-expired",
            LossKind::LeaseRanOut => "lease-ran-out",
            LossKind::SessionExpired => "session-expired",
            LossKind::KeyDeleted => "key-deleted",
            LossKind::Resigned => "resigned",
            LossKind::Closed => "closed",
        }
    }
}

/// The end of a term as its leader learned it.
#[derive(Clone, Debug)]
pub struct Loss {
    pub kind: LossKind,
    /// When the client concluded it: the instant a signal arrived, or for
    /// [`LossKind::LeaseRanOut`] the instant the lease may have run out.
    pub at: Instant,
    pub detail: String,
}

/// Tells a leader when its term ended. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LossWatch(pub(crate) watch::Receiver<Option<Loss>>);

impl LossWatch {
    /// The loss, if the term has ended.
    pub fn lost(&self) -> Option<Loss> {
        self.0.borrow().clone()
    }

    /// Wait until the term ends.
    pub async fn wait(&mut self) -> Loss {
        loop {
            if let Some(l) = self.0.borrow_and_update().clone() {
                return l;
            }
            if self.0.changed().await.is_err() {
                return self.0.borrow().clone().unwrap_or_else(|| Loss {
                    kind: LossKind::Closed,
                    at: Instant::now(),
                    detail: "the election client was dropped".into(),
                });
            }
        }
    }
}

/// One leader-election client. Implementations live in one file per system.
#[async_trait]
pub trait ElectionClient: Send {
    /// Campaign in `election` with the requested lease `ttl`, waiting at
    /// most `wait` to become leader. `Ok(None)`: not elected (someone else
    /// leads); this client's candidacy is withdrawn again.
    async fn campaign(
        &mut self,
        election: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Term>, ClientError>;

    /// Give leadership up. `Ok(false)`: the term had already ended.
    async fn resign(&mut self, term: &Term) -> Result<bool, ClientError>;

    /// Whom the service names leader of `election` now (`None`: nobody).
    async fn observe(&mut self, election: &str) -> Result<Option<Leader>, ClientError>;

    /// The loss notice of a term this client won (`None` for a term it
    /// does not know, e.g. after `resign`).
    fn loss_watch(&self, term: &Term) -> Option<LossWatch>;
}

/// The background refresh period for a lease: a third of it, at least 50 ms.
pub(crate) fn refresh_period(lease: Duration) -> Duration {
    (lease / 3).max(Duration::from_millis(50))
}
