//! `--find-boundary`: bisect for the value at which an anomaly's rate
//! crosses 50 %, over a [`Prober`] that runs more runs at a value and
//! answers the rate there so far. Pure: the sweep gives a prober of real
//! `lockjaw run`s, the tests a fake one.
//!
//! A probe adds `batch` runs at a time until the rate's 95 % Wilson
//! interval excludes 0.5 (decided: above or below) or it has run `cap`
//! runs (undecided: the bisection stops there, since a coin flip must not
//! send it the wrong way). Both ends of the range are probed first; on the
//! same side there is no crossing to find. Then each midpoint replaces the
//! end on its side, until the bracket is at most `tolerance` wide or
//! `max_decided` midpoints have been decided.

use crate::report::sweep::{Found, ProbeRecord, Side};
use crate::report::trials::Rate;

/// Runs `runs` more runs at `value` and answers the rate there over all of
/// its runs so far.
pub trait Prober {
    fn more(&mut self, value: f64, runs: u32) -> Result<Rate, String>;
}

/// The bisection's rules.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// Runs added to a probe at a time.
    pub batch: u32,
    /// Runs at most per probe.
    pub cap: u32,
    /// Stop when the bracket is this narrow (in the parameter's unit).
    pub tolerance: f64,
    /// Stop after this many decided midpoints.
    pub max_decided: u32,
    /// Values are whole numbers (ms).
    pub integral: bool,
}

/// What a bisection found, the probes it made (in order) and the runs it
/// spent.
#[derive(Clone, Debug)]
pub struct Bisection {
    pub found: Found,
    pub probes: Vec<ProbeRecord>,
    pub runs: u32,
}

struct State<'a, P: Prober> {
    rules: Rules,
    prober: &'a mut P,
    probes: Vec<ProbeRecord>,
    runs: u32,
}

impl<P: Prober> State<'_, P> {
    /// Probe `value` until decided or capped; `None` side: undecided.
    fn probe(&mut self, value: f64) -> Result<Option<Side>, String> {
        let (mut runs, batch, cap) = (0, self.rules.batch.max(1), self.rules.cap.max(1));
        loop {
            let add = batch.min(cap - runs);
            let rate = self.prober.more(value, add)?;
            runs += add;
            self.runs += add;
            let side = if !rate.excludes(0.5) {
                None
            } else if rate.lo > 0.5 {
                Some(Side::Above)
            } else {
                Some(Side::Below)
            };
            if side.is_some() || runs >= cap {
                self.probes.push(ProbeRecord {
                    value,
                    runs,
                    rate,
                    side,
                });
                return Ok(side);
            }
        }
    }

    fn rate_at(&self, value: f64) -> Rate {
        self.probes
            .iter()
            .rev()
            .find(|p| p.value == value)
            .map(|p| p.rate)
            .unwrap_or_default()
    }
}

/// Bisect `from..to` for the 50 % crossing.
pub fn bisect<P: Prober>(from: f64, to: f64, rules: Rules, prober: &mut P) -> Bisection {
    let mut s = State {
        rules,
        prober,
        probes: vec![],
        runs: 0,
    };
    let (mut lo, mut hi) = (from.min(to), from.max(to));
    let found = (|| -> Found {
        let stopped = |lo, hi, error| Found::Stopped { lo, hi, error };
        let mut ends = [None, None];
        for (i, v) in [lo, hi].into_iter().enumerate() {
            match s.probe(v) {
                Err(e) => return stopped(lo, hi, e),
                Ok(None) => return Found::Undecided { at: v, lo, hi },
                Ok(side) => ends[i] = side,
            }
        }
        if ends[0] == ends[1] {
            return Found::NoCrossing {
                from: lo,
                to: hi,
                from_rate: s.rate_at(lo),
                to_rate: s.rate_at(hi),
            };
        }
        let mut decided = 0;
        while hi - lo > rules.tolerance && decided < rules.max_decided {
            let mid = (lo + hi) / 2.0;
            let mid = if rules.integral { mid.round() } else { mid };
            if mid <= lo || mid >= hi {
                break;
            }
            match s.probe(mid) {
                Err(e) => return stopped(lo, hi, e),
                Ok(None) => return Found::Undecided { at: mid, lo, hi },
                Ok(side) => {
                    decided += 1;
                    if side == ends[0] {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
            }
        }
        Found::Bracket { lo, hi }
    })();
    Bisection {
        found,
        probes: s.probes,
        runs: s.runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;

    /// Each run lands `per_run` injections; each one is a success with
    /// probability `p(value)`.
    struct Fake<F: Fn(f64) -> f64> {
        p: F,
        per_run: u64,
        rng: rand::rngs::StdRng,
        seen: HashMap<u64, (u64, u64)>,
        calls: u32,
    }

    impl<F: Fn(f64) -> f64> Fake<F> {
        fn new(p: F, seed: u64) -> Self {
            Fake {
                p,
                per_run: 3,
                rng: rand::rngs::StdRng::seed_from_u64(seed),
                seen: HashMap::new(),
                calls: 0,
            }
        }
    }

    impl<F: Fn(f64) -> f64> Prober for Fake<F> {
        fn more(&mut self, value: f64, runs: u32) -> Result<Rate, String> {
            self.calls += runs;
            let p = (self.p)(value);
            let e = self.seen.entry(value.to_bits()).or_default();
            for _ in 0..u64::from(runs) * self.per_run {
                e.1 += 1;
                if self.rng.gen_bool(p.clamp(0.0, 1.0)) {
                    e.0 += 1;
                }
            }
            Ok(Rate::new(e.0, e.1))
        }
    }

    const RULES: Rules = Rules {
        batch: 2,
        cap: 20,
        tolerance: 0.05,
        max_decided: 8,
        integral: false,
    };

    #[test]
    fn a_sharp_edge_is_bracketed_within_the_tolerance() {
        let mut f = Fake::new(|v| if v > 0.9 { 1.0 } else { 0.0 }, 1);
        let b = bisect(0.5, 2.0, RULES, &mut f);
        let Found::Bracket { lo, hi } = b.found else {
            panic!("{:?}", b.found)
        };
        assert!(lo <= 0.9 && 0.9 <= hi && hi - lo <= 0.05, "{lo}..{hi}");
        assert_eq!(b.runs, f.calls);
        // Certain outcomes decide with one batch of 2 runs (6 trials).
        assert!(b.probes.iter().all(|p| p.runs == 2), "{:?}", b.probes);
    }

    #[test]
    fn a_noisy_edge_is_still_found_and_costs_more_runs() {
        // A smooth rise through 50 % at 1.0.
        let p = |v: f64| 1.0 / (1.0 + (-(v - 1.0) / 0.05).exp());
        for seed in 0..20 {
            let mut f = Fake::new(p, seed);
            let b = bisect(0.5, 2.0, RULES, &mut f);
            match b.found {
                Found::Bracket { lo, hi } => {
                    assert!(lo <= 1.1 && hi >= 0.9, "seed {seed}: {lo}..{hi}");
                    assert!(hi - lo <= 0.05 || b.probes.len() == 10, "seed {seed}");
                }
                Found::Undecided { at, lo, hi } => {
                    assert!(lo <= at && at <= hi, "seed {seed}");
                    assert!((at - 1.0).abs() < 0.15, "seed {seed}: undecided at {at}");
                    assert_eq!(b.probes.last().map(|p| p.runs), Some(20));
                }
                other => panic!("seed {seed}: {other:?}"),
            }
            assert!(b.probes.iter().all(|p| p.runs <= 20));
            assert_eq!(b.runs, b.probes.iter().map(|p| p.runs).sum::<u32>());
        }
    }

    #[test]
    fn a_prober_that_never_decides_stops_at_the_cap() {
        struct Coin;
        impl Prober for Coin {
            fn more(&mut self, _: f64, _: u32) -> Result<Rate, String> {
                Ok(Rate::new(5, 10))
            }
        }
        let b = bisect(0.5, 2.0, RULES, &mut Coin);
        assert!(
            matches!(b.found, Found::Undecided { at, lo, hi } if at == 0.5 && lo == 0.5 && hi == 2.0),
            "{:?}",
            b.found
        );
        assert_eq!((b.runs, b.probes.len()), (20, 1));
    }

    #[test]
    fn ends_on_one_side_have_no_crossing() {
        let mut f = Fake::new(|_| 0.0, 2);
        let b = bisect(0.5, 2.0, RULES, &mut f);
        assert!(
            matches!(b.found, Found::NoCrossing { from_rate, to_rate, .. } if from_rate.k == 0 && to_rate.n == 6),
            "{:?}",
            b.found
        );
        assert_eq!(b.probes.len(), 2);
    }

    #[test]
    fn whole_ms_values_and_the_decided_cap_stop_the_bisection() {
        let mut f = Fake::new(|v| if v > 1234.0 { 1.0 } else { 0.0 }, 3);
        let rules = Rules {
            tolerance: 0.0,
            integral: true,
            ..RULES
        };
        let b = bisect(1000.0, 3000.0, rules, &mut f);
        let Found::Bracket { lo, hi } = b.found else {
            panic!("{:?}", b.found)
        };
        assert!(lo <= 1234.0 && 1234.0 <= hi, "{lo}..{hi}");
        assert!(b.probes.iter().all(|p| p.value.fract() == 0.0));
        assert_eq!(b.probes.len(), 2 + 8, "8 decided midpoints at most");
    }

    #[test]
    fn a_failed_probe_stops_with_the_bracket_so_far() {
        struct Broken;
        impl Prober for Broken {
            fn more(&mut self, _: f64, _: u32) -> Result<Rate, String> {
                Err("cluster did not start".into())
            }
        }
        let b = bisect(0.5, 2.0, RULES, &mut Broken);
        assert!(matches!(b.found, Found::Stopped { ref error, .. } if error.contains("cluster")));
    }
}
