//! The coverage of an explore: per point, its injections summed over runs
//! and its status (a finding, undecided, allowed, the smallest rate its
//! landed trials exclude, never landed and why, not tried); per learned
//! request kind (strikes) and per phase × family (the other faults):
//! planned, tried, landed, never landed and why. Never a bare "clean": a
//! point without a finding says which rates its landed trials exclude.
//! Per point, too, whether its landed injections changed what the client
//! sent ([`super::feedback`]), and how.

use super::finding::{Judged, PointOutcome, Tallies};
use super::learn::{LinkKind, Phase};
use super::output::Report;
use super::plan::{Family, Point};
use serde::Serialize;
use std::collections::BTreeMap;

/// The rate above which `n` landed trials with no hit exclude at 95 %
/// (one-sided): 1 − 0.05^(1/n); 1 when nothing landed.
pub fn excluded_above(n: u64) -> f64 {
    if n == 0 {
        return 1.0;
    }
    1.0 - 0.05f64.powf(1.0 / n as f64)
}

/// One point over every run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PointLine {
    pub id: String,
    pub family: Option<Family>,
    pub kind: Option<String>,
    pub phase: Option<Phase>,
    pub label: Option<String>,
    pub runs: usize,
    pub injections: u64,
    pub landed: u64,
    /// Kind → landed injections with one, per judgement.
    pub findings: BTreeMap<String, u64>,
    pub undecided: BTreeMap<String, (u64, String)>,
    pub allowed: BTreeMap<String, (u64, String)>,
    /// Why injections did not land.
    pub missed: BTreeMap<String, u64>,
    /// Kinds the runs could not count, and why.
    pub unmeasured: BTreeMap<String, String>,
    /// No finding and nothing undecided: finding rates above this are
    /// excluded at 95 % by the landed trials.
    pub excluded_above: Option<f64>,
    /// What its landed injections changed in what the client sent (empty:
    /// nothing); `None` when the wire was not read (nothing landed, runs
    /// without the tap).
    pub changed: Option<Vec<String>>,
    /// One line for people.
    pub status: String,
}

impl PointLine {
    /// The coverage's column: `yes: <how>`, `no`, or `—` (not read).
    pub fn changed_text(&self) -> String {
        match &self.changed {
            None => "—".into(),
            Some(v) if v.is_empty() => "no".into(),
            Some(v) => format!("yes: {}", v.join("; ")),
        }
    }
}

/// Sum a point's outcomes over runs.
pub fn line(p: Option<&Point>, id: &str, outcomes: &[PointOutcome]) -> PointLine {
    let mut l = PointLine {
        id: id.to_string(),
        family: p.map(|p| p.family),
        kind: p.and_then(|p| p.kind.clone()),
        phase: p.and_then(|p| p.phase),
        label: p.and_then(|p| p.label.clone()),
        runs: outcomes.len(),
        ..PointLine::default()
    };
    for o in outcomes {
        l.injections += o.injections;
        l.landed += o.landed;
        for (why, n) in &o.missed {
            *l.missed.entry(why.clone()).or_default() += n;
        }
        for (k, why) in &o.unmeasured {
            l.unmeasured.insert(k.clone(), why.clone());
        }
        if let Some(c) = &o.changed {
            let v = l.changed.get_or_insert_with(Vec::new);
            for why in c {
                if v.len() < super::feedback::MAX_REASONS && !v.contains(why) {
                    v.push(why.clone());
                }
            }
        }
        for h in &o.hits {
            match &h.judged {
                Judged::Finding => *l.findings.entry(h.kind.clone()).or_default() += h.hits,
                Judged::Undecided(why) => add(&mut l.undecided, &h.kind, h.hits, why),
                Judged::Allowed(why) => add(&mut l.allowed, &h.kind, h.hits, why),
            }
        }
    }
    l.status = status(&mut l);
    l
}

fn add(m: &mut BTreeMap<String, (u64, String)>, kind: &str, n: u64, why: &str) {
    let e = m
        .entry(kind.to_string())
        .or_insert_with(|| (0, why.to_string()));
    e.0 += n;
}

fn status(l: &mut PointLine) -> String {
    let kinds = |m: Vec<&String>| m.into_iter().cloned().collect::<Vec<_>>().join(", ");
    if !l.findings.is_empty() {
        return format!("finding: {}", kinds(l.findings.keys().collect()));
    }
    if !l.undecided.is_empty() {
        return format!("undecided, review: {}", kinds(l.undecided.keys().collect()));
    }
    if l.injections == 0 {
        return "not tried (the budget ran out first)".into();
    }
    if l.landed == 0 {
        let why: Vec<String> = l.missed.iter().map(|(w, n)| format!("{w} ×{n}")).collect();
        return format!(
            "never landed in {} injection(s): {}",
            l.injections,
            why.join("; ")
        );
    }
    let bound = excluded_above(l.landed);
    l.excluded_above = Some(bound);
    let mut s = format!(
        "0 of {} landed: rates above {} excluded",
        l.landed,
        crate::report::trials::pct(bound)
    );
    if !l.allowed.is_empty() {
        s += &format!(
            " (allowed by this fault: {})",
            kinds(l.allowed.keys().collect())
        );
    }
    if !l.unmeasured.is_empty() {
        s += &format!(" (not counted: {})", kinds(l.unmeasured.keys().collect()));
    }
    s
}

/// A point's status as the confirmation alone left it: a finding shown
/// again alone, one awaiting that run, or one that did not show again.
fn confirmation(l: &mut PointLine, r: &Report) {
    let mine: Vec<&super::output::Finding> =
        r.findings.iter().filter(|f| f.point == l.id).collect();
    if mine.is_empty() {
        return;
    }
    for f in &mine {
        l.findings.entry(f.kind.clone()).or_insert(f.hits);
    }
    l.excluded_above = None;
    let words = |pick: &dyn Fn(&super::output::Finding) -> bool| {
        mine.iter()
            .filter(|f| pick(f))
            .map(|f| f.kind.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (shown, pending, refuted) = (
        words(&|f| f.confirmed),
        words(&|f| f.pending()),
        words(&|f| f.refuted()),
    );
    l.status = if !shown.is_empty() {
        format!("finding: {shown}")
    } else if !pending.is_empty() {
        format!("awaiting confirmation alone: {pending}")
    } else {
        format!("shown in the search, not again alone: {refuted}")
    };
}

/// One row of the coverage table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// A learned request kind's label (strikes), or `any request` for the
    /// faults aimed at a phase (a `together` point counts in its family's
    /// rows, not its strike part's).
    pub what: String,
    pub link: Option<LinkKind>,
    /// The kind's phases, or the phase the faults aim at.
    pub phases: Vec<Phase>,
    pub family: Family,
    pub planned: usize,
    pub tried: usize,
    pub landed: usize,
    /// Points that were tried and never landed, and why.
    pub never_landed: Vec<(String, String)>,
    /// Candidates not planned here, and why.
    pub not_planned: Vec<(String, String)>,
    /// The largest of its clean points' excluded rates (the weakest).
    pub excluded_above: Option<f64>,
}

/// Everything the coverage shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Coverage {
    pub rows: Vec<Row>,
    pub points: Vec<PointLine>,
    /// Opaque links: `node (why): connection-level faults only`.
    pub opaque: Vec<String>,
    /// Planned points that landed fewer than the minimum.
    pub short: Vec<(String, u64)>,
    pub min_landed: u64,
    /// Landed points whose wire was read, and of them those that changed
    /// what the client sent.
    pub sending_read: usize,
    pub sending_changed: usize,
}

/// The coverage of `r`, each planned point held to `min_landed`.
pub fn coverage(r: &Report, min_landed: u64) -> Coverage {
    let empty: Vec<PointOutcome> = vec![];
    let mut points: Vec<PointLine> = r
        .plan
        .points
        .iter()
        .map(|p| line(Some(p), &p.id, r.tallies.get(&p.id).unwrap_or(&empty)))
        .collect();
    // Outcomes of points not in the plan (point `none`, older plans).
    for (id, o) in &r.tallies {
        if r.plan.get(id).is_none() {
            points.push(line(None, id, o));
        }
    }
    for l in &mut points {
        confirmation(l, r);
    }
    let short = points
        .iter()
        .filter(|l| l.family.is_some() && l.landed < min_landed)
        .map(|l| (l.id.clone(), l.landed))
        .collect();
    let mut rows = vec![];
    for k in &r.learned.kinds {
        let label = k.label();
        let mut row = row(label.clone(), Some(k.link), Family::Strike, &points, &|l| {
            l.family == Some(Family::Strike) && l.kind.as_deref() == Some(&label)
        });
        row.phases = k.phases.iter().copied().collect();
        row.not_planned = r
            .plan
            .refused
            .iter()
            .filter(|x| x.kind.as_deref() == Some(&label))
            .map(|x| (x.id.clone(), x.why.clone()))
            .collect();
        if k.link == LinkKind::Storage && row.planned == 0 {
            row.not_planned.push((
                "strike".into(),
                "a storage request is reached by delay-storage (a network fault), not struck"
                    .into(),
            ));
        }
        rows.push(row);
    }
    for f in Family::ALL.into_iter().filter(|f| *f != Family::Strike) {
        for ph in Phase::ALL.into_iter().map(Some).chain([None]) {
            let what = "any request".to_string();
            let mut row = row(what, None, f, &points, &|l| {
                l.family == Some(f) && l.phase == ph
            });
            row.phases = ph.into_iter().collect();
            row.not_planned = r
                .plan
                .refused
                .iter()
                .filter(|x| x.family == f && x.phase == ph)
                .map(|x| (x.id.clone(), x.why.clone()))
                .collect();
            if row.planned > 0 || !row.not_planned.is_empty() {
                rows.push(row);
            }
        }
    }
    let opaque = r
        .learned
        .opaque
        .iter()
        .map(|o| {
            format!(
                "{} ({}): not framed, so faults act per connection, by phase and time only",
                o.node, o.why
            )
        })
        .collect();
    let read: Vec<&PointLine> = points
        .iter()
        .filter(|l| l.landed > 0 && l.changed.is_some())
        .collect();
    Coverage {
        sending_read: read.len(),
        sending_changed: read
            .iter()
            .filter(|l| l.changed.as_ref().is_some_and(|v| !v.is_empty()))
            .count(),
        rows,
        points,
        opaque,
        short,
        min_landed,
    }
}

fn row(
    what: String,
    link: Option<LinkKind>,
    family: Family,
    points: &[PointLine],
    pick: &dyn Fn(&PointLine) -> bool,
) -> Row {
    let mine: Vec<&PointLine> = points
        .iter()
        .filter(|l| l.family.is_some() && pick(l))
        .collect();
    Row {
        what,
        link,
        phases: vec![],
        family,
        planned: mine.len(),
        tried: mine.iter().filter(|l| l.injections > 0).count(),
        landed: mine.iter().filter(|l| l.landed > 0).count(),
        never_landed: mine
            .iter()
            .filter(|l| l.injections > 0 && l.landed == 0)
            .map(|l| (l.id.clone(), l.status.clone()))
            .collect(),
        not_planned: vec![],
        excluded_above: mine
            .iter()
            .filter_map(|l| l.excluded_above)
            .reduce(f64::max),
    }
}

/// Tallies' undecided outcomes (an anomaly the rule did not decide).
pub fn undecided(t: &Tallies) -> Vec<&PointOutcome> {
    t.values()
        .flatten()
        .filter(|o| {
            o.hits
                .iter()
                .any(|h| matches!(h.judged, Judged::Undecided(_)))
        })
        .collect()
}
