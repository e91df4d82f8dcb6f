//! The explore's resumable record, `DIR/state.json`: the settings it was
//! started with, what the learn runs showed, the plan, and every run it
//! decided on with its outcome once it finished. Written atomically after
//! each run, so `lockjaw explore DIR` after Ctrl-C or a SIGKILL continues
//! where it stopped and never repeats a finished run (a run that was cut
//! short is run again, in a new directory).

use super::finding::{Judge, PointOutcome};
use super::learn::Learned;
use super::plan::{Plan, Point};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The state file in an explore's directory.
pub const FILE: &str = "state.json";

/// What the explore was started with (a resume takes them from here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub system: String,
    /// `--client`; `None`: lockjaw's own.
    pub client: Option<String>,
    pub budget_secs: u64,
    pub jobs: usize,
    pub seed: u64,
    pub ttl_ms: u64,
    pub concurrency: usize,
    /// Landed injections each planned point needs before its absence of
    /// findings counts (exit 0 rather than 2).
    pub min_landed: u64,
    /// Seconds of each learn run.
    pub learn_secs: u64,
    /// Most single points in one search run.
    pub per_run: usize,
    /// Run each confirmed finding's point with lockjaw's own client too
    /// (`--no-second-opinion` turns it off; older state: on).
    #[serde(default = "on")]
    pub second_opinion: bool,
    /// `--shard K/N`: only the fault points whose name hashes to shard K
    /// (added after the contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::runner::shard::Shard>,
}

fn on() -> bool {
    true
}

/// Why a run was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// A fault-free run with the wire tap on.
    Learn,
    /// Single points tried for the first time.
    Search,
    /// Single points that did not land yet, again.
    Retry,
    /// Two points together (`fault = "together"`).
    Pair,
    /// A candidate finding's point alone, on a fresh cluster and seed.
    Confirm,
    /// The same point with lockjaw's own client (the second opinion).
    Builtin,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Learn => "learn",
            Stage::Search => "search",
            Stage::Retry => "retry",
            Stage::Pair => "pair",
            Stage::Confirm => "confirm",
            Stage::Builtin => "builtin",
        }
    }

    /// Search runs: their findings are candidates.
    pub fn searches(self) -> bool {
        matches!(self, Stage::Search | Stage::Retry | Stage::Pair)
    }
}

/// How a finished run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "ended")]
pub enum Outcome {
    /// It ran to its end and was read back: its points' outcomes.
    Ran {
        exit: u8,
        outcomes: Vec<PointOutcome>,
        secs: f64,
    },
    /// It could not be run or read (counts as tried, never as landed).
    Failed { error: String, secs: f64 },
}

impl Outcome {
    pub fn secs(&self) -> f64 {
        match self {
            Outcome::Ran { secs, .. } | Outcome::Failed { secs, .. } => *secs,
        }
    }

    pub fn outcomes(&self) -> &[PointOutcome] {
        match self {
            Outcome::Ran { outcomes, .. } => outcomes,
            Outcome::Failed { .. } => &[],
        }
    }
}

/// One run the explore decided on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRec {
    /// From 1, in the order decided.
    pub n: usize,
    pub stage: Stage,
    pub workload: String,
    /// The point ids it injects (none for a learn run).
    pub points: Vec<String>,
    pub seed: u64,
    /// How often it was started before and cut short (its directory then
    /// gets `.<attempt>`).
    #[serde(default)]
    pub attempt: u32,
    /// Its run directory.
    pub dir: PathBuf,
    /// `None` until it finished.
    pub outcome: Option<Outcome>,
}

impl RunRec {
    pub fn finished(&self) -> bool {
        self.outcome.is_some()
    }
}

/// The whole record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub settings: Settings,
    /// Wall seconds spent by every invocation so far.
    pub spent_secs: f64,
    /// The workloads learned (and searched with).
    pub workloads: Vec<String>,
    pub learned: Option<Learned>,
    pub judge: Option<Judge>,
    pub plan: Option<Plan>,
    /// The pairs, once the single points are done (`None` before).
    pub pairs: Option<Vec<Point>>,
    pub runs: Vec<RunRec>,
}

impl State {
    pub fn new(settings: Settings, workloads: Vec<String>) -> State {
        State {
            settings,
            spent_secs: 0.0,
            workloads,
            learned: None,
            judge: None,
            plan: None,
            pairs: None,
            runs: vec![],
        }
    }

    /// Read `dir/state.json`; `None` when there is none.
    pub fn load(dir: &Path) -> Result<Option<State>, String> {
        let path = dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            format!(
                "{}: line {}: not an explore's state: {e} (hint: a state of another lockjaw version? start a new explore with --out)",
                path.display(),
                e.line()
            )
        })
    }

    /// Write `dir/state.json` atomically (a temp file renamed over it).
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(FILE);
        crate::runner::rundir::write_json(&path, self)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))
    }

    /// Every point, single and paired, by id.
    pub fn point(&self, id: &str) -> Option<&Point> {
        let plan = self.plan.iter().flat_map(|p| p.points.iter());
        plan.chain(self.pairs.iter().flatten()).find(|p| p.id == id)
    }

    /// The finished runs of `stage`.
    pub fn finished(&self, stage: Stage) -> impl Iterator<Item = &RunRec> {
        self.runs
            .iter()
            .filter(move |r| r.stage == stage && r.finished())
    }

    /// Finished runs (any stage but learn) that injected `point`.
    pub fn tries(&self, point: &str) -> usize {
        self.runs
            .iter()
            .filter(|r| r.stage.searches() && r.finished())
            .filter(|r| r.points.iter().any(|p| p == point))
            .count()
    }

    /// Injections of `point` over the search runs.
    pub fn injections(&self, point: &str) -> u64 {
        self.search_outcomes()
            .filter(|o| o.point == point)
            .map(|o| o.injections)
            .sum()
    }

    /// Landed injections of `point` over the search runs.
    pub fn landed(&self, point: &str) -> u64 {
        self.search_outcomes()
            .filter(|o| o.point == point)
            .map(|o| o.landed)
            .sum()
    }

    /// What `point`'s landed injections changed in what the client sent,
    /// over the search runs (each reason once, at most
    /// [`super::feedback::MAX_REASONS`]); `None` when none was read.
    pub fn changed(&self, point: &str) -> Option<Vec<String>> {
        let mut out: Option<Vec<String>> = None;
        for c in self
            .search_outcomes()
            .filter(|o| o.point == point)
            .filter_map(|o| o.changed.as_ref())
        {
            let v = out.get_or_insert_with(Vec::new);
            for why in c {
                if v.len() < super::feedback::MAX_REASONS && !v.contains(why) {
                    v.push(why.clone());
                }
            }
        }
        out
    }

    /// Whether a landed injection of `point` changed what the client sent.
    pub fn changed_sending(&self, point: &str) -> bool {
        self.changed(point).is_some_and(|v| !v.is_empty())
    }

    /// Every point outcome of the finished search runs.
    pub fn search_outcomes(&self) -> impl Iterator<Item = &PointOutcome> {
        self.runs
            .iter()
            .filter(|r| r.stage.searches())
            .filter_map(|r| r.outcome.as_ref())
            .flat_map(|o| o.outcomes().iter())
    }

    /// The next run number.
    pub fn next_n(&self) -> usize {
        self.runs.len() + 1
    }
}

#[cfg(test)]
pub(crate) fn settings() -> Settings {
    Settings {
        system: "redis".into(),
        client: Some("python-x@1".into()),
        budget_secs: 600,
        jobs: 1,
        seed: 7,
        ttl_ms: 500,
        concurrency: 3,
        min_landed: 1,
        learn_secs: 4,
        per_run: 3,
        second_opinion: true,
        shard: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_survives_a_save_and_a_load_and_a_bad_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(State::load(dir.path()).unwrap(), None);
        let mut s = State::new(settings(), vec!["lock".into()]);
        s.runs.push(RunRec {
            n: 1,
            stage: Stage::Learn,
            workload: "lock".into(),
            points: vec![],
            seed: 3,
            attempt: 0,
            dir: dir.path().join("learn/lock-1"),
            outcome: Some(Outcome::Failed {
                error: "x".into(),
                secs: 1.0,
            }),
        });
        s.save(dir.path()).unwrap();
        assert_eq!(State::load(dir.path()).unwrap(), Some(s));
        std::fs::write(dir.path().join(FILE), "{").unwrap();
        let e = State::load(dir.path()).unwrap_err();
        assert!(
            e.contains("state.json: line 1") && e.contains("hint"),
            "{e}"
        );
    }

    /// A state written before the feedback (no `bigrams` in what was
    /// learned, no `changed` on an outcome) still loads, as unread.
    #[test]
    fn a_state_from_before_the_feedback_loads_with_nothing_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = State::new(settings(), vec!["lock".into()]);
        s.learned = Some(Learned {
            bigrams: Some([("^".to_string(), "SET".to_string())].into()),
            ..Learned::default()
        });
        s.runs.push(RunRec {
            n: 1,
            stage: Stage::Search,
            workload: "lock".into(),
            points: vec!["p".into()],
            seed: 3,
            attempt: 0,
            dir: dir.path().join("runs/run-1"),
            outcome: Some(Outcome::Ran {
                exit: 0,
                secs: 1.0,
                outcomes: vec![PointOutcome {
                    point: "p".into(),
                    injections: 1,
                    landed: 1,
                    hits: vec![],
                    dir: "d".into(),
                    missed: Default::default(),
                    unmeasured: Default::default(),
                    changed: Some(vec!["SET twice in a row".into()]),
                }],
            }),
        });
        assert!(s.changed_sending("p"));
        let mut v = serde_json::to_value(&s).unwrap();
        let learned = v["learned"].as_object_mut().unwrap();
        assert!(learned.remove("bigrams").is_some());
        let o = v.pointer_mut("/runs/0/outcome/outcomes/0").unwrap();
        assert!(o.as_object_mut().unwrap().remove("changed").is_some());
        std::fs::write(dir.path().join(FILE), v.to_string()).unwrap();
        let old = State::load(dir.path()).unwrap().unwrap();
        assert_eq!(old.learned.as_ref().unwrap().bigrams, None);
        assert_eq!(old.changed("p"), None);
        assert!(!old.changed_sending("p"));
    }
}
