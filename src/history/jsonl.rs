//! Streaming reader and writer for lockjaw's JSON Lines history format.
//!
//! The reader never holds the file as text: it reads one line at a time,
//! transparently gunzipping `.gz` input (detected by its magic bytes). A
//! line longer than [`max_line_bytes`] is an error before more of it is
//! read; a last line cut off mid-write (no newline, JSON that ends too
//! early, as a killed run leaves it) is set aside as a [`PartialTail`].

use super::{HistoryError, Meta, Op};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The longest history line read by default (64 MiB): far above any
/// real op, low enough that a hostile file cannot take the memory.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 64 << 20;

static MAX_LINE_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_LINE_BYTES);

/// The longest line the history readers accept, in bytes.
pub fn max_line_bytes() -> u64 {
    MAX_LINE_BYTES.load(Ordering::Relaxed)
}

/// Set the longest line the history readers opened from now on accept
/// (`--max-line-bytes`; set once, by the command line).
pub fn set_max_line_bytes(n: u64) {
    MAX_LINE_BYTES.store(n.max(1), Ordering::Relaxed);
}

/// The error for a line over the cap.
pub fn too_long(max: u64) -> String {
    format!(
        "line longer than {max} bytes (hint: a history line holds one op; \
         `--max-line-bytes N` raises the cap)"
    )
}

/// Where a reader set aside a cut-off last line: shared with whoever asks
/// once the reader is used up (the checkers hand the reader away).
#[derive(Clone, Debug, Default)]
pub struct PartialTail(Arc<AtomicU64>);

impl PartialTail {
    /// The 1-based line that was cut off and ignored, if one was.
    pub fn line(&self) -> Option<u64> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    fn set(&self, line: u64) {
        self.0.store(line, Ordering::Relaxed);
    }

    /// What to tell the user about the line set aside.
    pub fn message() -> &'static str {
        "the last line is cut off (as a run killed mid-write leaves it) and was ignored: \
         the verdict covers the complete lines (hint: `lockjaw heal RUN_DIR` removes it \
         from a run's history)"
    }
}

/// The error for a line cut short that is not the last one.
pub fn truncated(e: &serde_json::Error) -> String {
    format!(
        "truncated line: {e} (hint: only the last line may be cut off, by a writer \
         killed mid-line; this one is followed by more, so the file is damaged)"
    )
}

/// Whether a line without its newline is JSON that ended too early: what
/// a writer killed mid-line leaves.
fn is_cut_json(line: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err_and(|e| e.is_eof())
}

/// Reads a history file one operation at a time.
pub struct JsonlReader {
    lines: LineReader,
    meta: Option<Meta>,
    /// A first line that was an op, not meta, kept for the iterator.
    pending: Option<Result<Op, HistoryError>>,
}

/// The one streaming line reader of histories: the next non-blank line as
/// bytes, its 1-based line number, and errors that name FILE:LINE. The
/// JSONL reader and the lock checks' reader thread both read through it.
pub struct LineReader {
    file: String,
    input: Box<dyn BufRead + Send>,
    line: u64,
    buf: Vec<u8>,
    max: u64,
    tail: PartialTail,
}

impl LineReader {
    /// Lines of `input`, at most [`max_line_bytes`] long each.
    pub fn new(file: String, input: Box<dyn BufRead + Send>) -> LineReader {
        LineReader {
            file,
            input,
            line: 0,
            buf: Vec::new(),
            max: max_line_bytes(),
            tail: PartialTail::default(),
        }
    }

    /// The same reader with another line cap.
    pub fn with_max_line(mut self, max: u64) -> LineReader {
        self.max = max;
        self
    }

    /// Where a cut-off last line is noted (see [`PartialTail`]).
    pub fn partial_tail(&self) -> PartialTail {
        self.tail.clone()
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// The line number of the current line (1-based; 0 before the first).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The current line (without trailing whitespace).
    pub fn current(&self) -> &[u8] {
        self.buf.trim_ascii_end()
    }

    /// An error at the current line.
    pub fn err(&self, msg: String) -> HistoryError {
        HistoryError {
            file: self.file.clone(),
            line: self.line,
            msg,
        }
    }

    /// Read the next non-blank line; false at the end of input. Never
    /// holds more than the cap (plus one byte) of a line: a longer one is
    /// an error. A cut-off last line ends the input (noted in
    /// [`partial_tail`](Self::partial_tail)).
    pub fn advance(&mut self) -> Result<bool, HistoryError> {
        loop {
            self.buf.clear();
            let n = (&mut self.input)
                .take(self.max.saturating_add(1))
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| HistoryError {
                    file: self.file.clone(),
                    line: self.line + 1,
                    msg: format!("cannot read: {e}"),
                })?;
            if n == 0 {
                return Ok(false);
            }
            self.line += 1;
            if self.buf.last() != Some(&b'\n') {
                if self.buf.len() as u64 > self.max {
                    self.buf = Vec::new();
                    return Err(self.err(too_long(self.max)));
                }
                if is_cut_json(&self.buf) {
                    self.tail.set(self.line);
                    self.buf.clear();
                    return Ok(false);
                }
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(true);
            }
        }
    }
}

/// A first line parsed as JSON: the meta record (its `type` removed, its
/// version checked), or `None` when the line is an op.
pub fn meta_record(mut v: serde_json::Value) -> Result<Option<Meta>, String> {
    if v.get("type").and_then(|t| t.as_str()) != Some("meta") {
        return Ok(None);
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("type");
    }
    let meta: Meta = serde_json::from_value(v).map_err(|e| format!("bad meta record: {e}"))?;
    meta.check_version()?;
    Ok(Some(meta))
}

/// Open a file for line-by-line reading, gunzipping it when it starts with
/// the gzip magic bytes.
pub fn open_lines(path: &Path) -> Result<Box<dyn BufRead + Send>, HistoryError> {
    let name = path.display().to_string();
    let err = |msg: String| HistoryError {
        file: name.clone(),
        line: 0,
        msg,
    };
    let f = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
    let mut r = BufReader::with_capacity(1 << 16, f);
    let head = r.fill_buf().map_err(|e| err(format!("cannot read: {e}")))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::bufread::MultiGzDecoder::new(r);
        Ok(Box::new(BufReader::with_capacity(1 << 16, gz)))
    } else {
        Ok(Box::new(r))
    }
}

impl JsonlReader {
    /// Open `path` and read its meta record, if its first line is one.
    pub fn open(path: &Path) -> Result<JsonlReader, HistoryError> {
        let input = open_lines(path)?;
        Self::from_reader(path.display().to_string(), input)
    }

    /// Read a history from any buffered input; `name` is used in errors.
    pub fn from_reader(
        name: String,
        input: Box<dyn BufRead + Send>,
    ) -> Result<JsonlReader, HistoryError> {
        let mut r = JsonlReader {
            lines: LineReader::new(name, input),
            meta: None,
            pending: None,
        };
        if !r.lines.advance()? {
            if r.lines.partial_tail().line().is_some() {
                return Err(r.lines.err(
                    "the only line is cut off mid-write: nothing to read (hint: a run killed \
                     before it wrote its meta record leaves no history)"
                        .into(),
                ));
            }
        } else {
            let text = r.text()?;
            let v: serde_json::Value =
                serde_json::from_str(text).map_err(|e| r.lines.err(diagnose(text, &e)))?;
            match meta_record(v).map_err(|e| r.lines.err(e))? {
                Some(meta) => r.meta = Some(meta),
                None => r.pending = Some(r.parse_op()),
            }
        }
        Ok(r)
    }

    pub fn meta(&self) -> Option<&Meta> {
        self.meta.as_ref()
    }

    pub fn file(&self) -> &str {
        self.lines.file()
    }

    /// Where a cut-off last line is noted.
    pub fn partial_tail(&self) -> PartialTail {
        self.lines.partial_tail()
    }

    /// The line of the op most recently returned (1-based).
    pub fn line(&self) -> u64 {
        self.lines.line()
    }

    /// The current line as text.
    fn text(&self) -> Result<&str, HistoryError> {
        std::str::from_utf8(self.lines.current()).map_err(|_| {
            self.lines
                .err("cannot read: stream did not contain valid UTF-8".into())
        })
    }

    fn parse_op(&self) -> Result<Op, HistoryError> {
        let text = self.text()?;
        serde_json::from_str::<Op>(text).map_err(|e| self.lines.err(diagnose(text, &e)))
    }
}

impl Iterator for JsonlReader {
    type Item = Result<Op, HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(p) = self.pending.take() {
            return Some(p);
        }
        match self.lines.advance() {
            Err(e) => Some(Err(e)),
            Ok(false) => None,
            Ok(true) => Some(self.parse_op()),
        }
    }
}

/// Say which field of an op line is wrong, where serde's message would not.
fn diagnose(text: &str, e: &serde_json::Error) -> String {
    use serde_json::Value;
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) if e.is_eof() => return truncated(&e),
        Err(e) => return format!("not valid JSON: {e}"),
    };
    let Some(o) = v.as_object() else {
        return format!("expected a JSON object, got {v}");
    };
    let uint = |v: &Value| v.as_u64().is_some();
    let string = |v: &Value| v.is_string();
    type Check<'a> = (&'a str, bool, &'a dyn Fn(&Value) -> bool, &'a str);
    let checks: [Check; 12] = [
        (
            "time",
            true,
            &uint,
            "a non-negative integer (ns since run start)",
        ),
        (
            "process",
            true,
            &|v| v.is_string() || v.is_i64(),
            "an integer or a string",
        ),
        (
            "type",
            true,
            &|v| matches!(v.as_str(), Some("invoke" | "ok" | "fail" | "info")),
            "one of \"invoke\", \"ok\", \"fail\", \"info\"",
        ),
        ("f", true, &string, "a string"),
        ("index", false, &uint, "a non-negative integer"),
        ("key", false, &|v| v.is_string() || v.is_null(), "a string"),
        (
            "fence",
            false,
            &|v| uint(v) || v.is_null(),
            "a non-negative integer",
        ),
        (
            "lease_ms",
            false,
            &|v| uint(v) || v.is_null(),
            "a non-negative integer",
        ),
        (
            "seq",
            false,
            &|v| uint(v) || v.is_null(),
            "a non-negative integer",
        ),
        (
            "owner",
            false,
            &|v| v.is_string() || v.is_i64() || v.is_null(),
            "a string or an integer",
        ),
        ("node", false, &|v| string(v) || v.is_null(), "a string"),
        ("error", false, &|v| string(v) || v.is_null(), "a string"),
    ];
    if o.get("type").and_then(Value::as_str) == Some("meta") {
        return format!("a meta record is only allowed on the first line: {e}");
    }
    for (name, required, ok, want) in checks {
        match o.get(name) {
            None if required => return format!("missing field `{name}`"),
            Some(v) if !ok(v) => return format!("field `{name}`: expected {want}, got {v}"),
            _ => {}
        }
    }
    if let Some(v) = o.get("unobserved").filter(|v| !v.is_boolean()) {
        return format!("field `unobserved`: expected true or false, got {v}");
    }
    e.to_string()
}

/// Writes a history: the meta record, then one op per line, numbering ops
/// in the order they are written.
pub struct JsonlWriter<W: Write> {
    out: BufWriter<W>,
    next_index: u64,
}

impl JsonlWriter<File> {
    pub fn create(path: &Path, meta: &Meta) -> std::io::Result<JsonlWriter<File>> {
        JsonlWriter::new(File::create(path)?, meta)
    }
}

impl<W: Write> JsonlWriter<W> {
    pub fn new(out: W, meta: &Meta) -> std::io::Result<JsonlWriter<W>> {
        let mut w = JsonlWriter {
            out: BufWriter::new(out),
            next_index: 0,
        };
        let mut v = serde_json::to_value(meta)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), "meta".into());
        }
        serde_json::to_writer(&mut w.out, &v)?;
        w.out.write_all(b"\n")?;
        Ok(w)
    }

    /// Write one op, setting its `index` to its position in the file.
    pub fn write(&mut self, op: &mut Op) -> std::io::Result<()> {
        op.index = self.next_index;
        self.next_index += 1;
        serde_json::to_writer(&mut self.out, op)?;
        self.out.write_all(b"\n")
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> std::io::Result<W> {
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

/// Read a whole history into memory (small files, tests).
pub fn read_all(path: &Path) -> Result<(Option<Meta>, Vec<Op>), HistoryError> {
    let mut r = JsonlReader::open(path)?;
    let meta = r.meta.clone();
    let ops = r.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok((meta, ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{OpType, Process};

    #[test]
    fn round_trip_with_meta() {
        let meta = Meta {
            model: Some("cas-register".into()),
            ..Meta::default()
        };
        let mut w = JsonlWriter::new(Vec::new(), &meta).unwrap();
        let mut op = Op::new(5, Process::Named("3-lease".into()), OpType::Invoke, "renew");
        op.owner = Some("77".into());
        w.write(&mut op).unwrap();
        let bytes = w.into_inner().unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with("{\""));
        let r =
            JsonlReader::from_reader("t".into(), Box::new(std::io::Cursor::new(bytes))).unwrap();
        assert_eq!(r.meta().unwrap().model.as_deref(), Some("cas-register"));
        let ops: Vec<Op> = r.map(|o| o.unwrap()).collect();
        assert_eq!(ops, vec![op]);
    }

    fn lines(text: &str) -> LineReader {
        let input = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
        LineReader::new("h".into(), input)
    }

    #[test]
    fn a_line_over_the_cap_is_an_error_naming_it() {
        let mut r = lines("12345678\n123456789\n").with_max_line(8);
        assert!(r.advance().unwrap());
        let e = r.advance().unwrap_err();
        assert!(
            e.to_string().starts_with("h:2: line longer than 8 bytes"),
            "{e}"
        );
        // Without a newline at the end, too.
        let mut r = lines("123456789").with_max_line(8);
        assert_eq!(r.advance().unwrap_err().line, 1);
    }

    #[test]
    fn only_a_cut_last_line_is_set_aside() {
        let mut r = lines("{}\n{\"time\":1,\"pro");
        let tail = r.partial_tail();
        assert!(r.advance().unwrap());
        assert!(!r.advance().unwrap());
        assert_eq!(tail.line(), Some(2));
        // A complete last line without its newline is a line.
        let mut r = lines("{}\n{\"time\":1}");
        assert!(r.advance().unwrap() && r.advance().unwrap());
        assert_eq!(r.current(), b"{\"time\":1}");
        assert_eq!(r.partial_tail().line(), None);
        // A cut line with more after it is given to the caller (an error there).
        let mut r = lines("{\"time\":1,\n{}\n");
        assert!(r.advance().unwrap());
        assert_eq!(r.current(), b"{\"time\":1,");
        assert_eq!(r.partial_tail().line(), None);
    }

    #[test]
    fn bad_line_names_file_and_line() {
        let text =
            "{\"type\":\"meta\"}\n{\"time\":1,\"process\":0,\"type\":\"bogus\",\"f\":\"read\"}\n";
        let r = JsonlReader::from_reader("h.jsonl".into(), Box::new(std::io::Cursor::new(text)))
            .unwrap();
        let e = r.into_iter().next().unwrap().unwrap_err();
        assert!(e.to_string().starts_with("h.jsonl:2: "), "{e}");
    }
}
