//! The search of `lockjaw shrink`, as pure data: one [`Knob`] per
//! dimension (time limit, workers, injections, the fault's size, think and
//! hold times, the workload), tried in that order, one at a time. A knob
//! either jumps to its floor first (counts, think time, the workload) or
//! halves; after a dropped value it bisects between that value and the
//! kept one until they are close. A kept value becomes the knob's current
//! value, and every later candidate builds on it.

use serde::{Deserialize, Serialize};

/// At most this many candidates per knob (each costs `--runs` runs).
pub const MAX_TRIES: u32 = 4;

/// What a knob changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dim {
    /// Workers (`--concurrency`), down to 2.
    Workers,
    /// The nemesis's `max_injections`.
    Injections,
    /// `--time-limit`, in ms.
    TimeLimit,
    /// The nemesis's `duration_ms`.
    DurationMs,
    /// The nemesis's `duration_leases`, in thousandths of a lease.
    DurationLeases,
    /// The nemesis's `offset_ms` (clock faults).
    OffsetMs,
    /// The nemesis's `latency_ms`.
    LatencyMs,
    /// `--think-ms`.
    ThinkMs,
    /// `--hold-ms`.
    HoldMs,
    /// The workload: 1 the original (`fenced-counter`), 0 `lock`.
    Workload,
}

impl Dim {
    /// Counts and on/off choices jump to their floor first; lengths halve.
    fn jumps(self) -> bool {
        matches!(
            self,
            Dim::Workers | Dim::Injections | Dim::ThinkMs | Dim::Workload
        )
    }

    /// The knob's name as the steps show it.
    pub fn label(self) -> &'static str {
        match self {
            Dim::Workers => "workers",
            Dim::Injections => "max_injections",
            Dim::TimeLimit => "time limit",
            Dim::DurationMs => "fault duration",
            Dim::DurationLeases => "fault duration",
            Dim::OffsetMs => "clock offset",
            Dim::LatencyMs => "latency",
            Dim::ThinkMs => "think time",
            Dim::HoldMs => "hold time",
            Dim::Workload => "workload",
        }
    }

    /// A value of this knob as the steps show it.
    pub fn show(self, v: u64) -> String {
        match self {
            Dim::Workers => v.to_string(),
            Dim::Injections => v.to_string(),
            Dim::TimeLimit => format!("{} s", v as f64 / 1000.0),
            Dim::DurationLeases if v == 1000 => "1 lease".into(),
            Dim::DurationLeases => format!("{} leases", v as f64 / 1000.0),
            Dim::Workload if v == 0 => "lock".into(),
            Dim::Workload => "fenced-counter".into(),
            _ => format!("{v} ms"),
        }
    }
}

/// One dimension of the search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knob {
    pub dim: Dim,
    /// The original command's value.
    pub original: u64,
    /// The value of the command kept so far.
    pub current: u64,
    /// The smallest value worth trying.
    pub floor: u64,
    /// The largest value whose candidate was dropped.
    pub failed: Option<u64>,
    /// Candidates tried.
    pub tries: u32,
}

impl Knob {
    pub fn new(dim: Dim, original: u64, floor: u64) -> Knob {
        Knob {
            dim,
            original,
            current: original,
            floor,
            failed: None,
            tries: 0,
        }
    }

    /// The next value to try, or None when this knob is done.
    pub fn next(&self) -> Option<u64> {
        if self.current <= self.floor || self.tries >= MAX_TRIES {
            return None;
        }
        let v = match self.failed {
            None if self.dim.jumps() => self.floor,
            None => (self.current / 2).max(self.floor),
            Some(f) => {
                let close = match self.dim {
                    Dim::Workers | Dim::Injections | Dim::Workload => 1,
                    _ => (self.current / 5).max(1),
                };
                if self.current.saturating_sub(f) <= close {
                    return None;
                }
                f + (self.current - f) / 2
            }
        };
        (v < self.current && !self.failed.is_some_and(|f| v <= f)).then_some(v)
    }
}

/// A candidate: knob `knob` set to `value`, every other knob as kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub knob: usize,
    pub value: u64,
}

/// Every knob, in the order they are tried.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Search {
    pub knobs: Vec<Knob>,
}

impl Search {
    /// The next candidate: the first knob not yet done.
    pub fn next(&self) -> Option<Candidate> {
        self.knobs
            .iter()
            .enumerate()
            .find_map(|(knob, k)| k.next().map(|value| Candidate { knob, value }))
    }

    /// Record a candidate's outcome.
    pub fn record(&mut self, c: Candidate, kept: bool) {
        let Some(k) = self.knobs.get_mut(c.knob) else {
            return;
        };
        k.tries += 1;
        if kept {
            k.current = c.value;
        } else {
            k.failed = Some(k.failed.map_or(c.value, |f| f.max(c.value)));
        }
    }

    /// Take back a kept value whose command was not confirmed: the knob
    /// returns to `previous` and `value` counts as dropped.
    pub fn undo(&mut self, knob: usize, value: u64, previous: u64) {
        if let Some(k) = self.knobs.get_mut(knob) {
            k.current = previous;
            k.failed = Some(k.failed.map_or(value, |f| f.max(value)));
        }
    }

    /// The kept value of `dim`, if the search has that knob.
    pub fn value(&self, dim: Dim) -> Option<u64> {
        self.knobs.iter().find(|k| k.dim == dim).map(|k| k.current)
    }

    /// Set the time limit's floor to `floor(search)`, never above the
    /// original (a shorter fault lets a shorter run hold it).
    pub fn refloor_time(&mut self, floor: impl Fn(&Search) -> u64) {
        let f = floor(self);
        if let Some(k) = self.knobs.iter_mut().find(|k| k.dim == Dim::TimeLimit) {
            k.floor = f.min(k.original);
        }
    }

    /// The knobs whose kept value differs from the original.
    pub fn changed(&self) -> impl Iterator<Item = &Knob> {
        self.knobs.iter().filter(|k| k.current != k.original)
    }

    /// A copy with `c` applied: the command a candidate runs.
    pub fn with(&self, c: Candidate) -> Search {
        let mut s = self.clone();
        if let Some(k) = s.knobs.get_mut(c.knob) {
            k.current = c.value;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run the search against a fake oracle: a candidate reproduces when
    /// `reproduces(knob's dim, value)`. Returns the values tried.
    fn drive(s: &mut Search, reproduces: impl Fn(Dim, u64) -> bool) -> Vec<(Dim, u64)> {
        let mut tried = vec![];
        while let Some(c) = s.next() {
            let dim = s.knobs[c.knob].dim;
            tried.push((dim, c.value));
            s.record(c, reproduces(dim, c.value));
            assert!(tried.len() < 100, "the search ends");
        }
        tried
    }

    #[test]
    fn counts_jump_to_their_floor_and_lengths_halve() {
        let mut s = Search {
            knobs: vec![
                Knob::new(Dim::Workers, 5, 2),
                Knob::new(Dim::TimeLimit, 20_000, 8_000),
            ],
        };
        let tried = drive(&mut s, |_, _| true);
        assert_eq!(
            tried,
            [
                (Dim::Workers, 2),
                (Dim::TimeLimit, 10_000),
                (Dim::TimeLimit, 8_000)
            ]
        );
        assert_eq!(s.value(Dim::Workers), Some(2));
        assert_eq!(
            s.value(Dim::TimeLimit),
            Some(8_000),
            "never below the floor"
        );
    }

    #[test]
    fn a_dropped_value_is_bisected_toward_the_kept_one() {
        // Reproduces with 4 workers or more, and a fault of 700 ms or more.
        let mut s = Search {
            knobs: vec![
                Knob::new(Dim::Workers, 6, 2),
                Knob::new(Dim::DurationMs, 3000, 1),
            ],
        };
        let tried = drive(&mut s, |d, v| match d {
            Dim::Workers => v >= 4,
            _ => v >= 700,
        });
        assert_eq!(
            &tried[..3],
            [(Dim::Workers, 2), (Dim::Workers, 4), (Dim::Workers, 3)]
        );
        assert_eq!(s.value(Dim::Workers), Some(4));
        let d = s.value(Dim::DurationMs).unwrap();
        assert!((700..=1500).contains(&d), "{d}: {tried:?}");
        assert!(
            tried.iter().filter(|t| t.0 == Dim::DurationMs).count() as u32 <= MAX_TRIES,
            "{tried:?}"
        );
        // No value at or below a dropped one is tried again.
        let k = &s.knobs[1];
        assert!(k.failed.unwrap() < k.current);
    }

    #[test]
    fn nothing_reproduces_leaves_the_original() {
        let mut s = Search {
            knobs: vec![
                Knob::new(Dim::Workers, 3, 2),
                Knob::new(Dim::Injections, 5, 1),
                Knob::new(Dim::Workload, 1, 0),
                Knob::new(Dim::HoldMs, 0, 0),
            ],
        };
        let tried = drive(&mut s, |_, _| false);
        assert_eq!(
            tried,
            [
                (Dim::Workers, 2),
                (Dim::Injections, 1),
                (Dim::Injections, 3),
                (Dim::Injections, 4),
                (Dim::Workload, 0)
            ]
        );
        assert!(s.changed().next().is_none(), "every knob as it was");
    }

    #[test]
    fn a_shorter_fault_lets_the_time_limit_shrink_again() {
        let floor = |s: &Search| 6000 + s.value(Dim::DurationMs).unwrap();
        let mut s = Search {
            knobs: vec![
                Knob::new(Dim::TimeLimit, 20_000, 20_000),
                Knob::new(Dim::DurationMs, 2000, 1),
            ],
        };
        s.refloor_time(floor);
        let mut tried = vec![];
        while let Some(c) = s.next() {
            tried.push((s.knobs[c.knob].dim, c.value));
            s.record(c, true);
            s.refloor_time(floor);
        }
        assert_eq!(
            tried,
            [
                (Dim::TimeLimit, 10_000),
                (Dim::TimeLimit, 8_000),
                (Dim::DurationMs, 1000),
                (Dim::TimeLimit, 7_000),
                (Dim::DurationMs, 500),
                (Dim::TimeLimit, 6_500),
                (Dim::DurationMs, 250),
                (Dim::DurationMs, 125),
            ]
        );
    }

    #[test]
    fn undo_takes_back_a_kept_value() {
        let mut s = Search {
            knobs: vec![Knob::new(Dim::Workers, 5, 2)],
        };
        let c = s.next().unwrap();
        s.record(c, true);
        assert_eq!(s.value(Dim::Workers), Some(2));
        s.undo(0, 2, 5);
        assert_eq!(s.value(Dim::Workers), Some(5));
        assert_eq!(
            s.next(),
            Some(Candidate { knob: 0, value: 3 }),
            "bisects above 2"
        );
        assert_eq!(
            s.with(Candidate { knob: 0, value: 3 }).value(Dim::Workers),
            Some(3)
        );
        assert_eq!(s.value(Dim::Workers), Some(5), "with() leaves the search");
    }
}
