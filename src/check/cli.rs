//! Command-line entry points of the `check` module (not implemented yet).

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {}

pub fn check(_args: CheckArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}
