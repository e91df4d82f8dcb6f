//! The storage wire protocol: newline-delimited JSON requests and answers.
//!
//! One request per line, one answer per line, in order, on a persistent TCP
//! connection; a client keeps at most one request in flight. A request counts
//! only once its terminating newline has arrived: a connection that ends in
//! the middle of a line never applies that partial request.
//!
//! ```text
//! → {"id":1,"op":"read","key":"counter","fence":33}
//! ← {"id":1,"status":"ok","seq":12,"value":7}
//! → {"id":2,"op":"write","key":"counter","value":8,"fence":33}
//! ← {"id":2,"status":"stale-fence","seq":14,"highest":34}
//! → {"id":3,"op":"write","key":"counter","value":9,"version":4}
//! ← {"id":3,"status":"version-conflict","seq":15,"version":5}
//! → {"op":"frobnicate"}
//! ← {"status":"bad-request","message":"..."}
//! ```
//!
//! `id` is optional and echoed back; `fence` is optional (absent = unfenced).
//!
//! `apply` (the jobs workload) applies job `job` to `key`, whose value is
//! the list of job ids applied so far: it appends the id, unless the
//! request carries `"idempotent": true` and the list already holds it (an
//! idempotency key). The answer's `value` says whether it was applied:
//!
//! ```text
//! → {"id":3,"op":"apply","key":"jobs","value":{"job":7,"idempotent":true},"fence":35}
//! ← {"id":3,"status":"ok","seq":15,"value":false}
//! ```
//!
//! A write may carry `version`, the key's version it expects (the number of
//! writes applied to the key so far): it is applied only if that is still
//! the key's version, else refused with `version-conflict` (a conditional
//! write, compare-and-set). Every `ok`, `stale-fence` and `version-conflict`
//! answer carries the request's sequence number `seq`; `ok` and
//! `version-conflict` answers carry the key's `version` (after the request);
//! a `bad-request` answer has none (nothing was applied or numbered).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Longest request line the server accepts (bytes, newline excluded). A
/// longer line gets a `bad-request` answer and the connection is closed,
/// because the stream cannot be resynchronised.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The most bytes of unfinished request lines the server holds over all
/// connections together (default of [`StorageConfig::max_partial_bytes`](super::StorageConfig)).
/// The connection whose bytes would pass it gets a `bad-request` answer
/// and is closed, so many slow senders cannot take the memory.
pub const MAX_PARTIAL: usize = 64 * 1024 * 1024;

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// Return the whole value of `key` (JSON `null` when absent).
    Read,
    /// Replace the whole value of `key` with `value`.
    Write,
    /// Append a job id to the list in `key` (see the module's text).
    Apply,
}

impl OpKind {
    /// The history `f` of this operation.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Apply => "apply",
        }
    }
}

/// One request line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Client-chosen id, echoed in the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub op: OpKind,
    pub key: String,
    /// The value to write: required for `write` (it may be `null`), refused
    /// on `read`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub value: Option<Value>,
    /// The client's fencing token; absent = unfenced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// On a write: the key's version it expects (a conditional write);
    /// absent = unconditional. Refused on `read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

/// Distinguish a present `null` (`Some(Null)`) from a missing field (`None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Request {
    pub fn read(key: impl Into<String>, fence: Option<u64>) -> Request {
        Request {
            id: None,
            op: OpKind::Read,
            key: key.into(),
            value: None,
            fence,
            version: None,
        }
    }

    pub fn write(key: impl Into<String>, value: Value, fence: Option<u64>) -> Request {
        Request {
            id: None,
            op: OpKind::Write,
            key: key.into(),
            value: Some(value),
            fence,
            version: None,
        }
    }

    /// A conditional write: applied only while `key`'s version is `version`.
    pub fn write_if(
        key: impl Into<String>,
        value: Value,
        fence: Option<u64>,
        version: u64,
    ) -> Request {
        Request {
            version: Some(version),
            ..Request::write(key, value, fence)
        }
    }

    /// Apply job `job` to `key`; `idempotent`: not if `key` holds it.
    pub fn apply(
        key: impl Into<String>,
        job: u64,
        idempotent: bool,
        fence: Option<u64>,
    ) -> Request {
        Request {
            id: None,
            op: OpKind::Apply,
            key: key.into(),
            value: Some(serde_json::json!({ "job": job, "idempotent": idempotent })),
            fence,
            version: None,
        }
    }

    /// An apply's job id and idempotency flag, checked.
    pub fn job(&self) -> Result<(u64, bool), String> {
        let hint = "(hint: an apply's value is {\"job\": 7} or {\"job\": 7, \"idempotent\": true})";
        let Some(Value::Object(o)) = &self.value else {
            return Err(format!("an apply needs an object `value` {hint}"));
        };
        if let Some(k) = o.keys().find(|k| *k != "job" && *k != "idempotent") {
            return Err(format!(
                "an apply's value has an unknown field `{k}` {hint}"
            ));
        }
        let job = o.get("job").and_then(Value::as_u64).filter(|j| *j > 0);
        let Some(job) = job else {
            return Err(format!(
                "an apply's `job` must be a positive integer {hint}"
            ));
        };
        match o.get("idempotent") {
            None => Ok((job, false)),
            Some(Value::Bool(b)) => Ok((job, *b)),
            Some(v) => Err(format!(
                "an apply's `idempotent` must be true or false, got {v} {hint}"
            )),
        }
    }

    /// Parse one request line (without its newline). The error text is what
    /// the server puts in its `bad-request` answer.
    pub fn parse(line: &[u8]) -> Result<Request, String> {
        let req: Request = serde_json::from_slice(line).map_err(|e| {
            format!(
                "not a valid request: {e} (hint: one JSON object per line, e.g. \
                 {{\"op\":\"read\",\"key\":\"counter\",\"fence\":3}})"
            )
        })?;
        match (req.op, &req.value) {
            (OpKind::Write, None) => Err("a write needs a `value` (null is allowed)".into()),
            (OpKind::Read, Some(_)) => Err("a read takes no `value`".into()),
            (OpKind::Apply, _) => req.job().map(|_| req),
            (OpKind::Read, None) if req.version.is_some() => {
                Err("a read takes no `version` (only a write can be conditional on one)".into())
            }
            _ => Ok(req),
        }
    }
}

/// The status of an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Applied: a read returns `value`, a write stored it.
    Ok,
    /// Refused by the fence rule: the key has seen fence `highest` > the
    /// request's fence. Nothing was read or written.
    StaleFence,
    /// A conditional write whose expected `version` is not the key's:
    /// nothing was written; the answer carries the key's `version`.
    VersionConflict,
    /// The line was not a valid request; nothing was applied.
    BadRequest,
}

/// One answer line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// A read's value (`null` = absent, and then omitted on the wire).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub value: Value,
    /// On `stale-fence`: the highest fence the key has seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest: Option<u64>,
    /// On `ok` and `version-conflict`: the key's version after the request
    /// (writes applied to it so far).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// On `bad-request`: what was wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Response {
    /// The answer to a line that was not a valid request. Echoes the line's
    /// `id` when the line is a JSON object carrying a numeric one.
    pub fn bad_request(line: &[u8], message: String) -> Response {
        let id = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v.get("id").and_then(Value::as_u64));
        Response {
            id,
            status: Status::BadRequest,
            seq: None,
            value: Value::Null,
            highest: None,
            version: None,
            message: Some(message),
        }
    }

    /// Serialise as one line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).expect("a response always serialises");
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_read_and_write() {
        let r = Request::parse(br#"{"id":1,"op":"read","key":"c","fence":3}"#).unwrap();
        assert_eq!(
            r,
            Request {
                id: Some(1),
                ..Request::read("c", Some(3))
            }
        );
        let w = Request::parse(br#"{"op":"write","key":"s","value":[1,2]}"#).unwrap();
        assert_eq!(w, Request::write("s", json!([1, 2]), None));
        let n = Request::parse(br#"{"op":"write","key":"r","value":null}"#).unwrap();
        assert_eq!(n.value, Some(Value::Null));
        let c = Request::parse(br#"{"op":"write","key":"c","value":3,"version":2}"#).unwrap();
        assert_eq!(c, Request::write_if("c", json!(3), None, 2));
        let line = serde_json::to_string(&c).unwrap();
        assert!(line.contains(r#""version":2"#), "{line}");
        let plain = serde_json::to_string(&Request::write("c", json!(3), None)).unwrap();
        assert!(!plain.contains("version"), "{plain}");
    }

    #[test]
    fn parses_applies_and_refuses_bad_jobs() {
        let a =
            Request::parse(br#"{"op":"apply","key":"jobs","value":{"job":7,"idempotent":true}}"#)
                .unwrap();
        assert_eq!(a, Request::apply("jobs", 7, true, None));
        assert_eq!(a.job(), Ok((7, true)));
        let plain = Request::parse(br#"{"op":"apply","key":"jobs","value":{"job":1}}"#).unwrap();
        assert_eq!(plain.job(), Ok((1, false)));
        for bad in [
            &br#"{"op":"apply","key":"jobs"}"#[..],
            br#"{"op":"apply","key":"jobs","value":7}"#,
            br#"{"op":"apply","key":"jobs","value":{"job":0}}"#,
            br#"{"op":"apply","key":"jobs","value":{"job":"7"}}"#,
            br#"{"op":"apply","key":"jobs","value":{"job":7,"idempotent":1}}"#,
            br#"{"op":"apply","key":"jobs","value":{"job":7,"once":true}}"#,
        ] {
            let e = Request::parse(bad).unwrap_err();
            assert!(e.contains("hint:"), "{e}");
        }
    }

    #[test]
    fn refuses_malformed_requests() {
        for bad in [
            &b"not json"[..],
            br#"{"op":"write","key":"c"}"#,
            br#"{"op":"read","key":"c","value":1}"#,
            br#"{"op":"delete","key":"c"}"#,
            br#"{"op":"read","key":"c","fence":-1}"#,
            br#"{"op":"read","key":"c","version":1}"#,
            br#"{"op":"write","key":"c","value":1,"version":-1}"#,
            br#"{"op":"read","key":"c","fencing":3}"#,
            br#"{"op":"read"}"#,
            br#"[1,2]"#,
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn bad_request_echoes_id_and_round_trips() {
        let r = Response::bad_request(br#"{"id":9,"op":"nope"}"#, "x".into());
        assert_eq!(r.id, Some(9));
        let line = r.to_line();
        assert_eq!(line.last(), Some(&b'\n'));
        let back: Response = serde_json::from_slice(&line).unwrap();
        assert_eq!(back, r);
        let text = String::from_utf8(line).unwrap();
        assert!(text.contains(r#""status":"bad-request""#), "{text}");
    }
}
