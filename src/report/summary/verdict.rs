//! [`RunVerdict`]: the verdict of a whole `lockjaw run`, as results.json's
//! `run` field holds it: the checks' verdict, made unknown when the run
//! tested nothing (the runner decides: `runner::verdict`), with the
//! reasons, the warnings and what it covers. Here: the type and its line.

use crate::check::Validity;
use serde::{Deserialize, Serialize};

/// The key of [`RunVerdict`] in results.json.
pub const RUN_KEY: &str = "run";

/// A run's verdict and what it covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunVerdict {
    pub valid: Validity,
    /// Why the run's verdict is unknown (empty unless it is).
    pub unknown: Vec<String>,
    /// What the reader should know that does not change the verdict
    /// (faults injected that did not land).
    pub warnings: Vec<String>,
    /// What the verdict covers: `3 of 3 faults landed, 412 grants, ...`.
    pub covers: String,
}

impl Default for RunVerdict {
    /// A verdict that says nothing: unknown, covering nothing.
    fn default() -> RunVerdict {
        RunVerdict {
            valid: Validity::Unknown,
            unknown: Vec::new(),
            warnings: Vec::new(),
            covers: String::new(),
        }
    }
}

impl RunVerdict {
    /// The verdict line: `valid: 3 of 3 faults landed, 412 grants`,
    /// `unknown: no acquire succeeded (covers: ...)`.
    pub fn line(&self) -> String {
        match self.valid {
            Validity::Unknown if !self.unknown.is_empty() => format!(
                "unknown: {} (covers: {})",
                self.unknown.join("; "),
                self.covers
            ),
            Validity::False => format!("invalid: anomalies found; covers: {}", self.covers),
            v => format!("{}: {}", v.as_str(), self.covers),
        }
    }
}

/// `1206` as `1,206`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(412), "412");
        assert_eq!(thousands(1206), "1,206");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn the_line_says_the_verdict_why_and_what_it_covers() {
        let mut v = RunVerdict {
            valid: Validity::True,
            covers: "3 of 3 faults landed, 412 grants".into(),
            ..RunVerdict::default()
        };
        assert_eq!(v.line(), "valid: 3 of 3 faults landed, 412 grants");
        v.valid = Validity::Unknown;
        v.unknown = vec!["no acquire succeeded".into()];
        assert_eq!(
            v.line(),
            "unknown: no acquire succeeded (covers: 3 of 3 faults landed, 412 grants)"
        );
        v.valid = Validity::False;
        assert!(v.line().starts_with("invalid: "), "{}", v.line());
    }
}
