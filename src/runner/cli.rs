//! Command-line entry points of the `runner` module (not implemented yet).

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct RunArgs {}

pub fn run(_args: RunArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}

#[derive(clap::Args, Debug)]
pub struct WorkerArgs {}

pub fn worker(_args: WorkerArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}

#[derive(clap::Args, Debug)]
pub struct HealArgs {}

pub fn heal(_args: HealArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}
