//! A worker's wind-down: once its controller asks it to stop (SIGTERM at
//! the run's end), an acquire that waits for a holder to go away stops
//! waiting, exactly as when its wait runs out (same outcome, same undo of
//! what it queued, recorded the same way), so a worker stops within a
//! step's own time instead of after a full `acquire_wait_ms` (etcd's and
//! ZooKeeper's queued acquires held every fault-free run's end ~1 s).
//!
//! One flag per process, set by the worker ([`begin`]); in every other
//! process it is never set and the waits are plain timeouts.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

static BEGUN: AtomicBool = AtomicBool::new(false);
static NOTIFY: Notify = Notify::const_new();

/// The worker was asked to stop: every waiting acquire ends now.
pub fn begin() {
    BEGUN.store(true, Ordering::SeqCst);
    NOTIFY.notify_waiters();
}

/// Whether the wind-down has begun.
pub fn begun() -> bool {
    BEGUN.load(Ordering::SeqCst)
}

/// `fut` within `wait`, or `None` when the wait runs out or the wind-down
/// begins first (also when it had begun already).
pub async fn within<F: Future>(wait: Duration, fut: F) -> Option<F::Output> {
    let woken = NOTIFY.notified();
    tokio::pin!(woken);
    // Registered before the flag is read: a `begin` in between wakes it.
    woken.as_mut().enable();
    if begun() {
        return None;
    }
    tokio::select! {
        r = tokio::time::timeout(wait, fut) => r.ok(),
        _ = woken => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    // One test: the flag is the process's, and tests share a process.
    #[tokio::test]
    async fn a_wait_ends_when_the_wind_down_begins_and_after() {
        assert_eq!(within(Duration::from_secs(5), async { 7 }).await, Some(7));
        let t = Instant::now();
        assert_eq!(
            within(Duration::from_millis(20), std::future::pending::<()>()).await,
            None
        );
        assert!(t.elapsed() >= Duration::from_millis(20));
        let waiting = tokio::spawn(within(
            Duration::from_secs(30),
            std::future::pending::<()>(),
        ));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = Instant::now();
        begin();
        assert_eq!(waiting.await.unwrap(), None);
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(
            within(Duration::from_secs(30), std::future::pending::<()>()).await,
            None
        );
        assert!(begun());
    }
}
