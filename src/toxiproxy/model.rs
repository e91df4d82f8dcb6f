//! The Toxiproxy 2.x wire model: proxies, toxics and their JSON shapes, shared
//! by the embedded server and the API client.
//!
//! A [`Toxic`] keeps its `type` and `attributes` as sent on the wire, so a
//! client can list toxics of kinds lockjaw does not know (an external
//! Toxiproxy may have more); [`ToxicKind`] is the typed view of the kinds
//! lockjaw implements (Toxiproxy's eight and two one-shot extensions),
//! parsed with [`ToxicKind::parse`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

pub use super::matcher::MatchAction;

/// A proxy as the API shows it: `GET /proxies/{name}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Proxy {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
    #[serde(default)]
    pub toxics: Vec<Toxic>,
}

/// The body of `POST /proxies` and one element of `POST /populate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewProxy {
    pub name: String,
    /// `host:port` to listen on; port 0 picks a free port (the response
    /// carries the real one).
    pub listen: String,
    /// `host:port` of the real service.
    pub upstream: String,
    pub enabled: bool,
}

impl NewProxy {
    /// An enabled proxy from `listen` to `upstream`.
    pub fn new(
        name: impl Into<String>,
        listen: impl Into<String>,
        upstream: impl Into<String>,
    ) -> Self {
        NewProxy {
            name: name.into(),
            listen: listen.into(),
            upstream: upstream.into(),
            enabled: true,
        }
    }
}

/// The body of `PATCH /proxies/{name}`: only the fields present change.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProxyUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl ProxyUpdate {
    /// An update that only enables or disables the proxy.
    pub fn enabled(enabled: bool) -> Self {
        ProxyUpdate {
            enabled: Some(enabled),
            ..Default::default()
        }
    }
}

/// Which direction of a connection a toxic affects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Client to server.
    Upstream,
    /// Server to client (the default).
    Downstream,
}

impl Stream {
    /// Parse a `stream` field; case does not matter.
    pub fn parse(s: &str) -> Option<Stream> {
        match s.to_ascii_lowercase().as_str() {
            "upstream" => Some(Stream::Upstream),
            "downstream" => Some(Stream::Downstream),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A toxic as the API shows it (field order as Shopify's server writes it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Toxic {
    #[serde(default)]
    pub attributes: Map<String, Value>,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub stream: Stream,
    pub toxicity: f32,
}

impl Toxic {
    /// A toxic of a known kind, applied to every connection (toxicity 1).
    pub fn new(name: impl Into<String>, stream: Stream, kind: ToxicKind) -> Self {
        Toxic {
            attributes: kind.attributes(),
            name: name.into(),
            kind: kind.type_name().to_string(),
            stream,
            toxicity: 1.0,
        }
    }

    /// The same toxic applied to a random fraction of connections.
    pub fn with_toxicity(mut self, toxicity: f32) -> Self {
        self.toxicity = toxicity;
        self
    }

    /// The typed view of this toxic, if lockjaw knows its kind.
    pub fn typed(&self) -> Result<ToxicKind, ToxicParseError> {
        ToxicKind::parse(&self.kind, &self.attributes)
    }

    /// Whether a one-shot toxic (`hold_next`, `reset_next`) has acted: its
    /// read-only `fired` attribute as the embedded server reports it. None
    /// when the attribute is absent (other kinds, or a toxic built locally).
    pub fn fired(&self) -> Option<bool> {
        self.attributes
            .get(FIRED)
            .and_then(Value::as_i64)
            .map(|v| v != 0)
    }

    /// What a one-shot that fired struck, as the embedded server reports
    /// it: the Redis command or ZooKeeper op name of the request (or of
    /// the request whose reply it struck); None when it has not fired or
    /// the connection's protocol is not framed.
    pub fn struck(&self) -> Option<String> {
        self.attributes
            .get(STRUCK)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// The read-only attribute of one-shot toxics: what they struck.
pub const STRUCK: &str = "struck";

/// The read-only attribute of one-shot toxics: 1 once the toxic has acted.
pub const FIRED: &str = "fired";

/// The body of `PATCH /proxies/{p}/toxics/{t}`: attributes present are merged
/// into the toxic's, `toxicity` replaces it when present.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToxicUpdate {
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub attributes: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toxicity: Option<f32>,
}

/// The toxic kinds lockjaw implements, with Toxiproxy's attribute names.
/// Times are milliseconds except `Slicer::delay` (microseconds); `rate` is
/// KB/s. The embedded server refuses what [`ToxicKind::out_of_range`] names
/// (Toxiproxy takes a negative value as 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToxicKind {
    /// Delay every chunk by `latency` ± `jitter` ms.
    Latency { latency: i64, jitter: i64 },
    /// Limit the rate to `rate` KB/s.
    Bandwidth { rate: i64 },
    /// Delay closing the connection by `delay` ms after the source closes.
    SlowClose { delay: i64 },
    /// Drop all data; close the connection after `timeout` ms without data,
    /// or never when `timeout` is 0 (a blackhole until the toxic is removed).
    Timeout { timeout: i64 },
    /// Reset the connection (TCP RST) `timeout` ms after data arrives.
    ResetPeer { timeout: i64 },
    /// Cut data into pieces of `average_size` ± `size_variation` bytes with
    /// `delay` µs between them.
    Slicer {
        average_size: i64,
        size_variation: i64,
        delay: i64,
    },
    /// Close the connection after `bytes` bytes have passed.
    LimitData { bytes: i64 },
    /// Pass everything through unchanged (Toxiproxy's `noop`: a toxic that
    /// does nothing, for clients and tests that need one).
    Noop,
    /// lockjaw extension, one shot per proxy: hold the first chunk that
    /// reaches the toxic after it was added (on any connection) for `hold`
    /// ms after it arrived; 0 holds it until the toxic is removed or
    /// updated. Everything behind it on that connection and direction
    /// waits too. Then the toxic does nothing.
    HoldNext { hold: i64 },
    /// lockjaw extension, one shot per proxy: drop the first chunk that
    /// reaches the toxic after it was added and reset (TCP RST) that
    /// connection on both sides. Then the toxic does nothing.
    ResetNext,
    /// lockjaw extension, one shot per proxy, on framed Redis connections
    /// (`super::frames`): act on the next request that matches the
    /// toxic's pattern (`command`, `script`, `sha1`; kept beside the kind,
    /// see `super::matcher`) within `window` ms of being added (0: no
    /// limit). Upstream only.
    MatchNext {
        action: MatchAction,
        hold: i64,
        window: i64,
    },
}

/// Why a toxic's `type` or `attributes` were refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToxicParseError {
    #[error("invalid toxic type")]
    UnknownType(String),
    #[error("attribute {name} must be an integer, got {value}")]
    BadAttribute { name: String, value: String },
}

impl ToxicKind {
    /// Every type name lockjaw implements.
    pub const TYPES: [&'static str; 11] = [
        "latency",
        "bandwidth",
        "slow_close",
        "timeout",
        "reset_peer",
        "slicer",
        "limit_data",
        "noop",
        "hold_next",
        "reset_next",
        "match_next",
    ];

    pub fn type_name(&self) -> &'static str {
        match self {
            ToxicKind::Latency { .. } => "latency",
            ToxicKind::Bandwidth { .. } => "bandwidth",
            ToxicKind::SlowClose { .. } => "slow_close",
            ToxicKind::Timeout { .. } => "timeout",
            ToxicKind::ResetPeer { .. } => "reset_peer",
            ToxicKind::Slicer { .. } => "slicer",
            ToxicKind::LimitData { .. } => "limit_data",
            ToxicKind::Noop => "noop",
            ToxicKind::HoldNext { .. } => "hold_next",
            ToxicKind::ResetNext => "reset_next",
            ToxicKind::MatchNext { .. } => "match_next",
        }
    }

    /// A lockjaw one-shot toxic: acts on one chunk per proxy, then never
    /// again; its toxicity must be 1 and the API shows `fired`.
    pub fn is_one_shot(&self) -> bool {
        matches!(
            self,
            ToxicKind::HoldNext { .. } | ToxicKind::ResetNext | ToxicKind::MatchNext { .. }
        )
    }

    /// Parse a type name and its attributes; missing attributes are 0 and
    /// unknown attributes are ignored, as Toxiproxy does.
    pub fn parse(
        type_name: &str,
        attrs: &Map<String, Value>,
    ) -> Result<ToxicKind, ToxicParseError> {
        let get = |name: &str| attr(attrs, name);
        Ok(match type_name {
            "latency" => ToxicKind::Latency {
                latency: get("latency")?,
                jitter: get("jitter")?,
            },
            "bandwidth" => ToxicKind::Bandwidth { rate: get("rate")? },
            "slow_close" => ToxicKind::SlowClose {
                delay: get("delay")?,
            },
            "timeout" => ToxicKind::Timeout {
                timeout: get("timeout")?,
            },
            "reset_peer" => ToxicKind::ResetPeer {
                timeout: get("timeout")?,
            },
            "slicer" => ToxicKind::Slicer {
                average_size: get("average_size")?,
                size_variation: get("size_variation")?,
                delay: get("delay")?,
            },
            "limit_data" => ToxicKind::LimitData {
                bytes: get("bytes")?,
            },
            "noop" => ToxicKind::Noop,
            "hold_next" => ToxicKind::HoldNext { hold: get("hold")? },
            "reset_next" => ToxicKind::ResetNext,
            "match_next" => ToxicKind::MatchNext {
                action: match attrs.get("action") {
                    None | Some(Value::Null) => MatchAction::Hold,
                    Some(v) => v.as_str().and_then(MatchAction::parse).ok_or_else(|| {
                        ToxicParseError::BadAttribute {
                            name: "action".into(),
                            value: v.to_string(),
                        }
                    })?,
                },
                hold: get("hold")?,
                window: get("window")?,
            },
            other => return Err(ToxicParseError::UnknownType(other.to_string())),
        })
    }

    /// The attribute the embedded server refuses, and why: a negative
    /// value (Toxiproxy reads it as 0, and a `timeout` or `hold` of 0
    /// lasts forever), a time over a day, a size over 1 TiB.
    pub fn out_of_range(&self) -> Option<String> {
        const DAY_MS: i64 = 86_400_000;
        const TIB: i64 = 1 << 40;
        let (ms, us, size) = ((DAY_MS, "ms"), (DAY_MS * 1000, "µs"), (TIB, "bytes"));
        let bounds: Vec<(&str, i64, (i64, &str))> = match *self {
            ToxicKind::Latency { latency, jitter } => {
                vec![("latency", latency, ms), ("jitter", jitter, ms)]
            }
            ToxicKind::Bandwidth { rate } => vec![("rate", rate, (TIB, "KB/s"))],
            ToxicKind::SlowClose { delay } => vec![("delay", delay, ms)],
            ToxicKind::Timeout { timeout } | ToxicKind::ResetPeer { timeout } => {
                vec![("timeout", timeout, ms)]
            }
            ToxicKind::Slicer {
                average_size,
                size_variation,
                delay,
            } => vec![
                ("average_size", average_size, size),
                ("size_variation", size_variation, size),
                ("delay", delay, us),
            ],
            ToxicKind::LimitData { bytes } => vec![("bytes", bytes, size)],
            ToxicKind::HoldNext { hold } => vec![("hold", hold, ms)],
            ToxicKind::MatchNext { hold, window, .. } => {
                vec![("hold", hold, ms), ("window", window, ms)]
            }
            ToxicKind::Noop | ToxicKind::ResetNext => vec![],
        };
        bounds
            .into_iter()
            .find(|(_, v, (max, _))| !(0..=*max).contains(v))
            .map(|(name, v, (max, unit))| {
                format!(
                    "attribute {name} must be from 0 to {max} {unit}, got {v} \
                     (lockjaw refuses what Toxiproxy would read as 0 or overflow)"
                )
            })
    }

    /// The attributes object, every field present.
    pub fn attributes(&self) -> Map<String, Value> {
        let pairs: Vec<(&str, i64)> = match *self {
            ToxicKind::Latency { latency, jitter } => {
                vec![("latency", latency), ("jitter", jitter)]
            }
            ToxicKind::Bandwidth { rate } => vec![("rate", rate)],
            ToxicKind::SlowClose { delay } => vec![("delay", delay)],
            ToxicKind::Timeout { timeout } | ToxicKind::ResetPeer { timeout } => {
                vec![("timeout", timeout)]
            }
            ToxicKind::Slicer {
                average_size,
                size_variation,
                delay,
            } => vec![
                ("average_size", average_size),
                ("size_variation", size_variation),
                ("delay", delay),
            ],
            ToxicKind::LimitData { bytes } => vec![("bytes", bytes)],
            ToxicKind::HoldNext { hold } => vec![("hold", hold)],
            ToxicKind::MatchNext { hold, window, .. } => vec![("hold", hold), ("window", window)],
            ToxicKind::Noop | ToxicKind::ResetNext => vec![],
        };
        let mut map: Map<String, Value> = pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect();
        if let ToxicKind::MatchNext { action, .. } = self {
            map.insert("action".into(), Value::from(action.name()));
        }
        map
    }
}

fn attr(attrs: &Map<String, Value>, name: &str) -> Result<i64, ToxicParseError> {
    match attrs.get(name) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v.as_i64().ok_or_else(|| ToxicParseError::BadAttribute {
            name: name.to_string(),
            value: v.to_string(),
        }),
    }
}

/// The body of an API error: `{"error": "...", "status": 404}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub status: u16,
}

/// The response of `POST /populate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Populated {
    #[serde(default)]
    pub proxies: Vec<Proxy>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn toxic_round_trips_with_shopify_field_names() {
        let t = Toxic::new(
            "lag",
            Stream::Upstream,
            ToxicKind::Latency {
                latency: 100,
                jitter: 5,
            },
        );
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v,
            json!({"attributes": {"latency": 100, "jitter": 5}, "name": "lag",
                   "type": "latency", "stream": "upstream", "toxicity": 1.0})
        );
        let back: Toxic = serde_json::from_value(v).unwrap();
        assert_eq!(
            back.typed().unwrap(),
            ToxicKind::Latency {
                latency: 100,
                jitter: 5
            }
        );
    }

    #[test]
    fn every_kind_parses_back_from_its_attributes() {
        for kind in [
            ToxicKind::Latency {
                latency: 1,
                jitter: 2,
            },
            ToxicKind::Bandwidth { rate: 3 },
            ToxicKind::SlowClose { delay: 4 },
            ToxicKind::Timeout { timeout: 0 },
            ToxicKind::ResetPeer { timeout: 5 },
            ToxicKind::Slicer {
                average_size: 6,
                size_variation: 7,
                delay: 8,
            },
            ToxicKind::LimitData { bytes: 9 },
            ToxicKind::Noop,
            ToxicKind::HoldNext { hold: 10 },
            ToxicKind::ResetNext,
            ToxicKind::MatchNext {
                action: MatchAction::FreezeAfterReply,
                hold: 11,
                window: 12,
            },
        ] {
            assert!(ToxicKind::TYPES.contains(&kind.type_name()));
            assert_eq!(
                ToxicKind::parse(kind.type_name(), &kind.attributes()),
                Ok(kind)
            );
        }
    }

    #[test]
    fn missing_attributes_are_zero_and_bad_ones_are_refused() {
        assert_eq!(
            ToxicKind::parse("latency", &Map::new()),
            Ok(ToxicKind::Latency {
                latency: 0,
                jitter: 0
            })
        );
        let attrs = json!({"latency": 1.5}).as_object().unwrap().clone();
        assert!(matches!(
            ToxicKind::parse("latency", &attrs),
            Err(ToxicParseError::BadAttribute { .. })
        ));
        assert!(matches!(
            ToxicKind::parse("nope", &Map::new()),
            Err(ToxicParseError::UnknownType(_))
        ));
    }

    #[test]
    fn every_type_name_is_tested_and_one_shots_ignore_fired_on_input() {
        for name in ToxicKind::TYPES {
            let kind = ToxicKind::parse(name, &Map::new()).unwrap();
            assert_eq!(kind.type_name(), name);
            assert_eq!(
                kind.is_one_shot(),
                matches!(name, "hold_next" | "reset_next" | "match_next")
            );
        }
        let attrs = json!({"hold": 250, "fired": 1})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(
            ToxicKind::parse("hold_next", &attrs),
            Ok(ToxicKind::HoldNext { hold: 250 })
        );
        let mut t = Toxic::new("h", Stream::Downstream, ToxicKind::ResetNext);
        assert_eq!(t.fired(), None);
        t.attributes.insert(FIRED.to_string(), json!(1));
        assert_eq!(t.fired(), Some(true));
    }

    /// Issue 29: negative times, rates and sizes (a `hold_next` with hold
    /// -1 held forever) and values that overflow the data path are named.
    #[test]
    fn values_out_of_range_are_named() {
        for (kind, attrs, name) in [
            ("latency", json!({"latency": -1}), "latency"),
            ("latency", json!({"latency": 5, "jitter": -5}), "jitter"),
            ("latency", json!({"latency": i64::MAX}), "latency"),
            ("bandwidth", json!({"rate": -1}), "rate"),
            ("slow_close", json!({"delay": -1}), "delay"),
            ("timeout", json!({"timeout": -1}), "timeout"),
            ("reset_peer", json!({"timeout": -1}), "timeout"),
            ("slicer", json!({"average_size": -1}), "average_size"),
            (
                "slicer",
                json!({"size_variation": i64::MAX}),
                "size_variation",
            ),
            ("slicer", json!({"delay": -1}), "delay"),
            ("limit_data", json!({"bytes": -1}), "bytes"),
            ("hold_next", json!({"hold": -1}), "hold"),
        ] {
            let k = ToxicKind::parse(kind, attrs.as_object().unwrap()).unwrap();
            let why = k.out_of_range().unwrap_or_else(|| panic!("{kind} {attrs}"));
            assert!(
                why.starts_with(&format!("attribute {name} must be from 0 to ")),
                "{why}"
            );
        }
        for kind in ToxicKind::TYPES {
            let k = ToxicKind::parse(kind, &Map::new()).unwrap();
            assert_eq!(k.out_of_range(), None, "{kind}: zero is allowed");
        }
    }

    #[test]
    fn stream_parse_ignores_case() {
        assert_eq!(Stream::parse("UpStream"), Some(Stream::Upstream));
        assert_eq!(Stream::parse("sideways"), None);
    }
}
