//! Snapshots of the comparison as rendered (the terminal view, compare.md)
//! from cells built here like those of `make demo`: a change of output is
//! a reviewed diff of the `.snap` files beside this one.

use super::*;
use crate::report::trials::{RunTrials, Trial};
use std::path::Path;

/// One run of `landed` landed injections, `attributed` of them with a
/// stale write; `stale` stale writes accepted and `lost` lost updates
/// (found at the final read: attributed to no injection).
fn run(landed: u64, attributed: u64, stale: u64, lost: i64, fenced: bool) -> RunSummary {
    let mut s = RunSummary::empty();
    let invalid = stale > 0 || lost > 0;
    let v = |bad: bool| SideVerdict {
        valid: if bad { Validity::False } else { Validity::True },
        applicable: true,
    };
    s.overall = v(invalid).valid;
    s.service = Some(v(false));
    s.resource = Some(v(invalid));
    s.acquisitions = 57;
    s.updates = 90;
    s.retries = 40;
    s.duration_ns = 20_000_000_000;
    s.acquire_p50_ms = Some(0.7);
    s.acquire_p99_ms = Some(11.6);
    s.safety_violations = Some(0);
    s.fence_order_errors = Some(0);
    s.stale_writes_accepted = Some(stale);
    s.stale_writes_rejected = if fenced { landed } else { 0 };
    s.lost_updates = Some(lost);
    s.stale_holders = Some(landed);
    let trials = (1..=landed)
        .map(|id| Trial {
            id,
            fault: "pause-holder".into(),
            landed: true,
            kinds: (id <= attributed)
                .then(|| "stale-writes".to_string())
                .into_iter()
                .collect(),
            point: None,
        })
        .collect();
    let mut anomalies = std::collections::BTreeMap::new();
    if stale > 0 {
        anomalies.insert("stale-writes".to_string(), stale);
    }
    if lost > 0 {
        anomalies.insert("lost-updates".to_string(), lost as u64);
    }
    s.trials = RunTrials {
        trials,
        anomalies,
        unattributed: u64::from(lost > 0),
        complete: true,
    };
    s
}

fn cell(system: &str, nemesis: &str, fencing: bool, outcome: CellOutcome) -> Cell {
    Cell {
        spec: CellSpec {
            system: system.into(),
            client: "builtin".into(),
            workload: "fenced-counter".into(),
            nemesis: nemesis.into(),
            fencing: Some(fencing),
            concurrency: None,
        },
        outcome,
    }
}

fn filled(system: &str, nemesis: &str, fencing: bool, summary: RunSummary) -> Cell {
    let f = if fencing { "fenced" } else { "unfenced" };
    let report = format!("cells/{system}-fenced-counter-{nemesis}-{f}-0/report.html");
    let runs = vec![CellRun { summary, report }];
    cell(system, nemesis, fencing, CellOutcome::Runs { runs })
}

fn na(system: &str, nemesis: &str, fencing: bool, reason: &str) -> Cell {
    let reason = reason.to_string();
    cell(
        system,
        nemesis,
        fencing,
        CellOutcome::NotApplicable { reason },
    )
}

/// The demo's shape: filled cells with and without fencing, N/A cells,
/// and lost updates only the final read finds.
fn demo() -> Vec<Cell> {
    vec![
        filled("redis", "pause-holder", true, run(5, 0, 0, 0, true)),
        filled("redis", "pause-holder", false, run(5, 5, 5, 5, false)),
        na(
            "redlock",
            "pause-holder",
            true,
            "Redlock gives no fencing token, so there is no fence to check",
        ),
        filled("redlock", "pause-holder", false, run(5, 0, 0, 5, false)),
        na(
            "etcd",
            "clock-jump",
            false,
            "etcd (Go) ignores libfaketime: a clock fault cannot reach it",
        ),
        filled("zookeeper", "pause-holder", false, run(5, 5, 5, 5, false)),
    ]
}

const TITLE: &str = "lockjaw compare: fenced-counter (1 run(s) per cell, 20 s each)";

#[test]
fn the_terminal_view_is_narrow() {
    let text = compare_terminal(TITLE, &demo(), Path::new("histories/compare-x"));
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest <= 110, "{widest} columns:\n{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn the_terminal_view_absorbs_the_contention_table() {
    let mut cells = demo();
    cells.truncate(2);
    let mut level = filled("redis", "none", true, run(0, 0, 0, 0, true));
    level.spec.concurrency = Some(20);
    cells.push(level);
    insta::assert_snapshot!(compare_terminal(
        TITLE,
        &cells,
        Path::new("histories/compare-x")
    ));
}

#[test]
fn compare_md_shows_every_figure() {
    insta::assert_snapshot!(compare_md(TITLE, &demo()));
}
