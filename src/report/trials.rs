//! STUB of the lead's `trials` module (issue 17 item 1), only the API the
//! sweep uses; replaced by main's file at merge.

use super::summary::RunSummary;
use serde::Serialize;
use std::collections::BTreeMap;

pub const Z95: f64 = 1.95996;
pub const ANY: &str = "any";
pub const KINDS: [&str; 6] = [
    "two-holders",
    "fence-order",
    "stale-writes",
    "lost-updates",
    "duplicate-effects",
    "not-linearizable",
];

pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k.min(n) as f64, n as f64);
    let p = k / n;
    let z2 = Z95 * Z95;
    let d = 1.0 + z2 / n;
    let c = (p + z2 / (2.0 * n)) / d;
    let h = Z95 / d * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((c - h).max(0.0), (c + h).min(1.0))
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    pub k: u64,
    pub n: u64,
    pub lo: f64,
    pub hi: f64,
}

impl Default for Rate {
    fn default() -> Rate {
        Rate::new(0, 0)
    }
}

impl Rate {
    pub fn new(k: u64, n: u64) -> Rate {
        let (lo, hi) = wilson(k, n);
        Rate { k, n, lo, hi }
    }
    pub fn rate(&self) -> Option<f64> {
        (self.n > 0).then(|| self.k as f64 / self.n as f64)
    }
    pub fn excludes(&self, p: f64) -> bool {
        self.n > 0 && (self.lo > p || self.hi < p)
    }
    pub fn text(&self) -> String {
        format!("{} of {} injections", self.k, self.n)
    }
}

pub fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

pub fn kind_label(slug: &str) -> &str {
    match slug {
        ANY => "any anomaly",
        "two-holders" => "two holders",
        "stale-writes" => "stale writes",
        other => other,
    }
}

pub fn parse_kind(s: &str) -> Result<&'static str, String> {
    std::iter::once(ANY)
        .chain(KINDS)
        .find(|k| *k == s)
        .ok_or_else(|| format!("unknown anomaly kind `{s}`"))
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    pub runs: usize,
    pub runs_with_anomaly: usize,
    pub injections: u64,
    pub landed: u64,
    pub per_kind: BTreeMap<String, Rate>,
    pub any: Rate,
    pub anomalies: BTreeMap<String, u64>,
    pub unattributed: u64,
    pub complete: bool,
}

impl Tally {
    pub fn of(summaries: &[&RunSummary]) -> Tally {
        Tally {
            runs: summaries.len(),
            complete: true,
            ..Tally::default()
        }
    }
    pub fn rate(&self, kind: &str) -> Rate {
        if kind == ANY {
            return self.any;
        }
        self.per_kind
            .get(kind)
            .copied()
            .unwrap_or_else(|| Rate::new(0, self.landed))
    }
    pub fn kinds(&self) -> Vec<&'static str> {
        KINDS
            .into_iter()
            .filter(|k| self.per_kind.contains_key(*k))
            .collect()
    }
}
