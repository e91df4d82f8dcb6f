//! Command-line entry points of the `toxiproxy` module (not implemented yet).

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct ToxiproxyArgs {}

pub fn toxiproxy(_args: ToxiproxyArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}
