//! Command-line entry points of the `report` module (not implemented yet).

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {}

pub fn report(_args: ReportArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {}

pub fn compare(_args: CompareArgs) -> Exit {
    eprintln!("error: not implemented yet");
    Exit::Error
}
