//! Rates with their 95 % Wilson score interval: `k` successes in `n`
//! trials, and how a rate or a share is written.

use serde::Serialize;

/// z for a two-sided 95 % interval.
pub const Z95: f64 = 1.95996;

/// The 95 % Wilson score interval of `k` successes in `n` trials, without
/// continuity correction; `(0, 1)` when there is no trial.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k.min(n) as f64, n as f64);
    let p = k / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// `k` of `n` trials, with the 95 % Wilson interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    pub k: u64,
    pub n: u64,
    pub lo: f64,
    pub hi: f64,
}

impl Rate {
    pub fn new(k: u64, n: u64) -> Rate {
        let (lo, hi) = wilson(k, n);
        Rate { k, n, lo, hi }
    }

    /// k / n, when there was a trial.
    pub fn rate(&self) -> Option<f64> {
        (self.n > 0).then(|| self.k as f64 / self.n as f64)
    }

    /// The interval lies wholly above or wholly below `p`.
    pub fn excludes(&self, p: f64) -> bool {
        self.n > 0 && (self.lo > p || self.hi < p)
    }

    /// `3 of 10 injections: 30 % [11 %, 60 %]`.
    pub fn text(&self) -> String {
        let inj = if self.n == 1 {
            "injection"
        } else {
            "injections"
        };
        match self.rate() {
            None => format!("0 of 0 {inj}"),
            Some(r) => format!(
                "{} of {} {inj}: {} [{}, {}]",
                self.k,
                self.n,
                pct(r),
                pct(self.lo),
                pct(self.hi)
            ),
        }
    }
}

impl Rate {
    /// `3/10 = 30 % [11 %, 60 %]`.
    pub fn short(&self) -> String {
        match self.rate() {
            None => "0/0".into(),
            Some(r) => format!(
                "{}/{} = {} [{}, {}]",
                self.k,
                self.n,
                pct(r),
                pct(self.lo),
                pct(self.hi)
            ),
        }
    }
}

/// A share as a percentage, with no decimals unless it is small.
pub fn pct(x: f64) -> String {
    let p = x * 100.0;
    if (0.05..1.0).contains(&p) {
        format!("{p:.1} %")
    } else {
        format!("{p:.0} %")
    }
}

impl Default for Rate {
    fn default() -> Rate {
        Rate::new(0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: (f64, f64), b: (f64, f64)) -> bool {
        (a.0 - b.0).abs() < 5e-5 && (a.1 - b.1).abs() < 5e-5
    }

    #[test]
    fn wilson_gives_the_issue_values() {
        assert!(close(wilson(0, 10), (0.0, 0.2775)), "{:?}", wilson(0, 10));
        assert!(
            close(wilson(5, 10), (0.2366, 0.7634)),
            "{:?}",
            wilson(5, 10)
        );
        assert!(close(wilson(10, 10), (0.7225, 1.0)), "{:?}", wilson(10, 10));
        assert_eq!(wilson(0, 0), (0.0, 1.0));
        let r = Rate::new(5, 10);
        assert!(!r.excludes(0.5));
        assert!(Rate::new(10, 10).excludes(0.5));
        assert!(Rate::new(0, 10).excludes(0.5));
        assert!(!Rate::new(0, 0).excludes(0.5));
        assert_eq!(Rate::new(0, 25).short(), "0/25 = 0 % [0 %, 13 %]");
        assert_eq!(r.text(), "5 of 10 injections: 50 % [24 %, 76 %]");
    }
}
