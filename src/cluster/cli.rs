//! Command-line entry points of the `cluster` module (not implemented yet).

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {}

pub fn cluster(_args: ClusterArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}
