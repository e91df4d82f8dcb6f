//! The host-wide monotonic clock every lockjaw process stamps events with.
//!
//! All processes of a run (controller, workers, storage) read
//! CLOCK_MONOTONIC, which is shared by the whole host, and subtract the run's
//! start, passed to them as a raw CLOCK_MONOTONIC reading.

/// Raw CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_raw_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC
    // always exists on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A run's time origin: `now()` is nanoseconds since the run started.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    start_raw_ns: u64,
}

impl RunClock {
    /// A clock whose zero is now.
    pub fn start() -> RunClock {
        RunClock {
            start_raw_ns: monotonic_raw_ns(),
        }
    }

    /// A clock whose zero is a raw CLOCK_MONOTONIC reading taken elsewhere
    /// on this host (e.g. by the controller that spawned this worker).
    pub fn from_raw(start_raw_ns: u64) -> RunClock {
        RunClock { start_raw_ns }
    }

    pub fn start_raw_ns(&self) -> u64 {
        self.start_raw_ns
    }

    /// Nanoseconds since the run started.
    pub fn now(&self) -> u64 {
        monotonic_raw_ns().saturating_sub(self.start_raw_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_clock_is_monotonic_and_shared() {
        let a = RunClock::start();
        let b = RunClock::from_raw(a.start_raw_ns());
        let t1 = a.now();
        let t2 = b.now();
        assert!(t2 >= t1);
    }
}
