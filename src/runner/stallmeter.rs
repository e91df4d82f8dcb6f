//! The worker's stall meter: one thread that sleeps [`INTERVAL`] and
//! measures how late it wakes (as jHiccup does). A wake later than
//! [`THRESHOLD_MS`] means the whole worker process could not run for that
//! long (stopped, descheduled, swapped): it goes to the controller as a
//! `stall` message, which the controller writes to `stalls.json` for the
//! lease advice's pause budget. One timer, no I/O per tick.
//!
//! It runs on its own OS thread, so it measures pauses of the process,
//! not a busy async task of the worker's own runtime.

use super::protocol::Message;
use super::worker::Out;
use crate::history::clock::RunClock;
use std::sync::Arc;
use std::time::Duration;

/// How long the meter sleeps per tick.
pub const INTERVAL: Duration = Duration::from_millis(5);
/// Late wakes shorter than this are not reported.
pub const THRESHOLD_MS: f64 = 10.0;

/// How late (ms) a sleep of [`INTERVAL`] from `before` to `after` (ns) woke,
/// when that is a stall worth reporting.
pub fn late_ms(before: u64, after: u64) -> Option<f64> {
    let late = after.saturating_sub(before) as f64 / 1e6 - INTERVAL.as_secs_f64() * 1e3;
    (late >= THRESHOLD_MS).then_some(late)
}

/// Start the meter; it reports through `out` until the process exits.
pub fn start(out: Arc<Out>, clock: RunClock) {
    let spawned = std::thread::Builder::new()
        .name("lockjaw-stall-meter".into())
        .spawn(move || loop {
            let before = clock.now();
            std::thread::sleep(INTERVAL);
            let after = clock.now();
            if let Some(late_ms) = late_ms(before, after) {
                out.send(
                    &Message::Stall {
                        start_ns: before,
                        end_ns: after,
                        late_ms,
                    },
                    true,
                );
            }
        });
    if let Err(e) = spawned {
        eprintln!("warning: no stall meter (cannot start its thread: {e}); the run's pause budget will show as not measured for this worker");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_late_wakes_past_the_threshold_are_stalls() {
        let ms = 1_000_000;
        assert_eq!(late_ms(0, 6 * ms), None);
        assert_eq!(late_ms(0, 14 * ms), None);
        assert_eq!(late_ms(100 * ms, 140 * ms), Some(35.0));
    }
}
