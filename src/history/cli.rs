//! Command-line entry points of the `history` module (not implemented yet).

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {}

pub fn convert(_args: ConvertArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}
