//! `--max-rate OPS`: the pace of the requests a run's workers send to the
//! lock service, so an operator can bound what a run sends to a shared
//! cluster.
//!
//! The workers are separate processes on one host; they share no memory,
//! but they share one clock (CLOCK_MONOTONIC, one run origin). So the
//! rate is cut into a grid of send times on the run clock, laid out the
//! same in every worker: global slot `j` at `j / OPS` seconds, and slot
//! `j` belongs to worker `j mod N` (N the run's worker slots). Before each
//! request a worker takes the first of its own slots at or after now that
//! it has not used yet, waits for it, and sends ([`Pacer::take`]). No two
//! requests ever share a slot and slots lie `1 / OPS` apart, so in any
//! window of T seconds the workers together begin at most `OPS · T + 1`
//! requests, whatever each of them does, with no message between them.
//! The price: a worker never borrows another's idle slots; each gets
//! `OPS / N` a second. A worker started again (kill-holder) takes its
//! slot's place on the grid.
//!
//! What goes through the pace: every operation a worker starts on the
//! service (the workload's calls, before their `invoke` is recorded) and
//! every retry an operation makes on its own ([`super::wait_to_retry`],
//! Redis Cluster's re-sends after a redirection). Requests a client
//! library sends by itself (etcd keep-alives, ZooKeeper's session) are not
//! paced, nor the parts of one operation (Redlock's one request per
//! server, ZooKeeper's create + list + watch).
//!
//! One pacer per worker process, installed at its start ([`install`]);
//! in every other process [`pace`] returns at once.

use crate::history::clock::RunClock;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One worker's share of the run's request grid.
#[derive(Debug)]
pub struct Pacer {
    clock: RunClock,
    /// This worker's slot (0-based) and the run's number of slots.
    slot: u64,
    workers: u64,
    /// Requests per second, all workers together.
    rate: f64,
    /// This worker's next unused own slot (index `k`: global slot
    /// `slot + k · workers`).
    next: Mutex<u64>,
}

impl Pacer {
    /// The pacer of worker `slot` of `workers`, at `rate` requests per
    /// second over all of them (a positive, finite rate; the runner checks
    /// `--max-rate`).
    pub fn new(clock: RunClock, slot: usize, workers: usize, rate: f64) -> Pacer {
        Pacer {
            clock,
            slot: slot as u64,
            workers: workers.max(1) as u64,
            rate,
            next: Mutex::new(0),
        }
    }

    /// Run-clock ns of own slot `k`.
    fn time_of(&self, k: u64) -> u64 {
        let j = (self.slot + k * self.workers) as f64;
        (j * 1e9 / self.rate).ceil() as u64
    }

    /// Take the first own slot at or after `now` (run-clock ns) not used
    /// yet, and return its time; `None` (nothing taken) when that slot
    /// lies after `latest`.
    pub fn take(&self, now: u64, latest: u64) -> Option<u64> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        // The first global slot at or after now, then this worker's.
        let first = (now as f64 * self.rate / 1e9).floor() as u64;
        let mut k = first.saturating_sub(self.slot).div_ceil(self.workers);
        k = k.max(*next);
        while self.time_of(k) < now {
            k += 1;
        }
        let t = self.time_of(k);
        if t > latest {
            return None;
        }
        *next = k + 1;
        Some(t)
    }

    /// Sleep until run-clock `t` (never wakes before it).
    async fn until(&self, t: u64) {
        loop {
            let now = self.clock.now();
            if now >= t {
                return;
            }
            tokio::time::sleep(Duration::from_nanos(t - now)).await;
        }
    }
}

static PACER: OnceLock<Pacer> = OnceLock::new();

/// Install this process's pacer (a worker, at its start). A second call
/// is ignored: one process, one pacer.
pub fn install(p: Pacer) {
    let _ = PACER.set(p);
}

/// Wait for this worker's next slot (at once without `--max-rate`).
pub async fn pace() {
    if let Some(p) = PACER.get() {
        let t = p.take(p.clock.now(), u64::MAX).unwrap_or(0);
        p.until(t).await;
    }
}

/// [`pace`] for a retry that may go only before `deadline`: false (no
/// slot taken, no wait) when the next slot lies after it.
pub async fn pace_before(deadline: Instant) -> bool {
    let Some(p) = PACER.get() else {
        return true;
    };
    let now = p.clock.now();
    let left = deadline.saturating_duration_since(Instant::now());
    match p.take(now, now.saturating_add(left.as_nanos() as u64)) {
        Some(t) => {
            p.until(t).await;
            true
        }
        None => false,
    }
}

/// Most of the sorted run-clock `times` (ns) in any closed window of `w`
/// ns: what `--max-rate` bounds by `OPS · w / 1e9 + 1` (its tests count
/// sends, and recorded invokes, with it).
pub fn busiest(times: &[u64], w: u64) -> usize {
    let mut most = 0;
    let mut lo = 0;
    for hi in 0..times.len() {
        while times[hi] - times[lo] > w {
            lo += 1;
        }
        most = most.max(hi - lo + 1);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const SECOND: u64 = 1_000_000_000;

    /// N workers asking at random times (a fake clock: each asks when its
    /// previous request was sent plus a random think time, often zero):
    /// no slot is used twice, every send is at or after its ask, and no
    /// window of one second (or of 100 ms) holds more than the rate's
    /// worth plus one; workers that never think send at the rate.
    #[test]
    fn the_workers_together_never_exceed_the_rate_in_any_window() {
        for (rate, workers) in [(20.0, 4), (7.5, 3), (1000.0, 10), (3.0, 5), (50.0, 1)] {
            let clock = RunClock::start();
            let pacers: Vec<Pacer> = (0..workers)
                .map(|s| Pacer::new(clock, s, workers, rate))
                .collect();
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let mut sends = Vec::new();
            for p in &pacers {
                let mut now = rng.gen_range(0..SECOND / 10);
                while now < 5 * SECOND {
                    let t = p.take(now, u64::MAX).unwrap();
                    assert!(t >= now, "sent before it asked");
                    sends.push(t);
                    let think = if rng.gen_bool(0.5) {
                        0
                    } else {
                        rng.gen_range(0..SECOND / 5)
                    };
                    now = t + think;
                }
            }
            sends.sort_unstable();
            let n = sends.len();
            sends.dedup();
            assert_eq!(sends.len(), n, "a slot used twice");
            for w in [SECOND, SECOND / 10] {
                let allowed = (rate * w as f64 / SECOND as f64).floor() as usize + 1;
                let most = busiest(&sends, w);
                assert!(
                    most <= allowed,
                    "rate {rate}, {workers} workers: {most} in {w} ns"
                );
            }
            // Workers that never think use every slot: the pace is the rate.
            let busy: usize = pacers
                .iter()
                .enumerate()
                .map(|(s, _)| {
                    let p = Pacer::new(clock, s, workers, rate);
                    let (mut now, mut sent) = (0, 0);
                    loop {
                        now = p.take(now, u64::MAX).unwrap();
                        if now >= 5 * SECOND {
                            return sent;
                        }
                        sent += 1;
                    }
                })
                .sum();
            let want = (rate * 5.0).ceil() as usize;
            assert_eq!(busy, want, "rate {rate}: every slot of 5 s used");
        }
    }

    /// A retry whose next slot lies after its deadline takes nothing; the
    /// slot stays free for the next request.
    #[test]
    fn a_slot_after_the_deadline_is_not_taken() {
        let p = Pacer::new(RunClock::start(), 1, 2, 10.0);
        // Worker 1 of 2 at 10/s: its slots at 0.1 s, 0.3 s, 0.5 s, ...
        assert_eq!(p.take(0, u64::MAX), Some(SECOND / 10));
        assert_eq!(p.take(SECOND / 10, SECOND / 5), None);
        assert_eq!(p.take(SECOND / 10, u64::MAX), Some(3 * SECOND / 10));
        // Late: the next slot at or after now, the missed ones unused.
        assert_eq!(p.take(SECOND, u64::MAX), Some(11 * SECOND / 10));
    }
}
