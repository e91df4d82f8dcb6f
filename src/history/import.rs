//! Reading any supported history format as lockjaw ops, with detection.
//!
//! Formats: lockjaw JSON Lines, Jepsen/Knossos EDN (one vector or list of op
//! maps, or one map per line), Porcupine's Jepsen etcd logs and Porcupine's
//! kv logs. Each importer translates its source's meaning into lockjaw's:
//! a Jepsen/Knossos ok-read of `nil` is an unobserved value
//! (`unobserved: true`), in Porcupine's etcd logs `nil` is the absent register
//! (`value: null`) and a `:fail :read :timed-out` is a completed read with an
//! unobserved value. Sources without timestamps get times from file order.

use super::edn::{Edn, EdnReader};
use super::jsonl::{open_lines, JsonlReader, PartialTail};
use super::porcupine::EtcdLog;
use super::{HistoryError, Meta, Op, OpType, Process};
use std::collections::VecDeque;
use std::io::BufRead;
use std::path::Path;

/// A history file format.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// lockjaw's JSON Lines (meta record, then one op a line).
    Jsonl,
    /// Jepsen/Knossos EDN: a vector or list of op maps, or one map a line.
    Edn,
    /// Porcupine's Jepsen etcd logs (`INFO  jepsen.util - P :type :f value`).
    PorcupineEtcd,
    /// Porcupine's kv logs (one EDN map a line with `:key`).
    PorcupineKv,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Edn => "edn",
            Format::PorcupineEtcd => "porcupine-etcd",
            Format::PorcupineKv => "porcupine-kv",
        }
    }
}

enum Inner {
    Jsonl(Box<JsonlReader>),
    Edn(EdnOps),
    Etcd(EtcdLog),
}

/// An open history of any format: its meta record (given by the file or
/// implied by the format) and its ops with their line numbers.
pub struct Source {
    pub file: String,
    pub format: Format,
    /// The file's meta record, or what the format implies (model, init).
    pub meta: Option<Meta>,
    inner: Inner,
    buffered: VecDeque<(u64, Op)>,
}

fn herr(file: &str, line: u64, msg: impl Into<String>) -> HistoryError {
    HistoryError {
        file: file.to_string(),
        line,
        msg: msg.into(),
    }
}

/// Open `path` (possibly gzipped) in the given format, or detect it.
pub fn open(path: &Path, format: Option<Format>) -> Result<Source, HistoryError> {
    let name = path.display().to_string();
    let mut input = open_lines(path)?;
    let head = input.fill_buf().map_err(|e| {
        herr(
            &name,
            1,
            format!(
                "cannot read: {e} (hint: a file starting with the gzip magic must be valid gzip)"
            ),
        )
    })?;
    let format = match format {
        Some(f) => f,
        None => detect(head).ok_or_else(|| {
            herr(
                &name,
                0,
                "empty file (hint: a history holds at least a meta record or one op)",
            )
        })?,
    };
    open_input(name, input, format)
}

/// Read a history from any buffered input in the given format.
pub fn open_input(
    name: String,
    input: Box<dyn BufRead + Send>,
    format: Format,
) -> Result<Source, HistoryError> {
    let (inner, meta) = match format {
        Format::Jsonl => {
            let r = JsonlReader::from_reader(name.clone(), input)?;
            let meta = r.meta().cloned();
            (Inner::Jsonl(Box::new(r)), meta)
        }
        Format::Edn | Format::PorcupineKv => {
            let mut input = input;
            let written = edn_meta_comment(&name, &mut input)?;
            let ops = EdnOps::new(name.clone(), input)?;
            let meta = written.or_else(|| {
                (format == Format::PorcupineKv).then(|| Meta {
                    model: Some("kv".into()),
                    init: Some(serde_json::Value::String(String::new())),
                    ..Meta::default()
                })
            });
            (Inner::Edn(ops), meta)
        }
        Format::PorcupineEtcd => {
            let meta = Meta {
                model: Some("cas-register".into()),
                init: Some(serde_json::Value::Null),
                ..Meta::default()
            };
            (Inner::Etcd(EtcdLog::new(name.clone(), input)), Some(meta))
        }
    };
    let mut src = Source {
        file: name,
        format,
        meta,
        inner,
        buffered: VecDeque::new(),
    };
    if format == Format::Edn && src.meta.is_none() && src.looks_like_porcupine_kv()? {
        src.format = Format::PorcupineKv;
        src.meta = Some(Meta {
            model: Some("kv".into()),
            init: Some(serde_json::Value::String(String::new())),
            ..Meta::default()
        });
    }
    Ok(src)
}

/// The comment line `convert --to edn` starts an EDN history with, to
/// carry lockjaw's meta record (Jepsen and Knossos skip comments).
pub const EDN_META_PREFIX: &str = "; lockjaw-meta ";

/// Read the meta record from a leading [`EDN_META_PREFIX`] comment, if
/// the input starts with one. The line stays in the input (the EDN reader
/// skips it as a comment), so line numbers are unchanged.
fn edn_meta_comment(
    name: &str,
    input: &mut Box<dyn BufRead + Send>,
) -> Result<Option<Meta>, HistoryError> {
    let head = input
        .fill_buf()
        .map_err(|e| herr(name, 1, format!("cannot read: {e}")))?;
    let Some(rest) = head.strip_prefix(EDN_META_PREFIX.as_bytes()) else {
        return Ok(None);
    };
    let Some(end) = rest.iter().position(|&b| b == b'\n') else {
        return Err(herr(
            name,
            1,
            "the lockjaw-meta comment is not one complete line within the first 8 KiB",
        ));
    };
    let mut v: serde_json::Value = serde_json::from_slice(&rest[..end])
        .map_err(|e| herr(name, 1, format!("bad lockjaw-meta comment: {e}")))?;
    if let Some(o) = v.as_object_mut() {
        o.remove("type");
    }
    let meta: Meta = serde_json::from_value(v)
        .map_err(|e| herr(name, 1, format!("bad lockjaw-meta comment: {e}")))?;
    meta.check_version().map_err(|e| herr(name, 1, e))?;
    Ok(Some(meta))
}

/// Guess the format from the first bytes of the (gunzipped) file.
pub fn detect(head: &[u8]) -> Option<Format> {
    let text = String::from_utf8_lossy(&head[..head.len().min(4096)]);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if t.is_empty() {
        return None;
    }
    let first_line = t.lines().next().unwrap_or("");
    if t.starts_with('{') && t[1..].trim_start().starts_with('"') {
        return Some(Format::Jsonl);
    }
    if first_line.contains("jepsen.util") || EtcdLog::looks_like(first_line) {
        return Some(Format::PorcupineEtcd);
    }
    Some(Format::Edn)
}

impl Source {
    /// Where a cut-off last line is noted once the ops are read (JSONL and
    /// Porcupine's logs; EDN forms are whole or an error).
    pub fn partial_tail(&self) -> PartialTail {
        match &self.inner {
            Inner::Jsonl(r) => r.partial_tail(),
            Inner::Etcd(r) => r.partial_tail(),
            Inner::Edn(_) => PartialTail::default(),
        }
    }

    /// The first client (non-nemesis) op, read ahead without losing it.
    pub fn first_client_op(&mut self) -> Result<Option<&Op>, HistoryError> {
        let found = loop {
            if let Some(i) = self
                .buffered
                .iter()
                .position(|(_, o)| !o.process.is_nemesis())
            {
                break Some(i);
            }
            match self.read_next() {
                None => break None,
                Some(Err(e)) => return Err(e),
                Some(Ok(x)) => self.buffered.push_back(x),
            }
        };
        Ok(found.map(|i| &self.buffered[i].1))
    }

    fn looks_like_porcupine_kv(&mut self) -> Result<bool, HistoryError> {
        let Inner::Edn(e) = &self.inner else {
            return Ok(false);
        };
        if e.in_collection {
            return Ok(false);
        }
        Ok(self
            .first_client_op()?
            .is_some_and(|o| o.key.is_some() && matches!(o.f.as_str(), "get" | "put" | "append")))
    }

    fn read_next(&mut self) -> Option<Result<(u64, Op), HistoryError>> {
        match &mut self.inner {
            Inner::Jsonl(r) => r.next().map(|res| res.map(|op| (r.line(), op))),
            Inner::Edn(r) => r.next(),
            Inner::Etcd(r) => r.next(),
        }
    }
}

impl Iterator for Source {
    type Item = Result<(u64, Op), HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(x) = self.buffered.pop_front() {
            return Some(Ok(x));
        }
        self.read_next()
    }
}

/// Ops from a Jepsen/Knossos EDN history.
struct EdnOps {
    file: String,
    r: EdnReader<Box<dyn BufRead + Send>>,
    /// The file is one vector/list (rather than one map a line).
    in_collection: bool,
    done: bool,
    ordinal: u64,
    has_time: Option<bool>,
}

impl EdnOps {
    fn new(file: String, input: Box<dyn BufRead + Send>) -> Result<EdnOps, HistoryError> {
        let mut r = EdnReader::new(input);
        let first = r.peek_form().map_err(|e| herr(&file, e.line, e.msg))?;
        let in_collection = matches!(first, Some(b'[' | b'('));
        match first {
            None => {
                return Err(herr(
                    &file,
                    0,
                    "empty file (hint: an EDN history is a vector of op maps)",
                ))
            }
            Some(b'[' | b'(') => r.consume_byte().map_err(|e| herr(&file, e.line, e.msg))?,
            Some(_) => {}
        }
        Ok(EdnOps {
            file,
            r,
            in_collection,
            done: false,
            ordinal: 0,
            has_time: None,
        })
    }

    fn read_one(&mut self) -> Result<Option<(u64, Op)>, HistoryError> {
        let e = |x: super::edn::EdnError| herr(&self.file, x.line, x.msg);
        let next = self.r.peek_form().map_err(e)?;
        match next {
            None if self.in_collection => {
                return Err(herr(
                    &self.file,
                    self.r.line(),
                    "unclosed top-level collection (truncated file?)",
                ))
            }
            None => return Ok(None),
            Some(b']' | b')') if self.in_collection => {
                self.r.consume_byte().map_err(e)?;
                if let Some(b) = self.r.peek_form().map_err(e)? {
                    return Err(herr(
                        &self.file,
                        self.r.line(),
                        format!(
                            "unexpected `{}` after the history's closing bracket",
                            b as char
                        ),
                    ));
                }
                return Ok(None);
            }
            Some(_) => {}
        }
        let line = self.r.line();
        let form = self.r.read().map_err(e)?.expect("peeked a form");
        let op = edn_op(&form, self.ordinal, &mut self.has_time)
            .map_err(|m| herr(&self.file, line, m))?;
        self.ordinal += 1;
        Ok(Some((line, op)))
    }
}

impl Iterator for EdnOps {
    type Item = Result<(u64, Op), HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.read_one().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

fn edn_u64(v: &Edn, field: &str) -> Result<u64, String> {
    match v {
        Edn::Int(i) if *i >= 0 => Ok(*i as u64),
        other => Err(format!(
            "{field}: expected a non-negative integer, got {other}"
        )),
    }
}

/// Translate one Jepsen/Knossos op map into a lockjaw op.
pub fn edn_op(form: &Edn, ordinal: u64, has_time: &mut Option<bool>) -> Result<Op, String> {
    if !matches!(form, Edn::Map(_)) {
        return Err(format!("expected an op map, got {form}"));
    }
    let kind = match form.get("type") {
        Some(Edn::Keyword(k)) => match k.as_str() {
            "invoke" => OpType::Invoke,
            "ok" => OpType::Ok,
            "fail" => OpType::Fail,
            "info" => OpType::Info,
            other => {
                return Err(format!(
                    ":type: unknown type :{other} (expected :invoke, :ok, :fail or :info)"
                ))
            }
        },
        Some(other) => return Err(format!(":type: expected a keyword, got {other}")),
        None => return Err("missing :type".into()),
    };
    let process = match form.get("process") {
        Some(Edn::Int(i)) => Process::Num(*i),
        Some(Edn::Keyword(k)) if k == "nemesis" => Process::Nemesis,
        Some(Edn::Keyword(k) | Edn::Str(k) | Edn::Symbol(k)) => Process::Named(k.clone()),
        Some(other) => {
            return Err(format!(
                ":process: expected an integer or :nemesis, got {other}"
            ))
        }
        None => return Err("missing :process".into()),
    };
    let f = match form.get("f") {
        Some(Edn::Keyword(k) | Edn::Str(k) | Edn::Symbol(k)) => k.clone(),
        Some(other) => return Err(format!(":f: expected a keyword, got {other}")),
        None => return Err("missing :f".into()),
    };
    let time = match (form.get("time"), *has_time) {
        (Some(t), Some(true) | None) => {
            *has_time = Some(true);
            edn_u64(t, ":time")?
        }
        (None, Some(false) | None) => {
            *has_time = Some(false);
            ordinal
        }
        (Some(_), Some(false)) => return Err(":time given, but earlier ops have none".into()),
        (None, Some(true)) => return Err("missing :time (earlier ops have one)".into()),
    };
    let mut op = Op::new(time, process, kind, f);
    op.index = match form.get("index") {
        Some(i) => edn_u64(i, ":index")?,
        None => ordinal,
    };
    let value = form.get("value").unwrap_or(&Edn::Nil);
    op.value = if op.f == "txn" {
        txn_json(value, kind)
    } else {
        value.to_json()
    };
    if kind == OpType::Ok && matches!(value, Edn::Nil) && matches!(op.f.as_str(), "read" | "get") {
        op.unobserved = true;
    }
    op.key = form.get("key").map(Edn::name_or_text);
    op.error = form.get("error").map(Edn::name_or_text);
    op.node = form.get("node").map(Edn::name_or_text);
    // lockjaw's lock fields (what `convert --to edn` writes).
    let opt_u64 = |name: &str| -> Result<Option<u64>, String> {
        match form.get(name) {
            None | Some(Edn::Nil) => Ok(None),
            Some(v) => edn_u64(v, &format!(":{name}")).map(Some),
        }
    };
    op.fence = opt_u64("fence")?;
    op.lease_ms = opt_u64("lease_ms")?;
    op.seq = opt_u64("seq")?;
    op.owner = match form.get("owner") {
        None | Some(Edn::Nil) => None,
        Some(Edn::Int(i)) => Some(i.to_string()),
        Some(o) => Some(Edn::name_or_text(o)),
    };
    Ok(op)
}

/// A Knossos transaction: micro-ops `[f k v]`; on a completion, a read of
/// `nil` was not observed and becomes `[f k]` (no value) in lockjaw.
fn txn_json(value: &Edn, kind: OpType) -> serde_json::Value {
    let (Edn::Vector(mops) | Edn::List(mops)) = value else {
        return value.to_json();
    };
    let conv = |m: &Edn| match m {
        Edn::Vector(parts) | Edn::List(parts)
            if kind == OpType::Ok && parts.len() == 3 && matches!(parts[2], Edn::Nil) =>
        {
            serde_json::Value::Array(parts[..2].iter().map(Edn::to_json).collect())
        }
        other => other.to_json(),
    };
    serde_json::Value::Array(mops.iter().map(conv).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str, format: Option<Format>) -> Result<Source, HistoryError> {
        let f = format.or_else(|| detect(text.as_bytes())).unwrap();
        open_input(
            "t".into(),
            Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
            f,
        )
    }

    #[test]
    fn detects_formats() {
        assert_eq!(detect(b"  {\"type\":\"meta\"}"), Some(Format::Jsonl));
        assert_eq!(
            detect(b"INFO  jepsen.util - 0\t:invoke\t:read\tnil\n"),
            Some(Format::PorcupineEtcd)
        );
        assert_eq!(detect(b"; x\n[{:type :ok}]"), Some(Format::Edn));
        assert_eq!(detect(b" \n "), None);
        let s = src(
            "{:process 0, :type :invoke, :f :get, :key \"1\", :value nil}\n",
            None,
        )
        .unwrap();
        assert_eq!(s.format, Format::PorcupineKv);
        assert_eq!(s.meta.unwrap().model.as_deref(), Some("kv"));
    }

    #[test]
    fn knossos_nil_read_is_unobserved_and_times_follow_file_order() {
        let s = src("[{:process 0 :type :invoke :f :read :value nil}\n {:process :nemesis :type :info :f :kill}\n {:process 0 :type :ok :f :read :value nil}]", None).unwrap();
        let ops: Vec<(u64, Op)> = s.map(Result::unwrap).collect();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[1].1.process, Process::Nemesis);
        assert!(ops[2].1.unobserved);
        assert_eq!((ops[2].0, ops[2].1.time), (3, 2));
    }

    #[test]
    fn edn_errors_name_line_and_field() {
        let s = src(
            "[{:process 0 :type :invoke :f :read}\n{:process 0 :type :bogus :f :read}]",
            None,
        )
        .unwrap();
        let e = s
            .map(|r| r.map(|_| ()))
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert!(
            e.to_string().starts_with("t:2: :type: unknown type :bogus"),
            "{e}"
        );
        let s = src("[{:process 0 :type :invoke :f :read}\n", None).unwrap();
        let e = s
            .map(|r| r.map(|_| ()))
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert!(e.to_string().contains("unclosed"), "{e}");
    }
}
