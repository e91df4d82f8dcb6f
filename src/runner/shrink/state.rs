//! The state of a shrink, kept in RUN_DIR/shrink/state.json after every
//! step so an interrupted shrink resumes where it stopped: the search, the
//! steps taken with each run's outcome, the next fresh seed, and what one
//! run costs. [`State::next`] decides what comes next from the state and
//! the budget left, as a pure function.

use super::search::{Candidate, Search};
use super::stats;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The shrink's directory under the run directory.
pub const DIR: &str = "shrink";
/// The state file in [`DIR`].
pub const FILE: &str = "state.json";
const VERSION: u32 = 1;

/// How one run of a step ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum Outcome {
    /// The anomaly kind followed a landed injection of the fault.
    Reproduced,
    /// It did not; why (`no injection landed`, `no two holders`).
    Missed { why: String },
    /// The run could not run or check.
    Failed { error: String },
}

/// One run of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub seed: u64,
    pub dir: PathBuf,
    pub outcome: Outcome,
    /// Wall time of the run, setup and check included.
    pub wall_ms: u64,
    /// A witness file the run wrote for the kind, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness: Option<PathBuf>,
}

/// What a step measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "role")]
pub enum Role {
    /// The original command.
    Original,
    /// A candidate: `knob` from `previous` to `value`.
    Candidate {
        knob: usize,
        value: u64,
        previous: u64,
    },
    /// The final command on fresh seeds.
    Confirm,
}

/// One step: a command run `runs.len()` times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its number: its runs are in `shrink/runs/step-<n>/`.
    pub n: u64,
    pub role: Role,
    /// What changed, for people: `workers 5 → 2`.
    pub change: String,
    /// The command, quoted: what each run ran (with its own `--seed`).
    pub command: String,
    pub runs: Vec<RunRecord>,
    /// Kept (a candidate), reproducing (the original) or confirmed.
    pub kept: bool,
    /// A kept candidate taken back because its command did not confirm.
    #[serde(default)]
    pub undone: bool,
}

impl Step {
    pub fn reproduced(&self) -> u64 {
        self.runs
            .iter()
            .filter(|r| r.outcome == Outcome::Reproduced)
            .count() as u64
    }

    pub fn total(&self) -> u64 {
        self.runs.len() as u64
    }
}

/// What to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Measure the original command.
    Original,
    /// Run a candidate.
    Candidate(Candidate),
    /// Confirm the command kept so far on fresh seeds.
    Confirm,
    /// A command was confirmed: the last step.
    Done,
    /// The original does not reproduce (or did not confirm).
    NotReproducing,
    /// The budget left cannot pay for the confirmation.
    OutOfBudget,
}

/// Everything a shrink has done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// The run directory shrunk.
    pub run: PathBuf,
    pub kind: String,
    pub fault: String,
    pub search: Search,
    /// Seeds are never reused: each run takes the next.
    pub next_seed: u64,
    pub next_step: u64,
    pub steps: Vec<Step>,
    /// Mean wall time of a run beyond its time limit (setup, heal, check).
    pub overhead_ms: u64,
    pub runs_timed: u64,
}

/// The counts a decision needs: runs per candidate and per confirmation,
/// runs at once, the budget left.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub runs: u64,
    pub confirm: u64,
    pub jobs: u64,
    pub left_ms: u64,
}

impl State {
    pub fn new(run: &Path, kind: &str, fault: &str, search: Search, seed: u64) -> State {
        State {
            version: VERSION,
            run: run.to_path_buf(),
            kind: kind.into(),
            fault: fault.into(),
            search,
            next_seed: seed,
            next_step: 0,
            steps: vec![],
            overhead_ms: 0,
            runs_timed: 0,
        }
    }

    /// `n` fresh seeds: the first; none is handed out twice.
    pub fn seeds(&mut self, n: u64) -> u64 {
        let s = self.next_seed;
        self.next_seed = self.next_seed.wrapping_add(n);
        s
    }

    /// The estimated wall time of `n` runs of `time_limit_ms` each.
    pub fn estimate_ms(&self, time_limit_ms: u64, n: u64, jobs: u64) -> u64 {
        n.div_ceil(jobs.max(1)) * (time_limit_ms + self.overhead_ms)
    }

    /// What comes next. `time_ms(search)` is the time limit of a command.
    /// What a step of `next` runs: its role, its search (with the
    /// candidate's value applied) and how many runs; `None` when `next`
    /// runs nothing.
    pub fn plan(&self, next: &Next, l: Limits) -> Option<(Role, Search, u64)> {
        match next {
            Next::Original => Some((Role::Original, self.search.clone(), l.runs)),
            Next::Candidate(c) => {
                let role = Role::Candidate {
                    knob: c.knob,
                    value: c.value,
                    previous: self.search.knobs[c.knob].current,
                };
                Some((role, self.search.with(*c), l.runs))
            }
            Next::Confirm => Some((Role::Confirm, self.search.clone(), l.confirm)),
            _ => None,
        }
    }

    pub fn next(&self, l: Limits, time_ms: impl Fn(&Search) -> u64) -> Next {
        let Some(first) = self.steps.first() else {
            return Next::Original;
        };
        if !first.kept {
            return Next::NotReproducing;
        }
        match self.steps.last() {
            Some(s) if s.role == Role::Confirm && s.kept => return Next::Done,
            Some(s) if s.role == Role::Confirm && !self.any_kept_candidate() => {
                return Next::NotReproducing
            }
            _ => {}
        }
        let confirm = self.estimate_ms(time_ms(&self.search), l.confirm, l.jobs);
        if let Some(c) = self.search.next() {
            let run = self.estimate_ms(time_ms(&self.search.with(c)), l.runs, l.jobs);
            if run + confirm <= l.left_ms {
                return Next::Candidate(c);
            }
        }
        if confirm <= l.left_ms {
            Next::Confirm
        } else {
            Next::OutOfBudget
        }
    }

    fn any_kept_candidate(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.kept && !s.undone && matches!(s.role, Role::Candidate { .. }))
    }

    /// Record a finished step: the kept rule for the original and the
    /// candidates, the confirmation rule for a confirmation. A
    /// confirmation that fails takes back the last kept candidate.
    pub fn record(&mut self, mut step: Step, limit_ms: u64) {
        let (k, n) = (step.reproduced(), step.total());
        step.kept = match step.role {
            Role::Confirm => stats::confirmed(k, n),
            _ => stats::kept(k, n),
        };
        for r in &step.runs {
            let over = r.wall_ms.saturating_sub(limit_ms);
            self.overhead_ms = (self.overhead_ms * self.runs_timed + over) / (self.runs_timed + 1);
            self.runs_timed += 1;
        }
        if let Role::Candidate { knob, value, .. } = step.role {
            self.search.record(Candidate { knob, value }, step.kept);
        }
        if step.role == Role::Confirm && !step.kept {
            if let Some(s) = self
                .steps
                .iter_mut()
                .rev()
                .find(|s| s.kept && !s.undone && matches!(s.role, Role::Candidate { .. }))
            {
                if let Role::Candidate {
                    knob,
                    value,
                    previous,
                } = s.role
                {
                    s.undone = true;
                    self.search.undo(knob, value, previous);
                }
            }
        }
        self.steps.push(step);
    }

    /// The confirmed step, once there is one.
    pub fn confirmed(&self) -> Option<&Step> {
        self.steps
            .last()
            .filter(|s| s.role == Role::Confirm && s.kept)
    }

    pub fn save(&self, run_dir: &Path) -> Result<(), String> {
        let dir = run_dir.join(DIR);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let p = dir.join(FILE);
        crate::runner::rundir::write_json(&p, self).map_err(|e| format!("{}: {e}", p.display()))
    }

    /// The saved state of a shrink of `run_dir`, if one was started.
    pub fn load(run_dir: &Path) -> Result<Option<State>, String> {
        let p = run_dir.join(DIR).join(FILE);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        let s: State = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: line {}: {e} (hint: remove {} to start the shrink afresh)",
                p.display(),
                e.line(),
                run_dir.join(DIR).display()
            )
        })?;
        if s.version != VERSION {
            return Err(format!(
                "{}: version {} of the state, this lockjaw writes {VERSION} (hint: remove {} to start afresh)",
                p.display(),
                s.version,
                run_dir.join(DIR).display()
            ));
        }
        Ok(Some(s))
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
