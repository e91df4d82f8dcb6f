//! classify's tests on the committed example run (three landed
//! `pause-holder` injections, stale writes accepted), its injections
//! renamed to points.

use super::*;
use crate::explore::plan::{Family, Point};
use serde_json::json;

const EXAMPLE: &str = "histories/examples/redis-fenced-counter-pause-holder";

/// The example run copied, injection i named `points[i]` (None: as
/// recorded).
fn run_dir(points: &[Option<&str>]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(EXAMPLE).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    let path = dir.path().join("nemesis.json");
    let mut n: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (i, p) in points.iter().enumerate() {
        if let Some(p) = p {
            n["injections"][i]["target"]["point"] = json!(p);
            n["injections"][i]["target"]["mixed"] = json!(true);
        }
    }
    std::fs::write(&path, n.to_string()).unwrap();
    dir
}

fn point(id: &str, fault: &str) -> Point {
    Point {
        id: id.into(),
        family: Family::Process,
        nemesis: format!("name = \"{id}\"\nfault = \"{fault}\"\n"),
        kind: None,
        phase: None,
        own_run: false,
        label: None,
        parts: vec![],
        workloads: vec![],
    }
}

fn hit<'a>(o: &'a PointOutcome, kind: &str) -> Option<&'a Hit> {
    o.hits.iter().find(|h| h.kind == kind)
}

#[test]
fn injections_are_grouped_by_their_point() {
    let dir = run_dir(&[Some("a"), Some("b"), Some("a")]);
    let run = Run::read(dir.path()).unwrap();
    let points = [point("a", "pause-holder"), point("b", "kill-holder")];
    let got = outcomes(&run, &points, &|_, _| Allowance::Finding);
    let by: Vec<(&str, u64, u64)> = got
        .iter()
        .map(|o| (o.point.as_str(), o.injections, o.landed))
        .collect();
    assert_eq!(by, [("a", 2, 2), ("b", 1, 1)]);
    let all: u64 = got
        .iter()
        .filter_map(|o| hit(o, "stale-write-accepted"))
        .map(|h| h.hits)
        .sum();
    let whole = crate::bugs::replay::observe_dir(Expect::StaleWriteAccepted, dir.path()).unwrap();
    assert!(whole.hits > 0, "the example has stale writes in windows");
    assert_eq!(all, whole.hits, "the points' hits add up to the run's");
    for o in &got {
        assert_eq!(o.dir, dir.path());
        for h in &o.hits {
            assert_eq!(h.judged, Judged::Finding);
        }
    }
}

#[test]
fn a_run_of_one_point_recorded_before_points_counts_for_its_name() {
    let dir = run_dir(&[]);
    let got = classify(dir.path(), &[], &Judge::default()).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].point.as_str(), got[0].injections),
        ("pause-holder", 3)
    );
    for h in &got[0].hits {
        assert!(
            matches!(h.judged, Judged::Undecided(_)),
            "a point not in the plan is never judged: {h:?}"
        );
    }
}

#[test]
fn an_allowed_anomaly_is_never_a_finding_and_an_undecided_one_never_clean() {
    let dir = run_dir(&[Some("a"), Some("a"), Some("a")]);
    let run = Run::read(dir.path()).unwrap();
    let points = [point("a", "pause-holder")];
    let allowed = outcomes(&run, &points, &|s, k| {
        assert_eq!(s.fault, "pause-holder", "the rule sees the point's spec");
        Allowance::Allowed(format!("{k}: an unfenced paused holder"))
    });
    let undecided = outcomes(&run, &points, &|_, _| {
        Allowance::Undecided("no rule".into())
    });
    let (a, u) = (&allowed[0], &undecided[0]);
    assert!(!a.hits.is_empty() && a.hits.len() == u.hits.len());
    for (ha, hu) in a.hits.iter().zip(&u.hits) {
        assert!(matches!(ha.judged, Judged::Allowed(_)), "{ha:?}");
        assert!(
            hu.hits > 0,
            "an undecided anomaly keeps its hits (not clean)"
        );
        assert!(matches!(hu.judged, Judged::Undecided(_)), "{hu:?}");
    }
    let mut t = Tallies::new();
    add(&mut t, allowed);
    assert!(promising_ids(&t).contains("a"));
    assert!(landed_ids(&t).contains("a"));
    // The real rule, whatever it decides, says something for each kind.
    let real = classify(dir.path(), &points, &Judge::default()).unwrap();
    assert_eq!(real[0].hits.len(), u.hits.len());
}

#[test]
fn a_missed_injection_says_why() {
    let v = json!({"detail": {"fired": false, "landed_inside": false}});
    assert_eq!(missed_why(&v), "matched no request within its window");
    let v = json!({"error": "no holder", "detail": null});
    assert_eq!(missed_why(&v), "failed: no holder");
    let v = json!({"detail": {"cut_short": true}});
    assert!(missed_why(&v).contains("cut short"));
}

/// A run without a directory: trials of points `(id, point, landed)`.
fn run_of(trials: &[(u64, &str, bool)], lost: u64) -> Run {
    use crate::report::trials::Trial;
    let trials = trials
        .iter()
        .map(|&(id, p, landed)| Trial {
            id,
            point: Some(p.into()),
            ..Trial::sample("strike-command", landed, &[])
        })
        .collect();
    let mut anomalies = BTreeMap::new();
    if lost > 0 {
        anomalies.insert("lost-updates".to_string(), lost);
    }
    Run {
        dir: "r".into(),
        trials: RunTrials {
            trials,
            anomalies,
            unattributed: lost,
            complete: true,
        },
        liveness: None,
        windows: vec![],
        nemesis: json!({"name": "explore-run-1", "injections": [
            {"id": 1, "detail": {"landed_inside": true}},
            {"id": 2, "detail": {"fired": false, "landed_inside": false}}
        ]}),
    }
}

#[test]
fn lost_updates_at_the_final_read_count_only_in_a_run_of_one_point() {
    let points = [point("a", "pause-holder"), point("b", "kill-holder")];
    let rule = |_: &NemesisSpec, _: &str| Allowance::Finding;
    let alone = outcomes(
        &run_of(&[(1, "a", true), (2, "a", false)], 2),
        &points,
        &rule,
    );
    assert_eq!((alone[0].injections, alone[0].landed), (2, 1));
    let h = hit(&alone[0], "lost-updates").expect("counted once for the point");
    assert_eq!(h.hits, 1);
    assert!(h.note.as_deref().unwrap().contains("final read"));
    assert_eq!(
        alone[0].missed,
        BTreeMap::from([("matched no request within its window".to_string(), 1)])
    );
    let shared = outcomes(
        &run_of(&[(1, "a", true), (2, "b", true)], 2),
        &points,
        &rule,
    );
    assert!(
        shared.iter().all(|o| hit(o, "lost-updates").is_none()),
        "two points in the run: the final read names neither"
    );
    // No liveness figures: stuck locks were not counted, and say so.
    assert!(alone[0].unmeasured["stuck-lock"].contains("liveness"));
    assert!(alone[0].hits.iter().all(|h| h.kind != "stuck-lock"));
}

#[test]
fn a_renewal_check_is_read_from_renewals_json_where_the_wire_was_the_source() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(renewal_check(d.path()), None, "no file: none");
    let write = |v: Value| std::fs::write(d.path().join("renewals.json"), v.to_string()).unwrap();
    write(
        json!({"source": "wire", "check": {"wire": 0, "events": 2, "events_unseen": [{"slot": 1, "from_ns": 5, "to_ns": 6}], "wire_unreported": [[0, 7]]}}),
    );
    let c = renewal_check(d.path()).unwrap();
    assert_eq!(
        (
            c.wire,
            c.events,
            c.events_unseen.len(),
            c.wire_unreported.len()
        ),
        (0, 2, 1, 1)
    );
    assert!(c.disagrees());
    // The events the source: nothing compared.
    write(
        json!({"source": "events", "check": {"wire": 0, "events": 1, "events_unseen": [], "wire_unreported": []}}),
    );
    assert_eq!(renewal_check(d.path()), None);
}
