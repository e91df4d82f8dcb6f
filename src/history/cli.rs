//! `lockjaw convert`: rewrite a history as lockjaw JSONL or Jepsen/Knossos EDN.
//!
//! Reads any supported format (detected, or `--format`), streams it op by
//! op, and writes it to `-o OUT` or stdout. The output starts with the
//! source's meta record (or the one its format implies, with `--model` and
//! `--init` on top): JSONL as its first line, EDN in a leading
//! `; lockjaw-meta {...}` comment that Jepsen and Knossos skip and lockjaw
//! reads back. Ops that break the pairing rules are an error (exit 3).

use super::export::EdnWriter;
use super::import::{self, Format};
use super::jsonl::JsonlWriter;
use super::pair::Pairer;
use super::{HistoryError, Op};
use crate::exit::Exit;
use std::io::Write;
use std::path::PathBuf;

/// Output format of `convert`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    Jsonl,
    Edn,
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// The history to convert (any supported format, possibly gzipped).
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub to: Target,
    /// Input format (detected by default).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Output file (default: stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Model to record in the output's meta record (register, cas-register,
    /// kv, ...), so that `lockjaw check` on the output needs no flags.
    #[arg(long)]
    pub model: Option<String>,
    /// Initial model value (JSON or EDN) to record in the meta record.
    #[arg(long)]
    pub init: Option<String>,
}

fn io_err(file: &str, e: std::io::Error) -> HistoryError {
    HistoryError {
        file: file.to_string(),
        line: 0,
        msg: format!("cannot write: {e}"),
    }
}

fn run(args: &ConvertArgs) -> Result<(), HistoryError> {
    let src = import::open(&args.file, args.format)?;
    let out_name = args
        .output
        .as_ref()
        .map_or("stdout".to_string(), |p| p.display().to_string());
    let out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::fs::File::create(p).map_err(|e| io_err(&out_name, e))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut meta = src.meta.clone().unwrap_or_default();
    if let Some(m) = &args.model {
        meta.model = Some(m.clone());
    }
    if let Some(i) = &args.init {
        meta.init = Some(super::parse_init(i));
    }
    // The input must be a well-formed history (the pairing rules), or the
    // output would not be one either.
    let mut pairer = Pairer::new(src.file.clone());
    let mut checked = |line: u64, op: &Op| pairer.push(line, op.clone()).map(|_| ());
    match args.to {
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
    Ok(())
}

pub fn convert(args: ConvertArgs) -> Exit {
    match run(&args) {
        Ok(()) => Exit::Valid,
        // A reader such as `head` closed the pipe: not an error of ours.
        Err(e) if e.msg.contains("Broken pipe") => Exit::Valid,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
