//! Rewriting a history as lockjaw JSONL or Jepsen/Knossos EDN
//! (`lockjaw convert`).
//!
//! Reads any supported format (detected, or given), streams it op by op,
//! and writes it to a file or stdout. The output starts with the source's
//! meta record (or the one its format implies, with the model and initial
//! value given on top): JSONL as its first line, EDN in a leading
//! `; lockjaw-meta {...}` comment that Jepsen and Knossos skip and lockjaw
//! reads back. Ops that break the pairing rules are an error.

use super::export::EdnWriter;
use super::import::{self, Format};
use super::jsonl::JsonlWriter;
use super::pair::Pairer;
use super::{HistoryError, Op};
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;

/// Output format of `convert`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    Jsonl,
    Edn,
}

/// One conversion: what to read, what to write, what to add to the meta
/// record.
#[derive(Clone, Debug)]
pub struct Conversion {
    pub file: PathBuf,
    /// Input format; detected when `None`.
    pub format: Option<Format>,
    pub to: Target,
    /// Output file; stdout when `None`.
    pub output: Option<PathBuf>,
    pub model: Option<String>,
    pub init: Option<Value>,
}

fn io_err(file: &str, e: std::io::Error) -> HistoryError {
    HistoryError {
        file: file.to_string(),
        line: 0,
        msg: format!("cannot write: {e}"),
    }
}

impl Conversion {
    /// Convert, op by op. Returns the line of a cut-off last line that was
    /// left out, if there was one.
    pub fn run(&self) -> Result<Option<u64>, HistoryError> {
        let src = import::open(&self.file, self.format)?;
        let tail = src.partial_tail();
        let out_name = self
            .output
            .as_ref()
            .map_or("stdout".to_string(), |p| p.display().to_string());
        let out: Box<dyn Write> = match &self.output {
            Some(p) => Box::new(std::fs::File::create(p).map_err(|e| io_err(&out_name, e))?),
            None => Box::new(std::io::stdout().lock()),
        };
        let mut meta = src.meta.clone().unwrap_or_default();
        if let Some(m) = &self.model {
            meta.model = Some(m.clone());
        }
        if let Some(i) = &self.init {
            meta.init = Some(i.clone());
        }
        // The input must be a well-formed history (the pairing rules), or the
        // output would not be one either.
        let mut pairer = Pairer::new(src.file.clone());
        let mut checked = |line: u64, op: &Op| pairer.push(line, op.clone()).map(|_| ());
        match self.to {
            Target::Jsonl => {
                let mut w = JsonlWriter::new(out, &meta).map_err(|e| io_err(&out_name, e))?;
                for item in src {
                    let (line, mut op) = item?;
                    checked(line, &op)?;
                    w.write(&mut op).map_err(|e| io_err(&out_name, e))?;
                }
                w.flush().map_err(|e| io_err(&out_name, e))?;
            }
            Target::Edn => {
                let mut w = EdnWriter::with_meta(std::io::BufWriter::new(out), &meta)
                    .map_err(|e| io_err(&out_name, e))?;
                for item in src {
                    let (line, op) = item?;
                    checked(line, &op)?;
                    w.write(&op).map_err(|e| io_err(&out_name, e))?;
                }
                w.finish().map_err(|e| io_err(&out_name, e))?;
            }
        }
        Ok(tail.line())
    }
}
