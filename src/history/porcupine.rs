//! Porcupine's Jepsen etcd logs: `INFO  jepsen.util - P :type :f value`.
//!
//! Fields are separated by tabs or runs of spaces. Translation into
//! lockjaw's meaning: `nil` read values are the absent register (JSON
//! `null`); `:info` completions keep the call pending forever; a
//! `:fail :read :timed-out` is a completed read whose value was not observed
//! (the process goes on); other `:fail`s did not take effect. Times come
//! from file order.

use super::edn::{Edn, EdnReader};
use super::jsonl::LineReader;
use super::{HistoryError, Op, OpType, Process};
use std::io::BufRead;

pub(crate) struct EtcdLog {
    lines: LineReader,
    ordinal: u64,
    done: bool,
}

impl EtcdLog {
    pub(crate) fn new(file: String, input: Box<dyn BufRead + Send>) -> EtcdLog {
        EtcdLog {
            lines: LineReader::new(file, input),
            ordinal: 0,
            done: false,
        }
    }

    /// Does this line look like `P :type :f value` (without the log prefix)?
    pub(crate) fn looks_like(line: &str) -> bool {
        let mut t = line.split_whitespace();
        t.next().is_some_and(|p| p.parse::<i64>().is_ok())
            && t.next()
                .is_some_and(|ty| matches!(ty, ":invoke" | ":ok" | ":fail" | ":info"))
    }

    pub(crate) fn partial_tail(&self) -> super::jsonl::PartialTail {
        self.lines.partial_tail()
    }

    fn err(&self, msg: impl Into<String>) -> HistoryError {
        self.lines.err(msg.into())
    }

    fn read_one(&mut self) -> Result<Option<(u64, Op)>, HistoryError> {
        if !self.lines.advance()? {
            if self.lines.line() == 0 {
                return Err(self.err("empty file"));
            }
            return Ok(None);
        }
        let line = String::from_utf8(self.lines.current().to_vec())
            .map_err(|_| self.err("cannot read: stream did not contain valid UTF-8"))?;
        let op = self.parse_line(&line)?;
        self.ordinal += 1;
        Ok(Some((self.lines.line(), op)))
    }

    fn parse_line(&self, line: &str) -> Result<Op, HistoryError> {
        // Drop the log prefix up to " - " when present.
        let body = match line.find(" - ") {
            Some(i) if line[..i].contains("jepsen") => &line[i + 3..],
            _ => line,
        };
        let mut toks = body.split_whitespace();
        let (Some(p), Some(ty), Some(f)) = (toks.next(), toks.next(), toks.next()) else {
            return Err(self.err("expected `P :type :f value`"));
        };
        let value_text = toks.collect::<Vec<_>>().join(" ");
        let process = match p {
            ":nemesis" => Process::Nemesis,
            _ => Process::Num(p.parse().map_err(|_| {
                self.err(format!(
                    "process: expected an integer or :nemesis, got `{p}`"
                ))
            })?),
        };
        let kind = match ty {
            ":invoke" => OpType::Invoke,
            ":ok" => OpType::Ok,
            ":fail" => OpType::Fail,
            ":info" => OpType::Info,
            _ => {
                return Err(self.err(format!(
                    "type: unknown type `{ty}` (expected :invoke, :ok, :fail or :info)"
                )))
            }
        };
        let f = f.strip_prefix(':').unwrap_or(f);
        let value = if value_text.is_empty() {
            Edn::Nil
        } else {
            let mut r = EdnReader::new(std::io::Cursor::new(value_text.clone().into_bytes()));
            r.read()
                .map_err(|e| self.err(format!("value `{value_text}`: {}", e.msg)))?
                .unwrap_or(Edn::Nil)
        };
        let mut op = Op::new(self.ordinal, process, kind, f);
        op.index = self.ordinal;
        match (kind, &value) {
            (OpType::Info, v) | (OpType::Fail, v @ Edn::Keyword(_)) if !op.process.is_nemesis() => {
                // `:info :write :timed-out`: the value slot holds the reason.
                op.error = Some(v.name_or_text());
                if kind == OpType::Fail && f == "read" {
                    // A timed-out read: completed, value unknown.
                    op.kind = OpType::Ok;
                    op.unobserved = true;
                }
            }
            _ => op.value = value.to_json(),
        }
        Ok(op)
    }
}

impl Iterator for EtcdLog {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(text: &str) -> Vec<Op> {
        EtcdLog::new(
            "t".into(),
            Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
        )
        .map(|r| r.unwrap().1)
        .collect()
    }

    #[test]
    fn translates_etcd_meaning() {
        let o = ops("INFO  jepsen.util - 3\t:ok\t:read\tnil\nINFO  jepsen.util - 2   :invoke   :cas   [3 0]\nINFO  jepsen.util - 4\t:info\t:write\t:timed-out\nINFO  jepsen.util - 1\t:fail\t:read\t:timed-out\n");
        assert_eq!(o[0].value, serde_json::Value::Null);
        assert!(!o[0].unobserved);
        assert_eq!(o[1].value, serde_json::json!([3, 0]));
        assert_eq!(
            (o[2].kind, o[2].error.as_deref()),
            (OpType::Info, Some("timed-out"))
        );
        assert!(o[3].unobserved && o[3].kind == OpType::Ok);
        assert_eq!(o[3].time, 3);
    }
}
