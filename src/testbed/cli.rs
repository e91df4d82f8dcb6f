//! The arguments of `lockjaw testbed up|down`; what each does is in
//! [`super::up`] and [`super::down`].

use crate::exit::Exit;
use crate::undo::Heal;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub command: TestbedCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum TestbedCommand {
    /// Make N hosts on this machine (network namespaces on a bridge, each
    /// with its own time namespace and sshd) and write their hosts file.
    /// They keep running after lockjaw exits, until `testbed down`.
    Up(UpArgs),
    /// Stop a bed's sshd and everything else in its namespaces, delete its
    /// namespaces and links, remove its directory and hosts file.
    Down(DownArgs),
}

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// How many hosts (1 to 64).
    #[arg(long)]
    pub count: usize,
    /// The hosts file to write; the bed's keys, logs and state go to the
    /// directory of the same name with the extension `.bed`.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct DownArgs {
    /// The hosts file `testbed up` wrote.
    #[arg(long)]
    pub out: PathBuf,
}

/// Run `lockjaw testbed`; `healer` (the runner's undo executor, handed
/// down by the command line) takes back what a bed made.
pub fn testbed(args: TestbedArgs, healer: Arc<dyn Heal>) -> Exit {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Error;
        }
    };
    let done = match args.command {
        TestbedCommand::Up(a) => rt.block_on(super::up(a.count, &a.out, healer)).map(|bed| {
            println!("{}", bed.hosts_file.display());
            for h in &bed.hosts {
                println!(
                    "{}: {} in network namespace {}, sshd pid {}, clocks +{} s",
                    h.name, h.address, h.netns, h.sshd.pid, h.clock_offset_s
                );
            }
        }),
        TestbedCommand::Down(a) => rt.block_on(super::down(&a.out, healer)),
    };
    match done {
        Ok(()) => Exit::Valid,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
