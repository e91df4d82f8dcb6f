//! Checkers: pure functions of a history that return a tri-state verdict.
//!
//! `Validity` composes false > unknown > true. Submodules: the linearization
//! search and its models (issue 2), the lock-safety checks (issue 3), and
//! [`check_history`], the one path from a history to `results.json`.

pub mod cli;
pub mod files;
pub mod linear;
pub mod lock;
pub mod minimal;
pub mod models;
pub mod results;

pub use results::{check_history, CheckOptions, Checker, Results};

use serde::{Deserialize, Serialize};

/// A tri-state verdict. Serialized as `true`, `false` or `"unknown"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Validity {
    True,
    False,
    Unknown,
}

impl Validity {
    /// Compose two verdicts: false > unknown > true.
    pub fn merge(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (False, _) | (_, False) => False,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => True,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Validity::True => "valid",
            Validity::False => "invalid",
            Validity::Unknown => "unknown",
        }
    }
}

impl From<Validity> for crate::exit::Exit {
    fn from(v: Validity) -> crate::exit::Exit {
        use crate::exit::Exit;
        match v {
            Validity::True => Exit::Valid,
            Validity::False => Exit::Invalid,
            Validity::Unknown => Exit::Unknown,
        }
    }
}

impl Serialize for Validity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::True => s.serialize_bool(true),
            Validity::False => s.serialize_bool(false),
            Validity::Unknown => s.serialize_str("unknown"),
        }
    }
}

impl<'de> Deserialize<'de> for Validity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Bool(true) => Ok(Validity::True),
            serde_json::Value::Bool(false) => Ok(Validity::False),
            serde_json::Value::String(s) if s == "unknown" => Ok(Validity::Unknown),
            other => Err(serde::de::Error::custom(format!(
                "expected true, false or \"unknown\", got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Validity::*;

    #[test]
    fn merge_is_false_over_unknown_over_true() {
        assert_eq!(True.merge(Unknown), Unknown);
        assert_eq!(Unknown.merge(False), False);
        assert_eq!(True.merge(True), True);
        assert_eq!(serde_json::to_string(&Unknown).unwrap(), "\"unknown\"");
    }
}
