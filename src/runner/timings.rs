//! Where a run's wall time went: `run.json`'s `timings`, one entry per
//! phase in the order the phases ran (Toxiproxy, the cluster's start and
//! health, the storage, the workers, the run, healing, the check, the
//! report, ...), and the small table `lockjaw run --timings` prints.
//!
//! The phases tile the run: each mark closes the phase that began at the
//! previous one, so they add up to `wall_ms` (lockjaw's own time from the
//! run's start; the process's start and its flag parsing are not in it).

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// One phase's wall time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTime {
    pub phase: String,
    pub ms: f64,
}

/// The phases of one run, in order, with the wall time they tile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// From the run's start to the end of its last phase, ms.
    pub wall_ms: f64,
    pub phases: Vec<PhaseTime>,
    /// The run's start and the last mark (not recorded).
    #[serde(skip)]
    clock: Option<(Instant, Instant)>,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl Timings {
    /// The clock starts now.
    pub fn start() -> Timings {
        let now = Instant::now();
        Timings {
            clock: Some((now, now)),
            ..Timings::default()
        }
    }

    /// Nothing recorded (run directories of older versions).
    pub fn is_empty(&self) -> bool {
        self.phases.is_empty()
    }

    /// The phase that began at the previous mark ends now.
    pub fn mark(&mut self, phase: &str) {
        self.mark_at(phase, Instant::now());
    }

    /// The phase that began at the previous mark ends now, its first
    /// `first` of it (clamped to the whole) being `head`, the rest `tail`
    /// (a cluster's start, then its health).
    pub fn split(&mut self, head: &str, first: Duration, tail: &str) {
        let Some((_, last)) = self.clock else {
            return;
        };
        let now = Instant::now();
        let cut = (last + first).min(now);
        self.mark_at(head, cut);
        self.mark_at(tail, now);
    }

    fn mark_at(&mut self, phase: &str, at: Instant) {
        let Some((start, last)) = self.clock else {
            return;
        };
        let at = at.max(last);
        self.phases.push(PhaseTime {
            phase: phase.to_string(),
            ms: ms(at - last),
        });
        self.clock = Some((start, at));
        self.wall_ms = ms(at - start);
    }

    /// The phases' sum, ms (equal to `wall_ms` but for rounding).
    pub fn sum_ms(&self) -> f64 {
        self.phases.iter().map(|p| p.ms).sum()
    }

    /// The table `--timings` prints: one line per phase, ms, and the wall.
    pub fn table(&self) -> String {
        let width = self
            .phases
            .iter()
            .map(|p| p.phase.len())
            .chain(["wall time".len()])
            .max()
            .unwrap_or(0);
        let mut out = format!("{:<width$}  {:>9}\n", "phase", "ms");
        for p in &self.phases {
            out.push_str(&format!("{:<width$}  {:>9.0}\n", p.phase, p.ms));
        }
        out.push_str(&format!("{:<width$}  {:>9.0}\n", "wall time", self.wall_ms));
        out
    }
}

/// `--timings`: the table of the run in `dir` (from its `run.json`) on
/// stderr, or a line saying why there is none.
pub fn print(dir: &Path) {
    match super::rundir::RunInfo::read(dir) {
        Ok(info) if !info.timings.is_empty() => eprint!("{}", info.timings.table()),
        Ok(_) => eprintln!("lockjaw: no timings recorded in {}", dir.display()),
        Err(e) => eprintln!("lockjaw: no timings: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_phases_tile_the_wall_time_in_order() {
        let mut t = Timings::start();
        std::thread::sleep(Duration::from_millis(5));
        t.mark("one");
        t.split("two", Duration::from_millis(2), "three");
        std::thread::sleep(Duration::from_millis(3));
        t.split("four", Duration::from_secs(60), "five");
        t.mark("six");
        let names: Vec<&str> = t.phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(names, ["one", "two", "three", "four", "five", "six"]);
        assert!(t.phases.iter().all(|p| p.ms >= 0.0));
        assert!(t.phases[0].ms >= 5.0, "{t:?}");
        // A head longer than the phase takes it all.
        assert!(t.phases[3].ms >= 3.0 && t.phases[4].ms == 0.0, "{t:?}");
        assert!((t.sum_ms() - t.wall_ms).abs() < 0.01, "{t:?}");
    }

    #[test]
    fn the_table_lists_every_phase_and_the_wall() {
        let mut t = Timings::start();
        t.mark("cluster health");
        let table = t.table();
        assert!(table.starts_with("phase"), "{table}");
        assert!(table.contains("cluster health"), "{table}");
        assert!(table.lines().last().unwrap().starts_with("wall time"));
    }

    #[test]
    fn timings_read_back_from_json_as_written() {
        let mut t = Timings::start();
        t.mark("run");
        let back: Timings = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back.phases, t.phases);
        assert_eq!(back.wall_ms, t.wall_ms);
    }
}
