//! `lockjaw explore --system S [--client C] --budget 15m` and `lockjaw
//! explore DIR` (resume): the flags checked, the workloads the client
//! supports chosen, the state made or read, the loop driven
//! ([`super::drive`]) with the runner's engine, the report written and
//! its exit code returned.

use super::drive;
use super::state::{Settings, State};
use crate::exit::Exit;
use crate::nemesis::allows::Promises;
use crate::service::System;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `lockjaw explore`'s flags (the help text is on `cli::Command::Explore`).
#[derive(Args, Debug)]
pub struct ExploreArgs {
    /// An explore's output directory to resume (its state.json).
    #[arg(value_name = "DIR", conflicts_with_all = ["system", "client", "seed", "out", "ttl_ms", "concurrency", "min_landed", "learn_secs", "points_per_run", "no_second_opinion", "shard"])]
    pub dir: Option<PathBuf>,
    /// The lock service (as `lockjaw run --system` takes it).
    #[arg(long, value_enum)]
    pub system: Option<System>,
    /// The lock client: an adapter's name, path or NAME@VERSION
    /// [default: lockjaw's own].
    #[arg(long, value_name = "NAME|PATH")]
    pub client: Option<String>,
    /// Wall time of the search (e.g. 90s, 15m, 1h) [default: 15m]; on a
    /// resume, the new total.
    #[arg(long, value_parser = crate::runner::shrink::budget_flag)]
    pub budget: Option<Duration>,
    /// Runs at once (each on its own reserved ports) [default: 1; a
    /// resume keeps the first value unless given].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// The seed every run's seed is derived from [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
    /// The output directory [default: histories/explore-<system>-<UTC>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The lease of every run (ms); a search run keeps two leases quiet
    /// between its injections.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..))]
    pub ttl_ms: u64,
    /// Workers per run.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(2..))]
    pub concurrency: u64,
    /// Landed injections each planned point needs before its absence of
    /// findings counts.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_landed: u64,
    /// Seconds of each fault-free learn run.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(2..))]
    pub learn_secs: u64,
    /// Most points in one search run (a point with lasting effects always
    /// gets a run of its own).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..=50))]
    pub points_per_run: u64,
    /// Do not run a finding's point with lockjaw's own client as a second
    /// opinion (a run per finding saved; the report says it was not run).
    #[arg(long)]
    pub no_second_opinion: bool,
    /// Search only the fault points whose name hashes to shard K of N
    /// (needs --seed and --out); writes OUT/shard.json when done, for
    /// `lockjaw merge` (docs/ci.md).
    #[arg(long, value_name = "K/N", value_parser = crate::runner::shard::shard_flag)]
    pub shard: Option<crate::runner::shard::Shard>,
    #[command(flatten)]
    pub ci: crate::report::ci::CiArgs,
}

/// The default budget.
const BUDGET: Duration = Duration::from_secs(15 * 60);

/// The `lockjaw explore` command.
pub fn explore(a: ExploreArgs) -> Exit {
    match run(a) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Error
        }
    }
}

/// The workloads a client is learned and searched with: `lock` and
/// `fenced-counter`, and their renewing forms when the client renews
/// (lockjaw's own clients do; an adapter when its library renews).
pub fn workloads(renews: bool) -> Vec<String> {
    let mut w = vec!["lock".to_string(), "fenced-counter".to_string()];
    if renews {
        w.extend([
            "lock-renewing".to_string(),
            "fenced-counter-renewing".to_string(),
        ]);
    }
    w
}

/// An adapter's promises, from its handshake (`hello_ok`).
fn promises(client: Option<&str>, system: System, ttl_ms: u64) -> Result<Promises, String> {
    let Some(name) = client else {
        return Ok(crate::nemesis::allows::builtin_promises(system));
    };
    let ov = crate::workload::Overrides {
        ttl_ms: Some(ttl_ms),
        ..Default::default()
    };
    let w = crate::workload::load("lock", &ov).map_err(|e| e.to_string())?;
    let auth = crate::auth::Auth::default();
    let spec = crate::runner::adapter::preflight(name, system, &w, None, &auth, true)?;
    // What the adapter declares; whether the library renews by itself is
    // its `renewals` when it does not say.
    let mut p = spec.offer.promises;
    if p.renews_itself.is_none() {
        p.renews_itself = Some(spec.offer.renewals == crate::client::adapter::Renewals::All);
    }
    Ok(p)
}

fn new_state(a: &ExploreArgs) -> Result<(PathBuf, State, Promises), String> {
    let Some(system) = a.system else {
        return Err("give --system S to start an explore, or an explore's directory to resume it (hint: lockjaw explore --system redis --budget 15m)".into());
    };
    if let crate::service::Can::No(why) = system.facts().lock {
        return Err(format!(
            "--system {}: {why}: there is no lock client to explore (hint: explore a lock service, e.g. --system redis)",
            system.name()
        ));
    }
    if let Some(sh) = a.shard {
        crate::runner::shard::require(sh, a.seed, a.out.as_deref())?;
    }
    let client = a.client.clone().filter(|c| c != "builtin");
    let promises = promises(client.as_deref(), system, a.ttl_ms)?;
    let renews = client.is_none() || promises.renews_itself == Some(true);
    let dir = match &a.out {
        Some(d) => d.clone(),
        None => PathBuf::from("histories").join(format!(
            "explore-{}-{}",
            system.name(),
            crate::runner::rundir::utc_stamp()
        )),
    };
    if dir.join(super::state::FILE).exists() {
        return Err(format!(
            "{} holds an explore already (hint: `lockjaw explore {}` resumes it, or choose another --out)",
            dir.display(),
            dir.display()
        ));
    }
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let settings = Settings {
        system: system.name().to_string(),
        client,
        budget_secs: a.budget.unwrap_or(BUDGET).as_secs().max(1),
        jobs: a.jobs.unwrap_or(1) as usize,
        seed,
        ttl_ms: a.ttl_ms,
        concurrency: a.concurrency as usize,
        min_landed: a.min_landed,
        learn_secs: a.learn_secs,
        per_run: a.points_per_run as usize,
        second_opinion: !a.no_second_opinion,
        shard: a.shard,
    };
    Ok((dir, State::new(settings, workloads(renews)), promises))
}

fn resume(dir: &Path, a: &ExploreArgs) -> Result<(State, Promises), String> {
    let Some(mut s) = State::load(dir)? else {
        return Err(format!(
            "{}: no {} (hint: give the directory an explore printed, or start one with --system)",
            dir.display(),
            super::state::FILE
        ));
    };
    if let Some(b) = a.budget {
        s.settings.budget_secs = b.as_secs().max(1);
    }
    if let Some(j) = a.jobs {
        s.settings.jobs = j as usize;
    }
    let finished = s.runs.iter().filter(|r| r.finished()).count();
    println!(
        "resuming the explore in {}: {finished} run(s) finished, {:.0} of {} s spent",
        dir.display(),
        s.spent_secs,
        s.settings.budget_secs
    );
    let promises = match &s.judge {
        Some(j) => j.promises,
        // Stopped before the judge was made: ask the adapter again.
        None => {
            use clap::ValueEnum;
            let system = System::from_str(&s.settings.system, false)
                .map_err(|e| format!("{}: system {e}", dir.join(super::state::FILE).display()))?;
            promises(s.settings.client.as_deref(), system, s.settings.ttl_ms)?
        }
    };
    Ok((s, promises))
}

fn bar() -> ProgressBar {
    let pb = ProgressBar::new(0);
    if let Ok(st) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} runs, {elapsed}") {
        pb.set_style(st.progress_chars("=> "));
    }
    pb
}

fn run(a: ExploreArgs) -> Result<Exit, String> {
    let baseline = a.ci.load()?;
    let (dir, mut s, promises) = match &a.dir {
        Some(d) => {
            let (s, p) = resume(d, &a)?;
            (d.clone(), s, p)
        }
        None => new_state(&a)?,
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let dir = std::path::absolute(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    println!(
        "exploring {} with {} in {}",
        s.settings.system,
        s.settings
            .client
            .as_deref()
            .unwrap_or("lockjaw's own client"),
        dir.display()
    );
    crate::runner::compare::catch_sigint();
    let eng = super::real::Real {
        system: s.settings.system.clone(),
        promises,
        started: std::time::Instant::now(),
    };
    let pb = bar();
    let got = drive::drive(&dir, &mut s, &eng, &pb);
    pb.finish_and_clear();
    let Some(report) = got? else {
        println!(
            "interrupted: the state is saved (hint: `lockjaw explore {}` resumes)",
            dir.display()
        );
        return Ok(Exit::Unknown);
    };
    for (point, kind) in super::confirm::not_again(&s) {
        println!("not confirmed: {kind} at {point} did not show again when its point ran alone");
    }
    for f in &report.findings {
        println!(
            "finding: {} at {} ({} of {} landed)",
            f.kind, f.point, f.hits, f.landed
        );
        if let Some(r) = &f.row {
            println!("  row: {}", r.display());
        }
        if let Some(c) = &f.shrink {
            println!("  shrink: {c}");
        }
    }
    super::output::write(&dir, &report)?;
    if let Some(sh) = s.settings.shard {
        super::shard::manifest(&s.settings, sh, &report).write(&dir)?;
    }
    println!("report: {}", dir.join("explore.md").display());
    if let Some(e) = a.ci.finish(&baseline, super::ci::cases(&report)) {
        return Ok(e);
    }
    Ok(match super::output::exit(&report, s.settings.min_landed) {
        0 => Exit::Valid,
        1 => Exit::Invalid,
        _ => Exit::Unknown,
    })
}
