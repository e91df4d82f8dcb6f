//! `lockjaw convert`: its arguments; the conversion itself is
//! [`super::convert`]. Ops that break the pairing rules are an error
//! (exit 3).

use super::convert::{Conversion, Target};
use super::import::Format;
use super::jsonl::{set_max_line_bytes, PartialTail, DEFAULT_MAX_LINE_BYTES};
use crate::exit::Exit;
use std::path::PathBuf;

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
    /// The longest history line to read, in bytes (default 64 MiB); a
    /// longer one is an error naming its line.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_line_bytes: u64,
    /// Initial model value (JSON or EDN) to record in the meta record.
    #[arg(long)]
    pub init: Option<String>,
}

impl ConvertArgs {
    /// The conversion these arguments ask for; an error names the flag at
    /// fault.
    pub fn conversion(&self) -> Result<Conversion, String> {
        let init = super::init_flag(self.init.as_deref())?;
        Ok(Conversion {
            file: self.file.clone(),
            format: self.format,
            to: self.to,
            output: self.output.clone(),
            model: self.model.clone(),
            init,
        })
    }
}

pub fn convert(args: ConvertArgs) -> Exit {
    set_max_line_bytes(args.max_line_bytes);
    let conversion = match args.conversion() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    match conversion.run() {
        Ok(None) => Exit::Valid,
        Ok(Some(line)) => {
            let file = conversion.file.display();
            eprintln!("warning: {file}:{line}: {}", PartialTail::message());
            Exit::Valid
        }
        // A reader such as `head` closed the pipe: not an error of ours.
        Err(e) if e.msg.contains("Broken pipe") => Exit::Valid,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
