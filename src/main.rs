//! The `lockjaw` binary: a thin shell over the library's CLI module.
fn main() -> std::process::ExitCode {
    lockjaw::cli::main()
}
