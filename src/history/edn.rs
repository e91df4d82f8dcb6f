//! A streaming reader and a writer for EDN, the notation Jepsen and Knossos
//! store histories in.
//!
//! The reader pulls bytes from any `BufRead` and tracks line numbers, so a
//! history of gigabytes is parsed one form at a time and every error names
//! its line. It covers what histories use: nil, booleans, integers, floats,
//! strings, characters, keywords, symbols, lists, vectors, maps, sets,
//! tagged values (`#inst "..."`, whose tag is dropped), `#_` discards, `;`
//! comments and commas as whitespace. (No EDN crate reads from a stream with
//! line numbers, hence this small one.)

use std::fmt::Write as _;
use std::io::BufRead;

/// One EDN value.
#[derive(Clone, Debug, PartialEq)]
pub enum Edn {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Char(char),
    /// A keyword, without its leading colon.
    Keyword(String),
    Symbol(String),
    List(Vec<Edn>),
    Vector(Vec<Edn>),
    Map(Vec<(Edn, Edn)>),
    Set(Vec<Edn>),
}

impl Edn {
    /// Look a keyword key up in a map.
    pub fn get(&self, key: &str) -> Option<&Edn> {
        match self {
            Edn::Map(kvs) => kvs
                .iter()
                .find(|(k, _)| matches!(k, Edn::Keyword(n) if n == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as JSON: keywords and symbols become strings (without the
    /// colon), lists and sets arrays, maps objects keyed by their keys' names.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Edn::Nil => J::Null,
            Edn::Bool(b) => J::Bool(*b),
            Edn::Int(i) => J::from(*i),
            Edn::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => J::String(s.clone()),
            Edn::Char(c) => J::String(c.to_string()),
            Edn::List(v) | Edn::Vector(v) | Edn::Set(v) => {
                J::Array(v.iter().map(Edn::to_json).collect())
            }
            Edn::Map(kvs) => J::Object(
                kvs.iter()
                    .map(|(k, v)| (k.name_or_text(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// A keyword's, symbol's or string's name; other values as EDN text.
    pub fn name_or_text(&self) -> String {
        match self {
            Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for Edn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        write_edn(&mut s, self);
        f.write_str(&s)
    }
}

/// Append the EDN text of `v` to `out`.
pub fn write_edn(out: &mut String, v: &Edn) {
    let seq = |out: &mut String, open: &str, items: &[Edn], close: char| {
        out.push_str(open);
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            write_edn(out, x);
        }
        out.push(close);
    };
    match v {
        Edn::Nil => out.push_str("nil"),
        Edn::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Edn::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Edn::Float(x) => {
            let _ = write!(out, "{x:?}");
        }
        Edn::Str(s) => {
            // JSON string escapes are valid EDN string escapes.
            out.push_str(&serde_json::Value::String(s.clone()).to_string());
        }
        Edn::Char(c) => {
            let _ = write!(out, "\\{c}");
        }
        Edn::Keyword(k) => {
            out.push(':');
            out.push_str(k);
        }
        Edn::Symbol(s) => out.push_str(s),
        Edn::List(v) => seq(out, "(", v, ')'),
        Edn::Vector(v) => seq(out, "[", v, ']'),
        Edn::Set(v) => seq(out, "#{", v, '}'),
        Edn::Map(kvs) => {
            out.push('{');
            for (i, (k, x)) in kvs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_edn(out, k);
                out.push(' ');
                write_edn(out, x);
            }
            out.push('}');
        }
    }
}

/// A parse error: the 1-based line and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct EdnError {
    pub line: u64,
    pub msg: String,
}

/// How deeply forms may nest (collections, tags and `#_` discards count
/// alike). Far above any real history, and low enough that reading and
/// dropping a form never exhausts a thread's stack.
pub const MAX_DEPTH: usize = 1000;

const TOO_DEEP: &str = "forms nest deeper than";

impl EdnError {
    /// Whether the input was refused for nesting deeper than [`MAX_DEPTH`].
    pub fn is_too_deep(&self) -> bool {
        self.msg.starts_with(TOO_DEEP)
    }
}

/// Reads EDN forms from a byte stream.
pub struct EdnReader<R: BufRead> {
    input: R,
    buf: Vec<u8>,
    pos: usize,
    line: u64,
    eof: bool,
    /// Bytes read of the current line, and how many it may have.
    column: u64,
    max_line: u64,
}

/// A collection's kind.
#[derive(Clone, Copy)]
enum Coll {
    List,
    Vector,
    Map,
    Set,
}

impl Coll {
    fn close(self) -> u8 {
        match self {
            Coll::List => b')',
            Coll::Vector => b']',
            Coll::Map | Coll::Set => b'}',
        }
    }
}

/// A form begun but not finished, while [`EdnReader::read`] reads inside it.
enum Open {
    /// A collection: the forms read inside it so far, and the line it
    /// opened on.
    Coll {
        kind: Coll,
        items: Vec<Edn>,
        line: u64,
    },
    /// A tag (`#inst`): the next form is its value.
    Tag,
    /// `#_`: the next form is read and dropped.
    Discard,
}

/// What one token of input does: open a form, or finish one.
enum Step {
    Open(Open),
    Done(Edn),
}

impl Open {
    fn coll(kind: Coll, line: u64) -> Open {
        Open::Coll {
            kind,
            items: Vec::new(),
            line,
        }
    }
}

/// Hand a finished form to the form around it; the form itself when
/// nothing is open.
fn deliver(open: &mut Vec<Open>, v: Edn) -> Option<Edn> {
    loop {
        match open.last_mut() {
            None => return Some(v),
            Some(Open::Coll { items, .. }) => {
                items.push(v);
                return None;
            }
            Some(Open::Tag) => {
                open.pop();
            }
            Some(Open::Discard) => {
                open.pop();
                return None;
            }
        }
    }
}

fn is_delim(b: u8) -> bool {
    b.is_ascii_whitespace()
        || matches!(
            b,
            b',' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'"' | b';'
        )
}

impl<R: BufRead> EdnReader<R> {
    pub fn new(input: R) -> Self {
        EdnReader {
            input,
            buf: Vec::new(),
            pos: 0,
            line: 1,
            eof: false,
            column: 0,
            max_line: super::jsonl::max_line_bytes(),
        }
    }

    /// The same reader with another line cap.
    pub fn with_max_line(mut self, max: u64) -> Self {
        self.max_line = max;
        self
    }

    /// The current line (1-based).
    pub fn line(&self) -> u64 {
        self.line
    }

    fn err<T>(&self, msg: impl Into<String>) -> Result<T, EdnError> {
        Err(EdnError {
            line: self.line,
            msg: msg.into(),
        })
    }

    fn peek(&mut self) -> Result<Option<u8>, EdnError> {
        if self.pos < self.buf.len() {
            return Ok(Some(self.buf[self.pos]));
        }
        if self.eof {
            return Ok(None);
        }
        self.buf.clear();
        self.pos = 0;
        let chunk = match self.input.fill_buf() {
            Ok(c) => c,
            Err(e) => return self.err(format!("cannot read: {e}")),
        };
        if chunk.is_empty() {
            self.eof = true;
            return Ok(None);
        }
        self.buf.extend_from_slice(chunk);
        let n = chunk.len();
        self.input.consume(n);
        Ok(Some(self.buf[0]))
    }

    fn bump(&mut self) -> Result<Option<u8>, EdnError> {
        let b = self.peek()?;
        if let Some(c) = b {
            self.pos += 1;
            if c == b'\n' {
                self.line += 1;
                self.column = 0;
            } else {
                self.column += 1;
                if self.column > self.max_line {
                    return self.err(super::jsonl::too_long(self.max_line));
                }
            }
        }
        Ok(b)
    }

    /// Skip whitespace, commas and comments.
    fn skip_blank(&mut self) -> Result<(), EdnError> {
        while let Some(b) = self.peek()? {
            if b.is_ascii_whitespace() || b == b',' {
                self.bump()?;
            } else if b == b';' {
                while let Some(c) = self.bump()? {
                    if c == b'\n' {
                        break;
                    }
                }
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Whether a `#_` (discard the next form) comes next.
    fn at_discard(&mut self) -> Result<bool, EdnError> {
        Ok(self.peek()? == Some(b'#') && self.peek_second()? == Some(b'_'))
    }

    /// Skip whitespace, commas, comments and `#_` discarded forms.
    pub fn skip_ws(&mut self) -> Result<(), EdnError> {
        loop {
            self.skip_blank()?;
            if !self.at_discard()? {
                return Ok(());
            }
            self.bump()?;
            self.bump()?;
            self.read()?;
        }
    }

    fn peek_second(&mut self) -> Result<Option<u8>, EdnError> {
        if self.pos + 1 >= self.buf.len() && !self.eof {
            // Pull the next chunk in behind the current byte.
            let rest = self.buf[self.pos..].to_vec();
            let chunk = match self.input.fill_buf() {
                Ok(c) => c.to_vec(),
                Err(e) => return self.err(format!("cannot read: {e}")),
            };
            self.input.consume(chunk.len());
            if chunk.is_empty() {
                self.eof = true;
            }
            self.buf = rest;
            self.buf.extend_from_slice(&chunk);
            self.pos = 0;
        }
        Ok(self.buf.get(self.pos + 1).copied())
    }

    /// The next byte after whitespace, without consuming it; `None` at end.
    pub fn peek_form(&mut self) -> Result<Option<u8>, EdnError> {
        self.skip_ws()?;
        self.peek()
    }

    /// Consume one byte (after [`peek_form`](Self::peek_form) showed it).
    pub fn consume_byte(&mut self) -> Result<(), EdnError> {
        self.bump().map(|_| ())
    }

    /// Read the next form; `None` at end of input.
    ///
    /// Nested forms are kept on an explicit stack, not the call stack, so
    /// no input can exhaust the thread's stack; nesting deeper than
    /// [`MAX_DEPTH`] is an error all the same (the values are processed
    /// recursively later).
    pub fn read(&mut self) -> Result<Option<Edn>, EdnError> {
        let mut open: Vec<Open> = Vec::new();
        loop {
            self.skip_blank()?;
            let Some(b) = self.peek()? else {
                return self.end_of_input(open);
            };
            let step = match b {
                b'(' | b'[' | b'{' => {
                    let kind = match b {
                        b'(' => Coll::List,
                        b'[' => Coll::Vector,
                        _ => Coll::Map,
                    };
                    self.bump()?;
                    Step::Open(Open::coll(kind, self.line))
                }
                b'#' => self.read_dispatch()?,
                b')' | b']' | b'}' => Step::Done(self.close(&mut open, b)?),
                b'"' => {
                    self.bump()?;
                    Step::Done(Edn::Str(self.read_string()?))
                }
                b'\\' => {
                    self.bump()?;
                    Step::Done(self.read_char()?)
                }
                _ => Step::Done(self.read_atom()?),
            };
            match step {
                Step::Open(_) if open.len() >= MAX_DEPTH => {
                    return self.err(format!(
                        "{TOO_DEEP} {MAX_DEPTH} levels (hint: no history nests this deeply; \
                         the file is damaged or not a history)"
                    ))
                }
                Step::Open(f) => open.push(f),
                Step::Done(v) => {
                    if let Some(v) = deliver(&mut open, v) {
                        return Ok(Some(v));
                    }
                }
            }
        }
    }

    /// After `#`: a set, a discard or a tag begins.
    fn read_dispatch(&mut self) -> Result<Step, EdnError> {
        self.bump()?; // '#'
        match self.peek()? {
            Some(b'{') => {
                self.bump()?;
                Ok(Step::Open(Open::coll(Coll::Set, self.line)))
            }
            Some(b'_') => {
                self.bump()?;
                Ok(Step::Open(Open::Discard))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                // A tagged value: drop the tag, keep the value.
                self.read_token()?;
                Ok(Step::Open(Open::Tag))
            }
            _ => self.err("unsupported `#` form"),
        }
    }

    /// The input ended with `open` forms unfinished.
    fn end_of_input(&self, mut open: Vec<Open>) -> Result<Option<Edn>, EdnError> {
        while matches!(open.last(), Some(Open::Discard)) {
            open.pop();
        }
        match open.last() {
            None => Ok(None),
            Some(Open::Tag) => self.err("a tag without a value"),
            Some(Open::Coll { kind, line, .. }) => Err(EdnError {
                line: *line,
                msg: format!("unclosed collection (expected `{}`)", kind.close() as char),
            }),
            Some(Open::Discard) => unreachable!("discards were popped"),
        }
    }

    /// The closing byte `b`: finish the innermost collection.
    fn close(&mut self, open: &mut Vec<Open>, b: u8) -> Result<Edn, EdnError> {
        let Some(Open::Coll { kind, .. }) = open.last() else {
            return self.err(format!("unexpected `{}`", b as char));
        };
        if kind.close() != b {
            return self.err(format!("unexpected `{}`", b as char));
        }
        self.bump()?;
        let Some(Open::Coll { kind, items, line }) = open.pop() else {
            unreachable!("just matched a collection");
        };
        Ok(match kind {
            Coll::List => Edn::List(items),
            Coll::Vector => Edn::Vector(items),
            Coll::Set => Edn::Set(items),
            Coll::Map => {
                if items.len() % 2 != 0 {
                    return Err(EdnError {
                        line,
                        msg: "a map needs an even number of forms".into(),
                    });
                }
                let mut kvs = Vec::with_capacity(items.len() / 2);
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    kvs.push((k, v));
                }
                Edn::Map(kvs)
            }
        })
    }

    fn read_token(&mut self) -> Result<String, EdnError> {
        let mut tok = Vec::new();
        while let Some(b) = self.peek()? {
            if is_delim(b) {
                break;
            }
            tok.push(b);
            self.bump()?;
        }
        String::from_utf8(tok).or_else(|_| self.err("invalid UTF-8"))
    }

    fn read_string(&mut self) -> Result<String, EdnError> {
        let start = self.line;
        let mut out = Vec::new();
        loop {
            let Some(b) = self.bump()? else {
                return Err(EdnError {
                    line: start,
                    msg: "unterminated string".into(),
                });
            };
            match b {
                b'"' => break,
                b'\\' => match self.bump()? {
                    Some(b't') => out.push(b'\t'),
                    Some(b'r') => out.push(b'\r'),
                    Some(b'n') => out.push(b'\n'),
                    Some(b'u') => {
                        let mut hex = String::new();
                        for _ in 0..4 {
                            match self.bump()? {
                                Some(h) => hex.push(h as char),
                                None => return self.err("unterminated \\u escape"),
                            }
                        }
                        let c = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .map_or_else(|| self.err(format!("bad escape \\u{hex}")), Ok)?;
                        let mut tmp = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                    }
                    Some(c @ (b'"' | b'\\')) => out.push(c),
                    Some(c) => return self.err(format!("bad escape \\{}", c as char)),
                    None => return self.err("unterminated string"),
                },
                _ => out.push(b),
            }
        }
        String::from_utf8(out).or_else(|_| self.err("invalid UTF-8 in string"))
    }

    fn read_char(&mut self) -> Result<Edn, EdnError> {
        let first = match self.bump()? {
            Some(b) => b,
            None => return self.err("a `\\` without a character"),
        };
        let mut tok = vec![first];
        while let Some(b) = self.peek()? {
            if is_delim(b) {
                break;
            }
            tok.push(b);
            self.bump()?;
        }
        let s = String::from_utf8(tok).or_else(|_| self.err("invalid UTF-8"))?;
        let c = match s.as_str() {
            "newline" => '\n',
            "space" => ' ',
            "tab" => '\t',
            "return" => '\r',
            _ if s.chars().count() == 1 => s.chars().next().unwrap_or(' '),
            _ => return self.err(format!("unknown character \\{s}")),
        };
        Ok(Edn::Char(c))
    }

    fn read_atom(&mut self) -> Result<Edn, EdnError> {
        let tok = self.read_token()?;
        if tok.is_empty() {
            let b = self.peek()?.unwrap_or(b' ');
            return self.err(format!("unexpected `{}`", b as char));
        }
        Ok(match tok.as_str() {
            "nil" => Edn::Nil,
            "true" => Edn::Bool(true),
            "false" => Edn::Bool(false),
            _ if tok.starts_with(':') => {
                if tok.len() == 1 {
                    return self.err("an empty keyword");
                }
                Edn::Keyword(tok[1..].to_string())
            }
            _ if looks_numeric(&tok) => {
                parse_number(&tok).map_or_else(|| self.err(format!("bad number `{tok}`")), Ok)?
            }
            _ => Edn::Symbol(tok),
        })
    }
}

fn looks_numeric(tok: &str) -> bool {
    let b = tok.as_bytes();
    b[0].is_ascii_digit() || (b.len() > 1 && matches!(b[0], b'-' | b'+') && b[1].is_ascii_digit())
}

fn parse_number(tok: &str) -> Option<Edn> {
    let t = tok.strip_suffix('N').unwrap_or(tok);
    if let Ok(i) = t.parse::<i64>() {
        return Some(Edn::Int(i));
    }
    let t = tok.strip_suffix('M').unwrap_or(tok);
    t.parse::<f64>().ok().map(Edn::Float)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(s: &str) -> Result<Vec<Edn>, EdnError> {
        let mut r = EdnReader::new(std::io::Cursor::new(s.as_bytes().to_vec()));
        let mut out = Vec::new();
        while let Some(v) = r.read()? {
            out.push(v);
        }
        Ok(out)
    }

    #[test]
    fn reads_history_forms() {
        let v = parse_all("; c\n[{:type :invoke, :f :cas, :value [1 2] :process 3}\n #_ {:x 1} #{1} \"a\\\"b\" -4 2.5 \\a]")
            .unwrap();
        let Edn::Vector(items) = &v[0] else { panic!() };
        assert_eq!(items[0].get("f"), Some(&Edn::Keyword("cas".into())));
        assert_eq!(
            items[0].get("value").unwrap().to_json(),
            serde_json::json!([1, 2])
        );
        assert_eq!(items[1], Edn::Set(vec![Edn::Int(1)]));
        assert_eq!(items[2], Edn::Str("a\"b".into()));
        assert_eq!(items[3], Edn::Int(-4));
        assert_eq!(items[4], Edn::Float(2.5));
        assert_eq!(items[5], Edn::Char('a'));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_all("[{:a 1}\n{:b 2\n").unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
        let e = parse_all("{:a 1}\n\n:b \"x").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(parse_all("{:a}").is_err());
    }

    #[test]
    fn nesting_is_capped_with_the_line() {
        // As deep as allowed: read, shown, turned into JSON and back to text
        // within a test thread's stack.
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        let v = parse_all(&ok).unwrap().remove(0);
        assert_eq!(v.to_string(), ok);
        assert_eq!(v.to_json().to_string(), ok);
        for deep in [
            "\n".to_string() + &"[".repeat(MAX_DEPTH + 1),
            "\n".to_string() + &"#_".repeat(20_000) + "1",
            "\n".to_string() + &"#a ".repeat(20_000) + "1",
            "\n".to_string() + &"{:a ".repeat(20_000),
        ] {
            let e = parse_all(&deep).unwrap_err();
            assert!(e.is_too_deep() && e.line == 2, "{e:?}");
        }
    }

    #[test]
    fn lines_are_capped() {
        let read = |s: &str| {
            let mut r =
                EdnReader::new(std::io::Cursor::new(s.as_bytes().to_vec())).with_max_line(8);
            r.read()
        };
        assert!(read("[1 2 3]\n[4 5 6]").is_ok());
        let e = read("[1\n\"123456789\"]").unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
        assert!(e.msg.contains("longer than 8 bytes"), "{e:?}");
    }

    #[test]
    fn writes_what_it_reads() {
        let text = "{:type :ok, :f :txn, :value [[:read :x 1] (2 #{3})], :s \"q\\n\"}";
        let v = parse_all(text).unwrap().remove(0);
        assert_eq!(parse_all(&v.to_string()).unwrap()[0], v);
    }
}
