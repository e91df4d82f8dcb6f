//! The loop with a fake engine: what it runs, what it reports, and that a
//! stop (Ctrl-C, or a kill that leaves runs unfinished) resumes without
//! repeating a finished run and ends where an uninterrupted explore ends.

use super::*;
use crate::explore::finding::{Hit, Judged};
use crate::explore::plan::Family;
use crate::explore::state::settings;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A world where: `a` lands and shows two-holders, also alone; `b` lands
/// and shows stuck-lock in a batch but not alone; `c` never lands; `d`
/// (a run of its own) lands, clean. lockjaw's own client shows `a` too.
struct Fake {
    /// Stop (as Ctrl-C) after this many runs ended.
    stop_after: Option<usize>,
    ended: AtomicUsize,
    stopped: AtomicBool,
    /// Every run started: (n, argv).
    started: Mutex<Vec<(usize, Vec<String>)>>,
    healed: Mutex<Vec<PathBuf>>,
    clock: Mutex<f64>,
}

impl Fake {
    fn new(stop_after: Option<usize>) -> Fake {
        Fake {
            stop_after,
            ended: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            started: Mutex::new(vec![]),
            healed: Mutex::new(vec![]),
            clock: Mutex::new(0.0),
        }
    }

    fn argv_of(&self, dir: &Path) -> Vec<String> {
        let d = dir.display().to_string();
        let started = self.started.lock().unwrap();
        let (_, a) = started
            .iter()
            .find(|(_, a)| a.windows(2).any(|w| w[0] == "--out" && w[1] == d))
            .expect("a run of this directory");
        a.clone()
    }
}

fn point(id: &str, own: bool) -> Point {
    Point::sample(id, Family::Strike, own, 500)
}

impl Engine for Fake {
    fn run(
        &self,
        runs: Vec<(usize, Vec<String>)>,
        _jobs: usize,
        done: &(dyn Fn(usize, Ran, f64) + Sync),
    ) {
        for (n, argv) in runs {
            if self.stopped.load(Ordering::SeqCst) {
                return;
            }
            self.started.lock().unwrap().push((n, argv));
            if self.stop_after == Some(self.ended.load(Ordering::SeqCst)) {
                // Cut short: not reported.
                self.stopped.store(true, Ordering::SeqCst);
                return;
            }
            *self.clock.lock().unwrap() += 10.0;
            self.ended.fetch_add(1, Ordering::SeqCst);
            done(n, Ran::Ended(0), 10.0);
        }
    }

    fn learn(&self, dirs: &[PathBuf]) -> Result<Learned, String> {
        Ok(Learned {
            runs: dirs.to_vec(),
            lease_ms: 500,
            run_secs: 10.0,
            ..Learned::default()
        })
    }

    fn judge(&self, _: &[PathBuf]) -> Judge {
        Judge {
            system: "redis".into(),
            ..Judge::default()
        }
    }

    fn plan(&self, _: &Learned, opts: &PlanOptions) -> Plan {
        assert!(opts.own_cluster);
        Plan {
            points: vec![
                point("a", false),
                point("b", false),
                point("c", false),
                point("d", true),
            ],
            ..Plan::default()
        }
    }

    fn pairs(&self, _: &Plan, landed: &[String], _: &[String]) -> Vec<Point> {
        assert!(!landed.contains(&"c".to_string()), "{landed:?}");
        // A real `together` point: its file names its parts' files.
        let mut p = point(&format!("together:{}", landed.join("+")), false);
        p.family = Family::Together;
        p.parts = landed[..2].to_vec();
        p.nemesis = crate::explore::pairs::together_text(
            &p.id,
            &crate::explore::search::point_file_name(&landed[0]),
            &crate::explore::search::point_file_name(&landed[1]),
        );
        vec![p]
    }

    fn classify(
        &self,
        dir: &Path,
        points: &[Point],
        _: &Judge,
    ) -> Result<Vec<PointOutcome>, String> {
        let argv = self.argv_of(dir);
        let alone = argv.iter().any(|a| a.contains("/points/"));
        let builtin = !argv.contains(&"--client".to_string());
        for p in points {
            // What the judge reads: every point loads, a pair by its parts.
            if let Err(e) = p.spec() {
                panic!("{} does not load for the judge: {e}", p.id);
            }
        }
        Ok(points
            .iter()
            .map(|p| {
                let kind = match p.id.as_str() {
                    "a" => Some("two-holders"),
                    "b" if !alone => Some("stuck-lock"),
                    _ => None,
                };
                let kind = kind.filter(|_| !builtin || p.id == "a");
                PointOutcome {
                    point: p.id.clone(),
                    injections: 1,
                    landed: u64::from(p.id != "c"),
                    hits: kind
                        .map(|k| Hit {
                            kind: k.into(),
                            hits: 1,
                            judged: Judged::Finding,
                            note: None,
                        })
                        .into_iter()
                        .collect(),
                    dir: dir.to_path_buf(),
                    missed: Default::default(),
                    unmeasured: Default::default(),
                    changed: None,
                }
            })
            .collect())
    }

    fn feedback(&self, _: &Path, _: &Learned) -> Result<crate::explore::feedback::Changes, String> {
        // `b` made the client send its release twice; `a` and `d` changed
        // nothing (`c` never lands).
        Ok([
            ("a", vec![]),
            ("b", vec!["DEL twice in a row".to_string()]),
            ("c", vec![]),
            ("d", vec![]),
        ]
        .into_iter()
        .map(|(p, v)| (p.to_string(), v))
        .collect())
    }

    fn heal(&self, dir: &Path) -> Result<(), String> {
        self.healed.lock().unwrap().push(dir.to_path_buf());
        Ok(())
    }

    fn interrupted(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn now(&self) -> f64 {
        *self.clock.lock().unwrap()
    }
}

fn fresh() -> State {
    let mut st = settings();
    st.per_run = 2;
    st.budget_secs = 10_000;
    State::new(st, vec!["lock".into(), "fenced-counter".into()])
}

/// The runs of a state as (n, stage, points, seed) for comparing.
fn shape(s: &State) -> Vec<(usize, Stage, Vec<String>, bool)> {
    s.runs
        .iter()
        .map(|r| (r.n, r.stage, r.points.clone(), r.finished()))
        .collect()
}

fn drive_to_end(dir: &Path, s: &mut State) -> Report {
    let f = Fake::new(None);
    let r = drive(dir, s, &f, &ProgressBar::hidden()).unwrap();
    r.expect("not interrupted")
}

#[test]
fn a_finding_is_reported_only_when_its_point_alone_shows_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = fresh();
    let r = drive_to_end(tmp.path(), &mut s);
    let found: Vec<(&str, &str)> = r
        .findings
        .iter()
        .map(|f| (f.kind.as_str(), f.point.as_str()))
        .collect();
    assert_eq!(
        found,
        [("two-holders", "a")],
        "b's stuck lock did not show alone"
    );
    let f = &r.findings[0];
    assert!(f.confirmed);
    assert_eq!(f.builtin_shows, Some(true));
    // One search run and one confirmation landed it, each with a hit.
    assert_eq!((f.landed, f.hits), (2, 2));
    let row = f.row.as_ref().unwrap();
    assert!(
        row.starts_with(tmp.path().join("rows")),
        "{}",
        row.display()
    );
    assert!(f.shrink.as_ref().unwrap().contains("--anomaly two-holders"));
    // Every point's file was written; c was tried MAX_TRIES times.
    for id in ["a", "b", "c", "d", "together:a+b+d"] {
        assert!(
            tmp.path()
                .join("points")
                .join(format!("{id}.toml"))
                .is_file(),
            "{id}"
        );
    }
    assert_eq!(s.tries("c"), search::MAX_TRIES);
    assert_eq!(s.landed("c"), 0);
    // Two learn runs, each workload once, under learn/.
    let learn: Vec<&RunRec> = s.runs.iter().filter(|r| r.stage == Stage::Learn).collect();
    assert_eq!(learn.len(), 2);
    assert!(learn[0].dir.ends_with("learn/lock-1"));
    assert_eq!(r.plan.points.len(), 5, "the pair is in the report's plan");
    assert!(r.tallies.contains_key("c"));
}

#[test]
fn a_stopped_explore_resumes_without_repeating_a_finished_run_and_ends_as_an_unstopped_one() {
    let whole = tempfile::tempdir().unwrap();
    let mut once = fresh();
    let expected = drive_to_end(whole.path(), &mut once);
    for stop in [1, 3, 5, 7] {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = fresh();
        let f = Fake::new(Some(stop));
        let got = drive(tmp.path(), &mut s, &f, &ProgressBar::hidden()).unwrap();
        assert!(got.is_none(), "stopped after {stop}");
        let finished: BTreeSet<usize> = s
            .runs
            .iter()
            .filter(|r| r.finished())
            .map(|r| r.n)
            .collect();
        assert_eq!(finished.len(), stop);
        // Resume from the file, as `lockjaw explore DIR` does.
        let mut s = State::load(tmp.path()).unwrap().unwrap();
        let f2 = Fake::new(None);
        let got = drive(tmp.path(), &mut s, &f2, &ProgressBar::hidden())
            .unwrap()
            .unwrap();
        let again: Vec<usize> = f2.started.lock().unwrap().iter().map(|(n, _)| *n).collect();
        assert!(
            again.iter().all(|n| !finished.contains(n)),
            "stop {stop}: {again:?} repeats one of {finished:?}"
        );
        assert_eq!(shape(&s), shape(&once), "stop {stop}");
        let kinds = |r: &Report| {
            r.findings
                .iter()
                .map(|f| (f.kind.clone(), f.point.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&got), kinds(&expected));
        // The run cut short got a new attempt in a new directory.
        let cut = s.runs.iter().find(|r| r.attempt > 0).expect("the cut run");
        assert!(
            cut.dir.display().to_string().ends_with(".1"),
            "{}",
            cut.dir.display()
        );
        assert_eq!(cut.seed, search::seed_of(7, cut.n, 1));
    }
}

#[test]
fn a_run_a_kill_left_unfinished_is_healed_then_run_again() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = fresh();
    let f = Fake::new(Some(4));
    assert!(drive(tmp.path(), &mut s, &f, &ProgressBar::hidden())
        .unwrap()
        .is_none());
    // As a SIGKILL leaves it: the run started, its directory made, no outcome.
    let cut = s.runs.iter().find(|r| !r.finished()).unwrap().clone();
    std::fs::create_dir_all(&cut.dir).unwrap();
    let mut s = State::load(tmp.path()).unwrap().unwrap();
    let f2 = Fake::new(None);
    drive(tmp.path(), &mut s, &f2, &ProgressBar::hidden())
        .unwrap()
        .unwrap();
    assert_eq!(*f2.healed.lock().unwrap(), std::slice::from_ref(&cut.dir));
    assert_eq!(f2.started.lock().unwrap()[0].0, cut.n);
}

#[test]
fn a_spent_budget_stops_the_search_but_not_a_confirmation() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = fresh();
    // Two learn runs (20 s) and one search run (10 s) fit; then only the
    // confirmations of its candidates (a and b).
    s.settings.budget_secs = 35;
    let r = drive_to_end(tmp.path(), &mut s);
    let stages: Vec<Stage> = s.runs.iter().map(|r| r.stage).collect();
    use Stage::*;
    // b never shows alone: CONFIRM_TRIES runs alone, one second opinion.
    assert_eq!(
        stages,
        [Learn, Learn, Search, Confirm, Builtin, Confirm, Builtin, Confirm, Confirm]
    );
    assert_eq!(r.findings.len(), 1);
    assert!(s.spent_secs > 35.0);
}

#[test]
fn search_runs_tap_the_wire_and_record_what_each_landed_point_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = fresh();
    let f = Fake::new(None);
    let r = drive(tmp.path(), &mut s, &f, &ProgressBar::hidden())
        .unwrap()
        .expect("not interrupted");
    let started = f.started.lock().unwrap();
    for run in &s.runs {
        let (_, argv) = started.iter().find(|(n, _)| *n == run.n).unwrap();
        let tapped = argv.contains(&"--tap-wire".to_string());
        let want = run.stage == Stage::Learn || run.stage.searches();
        assert_eq!(tapped, want, "run {} ({:?})", run.n, run.stage);
    }
    assert_eq!(s.changed("b"), Some(vec!["DEL twice in a row".to_string()]));
    assert_eq!(s.changed("a"), Some(vec![]));
    // Never landed: nothing read.
    assert_eq!(s.changed("c"), None);
    assert!(s.changed_sending("b") && !s.changed_sending("a"));
    let cov = crate::explore::coverage::coverage(&r, 1);
    let b = cov.points.iter().find(|l| l.id == "b").unwrap();
    assert_eq!(b.changed_text(), "yes: DEL twice in a row");
    let c = cov.points.iter().find(|l| l.id == "c").unwrap();
    assert_eq!(c.changed_text(), "—");
    assert_eq!((cov.sending_changed, cov.sending_read), (1, 3));
}
