//! The history: operations as lockjaw records them, and their JSON Lines form.
//!
//! A history file is JSON Lines. The first line may be a meta record
//! (`{"type":"meta", ...}`) naming the checkers/model and their parameters;
//! every other line is one [`Op`] with Jepsen's semantics (`invoke` followed
//! by exactly one `ok`, `fail` or `info` from the same process). Real-time
//! order is the `time` field, never line order.

pub mod cli;
pub mod clock;
pub mod convert;
pub mod edn;
pub mod export;
pub mod import;
pub mod jsonl;
pub mod pair;
mod porcupine;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::fmt;

/// Who performed an operation: a client process number, the nemesis, or a
/// named logical process such as `"3-lease"` (a worker's renewals; `"3-keepalive"`: its client's background refreshes).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    Num(i64),
    Nemesis,
    Named(String),
}

impl Process {
    /// The default lock owner for this process: its number, or for a named
    /// logical process such as `"3-lease"` the leading number (3).
    pub fn default_owner(&self) -> Option<String> {
        match self {
            Process::Num(n) => Some(n.to_string()),
            Process::Nemesis => None,
            Process::Named(s) => {
                let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
                if digits.is_empty() {
                    Some(s.clone())
                } else {
                    Some(digits)
                }
            }
        }
    }

    pub fn is_nemesis(&self) -> bool {
        matches!(self, Process::Nemesis)
    }
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Num(n) => write!(f, "{n}"),
            Process::Nemesis => f.write_str("nemesis"),
            Process::Named(s) => f.write_str(s),
        }
    }
}

impl Serialize for Process {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Num(n) => s.serialize_i64(*n),
            Process::Nemesis => s.serialize_str("nemesis"),
            Process::Named(n) => s.serialize_str(n),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Process;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer, \"nemesis\" or a process name")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Process, E> {
                Ok(Process::Num(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Process, E> {
                i64::try_from(v)
                    .map(Process::Num)
                    .map_err(|_| E::custom("process number out of range"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Process, E> {
                Ok(if v == "nemesis" {
                    Process::Nemesis
                } else {
                    Process::Named(v.to_string())
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// The `type` of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The operation began.
    Invoke,
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// It may or may not have taken effect; the process never invokes again.
    Info,
}

/// One line of a history: an invocation or a completion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history as written; assigned by the writer.
    #[serde(default)]
    pub index: u64,
    /// Nanoseconds since the run started, from one host-wide monotonic clock.
    pub time: u64,
    pub process: Process,
    #[serde(rename = "type")]
    pub kind: OpType,
    pub f: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// JSON `null` means absent.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// Lease, session or token id of a lock grant; a string or an integer in
    /// the file, always a string here.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "de_owner"
    )]
    pub owner: Option<String>,
    /// The server-assigned sequence number of the request (storage order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// A storage key's version (writes applied to it): on a conditional
    /// write, the version it expects; on its `version-conflict` failure,
    /// the key's version then; on an ok read, the version read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// On a completion: its value was not observed (a read whose result is
    /// unknown, such as a Knossos ok-read of `nil` or a timed-out read). Such
    /// a value matches any state; `value: null` instead means "absent".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unobserved: bool,
}

fn de_owner<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(serde::de::Error::custom(format!(
            "owner must be a string or an integer, got {other}"
        ))),
    }
}

impl Op {
    /// A new operation with only the required fields set.
    pub fn new(time: u64, process: Process, kind: OpType, f: impl Into<String>) -> Op {
        Op {
            index: 0,
            time,
            process,
            kind,
            f: f.into(),
            key: None,
            value: Value::Null,
            fence: None,
            lease_ms: None,
            owner: None,
            seq: None,
            version: None,
            node: None,
            error: None,
            unobserved: false,
        }
    }

    /// The owner of a lock op: the explicit `owner`, else the process default.
    pub fn owner_or_default(&self) -> Option<String> {
        self.owner.clone().or_else(|| self.process.default_owner())
    }
}

/// The meta record: the first line of a lockjaw history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Format version; 1 when absent.
    #[serde(default = "default_version")]
    pub version: u32,
    /// Linearizability model to check with, e.g. `cas-register`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Initial model state (model-specific JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<Value>,
    /// Checkers to apply, e.g. `["lock"]` or `["linearizable"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkers: Vec<String>,
    /// Every other parameter a checker needs (workload, acquire_sets_ttl, ...).
    #[serde(flatten)]
    pub params: serde_json::Map<String, Value>,
}

fn default_version() -> u32 {
    1
}

impl Meta {
    /// The history format version this lockjaw reads and writes.
    pub const VERSION: u32 = 1;

    /// An error message if the record's `version` is not one this lockjaw reads.
    pub fn check_version(&self) -> Result<(), String> {
        if self.version == Meta::VERSION {
            return Ok(());
        }
        Err(format!(
            "meta field `version` is {}, but this lockjaw reads version {} histories \
             (hint: a newer lockjaw wrote it; check it with that one)",
            self.version,
            Meta::VERSION
        ))
    }
}

impl Default for Meta {
    fn default() -> Meta {
        Meta {
            version: default_version(),
            model: None,
            init: None,
            checkers: Vec::new(),
            params: serde_json::Map::new(),
        }
    }
}

/// Where a recorder puts operations; implemented by the history writer and
/// by a worker's pipe to the controller. Lock clients record their
/// background lease refreshes through it.
pub trait Sink: Send + Sync {
    fn record(&self, op: Op);
}

/// A history file that could not be read: names the file and line.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {msg}")]
pub struct HistoryError {
    pub file: String,
    /// 1-based line number; 0 when the error concerns the whole file.
    pub line: u64,
    pub msg: String,
}

/// A value given on the command line (`--init`): JSON, else one EDN form
/// (not a bare symbol), else the text as a string. Text nested too deeply
/// to read as either is an error, never silently a string.
pub fn parse_init(text: &str) -> Result<Value, String> {
    let hint = "(hint: an initial value is a small JSON or EDN value)";
    let json = match serde_json::from_str(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let mut r = edn::EdnReader::new(std::io::Cursor::new(text.as_bytes().to_vec()));
    match r.read() {
        Ok(Some(v)) if matches!(r.read(), Ok(None)) && !matches!(v, edn::Edn::Symbol(_)) => {
            Ok(v.to_json())
        }
        Err(e) if e.is_too_deep() => Err(format!(
            "nests deeper than {} levels {hint}",
            edn::MAX_DEPTH
        )),
        _ if json.to_string().starts_with("recursion limit exceeded") => {
            Err(format!("not JSON: {json} {hint}"))
        }
        _ => Ok(Value::String(text.to_string())),
    }
}

/// The `--init` flag, if given, through [`parse_init`]; errors name the flag.
pub fn init_flag(text: Option<&str>) -> Result<Option<Value>, String> {
    text.map(parse_init)
        .transpose()
        .map_err(|e| format!("--init: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn init_parses_json_edn_or_text() {
        let init = |t: &str| parse_init(t).unwrap();
        assert_eq!(init("0"), json!(0));
        assert_eq!(init("\"\""), json!(""));
        assert_eq!(init(""), json!(""));
        assert_eq!(init("{:x 0 :y 0}"), json!({"x": 0, "y": 0}));
        assert_eq!(init("unlocked"), json!("unlocked"));
        assert_eq!(init("nil"), Value::Null);
        // Deeper than JSON reads but within EDN's cap: EDN.
        let v = init(&("[".repeat(200) + &"]".repeat(200)));
        assert!(v.is_array());
        // Too deep for both: an error, not a string.
        let e = parse_init(&"[".repeat(20_000)).unwrap_err();
        assert!(e.contains("nests deeper than 1000"), "{e}");
        let e = parse_init(&"{\"a\":".repeat(200)).unwrap_err();
        assert!(e.contains("recursion limit"), "{e}");
    }
}
