//! The [`Engine`] of a real explore: runs in-process through the runner
//! (`runner::repeat`, each run an ordinary run directory that reserves
//! its own port block and heals on Ctrl-C, as `lockjaw bugs run`'s runs
//! do), learning, planning and judging by the explore's own modules,
//! healing by `lockjaw heal`'s library call, and the wall clock.

use super::drive::{Engine, Ran};
use super::finding::{Judge, PointOutcome};
use super::learn::Learned;
use super::plan::{Plan, PlanOptions, Point};
use crate::nemesis::allows::Promises;
use crate::runner::{controller, repeat};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The runner's engine.
pub struct Real {
    pub system: String,
    pub promises: Promises,
    pub started: Instant,
}

/// At most this many pairs are tried.
const MAX_PAIRS: usize = 24;

impl Engine for Real {
    fn run(
        &self,
        runs: Vec<(usize, Vec<String>)>,
        jobs: usize,
        done: &(dyn Fn(usize, Ran, f64) + Sync),
    ) {
        let mut cfgs = vec![];
        let mut ns = vec![];
        for (n, argv) in runs {
            let cfg = crate::runner::shrink::runs::config(&argv)
                .and_then(|c| controller::validate(&c).map(|()| c).map_err(|e| e.msg));
            match cfg {
                Ok(c) => {
                    cfgs.push(c);
                    ns.push(n);
                }
                Err(e) => done(n, Ran::Failed(e), 0.0),
            }
        }
        // Each run's clock: from when the previous run of its slot ended.
        let t0 = Instant::now();
        let finished = |f: &repeat::Finished, _total: usize| {
            let n = ns[f.index - 1];
            let secs = t0.elapsed().as_secs_f64();
            match &f.result {
                Ok(o) if o.exit == crate::exit::Exit::Error => done(
                    n,
                    Ran::Failed(
                        o.error
                            .clone()
                            .unwrap_or_else(|| format!("the run failed ({})", o.dir.display())),
                    ),
                    secs,
                ),
                // Cut short by Ctrl-C: not finished; a resume runs it again.
                Ok(o) if was_interrupted(&o.dir) => {}
                Ok(o) => done(n, Ran::Ended(o.exit.code()), secs),
                // Interrupted: not finished; a resume runs it again.
                Err(e) if e.exit != crate::exit::Exit::Error => {}
                Err(e) => done(n, Ran::Failed(e.msg.clone()), secs),
            }
        };
        repeat::run_all(cfgs, jobs, &finished);
    }

    fn learn(&self, dirs: &[PathBuf]) -> Result<Learned, String> {
        super::learn::learn(dirs)
    }

    fn judge(&self, learn_dirs: &[PathBuf]) -> Judge {
        Judge {
            system: self.system.clone(),
            fencing: learn_dirs.first().is_some_and(|d| fencing_of(d)),
            promises: self.promises,
        }
    }

    fn plan(&self, learned: &Learned, opts: &PlanOptions) -> Plan {
        super::plan::plan(learned, opts)
    }

    fn pairs(&self, plan: &Plan, landed: &[String], promising: &[String]) -> Vec<Point> {
        let set = |v: &[String]| v.iter().cloned().collect();
        super::pairs::pairs(plan, &set(landed), &set(promising), MAX_PAIRS)
    }

    fn classify(
        &self,
        dir: &Path,
        points: &[Point],
        judge: &Judge,
    ) -> Result<Vec<PointOutcome>, String> {
        // The run's own fencing (lockjaw's own client may differ).
        let j = Judge {
            fencing: fencing_of(dir),
            ..judge.clone()
        };
        super::finding::classify(dir, points, &j)
    }

    fn feedback(&self, dir: &Path, learned: &Learned) -> Result<super::feedback::Changes, String> {
        super::feedback::of_run(dir, learned)
    }

    fn heal(&self, dir: &Path) -> Result<(), String> {
        let h = crate::runner::heal::heal_dir(dir, false, false)?;
        match h.problems.first() {
            None => Ok(()),
            Some(p) => Err(p.clone()),
        }
    }

    fn interrupted(&self) -> bool {
        controller::interrupted()
            || crate::runner::compare::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// Whether a run directory's run was cut short (its run.json's outcome).
fn was_interrupted(dir: &Path) -> bool {
    run_json(dir).is_some_and(|v| v["outcome"] == "interrupted")
}

fn run_json(dir: &Path) -> Option<serde_json::Value> {
    std::fs::read_to_string(dir.join(crate::runner::rundir::RUN))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
}

/// Whether a run directory's run used fencing (its run.json).
fn fencing_of(dir: &Path) -> bool {
    run_json(dir).is_some_and(|v| v["fencing"] == "on")
}
