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

/// Reads EDN forms from a byte stream.
pub struct EdnReader<R: BufRead> {
    input: R,
    buf: Vec<u8>,
    pos: usize,
    line: u64,
    eof: bool,
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
        }
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
            }
        }
        Ok(b)
    }

    /// Skip whitespace, commas, comments and `#_` discarded forms.
    pub fn skip_ws(&mut self) -> Result<(), EdnError> {
        while let Some(b) = self.peek()? {
            if b.is_ascii_whitespace() || b == b',' {
                self.bump()?;
            } else if b == b';' {
                while let Some(c) = self.bump()? {
                    if c == b'\n' {
                        break;
                    }
                }
            } else if b == b'#' && self.peek_second()? == Some(b'_') {
                self.bump()?;
                self.bump()?;
                self.read()?;
            } else {
                break;
            }
        }
        Ok(())
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
    pub fn read(&mut self) -> Result<Option<Edn>, EdnError> {
        self.skip_ws()?;
        let Some(b) = self.peek()? else {
            return Ok(None);
        };
        let v = match b {
            b'(' => {
                self.bump()?;
                Edn::List(self.read_seq(b')')?)
            }
            b'[' => {
                self.bump()?;
                Edn::Vector(self.read_seq(b']')?)
            }
            b'{' => {
                self.bump()?;
                self.read_map()?
            }
            b')' | b']' | b'}' => return self.err(format!("unexpected `{}`", b as char)),
            b'"' => {
                self.bump()?;
                Edn::Str(self.read_string()?)
            }
            b'#' => self.read_dispatch()?,
            b'\\' => {
                self.bump()?;
                self.read_char()?
            }
            _ => self.read_atom()?,
        };
        Ok(Some(v))
    }

    fn read_seq(&mut self, close: u8) -> Result<Vec<Edn>, EdnError> {
        let start = self.line;
        let mut items = Vec::new();
        loop {
            self.skip_ws()?;
            match self.peek()? {
                None => {
                    return Err(EdnError {
                        line: start,
                        msg: format!("unclosed collection (expected `{}`)", close as char),
                    })
                }
                Some(c) if c == close => {
                    self.bump()?;
                    return Ok(items);
                }
                Some(_) => items.push(self.read()?.expect("peeked a byte")),
            }
        }
    }

    fn read_map(&mut self) -> Result<Edn, EdnError> {
        let start = self.line;
        let items = self.read_seq(b'}')?;
        if items.len() % 2 != 0 {
            return Err(EdnError {
                line: start,
                msg: "a map needs an even number of forms".into(),
            });
        }
        let mut kvs = Vec::with_capacity(items.len() / 2);
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            kvs.push((k, v));
        }
        Ok(Edn::Map(kvs))
    }

    fn read_dispatch(&mut self) -> Result<Edn, EdnError> {
        self.bump()?; // '#'
        match self.peek()? {
            Some(b'{') => {
                self.bump()?;
                Ok(Edn::Set(self.read_seq(b'}')?))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                // A tagged value: drop the tag, keep the value.
                self.read_token()?;
                match self.read()? {
                    Some(v) => Ok(v),
                    None => self.err("a tag without a value"),
                }
            }
            _ => self.err("unsupported `#` form"),
        }
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
    fn writes_what_it_reads() {
        let text = "{:type :ok, :f :txn, :value [[:read :x 1] (2 #{3})], :s \"q\\n\"}";
        let v = parse_all(text).unwrap().remove(0);
        assert_eq!(parse_all(&v.to_string()).unwrap()[0], v);
    }
}
