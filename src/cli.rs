//! The command line: clap-derive definitions and dispatch to each module's
//! entry point. Logic lives in the modules; this file only routes.

use crate::exit::Exit;
use clap::{Parser, Subcommand};

/// lockjaw: a Jepsen-style black-box checker for distributed locks.
///
/// Exit codes: 0 valid, 1 invalid (anomalies found), 2 unknown, 3 bad input,
/// bad usage or failed setup.
#[derive(Parser, Debug)]
#[command(name = "lockjaw", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check one or more histories (files, folders, run directories).
    Check(crate::check::cli::CheckArgs),
    /// Convert a history between lockjaw JSONL and Jepsen/Knossos EDN.
    Convert(crate::history::cli::ConvertArgs),
    /// Start, inspect or stop a local cluster of a lock service.
    Cluster(crate::runner::cluster_cli::ClusterArgs),
    /// Run an embedded Toxiproxy-compatible server.
    Toxiproxy(crate::toxiproxy::cli::ToxiproxyArgs),
    /// Drive a lock service through faults and record a checked history.
    Run(Box<crate::runner::cli::RunArgs>),
    /// Internal: one client process of a run.
    #[command(hide = true)]
    Worker(crate::runner::cli::WorkerArgs),
    /// Undo every effect a killed run left behind, from its undo log.
    ///
    /// Paths are acted on only beneath DIR, iptables rules and proxies
    /// only when they carry the run's id; a record failing these checks is
    /// reported and skipped. A directory of runs (compare, sweep, --runs)
    /// heals each run beneath it. --dry-run only says what would be done.
    /// Exit 0: all healed; 3: DIR refused (owned by another user or
    /// writable by others; nothing done), or some record skipped or not
    /// undone (the rest healed).
    Heal(crate::runner::cli::HealArgs),
    /// Rebuild report.html and summary.md from a saved run.
    Report(crate::report::cli::ReportArgs),
    /// Print the lease-advice box of saved runs: how long a lease must be.
    Advise(crate::report::cli::AdviseArgs),
    /// Run a matrix of systems × nemeses × fencing and compare them.
    Compare(Box<crate::runner::cli::CompareArgs>),
    /// Replay real lock-library bugs on their buggy and fixed releases
    /// (the catalogue in bugs/, docs/bugs.md).
    Bugs(crate::bugs::cli::BugsArgs),
    /// Search the faults a lock client can meet for an anomaly nobody
    /// named (docs/explore.md).
    ///
    /// Learns what the client sends in short fault-free runs, plans one
    /// fault point per request kind, phase and target, tries them within
    /// the budget (untried points like one whose fault changed what the
    /// client sent first, then points that did not land again, then pairs
    /// of points that landed), runs each candidate finding's point again alone and
    /// reports it only if it shows again. Writes explore.md, explore.json,
    /// explore.html, points/ (a nemesis file per point) and rows/ (a bug
    /// row per finding) under the output directory. Ctrl-C stops (the
    /// runs heal); `lockjaw explore DIR` resumes. Exit 0: no finding and
    /// every planned point landed its minimum; 1: a finding; 2: no finding
    /// but some point did not land, or interrupted; 3: bad input or a
    /// failure.
    Explore(crate::explore::cli::ExploreArgs),
    /// Join the shards of a `--shard K/N` compare, bugs table, run --runs,
    /// sweep or explore into the tables the unsharded command writes
    /// (docs/ci.md).
    ///
    /// Refuses shards of another plan, lockjaw, seed or server/library
    /// version, and a shard missing or given twice, naming each. The runs
    /// are linked (--copy: copied) under --out at the paths the unsharded
    /// command gives them; the tables are rebuilt from them. Exit: as the
    /// unsharded command; 3 when the shards cannot be merged.
    Merge(crate::merge::MergeArgs),
    /// Rates of anomalies against a varied fault or workload parameter,
    /// and the value where a rate crosses 50 % (--find-boundary).
    Sweep(Box<crate::runner::sweep::SweepArgs>),
    /// The smallest command that still reproduces a run's anomaly:
    /// fewer workers, a shorter run, fewer and smaller faults, confirmed
    /// on fresh seeds.
    ///
    /// A run counts when the run's anomaly kind follows a landed injection
    /// of its fault; a candidate is kept at 2 of 3 such runs, the final
    /// command confirmed at 5 of 10 fresh ones. Runs and shrink.md go to
    /// RUN_DIR/shrink/; Ctrl-C stops (the runs heal), running it again
    /// resumes. Exit 0: a command was confirmed; 1: the original does not
    /// reproduce; 2: budget or Ctrl-C before a confirmation; 3: bad input.
    Shrink(crate::runner::shrink::ShrinkArgs),
    /// Run the protected storage (fenced register/counter/set) by hand; no
    /// authentication: loopback or a private network only.
    ///
    /// It has no authentication: anyone who reaches the port can read and
    /// write every key, and a single request with fence 2^64-1 locks every
    /// later fenced request out. Keep it on loopback (the default) or a
    /// private network you trust.
    Storage(crate::storage::cli::StorageArgs),
    /// Make or remove a test bed: hosts on this machine (network and time
    /// namespaces, one sshd each) that `--hosts` can point at.
    Testbed(crate::testbed::cli::TestbedArgs),
}

/// Parse the command line, run the command, and map its outcome to an exit
/// code. Usage errors exit 3 (clap's own help and version exit 0).
pub fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => 0,
                _ => Exit::Error.code(),
            };
            let _ = e.print();
            return std::process::ExitCode::from(code);
        }
    };
    init_tracing();
    run(cli.command).into()
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LOCKJAW_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    use std::io::IsTerminal;
    // Colours only for a terminal; held while a run goes, so a failed
    // run's error comes first (crate::exit::hold_stderr).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(|| HeldStderr)
        .try_init();
}

/// The log's writer: [`crate::exit::write_stderr`].
struct HeldStderr;

impl std::io::Write for HeldStderr {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        crate::exit::write_stderr(b).map(|()| b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Dispatch a parsed command to its module.
pub fn run(cmd: Command) -> Exit {
    if matches!(cmd, Command::Check(_) | Command::Convert(_)) {
        // Commands that only print: a closed pipe (`| head`) ends them
        // quietly, like any Unix filter, instead of a panic. Long-running
        // commands keep SIGPIPE ignored so a dead worker's pipe is an error,
        // not death.
        // SAFETY: restoring the default disposition of SIGPIPE has no
        // memory-safety preconditions.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cmd {
        Command::Check(a) => crate::check::cli::check(a),
        Command::Convert(a) => crate::history::cli::convert(a),
        Command::Cluster(a) => crate::runner::cluster_cli::cluster(a),
        Command::Toxiproxy(a) => crate::toxiproxy::cli::toxiproxy(a),
        Command::Run(a) => crate::runner::cli::run(*a),
        Command::Worker(a) => crate::runner::cli::worker(a),
        Command::Heal(a) => crate::runner::cli::heal(a),
        Command::Report(a) => crate::report::cli::report(a),
        Command::Advise(a) => crate::report::cli::advise(a),
        Command::Compare(a) => crate::runner::cli::compare(*a),
        Command::Bugs(a) => crate::bugs::cli::bugs(a),
        Command::Explore(a) => crate::explore::cli::explore(a),
        Command::Merge(a) => crate::merge::merge(a),
        Command::Sweep(a) => crate::runner::sweep::sweep(*a),
        Command::Shrink(a) => crate::runner::shrink::shrink(a),
        Command::Storage(a) => crate::storage::cli::storage(a),
        Command::Testbed(a) => crate::testbed::cli::testbed(a, crate::runner::heal::executor()),
    }
}

pub use crate::exit::fail;
