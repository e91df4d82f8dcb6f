//! Repeated runs of one configuration: `lockjaw run --runs N --jobs J`
//! (`--test-count` is Jepsen's name for `--runs`).
//!
//! Run `i` (from 1) gets seed `seed + i - 1`, its own run directory (under
//! `--out DIR` as `DIR/run-i`, else a new one under `histories/`) and its
//! own run id, so its ports, cgroups, proxies and iptables rules are its
//! own: `J` runs go at once without touching each other. Every run
//! directory stays re-checkable on its own; the exit code composes the
//! runs' as over several files (the first of 1, 3, 2, 0 present).
//!
//! After the runs, their injections are tallied as trials (rates per
//! landed injection with 95 % Wilson intervals, `crate::report::trials`),
//! printed, and with `--out DIR` written to `DIR/tally.json` and
//! `DIR/tally.md`.

use super::controller::{self, RunConfig, RunError, RunOutcome};
use crate::exit::Exit;
use crate::report::trials::Tally;
use crate::report::RunSummary;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The configuration of each of `runs` runs of `base`.
pub fn configs(base: &RunConfig, runs: usize, jobs: usize) -> Vec<RunConfig> {
    (0..runs)
        .map(|i| {
            let mut c = base.clone();
            c.seed = base.seed.wrapping_add(i as u64);
            if runs > 1 {
                // Keys named after each run's id (`controller::run`).
                c.own_keys = true;
                c.out = base.out.as_ref().map(|d| d.join(format!("run-{}", i + 1)));
                if c.workload.kind == crate::workload::Kind::Register {
                    // A key of its own: the register starts absent in every run.
                    c.workload.register_key = format!("{}-{}", c.workload.register_key, i + 1);
                }
            }
            // Several bars at once would garble each other.
            c.progress = base.progress && jobs <= 1;
            c
        })
        .collect()
}

/// One finished run: its number (from 1), seed and outcome.
pub struct Finished {
    pub index: usize,
    pub seed: u64,
    pub result: Result<RunOutcome, RunError>,
}

impl Finished {
    /// The run's exit code: its verdict, or its error's (3 when it could
    /// not be run, 2 when it was interrupted).
    pub fn exit(&self) -> Exit {
        match &self.result {
            Ok(o) => o.exit,
            Err(e) => e.exit,
        }
    }
}

/// Run every configuration, at most `jobs` at a time, calling `done` as each
/// finishes (in the order they finish). Returns them in run order.
pub fn run_all(
    cfgs: Vec<RunConfig>,
    jobs: usize,
    done: &(dyn Fn(&Finished, usize) + Sync),
) -> Vec<Finished> {
    run_all_sharing(cfgs, jobs, false, done)
}

/// [`run_all`]; with `share`, each job hands its cluster from one run to
/// the next where that is sound ([`super::shared`]), and stops it when
/// its runs are done.
pub fn run_all_sharing(
    cfgs: Vec<RunConfig>,
    jobs: usize,
    share: bool,
    done: &(dyn Fn(&Finished, usize) + Sync),
) -> Vec<Finished> {
    let total = cfgs.len();
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Finished>> = Mutex::new(Vec::with_capacity(total));
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, total.max(1)) {
            s.spawn(|| {
                let slot = share.then(|| std::sync::Arc::new(super::shared::Slot::default()));
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(cfg) = cfgs.get(i).filter(|_| !controller::interrupted()) else {
                        break;
                    };
                    let mut cfg = cfg.clone();
                    cfg.share = slot.clone();
                    let result = controller::run(cfg);
                    if let Some(s) = &slot {
                        s.after_run(i + 1, &result);
                    }
                    let f = Finished {
                        index: i + 1,
                        seed: cfgs[i].seed,
                        result,
                    };
                    done(&f, total);
                    out.lock().unwrap_or_else(|e| e.into_inner()).push(f);
                }
                if let Some(s) = slot {
                    s.close();
                }
            });
        }
    });
    let mut v = out.into_inner().unwrap_or_else(|e| e.into_inner());
    v.sort_by_key(|f| f.index);
    v
}

/// One line that tallies the runs: `5 runs: 3 valid, 1 invalid, ...`.
pub fn tally(runs: &[Finished]) -> String {
    let count = |e: Exit| runs.iter().filter(|f| f.exit() == e).count();
    format!(
        "{} runs: {} valid, {} invalid, {} unknown, {} failed",
        runs.len(),
        count(Exit::Valid),
        count(Exit::Invalid),
        count(Exit::Unknown),
        count(Exit::Error)
    )
}

/// The finished runs as one measurement: rates per landed injection
/// (runs that failed, or whose directory cannot be read, are left out).
pub fn measure(runs: &[Finished]) -> Tally {
    let summaries: Vec<RunSummary> = runs
        .iter()
        .filter_map(|f| f.result.as_ref().ok())
        .filter_map(|o| RunSummary::from_dir(&o.dir).ok())
        .collect();
    let refs: Vec<&RunSummary> = summaries.iter().collect();
    Tally::of(&refs)
}

/// Which clusters the runs used, when any run shared one: `clusters: 10
/// runs on 2 clusters, 8 of them on one an earlier run used; a new one
/// for run 6: WHY`. `None` when every run had a cluster of its own for
/// no reason worth telling (no campaign sharing).
pub fn clusters_line(runs: &[Finished]) -> Option<String> {
    let uses: Vec<(usize, super::shared::ClusterUse)> = runs
        .iter()
        .filter_map(|f| Some((f.index, f.result.as_ref().ok()?)))
        .filter_map(|(i, o)| Some((i, super::rundir::RunInfo::read(&o.dir).ok()?.cluster?)))
        .collect();
    let shared = uses.iter().any(|(_, u)| u.home.is_some());
    let told = uses.iter().any(|(_, u)| u.fresh_because.is_some());
    if !shared && !told {
        return None;
    }
    let ids: std::collections::BTreeSet<&str> = uses.iter().map(|(_, u)| u.id.as_str()).collect();
    let reused = uses.iter().filter(|(_, u)| u.reused).count();
    let mut line = format!(
        "clusters: {} runs on {} cluster(s), {reused} of them on one an earlier run used",
        uses.len(),
        ids.len()
    );
    // Each reason once, with the runs it was given for.
    let mut why: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, u) in &uses {
        if let Some(w) = &u.fresh_because {
            match why.iter_mut().find(|(x, _)| x == w) {
                Some((_, v)) => v.push(*i),
                None => why.push((w.clone(), vec![*i])),
            }
        }
    }
    for (w, v) in why {
        let v: Vec<String> = v.iter().map(|i| i.to_string()).collect();
        line.push_str(&format!("; a new cluster for run {}: {w}", v.join(", ")));
    }
    Some(line)
}

/// `DIR/tally.json` and `DIR/tally.md`: the rates over the runs in
/// `DIR/run-*`.
pub fn write_tally(dir: &std::path::Path, t: &Tally) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(t).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("tally.json"), json + "\n")?;
    let mut md = String::from("# Rates over the runs\n\n");
    for l in t.lines() {
        md.push_str(&format!("- {l}\n"));
    }
    md.push_str(
        "\nA trial is a fault injection that landed; a rate is the share of trials with at least \
         one anomaly of that kind attributed, with its 95 % Wilson interval.\n",
    );
    std::fs::write(dir.join("tally.md"), md)
}

fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The composed exit code of all runs.
pub fn exit(runs: &[Finished]) -> Exit {
    runs.iter().fold(Exit::Valid, |e, f| e.merge(f.exit()))
}

/// `--runs N`: print each run's outcome as it finishes, then the tally;
/// with `share`, each job's runs share a cluster where that is sound.
pub fn run_and_print(
    cfg: &RunConfig,
    runs: usize,
    jobs: usize,
    share: bool,
    ci: &crate::report::ci::CiArgs,
) -> Exit {
    if let Err(e) = controller::validate(cfg) {
        eprintln!("error: {e}");
        return Exit::Error;
    }
    let baseline = match ci.load() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Error;
        }
    };
    let print = |f: &Finished, total: usize| match &f.result {
        Ok(o) => {
            if let Some(e) = &o.error {
                eprintln!("== run {}/{total} (seed {}): error: {e}", f.index, f.seed);
            }
            println!(
                "== run {}/{total} (seed {})\n{}\n",
                f.index, f.seed, o.summary
            )
        }
        Err(e) => {
            let dir = e
                .dir
                .as_ref()
                .map(|d| format!(" (run directory: {})", d.display()));
            eprintln!(
                "== run {}/{total} (seed {}): error: {}{}\n",
                f.index,
                f.seed,
                e.msg,
                dir.unwrap_or_default()
            )
        }
    };
    let done = run_all_sharing(configs(cfg, runs, jobs), jobs, share, &print);
    println!("{}", tally(&done));
    let measured = measure(&done);
    for l in measured.lines() {
        println!("{l}");
    }
    let clusters = clusters_line(&done);
    if let Some(l) = &clusters {
        println!("{l}");
    }
    if let Some(out) = &cfg.out {
        let written = write_tally(out, &measured).and_then(|()| match &clusters {
            Some(l) => append(&out.join("tally.md"), &format!("\n{l}\n")),
            None => Ok(()),
        });
        if let Err(e) = written {
            eprintln!("error: {}: {e}", out.display());
        }
    }
    if done.len() < runs {
        println!(
            "interrupted: {} of {runs} runs were not started",
            runs - done.len()
        );
    }
    let cases = super::runs_shard::cases(&done, cfg.out.as_deref());
    ci.finish(&baseline, cases).unwrap_or_else(|| exit(&done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::System;
    use std::path::PathBuf;

    fn base(workload: &str, out: Option<&str>) -> RunConfig {
        RunConfig {
            system: System::Redis,
            workload: crate::workload::load(workload, &Default::default()).unwrap(),
            nemesis: crate::nemesis::NemesisSpec::of("none").unwrap(),
            fencing: crate::storage::Fencing::On,
            endpoints: None,
            toxiproxy: None,
            tap_wire: false,
            client: crate::combination::ClientChoice::Builtin,
            adapter: None,
            storage: crate::combination::StorageChoice::Builtin,
            hosts: None,
            attach: false,
            plan: false,
            allow_majority: false,
            dead_man_margin: crate::nemesis::deadman::DEFAULT_MARGIN,
            seed: u64::MAX,
            out: out.map(PathBuf::from),
            histories: "histories".into(),
            base_port: None,
            nodes: None,
            progress: true,
            exe: "lockjaw".into(),
            command: vec![],
            record: true,
            sentinel_master: "lockjaw".into(),
            postgres_url: None,
            auth: Default::default(),
            pause_budget_ms: None,
            require_landed: None,
            witness: None,
            load: Default::default(),
            client_faketime: false,
            own_keys: false,
            share: None,
        }
    }

    #[test]
    fn each_run_gets_the_next_seed_its_own_directory_and_register_key() {
        let b = base("register", Some("/tmp/x"));
        let c = configs(&b, 3, 2);
        let seeds: Vec<u64> = c.iter().map(|c| c.seed).collect();
        assert_eq!(seeds, [u64::MAX, 0, 1]);
        let outs: Vec<_> = c.iter().map(|c| c.out.clone().unwrap()).collect();
        assert_eq!(outs[2], PathBuf::from("/tmp/x/run-3"));
        let keys: std::collections::HashSet<_> =
            c.iter().map(|c| c.workload.register_key.clone()).collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
        assert!(c.iter().all(|c| !c.progress), "no bars while runs overlap");
        assert!(
            c.iter().all(|c| c.own_keys),
            "each run's lock and storage keys carry its run id"
        );
    }

    #[test]
    fn a_single_run_is_left_as_asked() {
        let b = base("lock", Some("/tmp/x"));
        let c = configs(&b, 1, 1);
        assert_eq!(c[0].out, b.out);
        assert_eq!(c[0].workload.register_key, b.workload.register_key);
        assert!(c[0].progress);
        assert!(!c[0].own_keys, "a single run keeps the workload's keys");
    }

    #[test]
    fn the_tally_and_the_exit_compose_every_run() {
        let f = |index, exit| Finished {
            index,
            seed: 0,
            result: Ok(RunOutcome {
                dir: PathBuf::new(),
                exit,
                summary: String::new(),
                error: None,
            }),
        };
        let err = Finished {
            index: 4,
            seed: 0,
            result: Err(RunError::new("no")),
        };
        let runs = [
            f(1, Exit::Valid),
            f(2, Exit::Unknown),
            f(3, Exit::Valid),
            err,
        ];
        assert_eq!(
            tally(&runs),
            "4 runs: 2 valid, 0 invalid, 1 unknown, 1 failed"
        );
        assert_eq!(exit(&runs), Exit::Error);
        assert_eq!(exit(&runs[..3]), Exit::Unknown);
    }
}
