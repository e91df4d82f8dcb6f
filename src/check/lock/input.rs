//! Reading a history file for the lock checks. The meta record first;
//! then a reader thread parses each line into a borrowed view (no
//! allocation for its strings), pairs it into events (`pair`) and hands
//! them over in batches, while the calling thread runs the checks. Lines
//! come from the history's one line reader
//! ([`LineReader`](crate::history::jsonl::LineReader)); parse errors name
//! the file, the line and the field.

use super::engine::Backend;
use super::event::Event;
use super::pair::{OpRef, OwnerRef, Pairer, ProcRef};
use super::report::LockReport;
use super::LockOptions;
use crate::history::jsonl::{meta_record, open_lines, truncated, LineReader};
use crate::history::{HistoryError, Meta, OpType};
use serde::de::{Deserializer, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Events per batch: small enough (~80 KB) for the allocator to reuse
/// freed batches instead of mapping fresh pages.
const BATCH: usize = 512;

/// Events, and key names given ids since the previous batch.
type Batch = Result<(Vec<Event>, Vec<String>), HistoryError>;

/// One line, borrowed from the line buffer where it can be.
#[derive(Deserialize)]
struct RawOp<'a> {
    #[serde(default)]
    index: u64,
    time: u64,
    #[serde(borrow)]
    process: RawName<'a>,
    #[serde(rename = "type")]
    kind: OpType,
    #[serde(borrow)]
    f: Cow<'a, str>,
    #[serde(default, borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(default)]
    value: Value,
    #[serde(default)]
    fence: Option<u64>,
    #[serde(default)]
    lease_ms: Option<u64>,
    #[serde(default, borrow)]
    owner: Option<RawName<'a>>,
    #[serde(default)]
    seq: Option<u64>,
    /// Only `"held"` matters; any other value is kept as it is.
    #[serde(default)]
    error: Option<Value>,
}

/// A string or an integer (`process`, `owner`).
enum RawName<'a> {
    Num(i64),
    Str(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for RawName<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawName<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(RawName::Num(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(RawName::Num)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(RawName::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawName::Str(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'a> RawOp<'a> {
    fn view(&'a mut self) -> OpRef<'a> {
        OpRef {
            index: self.index,
            time: self.time,
            process: match &self.process {
                RawName::Num(n) => ProcRef::Num(*n),
                RawName::Str(s) if s == "nemesis" => ProcRef::Nemesis,
                RawName::Str(s) => ProcRef::Named(s),
            },
            kind: self.kind,
            f: &self.f,
            key: self.key.as_deref(),
            value: std::mem::take(&mut self.value),
            fence: self.fence,
            lease_ms: self.lease_ms,
            owner: self.owner.as_ref().map(|o| match o {
                RawName::Num(n) => OwnerRef::Num(*n),
                RawName::Str(s) => OwnerRef::Str(s),
            }),
            seq: self.seq,
            held: self.error.as_ref().and_then(Value::as_str) == Some("held"),
        }
    }
}

/// Parse the current line and pair it.
fn event(lines: &LineReader, pairer: &mut Pairer) -> Result<Option<Event>, HistoryError> {
    let line = lines.current();
    let mut raw: RawOp = serde_json::from_slice(line).map_err(|e| {
        if e.is_eof() {
            return lines.err(truncated(&e));
        }
        let why = explain(line).unwrap_or_else(|| e.to_string());
        lines.err(format!("bad op: {why}"))
    })?;
    pairer.push(raw.view(), lines.line())
}

/// Parse the current line as the meta record, or `None` if it is an op.
fn meta(lines: &LineReader) -> Result<Option<Meta>, HistoryError> {
    let v: Value = serde_json::from_slice(lines.current())
        .map_err(|e| lines.err(format!("not a JSON object: {e}")))?;
    meta_record(v).map_err(|e| lines.err(e))
}

/// Name the field at fault in a line serde rejected (error path only).
fn explain(line: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let Some(o) = v.as_object() else {
        return Some(format!("a line must be a JSON object, got {v}"));
    };
    let uint = |x: &Value| x.is_u64();
    let name = |x: &Value| x.is_string() || x.is_i64();
    type Check<'a> = (&'a str, &'a dyn Fn(&Value) -> bool, &'a str);
    let checks: [Check; 10] = [
        (
            "time",
            &uint,
            "a non-negative integer (ns since the run started)",
        ),
        ("index", &uint, "a non-negative integer"),
        ("fence", &uint, "a non-negative integer"),
        ("lease_ms", &uint, "a non-negative integer (ms)"),
        ("seq", &uint, "a non-negative integer"),
        ("f", &|x| x.is_string(), "a string such as \"acquire\""),
        ("key", &|x| x.is_string(), "a string"),
        ("owner", &name, "a string or an integer"),
        ("process", &name, "an integer, \"nemesis\" or a name"),
        ("type", &|x| x.is_string(), "invoke, ok, fail or info"),
    ];
    for (field, ok, want) in checks {
        match o.get(field) {
            Some(x) if !x.is_null() && !ok(x) => {
                return Some(format!("field `{field}` must be {want}, got {x}"))
            }
            _ => {}
        }
    }
    match o.get("type").and_then(Value::as_str) {
        Some("invoke" | "ok" | "fail" | "info") | None => None,
        Some(t) => Some(format!(
            "field `type` must be invoke, ok, fail or info, got \"{t}\""
        )),
    }
}

/// The reader thread: lines to batches of events; gives the pairer back
/// (its counters go into the report).
fn produce(
    mut lines: LineReader,
    mut pairer: Pairer,
    first: bool,
    tx: SyncSender<Batch>,
) -> Pairer {
    let mut batch = Vec::with_capacity(BATCH);
    let mut named = 0;
    let mut pending_first = first;
    loop {
        let more = if pending_first {
            pending_first = false;
            Ok(true)
        } else {
            lines.advance()
        };
        let step = more.and_then(|more| {
            if more {
                event(&lines, &mut pairer).map(|ev| (true, ev))
            } else {
                Ok((false, None))
            }
        });
        let (more, ev) = match step {
            Ok(x) => x,
            Err(e) => {
                let _ = tx.send(Err(e));
                return pairer;
            }
        };
        batch.extend(ev);
        if batch.len() >= BATCH || !more {
            let names = pairer.keys.since(named);
            named = pairer.keys.len();
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if tx.send(Ok((full, names))).is_err() || !more {
                return pairer;
            }
        }
    }
}

fn consume(rx: Receiver<Batch>, back: &mut Backend) -> Result<(), HistoryError> {
    for batch in rx {
        let (events, names) = batch?;
        back.learn_names(names);
        for ev in events {
            back.push(ev)?;
        }
    }
    Ok(())
}

/// One pass over the file at `path`.
pub(crate) fn check_path(path: &Path, opts: &LockOptions) -> Result<LockReport, HistoryError> {
    let mut lines = LineReader::new(path.display().to_string(), open_lines(path)?);
    let tail = lines.partial_tail();
    if !lines.advance()? {
        return Err(HistoryError {
            file: lines.file().to_string(),
            line: tail.line().unwrap_or(0),
            msg: match tail.line() {
                Some(_) => "the only line is cut off mid-write: nothing to check",
                None => "empty file (hint: a history holds at least a meta record or one op)",
            }
            .into(),
        });
    }
    let meta = meta(&lines)?;
    let first = meta.is_none();
    let file = lines.file().to_string();
    let mut back = Backend::new(file.clone(), meta.as_ref(), opts)?;
    let pairer = Pairer::new(file);
    let (tx, rx) = sync_channel::<Batch>(4);
    let (pairer, done) = std::thread::scope(|s| {
        let h = s.spawn(move || produce(lines, pairer, first, tx));
        let done = consume(rx, &mut back);
        (h.join().expect("the reader thread does not panic"), done)
    });
    done?;
    let mut r = back.finish(pairer)?;
    r.partial_line = tail.line();
    Ok(r)
}
