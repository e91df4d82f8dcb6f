//! explore.md, .json, .html and the exit code on hand-made reports.

use super::*;
use crate::explore::coverage::excluded_above;
use crate::explore::finding::Hit;
use crate::explore::learn::{LinkKind, OpaqueLink, Phase, RequestKind};
use crate::explore::plan::{plan, PlanOptions};

fn learned() -> Learned {
    Learned {
        runs: vec!["learn-1".into()],
        lease_ms: 1000,
        kinds: vec![
            RequestKind {
                proto: "redis".into(),
                link: LinkKind::Lock,
                command: "SETNX".into(),
                sha1: None,
                words: None,
                phases: [Phase::Acquire].into(),
                count: 30,
                errors: 0,
            },
            RequestKind {
                proto: "redis".into(),
                link: LinkKind::Storage,
                command: "SET".into(),
                sha1: None,
                words: None,
                phases: [Phase::Write].into(),
                count: 30,
                errors: 0,
            },
        ],
        opaque: vec![OpaqueLink {
            link: LinkKind::Lock,
            node: "n2".into(),
            why: "TLS".into(),
        }],
        run_secs: 20.0,
        ..Learned::default()
    }
}

fn outcome(point: &str, injections: u64, landed: u64, hits: Vec<Hit>) -> PointOutcome {
    PointOutcome {
        point: point.into(),
        injections,
        landed,
        hits,
        dir: PathBuf::from("runs/run-1"),
        missed: if landed < injections {
            [(
                "matched no request within its window".to_string(),
                injections - landed,
            )]
            .into()
        } else {
            Default::default()
        },
        unmeasured: Default::default(),
        changed: None,
    }
}

/// Every planned point landed `n` times, none with a hit.
fn report(n: u64) -> Report {
    let l = learned();
    let p = plan(
        &l,
        &PlanOptions {
            system: "redis".into(),
            own_cluster: false,
            workloads: vec!["lock".into()],
            library_renews: false,
        },
    );
    let tallies = p
        .points
        .iter()
        .map(|q| (q.id.clone(), vec![outcome(&q.id, n, n, vec![])]))
        .collect();
    Report {
        system: "redis".into(),
        client: Some("python-x@1.0".into()),
        seed: 7,
        budget_secs: 900,
        spent_secs: 880.0,
        learned: l,
        plan: p,
        tallies,
        min_landed: 3,
        ..Report::default()
    }
}

fn finding(confirmed: bool, confirm_dir: Option<&str>) -> Finding {
    Finding {
        kind: "two-holders".into(),
        point: "strike-crash-after-SETNX".into(),
        landed: 7,
        hits: 3,
        witness: Some("runs/run-1/witness-safety-violation.jsonl".into()),
        confirmed,
        confirm_dir: confirm_dir.map(PathBuf::from),
        builtin_shows: Some(false),
        shrink: Some("lockjaw shrink runs/run-1".into()),
        row: Some("explore/bugs/found-1.toml".into()),
    }
}

#[test]
fn the_excluded_rate_is_computed_not_copied() {
    assert!((excluded_above(3) - (1.0 - 0.05f64.powf(1.0 / 3.0))).abs() < 1e-12);
    assert_eq!(pct(excluded_above(3)), "63 %");
    assert_eq!(pct(excluded_above(10)), "26 %");
    assert_eq!(excluded_above(0), 1.0);
    let r = report(3);
    let md = markdown(&r, &coverage::coverage(&r, 3));
    assert!(
        md.contains("0 of 3 landed: rates above 63 % excluded"),
        "{md}"
    );
    let cov = coverage::coverage(&r, 3);
    for l in &cov.points {
        assert!(
            !l.status.contains("clean"),
            "never a bare clean: {}",
            l.status
        );
    }
}

#[test]
fn exit_is_1_with_a_finding_0_when_all_landed_and_2_otherwise() {
    let mut r = report(3);
    assert_eq!(exit(&r, 3), 0);
    assert_eq!(exit(&r, 4), 2, "each landed 3, the minimum is 4");
    r.findings.push(finding(false, Some("confirm/1")));
    assert_eq!(exit(&r, 3), 0, "not shown again alone: no finding");
    r.findings.push(finding(false, None));
    assert_eq!(exit(&r, 3), 2, "awaiting confirmation");
    r.findings.push(finding(true, Some("confirm/2")));
    assert_eq!(exit(&r, 3), 1);

    let mut short = report(3);
    let first = short.plan.points[0].id.clone();
    short
        .tallies
        .insert(first.clone(), vec![outcome(&first, 4, 1, vec![])]);
    assert_eq!(exit(&short, 3), 2);
    let md = markdown(&short, &coverage::coverage(&short, 3));
    assert!(md.contains(&format!("- `{first}`: 1 landed")), "{md}");

    let mut und = report(3);
    let hit = Hit {
        kind: "stuck-lock".into(),
        hits: 1,
        judged: Judged::Undecided("no rule for this fault".into()),
        note: None,
    };
    und.tallies
        .insert(first.clone(), vec![outcome(&first, 3, 3, vec![hit])]);
    assert_eq!(exit(&und, 3), 2, "an undecided anomaly is never clean");
    let md = markdown(&und, &coverage::coverage(&und, 3));
    assert!(md.contains("stuck-lock at `"), "{md}");
    assert!(md.contains("no rule for this fault"));

    let mut learn = report(3);
    learn.learned.anomalies = vec![("learn-1".into(), "two-holders".into(), 2)];
    assert_eq!(
        exit(&learn, 3),
        1,
        "an anomaly without a fault is a finding"
    );
}

#[test]
fn an_allowed_anomaly_is_listed_as_allowed_not_as_a_finding() {
    let mut r = report(3);
    let id = r.plan.points[0].id.clone();
    let hit = Hit {
        kind: "stale-write-accepted".into(),
        hits: 2,
        judged: Judged::Allowed("an unfenced paused holder".into()),
        note: None,
    };
    r.tallies
        .insert(id.clone(), vec![outcome(&id, 3, 3, vec![hit])]);
    assert_eq!(exit(&r, 3), 0);
    let cov = coverage::coverage(&r, 3);
    let line = cov.points.iter().find(|l| l.id == id).unwrap();
    assert!(line
        .status
        .contains("allowed by this fault: stale-write-accepted"));
    assert!(line.findings.is_empty());
}

#[test]
fn the_three_files_put_findings_first_and_cover_every_kind() {
    let mut r = report(2);
    r.findings.push(finding(true, Some("confirm/1")));
    let id = r.plan.points[1].id.clone();
    r.tallies
        .insert(id.clone(), vec![outcome(&id, 4, 0, vec![])]);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &r).unwrap();
    let md = std::fs::read_to_string(dir.path().join("explore.md")).unwrap();
    let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} missing:\n{md}"));
    assert!(at("## Findings") < at("## Undecided") && at("## Undecided") < at("## Coverage"));
    assert!(md.contains("### two-holders at `strike-crash-after-SETNX`"));
    assert!(
        md.contains("3 of 7 landed injections: 43 % [16 %, 75 %] (95 % Wilson)"),
        "{md}"
    );
    assert!(md.contains("`lockjaw shrink runs/run-1`"));
    assert!(md.contains("explore/bugs/found-1.toml"));
    assert!(md.contains("| SETNX | acquire | strike | 6 |"), "{md}");
    assert!(
        md.contains("| SET | write | strike | 0 |"),
        "a storage kind is listed"
    );
    assert!(
        md.contains("n2 (TLS): not framed"),
        "opaque links are noted"
    );
    assert!(md.contains("never landed in 4 injection(s): matched no request within its window ×4"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("explore.json")).unwrap())
            .unwrap();
    assert_eq!(json["findings"][0]["kind"], "two-holders");
    assert_eq!(json["findings"][0]["point"], "strike-crash-after-SETNX");
    assert_eq!(json["findings"][0]["hits"], 3);
    assert_eq!(json["exit"], 1);
    assert!(json["coverage"]["rows"].as_array().unwrap().len() > 2);
    let back: Report = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(
        back.findings, r.findings,
        "explore.json reads back as the report"
    );
    assert!(
        md.contains("| `strike-crash-after-SETNX` | strike | 2 | 2 | finding: two-holders |"),
        "a finding's point is no excluded rate: {md}"
    );
    let html = std::fs::read_to_string(dir.path().join("explore.html")).unwrap();
    assert!(html.contains("<tr class=\"finding\"><td>two-holders</td>"));
    assert!(!html.contains("<script"), "self-contained and static");
}

#[test]
fn a_renewal_disagreement_of_the_learn_runs_is_reported() {
    use crate::runner::renewal_check::RenewalCheck;
    let mut r = report(1);
    r.learned.renewal_checks = vec![
        (
            "learn/lock-renewing-1".into(),
            RenewalCheck {
                wire: 4,
                events: 4,
                ..RenewalCheck::default()
            },
        ),
        (
            "learn/fenced-counter-renewing-1".into(),
            RenewalCheck {
                wire: 3,
                events: 4,
                wire_unreported: vec![],
                events_unseen: vec![crate::runner::renewal_check::Span {
                    slot: 1,
                    from_ns: 5,
                    to_ns: 9,
                }],
            },
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &r).unwrap();
    let md = std::fs::read_to_string(dir.path().join("explore.md")).unwrap();
    assert!(
        md.contains("- `learn/lock-renewing-1`: 4 on the wire, 4 event(s): agree"),
        "{md}"
    );
    assert!(
        md.contains("- `learn/fenced-counter-renewing-1`: 3 on the wire, 4 event(s): **disagree**: 1 event(s) with no successful renewal on the wire inside them, 0 wire renewal(s) no event reports"),
        "{md}"
    );
    assert!(!md.contains("search runs"), "no search run read: {md}");
    // The search runs' checks: the totals, and the disagreeing runs named.
    r.renewals = vec![
        (
            "runs/run-1".into(),
            RenewalCheck {
                wire: 10,
                events: 10,
                ..RenewalCheck::default()
            },
        ),
        (
            "runs/run-2".into(),
            RenewalCheck {
                wire: 6,
                events: 5,
                wire_unreported: vec![(2, 7)],
                events_unseen: vec![],
            },
        ),
    ];
    write(dir.path(), &r).unwrap();
    let md = std::fs::read_to_string(dir.path().join("explore.md")).unwrap();
    assert!(
        md.contains("- search runs (the wire's renewals extended the leases): 16 on the wire, 15 event(s); 1 of 2 run(s) disagree"),
        "{md}"
    );
    assert!(
        md.contains(
            "  - `runs/run-2`: 0 event(s) unseen on the wire, 1 wire renewal(s) unreported"
        ),
        "{md}"
    );
    assert!(!md.contains("`runs/run-1`"), "{md}");
}

#[test]
fn html_escapes_what_it_was_told() {
    let mut r = report(1);
    let mut f = finding(true, None);
    f.point = "<b>x</b>".into();
    r.findings.push(f);
    let h = html(&r, &coverage::coverage(&r, 1));
    assert!(h.contains("&lt;b&gt;x&lt;/b&gt;") && !h.contains("<b>x</b>"));
}

#[test]
fn the_coverage_says_per_point_whether_it_changed_what_the_client_sent() {
    let mut r = report(3);
    let ids: Vec<String> = r.plan.points.iter().map(|p| p.id.clone()).collect();
    // The first changed what was sent, the second did not, the rest were
    // not read (no tap).
    let t = r.tallies.get_mut(&ids[0]).unwrap();
    t[0].changed = Some(vec!["SETNX twice in a row".into()]);
    r.tallies.get_mut(&ids[1]).unwrap()[0].changed = Some(vec![]);
    let cov = coverage::coverage(&r, 3);
    assert_eq!((cov.sending_changed, cov.sending_read), (1, 2));
    let md = markdown(&r, &cov);
    assert!(
        md.contains("1 of the 2 landed point(s) whose wire was read changed what the client sent"),
        "{md}"
    );
    let row = |id: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| `{id}` |")))
            .unwrap()
            .to_string()
    };
    assert!(
        row(&ids[0]).ends_with("| yes: SETNX twice in a row |"),
        "{}",
        row(&ids[0])
    );
    assert!(row(&ids[1]).ends_with("| no |"), "{}", row(&ids[1]));
    assert!(row(&ids[2]).ends_with("| — |"), "{}", row(&ids[2]));
    let json = serde_json::to_value(&cov).unwrap();
    assert_eq!(json["points"][0]["changed"][0], "SETNX twice in a row");
    assert!(html(&r, &cov).contains("<td>yes: SETNX twice in a row</td>"));
}
