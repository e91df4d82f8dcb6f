//! Protocol moments: a nemesis that must strike one request of the lock
//! protocol (the next acquire, renew or release of a worker) asks the
//! worker to announce it. The worker, before sending that request, says so
//! and waits until the controller answers (the fault is armed on its own
//! link, or not), at most [`ARM_WAIT`]; then it sends the request.
//!
//! The stepper only sees [`super::notify::Notify::moment`]: `None` when nobody
//! asked (the common case: no wait, no message), else a [`MomentWait`].

use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a worker waits for the controller to arm a fault.
pub const ARM_WAIT: Duration = Duration::from_millis(100);

/// A request of the lock protocol a fault can be timed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Moment {
    Acquire,
    Renew,
    Release,
}

impl Moment {
    pub fn as_str(self) -> &'static str {
        match self {
            Moment::Acquire => "acquire",
            Moment::Renew => "renew",
            Moment::Release => "release",
        }
    }
}

/// An announced moment: the controller's answer arrives on `rx`.
pub struct MomentWait {
    pub id: u64,
    pub rx: oneshot::Receiver<bool>,
}

impl MomentWait {
    /// Wait for the answer, at most [`ARM_WAIT`]; true when the fault is
    /// armed (false when it is not, or the answer came too late).
    pub async fn armed(self) -> bool {
        matches!(tokio::time::timeout(ARM_WAIT, self.rx).await, Ok(Ok(true)))
    }
}
