//! Two faults as one injection (`fault = "together"`): pairs of points
//! that each landed alone, most promising first: those whose parts showed
//! an anomaly the rule allowed or could not decide, or changed what the
//! client sent ([`super::search::pair_first_points`]), then by how their
//! families meet (a strike or a network fault under a moving client
//! clock; a worker cut off while its storage write is delayed).

use super::candidates::{quote, File};
use super::plan::{Family, Plan, Point};
use std::collections::BTreeSet;

/// A `together` nemesis file: `first` and `second` (names or paths) at
/// once.
pub fn together_text(id: &str, first: &str, second: &str) -> String {
    File::new(id, "together", "two fault points as one injection")
        .raw(
            "together",
            format!(
                "{{ first = {}, second = {}, delay_ms = 0 }}",
                quote(first),
                quote(second)
            ),
        )
        .text()
}

/// How well two families go together (higher first).
fn affinity(a: Family, b: Family) -> u32 {
    use Family::*;
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    match (a, b) {
        (Strike, ClientClock) => 6,
        (ClientClock, Network) => 5,
        (Network, Network) => 4,
        (Strike, Process) | (Process, Network) => 3,
        (Strike, Network) | (_, Server) => 2,
        _ => 1,
    }
}

/// Whether two points can be one injection: different faults, and not two
/// of one process, clock or server family (they would act on the same
/// process, clock file or node).
fn compatible(a: &Point, b: &Point) -> bool {
    let fault = |p: &Point| p.spec().map(|s| s.fault).ok();
    let same_family = a.family == b.family
        && matches!(
            a.family,
            Family::Process | Family::ClientClock | Family::Server
        );
    let workloads = a.workloads.is_empty()
        || b.workloads.is_empty()
        || a.workloads.iter().any(|w| b.workloads.contains(w));
    a.family != Family::Together
        && b.family != Family::Together
        && !same_family
        && workloads
        && fault(a).is_some()
        && fault(a) != fault(b)
}

/// `together` points of landed single points (`landed`: their ids), at
/// most `max`, most promising first (`promising`: points with an anomaly
/// allowed or undecided, or that changed what the client sent). Their `nemesis` names the parts' files by name
/// (`<id>.toml`); [`Point::file_text`] gives the paths.
pub fn pairs(
    plan: &Plan,
    landed: &BTreeSet<String>,
    promising: &BTreeSet<String>,
    max: usize,
) -> Vec<Point> {
    let singles: Vec<(usize, &Point)> = plan
        .points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.family != Family::Together && landed.contains(&p.id))
        .collect();
    let mut scored = vec![];
    for (i, (ia, a)) in singles.iter().enumerate() {
        for (ib, b) in &singles[i + 1..] {
            if !compatible(a, b) {
                continue;
            }
            let hot = [a, b].iter().filter(|p| promising.contains(&p.id)).count() as u32;
            let score = hot * 10 + affinity(a.family, b.family);
            scored.push((std::cmp::Reverse(score), ia + ib, *ia, *ib));
        }
    }
    scored.sort();
    scored
        .into_iter()
        .take(max)
        .map(|(_, _, ia, ib)| pair(&plan.points[ia], &plan.points[ib]))
        .collect()
}

fn pair(a: &Point, b: &Point) -> Point {
    let id = format!("together:{}+{}", a.id, b.id);
    let text = together_text(&id, &a.file_name(), &b.file_name());
    let workloads = if a.workloads.is_empty() {
        b.workloads.clone()
    } else {
        a.workloads
            .iter()
            .filter(|w| b.workloads.is_empty() || b.workloads.contains(w))
            .cloned()
            .collect()
    };
    Point {
        nemesis: text,
        family: Family::Together,
        kind: a.kind.clone().or_else(|| b.kind.clone()),
        phase: a.phase.or(b.phase),
        own_run: a.own_run || b.own_run,
        label: Some(format!("{} and {} at once", a.id, b.id)),
        parts: vec![a.id.clone(), b.id.clone()],
        workloads,
        id,
    }
}
