//! Reading a history file for the lock checks: the meta record, then ops
//! parsed on a second thread (parsing JSON is most of the cost) and handed
//! over in batches, each with its line number for error messages.

use super::engine::LockChecker;
use super::report::LockReport;
use super::LockOptions;
use crate::history::jsonl::open_lines;
use crate::history::{HistoryError, Meta, Op};
use std::io::BufRead;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

const BATCH: usize = 2048;

type Batch = Result<Vec<(Op, u64)>, HistoryError>;

struct Lines {
    file: String,
    input: Box<dyn BufRead + Send>,
    line: u64,
    buf: Vec<u8>,
}

impl Lines {
    fn err(&self, msg: String) -> HistoryError {
        HistoryError {
            file: self.file.clone(),
            line: self.line,
            msg,
        }
    }

    /// The next non-blank line into `buf`; false at the end.
    fn next(&mut self) -> Result<bool, HistoryError> {
        loop {
            self.buf.clear();
            let n = self
                .input
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
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(true);
            }
        }
    }

    fn op(&self) -> Result<Op, HistoryError> {
        serde_json::from_slice::<Op>(&self.buf).map_err(|e| self.err(format!("bad op: {e}")))
    }

    /// Parse the current line as the meta record, or `None` if it is an op.
    fn meta(&self) -> Result<Option<Meta>, HistoryError> {
        let v: serde_json::Value = serde_json::from_slice(&self.buf)
            .map_err(|e| self.err(format!("not a JSON object: {e}")))?;
        if v.get("type").and_then(|t| t.as_str()) != Some("meta") {
            return Ok(None);
        }
        let mut v = v;
        if let Some(o) = v.as_object_mut() {
            o.remove("type");
        }
        serde_json::from_value(v)
            .map(Some)
            .map_err(|e| self.err(format!("bad meta record: {e}")))
    }
}

fn produce(mut lines: Lines, first: Option<(Op, u64)>, tx: SyncSender<Batch>) {
    let mut batch: Vec<(Op, u64)> = first.into_iter().collect();
    loop {
        match lines.next() {
            Ok(true) => match lines.op() {
                Ok(op) => batch.push((op, lines.line)),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            },
            Ok(false) => break,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
        if batch.len() >= BATCH && tx.send(Ok(std::mem::take(&mut batch))).is_err() {
            return;
        }
    }
    let _ = tx.send(Ok(batch));
}

fn consume(rx: Receiver<Batch>, mut c: LockChecker) -> Result<LockReport, HistoryError> {
    for batch in rx {
        for (op, line) in batch? {
            c.push_line(op, line)?;
        }
    }
    let file = c.file().to_string();
    c.finish().map_err(|mut e| {
        if e.file.is_empty() {
            e.file = file;
        }
        e
    })
}

/// One pass over the file at `path`.
pub(crate) fn check_path(path: &Path, opts: &LockOptions) -> Result<LockReport, HistoryError> {
    let mut lines = Lines {
        file: path.display().to_string(),
        input: open_lines(path)?,
        line: 0,
        buf: Vec::new(),
    };
    let mut meta = None;
    let mut first = None;
    if lines.next()? {
        match lines.meta()? {
            Some(m) => meta = Some(m),
            None => first = Some((lines.op()?, lines.line)),
        }
    }
    let c = LockChecker::named(lines.file.clone(), meta.as_ref(), opts)?;
    let (tx, rx) = sync_channel::<Batch>(8);
    std::thread::scope(|s| {
        s.spawn(move || produce(lines, first, tx));
        consume(rx, c)
    })
}
