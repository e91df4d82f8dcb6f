//! Command-line entry points of the runner: `lockjaw run`, `lockjaw
//! compare`, the internal `lockjaw worker`, and `lockjaw heal`.

use super::controller::{self, RunConfig};
use super::repeat;
use crate::combination::{ClientChoice, StorageChoice};
use crate::exit::Exit;
use crate::service::System;
use crate::storage::Fencing;
use crate::workload::{self, Overrides};
use std::path::PathBuf;

/// The most data nodes lockjaw starts for one local cluster: more than any
/// quorum system is run with (etcd and ZooKeeper advise at most 7), few
/// enough that a typo (`--nodes 1000`) cannot start a thousand servers.
pub const MAX_NODES: usize = 15;

/// `--nodes N`: 1 to [`MAX_NODES`].
pub fn nodes_flag(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("--nodes {s}: not a number (hint: e.g. --nodes 3)"))?;
    if !(1..=MAX_NODES).contains(&n) {
        return Err(format!(
            "--nodes {n}: lockjaw starts 1 to {MAX_NODES} nodes (hint: leave --nodes out for the system's default)"
        ));
    }
    Ok(n)
}

/// `--base-port P`: a port a server can listen on (not 0).
pub fn base_port_flag(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(0) => Err("--base-port 0: port 0 is no port a server can be reached on (hint: use 1 to 65535, or leave --base-port out for a free block)".into()),
        Ok(p) => Ok(p),
        Err(_) => Err(format!("--base-port {s}: not a port (hint: use 1 to 65535)")),
    }
}

/// `--dead-man-margin-ms MS`: 1 s to a day.
pub fn margin_flag(s: &str) -> Result<u64, String> {
    let min = crate::nemesis::deadman::MIN_MARGIN.as_millis() as u64;
    match s.parse::<u64>() {
        Ok(ms) if (min..=86_400_000).contains(&ms) => Ok(ms),
        Ok(ms) => Err(format!("--dead-man-margin-ms {ms}: the margin is {min} ms to a day (hint: it must outlast lockjaw's own undo of a fault, which takes well under a second; the default is 10000)")),
        Err(_) => Err(format!("--dead-man-margin-ms {s}: not a number of milliseconds (hint: e.g. --dead-man-margin-ms 10000)")),
    }
}

/// Drive a lock service through faults and record a checked history.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The lock service.
    #[arg(long, value_enum)]
    pub system: System,
    /// A workload name or a path to a workload file (the names come from
    /// the workload registry: see [`workload_help`]).
    #[arg(long, default_value = "fenced-counter", help = workload_help())]
    pub workload: String,
    /// A nemesis name or a path to a nemesis file (the names come from the
    /// nemesis registry: see [`nemesis_help`]).
    #[arg(long, default_value = "none", help = nemesis_help())]
    pub nemesis: String,
    /// Seconds to run (overrides the workload file).
    #[arg(long)]
    pub time_limit: Option<f64>,
    /// Worker processes (overrides the workload file).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Requested lease in milliseconds (overrides the workload file).
    #[arg(long)]
    pub ttl_ms: Option<u64>,
    /// Time inside the critical section (overrides the workload file).
    #[arg(long)]
    pub hold_ms: Option<u64>,
    /// Pause between steps (overrides the workload file).
    #[arg(long)]
    pub think_ms: Option<u64>,
    /// Whether the storage enforces fencing tokens (default on; off for
    /// redlock, which has none).
    #[arg(long, value_enum)]
    pub fencing: Option<Fencing>,
    /// Check the lease before each protected write and abandon the write
    /// when it may not outlast it (overrides the workload's `lease_guard`).
    #[arg(long, value_enum)]
    pub lease_guard: Option<workload::LeaseGuard>,
    /// Use a running cluster (host:port,...) instead of starting one; for
    /// sentinel give the sentinels.
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Option<Vec<String>>,
    /// Your own PostgreSQL database (postgres://USER[:PASSWORD]@HOST:PORT/DB)
    /// instead of a server lockjaw starts: lockjaw creates only tables
    /// named `lockjaw_<run-id>_*` in it and drops them when the run ends
    /// (and in `heal`). The password: in the URL, in
    /// --postgres-password-file, or in PGPASSWORD; it is never written to
    /// a record, printed, or passed on a command line (docs/auth.md).
    #[arg(long)]
    pub postgres_url: Option<String>,
    /// The password of --postgres-url's user: the first line of FILE, a
    /// file only its owner can read (mode 0600).
    #[arg(long, value_name = "FILE", requires = "postgres_url")]
    pub postgres_password_file: Option<PathBuf>,
    /// Credentials and TLS for your servers (--endpoints): a TOML file
    /// naming the CA, client certificate and key, the server name to
    /// verify, a user, a ZooKeeper digest; secrets from owner-only files or
    /// the environment, never the command line (docs/auth.md).
    #[arg(long, value_name = "FILE")]
    pub auth: Option<std::path::PathBuf>,
    /// Sentinel with --endpoints: the master name your sentinels monitor
    /// (e.g. mymaster). A local cluster's is `lockjaw`.
    #[arg(long)]
    pub sentinel_master: Option<String>,
    /// An external Toxiproxy (http://host:port) instead of the embedded one.
    #[arg(long)]
    pub toxiproxy: Option<String>,
    /// Write every request and reply the run's proxies frame (Redis
    /// commands, ZooKeeper operations) to wire.jsonl in the run directory,
    /// with its moment and worker; nothing is held or changed. Embedded
    /// Toxiproxy only.
    #[arg(long)]
    pub tap_wire: bool,
    #[command(flatten)]
    pub choices: Choices,
    /// Seed for every random choice (default: from the clock; recorded).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the run exactly here instead of histories/<name>-<UTC>/.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Local cluster: first port, 1 to 65535 (default: a free block).
    #[arg(long, value_parser = base_port_flag)]
    pub base_port: Option<u16>,
    /// Local cluster: number of data nodes, 1 to 15 (default: the system's).
    #[arg(long, value_parser = nodes_flag)]
    pub nodes: Option<usize>,
    /// Where new run directories go.
    #[arg(long, default_value = "histories")]
    pub histories: PathBuf,
    /// No progress bars or phase lines on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// After the run, a table of where its wall time went (ms per phase,
    /// from run.json's `timings`) on stderr.
    #[arg(long)]
    pub timings: bool,
    /// Run the test this many times (seeds seed, seed+1, ...; with --out DIR
    /// the runs go to DIR/run-1, DIR/run-2, ...). Jepsen's name:
    /// --test-count.
    #[arg(long, alias = "test-count", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// With --runs: how many runs go at once (each on its own ports, cgroups
    /// and proxy names).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    /// With --runs: start a cluster for every run. Without it, each job's
    /// runs share one local cluster while it stays as a fresh one would be
    /// (a new one after a run that faulted the servers or left anything
    /// behind; docs/running.md).
    #[arg(long)]
    pub fresh_cluster: bool,
    /// With --runs: run only shard K of N of the runs (run-i for i = K,
    /// K+N, ...; needs --seed and --out) and write OUT/shard.json for
    /// `lockjaw merge` (docs/ci.md).
    #[arg(long, value_name = "K/N", value_parser = super::shard::shard_flag)]
    pub shard: Option<super::shard::Shard>,
    #[command(flatten)]
    pub ci: crate::report::ci::CiArgs,
    /// Call the run unknown (exit 2) when fewer than N of its faults
    /// landed (applied without error, not cut short, inside a critical
    /// section for the holder faults). Without it, faults that did not
    /// land leave a valid run valid, with a warning. Ignored with
    /// `--nemesis none`.
    #[arg(long, value_name = "N")]
    pub require_landed: Option<u64>,
    /// With --attach: print per node how its server is found and the
    /// proof that it is the server, then what each fault would do, when
    /// and for how long, and change nothing; discovery and the proofs run
    /// (they read /proc and ask each server who it is).
    #[arg(long, requires = "attach")]
    pub plan: bool,
    /// With --plan: add every command each host would be sent (the
    /// scripts of discovery, each fault, its undo, the start command, the
    /// log reads) to the tables. Refused without --plan.
    #[arg(long, requires = "plan")]
    pub verbose: bool,
    /// With --hosts: each fault on a host arms a dead man's switch there
    /// that takes the fault back by itself this long after its planned
    /// end, unless lockjaw has taken it back first (its machine or network
    /// died mid-fault). 1000 to 86400000 (recorded in run.json).
    #[arg(long, value_name = "MS", default_value_t = 10_000, requires = "hosts", value_parser = margin_flag)]
    pub dead_man_margin_ms: u64,
    /// Start every worker (and its client adapter) under libfaketime, its
    /// wall clock movable by a client clock fault, even when the nemesis
    /// has none (the client clock faults switch it on by themselves).
    #[arg(long)]
    pub client_faketime: bool,
    /// Do not record ops (only to measure the cost of recording).
    #[arg(long, hide = true)]
    pub no_record: bool,
    #[command(flatten)]
    pub load: super::load::LoadFlags,
    #[command(flatten)]
    pub pause_budget: crate::report::cli::PauseBudget,
    #[command(flatten)]
    pub witness: crate::report::cli::WitnessFlags,
}

/// `--workload`'s help: every built-in workload, from the registry.
pub fn workload_help() -> String {
    let names: Vec<&str> = workload::BUILTIN.iter().map(|(n, _)| *n).collect();
    format!(
        "A workload name ({}) or a path to a workload file",
        names.join(", ")
    )
}

/// `--nemesis`'s help: every built-in nemesis, from the registry.
pub fn nemesis_help() -> String {
    let names: Vec<&str> = crate::nemesis::spec::BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .collect();
    format!(
        "A nemesis name ({}) or a path to a nemesis file",
        names.join(", ")
    )
}

/// The flags that name what a run combines beyond system, workload and
/// nemesis (shared by `run` and `compare`). Only the defaults apply today;
/// the service registry refuses the rest with what is supported.
#[derive(clap::Args, Debug, Clone)]
pub struct Choices {
    /// The lock clients: `builtin` (lockjaw's own) or a client adapter's
    /// name or path; `NAME@VERSION` runs a pinned library version
    /// (clients/NAME/versions/VERSION), `NAME@PATH` a library source tree.
    #[arg(long, value_name = "NAME|PATH", default_value = "builtin")]
    pub client: String,
    /// The protected resource the workers write to.
    #[arg(long, value_enum, default_value = "builtin")]
    pub storage: StorageChoice,
    /// Start the servers on the hosts this file lists.
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// With --hosts: the servers run already (each node's `attach`
    /// table); lockjaw will pause, kill, restart and cut off these
    /// servers, and leaves them running.
    #[arg(long, requires = "hosts")]
    pub attach: bool,
    /// With --attach: faults may take a majority of the servers (or every
    /// replica), so the cluster may lose its quorum.
    #[arg(long, requires = "attach")]
    pub allow_majority: bool,
}

/// libpq's environment variable for the password of `--postgres-url`.
pub const PGPASSWORD: &str = "PGPASSWORD";

/// The command line without any URL's password (it is written to
/// run.json and printed).
fn without_password(args: impl Iterator<Item = String>) -> Vec<String> {
    crate::auth::redact::args(&args.collect::<Vec<_>>())
}

/// `--fencing`, or on where the client gives a token; `--fencing on`
/// with an adapter whose library gives none is refused.
fn fencing_of(
    a: &RunArgs,
    adapter: Option<&super::protocol::AdapterSpec>,
) -> Result<Fencing, String> {
    let has_fence = match adapter {
        Some(x) => x.offer.fence,
        None => a.system.facts().fencing_token.is_yes(),
    };
    if let (Some(x), Some(Fencing::On)) = (adapter, a.fencing) {
        if !x.offer.fence {
            return Err(format!(
                "--fencing on with --client {}: {} gives no fencing token (hint: use --fencing off)",
                a.choices.client,
                x.offer.title()
            ));
        }
    }
    Ok(a.fencing
        .unwrap_or(if has_fence { Fencing::On } else { Fencing::Off }))
}

pub(crate) fn config(a: RunArgs) -> Result<RunConfig, String> {
    if let (true, Some(url)) = (a.tap_wire, &a.toxiproxy) {
        return Err(format!(
            "--tap-wire with --toxiproxy {url}: only the embedded Toxiproxy can tap the wire \
             (hint: leave out --toxiproxy, or --tap-wire)"
        ));
    }
    let ov = Overrides {
        ttl_ms: a.ttl_ms,
        concurrency: a.concurrency,
        time_limit_s: a.time_limit,
        hold_ms: a.hold_ms,
        think_ms: a.think_ms,
        lease_guard: a.lease_guard,
    };
    // The half-lease rule waits for the adapter's handshake: a library
    // that renews its own leases may hold longer.
    let loaded = workload::load_for_client(&a.workload, &ov).map_err(|e| e.to_string())?;
    let mut w = loaded.workload.clone();
    if w.kind == workload::Kind::Register {
        // A key of its own: the register starts absent in every run.
        w.register_key = format!("{}-{}", w.register_key, super::rundir::utc_stamp());
    }
    let load = super::load::Load::of(&a.load, w.concurrency)?;
    let nemesis = crate::nemesis::spec::load(&a.nemesis).map_err(|e| e.to_string())?;
    let auth = std::sync::Arc::new(super::run_auth::auth_of(a.auth.as_deref(), &a)?);
    let client = ClientChoice::parse(&a.choices.client);
    let adapter = match &client {
        ClientChoice::Adapter(name)
            if !matches!(w.kind, workload::Kind::Register | workload::Kind::Leader) =>
        {
            Some(super::adapter::preflight(
                name,
                a.system,
                &w,
                a.endpoints.as_deref(),
                &auth,
                !a.no_progress,
            )?)
        }
        _ => None,
    };
    let library_renews = adapter
        .as_ref()
        .is_some_and(|x| x.offer.renewals == crate::client::adapter::Renewals::All);
    loaded.finish(library_renews).map_err(|e| e.to_string())?;
    let fencing = fencing_of(&a, adapter.as_ref())?;
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let sentinel_master = crate::service::sentinel::master_name(
        a.system,
        a.sentinel_master.as_deref(),
        // Your own sentinels: through --endpoints, or attached to.
        a.endpoints.is_some() || a.choices.attach,
    )?;
    let (endpoints, postgres_url) = match &a.postgres_url {
        None => (a.endpoints, None),
        Some(url) => {
            let storage = a.choices.storage == crate::combination::StorageChoice::Postgres;
            let endpoints = crate::service::postgres_storage::url_endpoints(
                url,
                a.system,
                storage,
                a.endpoints,
            )?;
            let password = match &a.postgres_password_file {
                Some(f) => Some(crate::auth::password_file(f, "--postgres-password-file")?),
                None => std::env::var(PGPASSWORD).ok().map(crate::auth::Secret::new),
            };
            let url = crate::service::postgres_storage::with_password(url, password.as_ref())?;
            (endpoints, Some(url))
        }
    };
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the lockjaw binary: {e}"))?;
    Ok(RunConfig {
        system: a.system,
        workload: w,
        nemesis,
        fencing,
        endpoints,
        postgres_url,
        auth,
        toxiproxy: a.toxiproxy,
        tap_wire: a.tap_wire,
        client,
        adapter,
        storage: a.choices.storage,
        hosts: a.choices.hosts,
        attach: a.choices.attach,
        plan: a.plan,
        allow_majority: a.choices.allow_majority,
        dead_man_margin: std::time::Duration::from_millis(a.dead_man_margin_ms),
        seed,
        out: a.out,
        histories: a.histories,
        base_port: a.base_port,
        nodes: a.nodes,
        progress: !a.no_progress,
        exe,
        command: without_password(std::env::args()),
        record: !a.no_record,
        sentinel_master,
        pause_budget_ms: a.pause_budget.pause_budget_ms,
        require_landed: a.require_landed,
        witness: a.witness.options(),
        load,
        client_faketime: a.client_faketime,
        own_keys: false,
        share: None,
    })
}

pub fn run(args: RunArgs) -> Exit {
    let (runs, jobs) = (args.runs as usize, args.jobs as usize);
    let (verbose, timings, share) = (args.verbose, args.timings, !args.fresh_cluster);
    let ci = args.ci.clone();
    let shard = match args
        .shard
        .map(|s| super::shard::require(s, args.seed, args.out.as_deref()).map(|(_, o)| (s, o)))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    let cfg = match config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    if cfg.plan {
        return super::attach_plan::print(&cfg, verbose);
    }
    if cfg.attach && jobs > 1 {
        eprintln!("error: --jobs {jobs} with --attach: runs at once would fault one cluster together (hint: --jobs 1)");
        return Exit::Error;
    }
    if let Some((s, out)) = shard {
        return super::runs_shard::run(&cfg, runs, jobs, s, &out, &ci);
    }
    if runs > 1 || ci.given() {
        return repeat::run_and_print(&cfg, runs, jobs, share, &ci);
    }
    // The run's error first on stderr, the warnings held until then.
    crate::exit::hold_stderr();
    let (exit, dir) = match controller::run(cfg) {
        Ok(o) => {
            if let Some(e) = &o.error {
                eprintln!("error: {e}");
            }
            crate::exit::release_stderr();
            println!("{}", o.summary);
            (o.exit, Some(o.dir))
        }
        Err(e) => {
            eprintln!("error: {}", e.msg);
            if let Some(d) = &e.dir {
                eprintln!("run directory: {}", d.display());
            }
            crate::exit::release_stderr();
            (e.exit, e.dir)
        }
    };
    if let (true, Some(d)) = (timings, &dir) {
        super::timings::print(d);
    }
    exit
}

pub use super::compare::args::{compare, CompareArgs};

/// Internal: one client process of a run.
#[derive(clap::Args, Debug)]
pub struct WorkerArgs {
    /// The worker spec written by `lockjaw run`.
    #[arg(long)]
    pub spec: PathBuf,
}

pub fn worker(args: WorkerArgs) -> Exit {
    super::worker::main(&args.spec)
}

/// Undo every effect a killed run left behind, from its undo log.
#[derive(clap::Args, Debug)]
pub struct HealArgs {
    /// The run directory (holds undo.jsonl; the runs beneath it, e.g. a
    /// shrink's steps, are healed too), or a directory of runs (compare,
    /// sweep, --runs): each run beneath it with something pending.
    pub dir: PathBuf,
    /// Heal even though the run's lockjaw still seems to be running.
    #[arg(long)]
    pub force: bool,
    /// Print every action heal would take and every record it would
    /// refuse (with the reason); change nothing. Exit 0 if all would be
    /// healed, 3 if some would be refused.
    #[arg(long)]
    pub dry_run: bool,
    /// Take the start commands of attached servers a run killed (`--attach`)
    /// from FILE instead of the run directory's copy `RUN_DIR/hosts.toml`
    /// (e.g. one whose start command is corrected); each node must still
    /// be described as the run recorded it.
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
}

/// Exit 0 when everything pending was undone; 3 when the directory was
/// refused (nothing done), or when a record was skipped or could not be
/// undone (everything else was).
pub fn heal(args: HealArgs) -> Exit {
    super::heal::use_hosts(args.hosts.clone());
    match super::heal::heal_dir(&args.dir, args.force, args.dry_run) {
        Ok(h) => {
            for l in &h.lines {
                println!("{l}");
            }
            for p in &h.problems {
                eprintln!("error: {p}");
            }
            if h.problems.is_empty() {
                return Exit::Valid;
            }
            if args.dry_run {
                eprintln!(
                    "error: heal would refuse {} record(s); nothing was changed",
                    h.problems.len()
                );
                return Exit::Error;
            }
            eprintln!(
                "error: {} line(s) of {} not healed; everything else was (hint: undo those by hand, or fix the cause and run `lockjaw heal {}` again)",
                h.problems.len(),
                args.dir.join(crate::undo::UNDO_FILE).display(),
                args.dir.display()
            );
            Exit::Error
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}
