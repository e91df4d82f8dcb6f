//! The search's decisions, as pure functions of the state: which runs come
//! next (candidates confirmed first; then single points never tried, in
//! the plan's order, those whose group has a point that changed what the
//! client sent first ([`super::feedback`]); then those that did not land
//! yet; then pairs of points that landed), how points are grouped into
//! runs, each run's seed, nemesis file and `lockjaw run` command, and how
//! long it lasts.

use super::plan::Point;
use super::state::{Settings, Stage, State};
use std::path::Path;

/// A point is tried at most this often before it counts as never landed.
pub const MAX_TRIES: usize = 3;

/// A run to make.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    pub stage: Stage,
    pub workload: String,
    pub points: Vec<String>,
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Make these runs (at once, `--jobs` at a time).
    Runs(Vec<NewRun>),
    /// The single points are done: compute the pairs of those that landed.
    Pairs,
    /// Nothing left, or the budget is spent.
    Done,
}

/// The seed of run `n` (from 1), its `attempt`-th start: a fixed mix of
/// the explore's seed, so the same seed gives the same runs.
pub fn seed_of(base: u64, n: usize, attempt: u32) -> u64 {
    let mut z = base ^ ((n as u64) << 16) ^ u64::from(attempt);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) >> 1
}

/// The workload a point runs with: a renewing one for a point aimed at
/// renewals, else the fenced counter (storage writes, stale writes, lost
/// updates), else the first learned.
pub fn workload_for(p: &Point, workloads: &[String]) -> String {
    // Among the learned workloads, those the registry applies the point
    // under (the planner's `workloads`; all of them for an older plan).
    let has = |w: &str| {
        workloads.iter().any(|x| x == w)
            && (p.workloads.is_empty() || p.workloads.iter().any(|x| x == w))
    };
    let renew = p.phase == Some(super::learn::Phase::Renew)
        || p.nemesis.contains("renewer")
        || p.nemesis.contains("renew-race");
    let order: &[&str] = if renew {
        &[
            "fenced-counter-renewing",
            "lock-renewing",
            "fenced-counter",
            "lock",
        ]
    } else {
        &[
            "fenced-counter",
            "lock",
            "fenced-counter-renewing",
            "lock-renewing",
        ]
    };
    order
        .iter()
        .find(|w| has(w))
        .map(|w| w.to_string())
        .or_else(|| workloads.first().cloned())
        .unwrap_or_else(|| "lock".into())
}

/// Group `points` into runs of `stage`: a point with `own_run` alone,
/// the others by workload, at most `per_run` to a run; the runs in the
/// order of their first points.
pub fn batches(
    points: &[&Point],
    workloads: &[String],
    per_run: usize,
    stage: Stage,
) -> Vec<NewRun> {
    let mut out: Vec<NewRun> = vec![];
    let mut open: Vec<NewRun> = vec![];
    for p in points {
        let workload = workload_for(p, workloads);
        if p.own_run {
            out.push(NewRun {
                stage,
                workload,
                points: vec![p.id.clone()],
            });
            continue;
        }
        match open.iter().position(|r| r.workload == workload) {
            Some(i) => {
                open[i].points.push(p.id.clone());
                if open[i].points.len() >= per_run.max(1) {
                    out.push(open.remove(i));
                }
            }
            None => {
                let r = NewRun {
                    stage,
                    workload,
                    points: vec![p.id.clone()],
                };
                if per_run <= 1 {
                    out.push(r);
                } else {
                    open.push(r);
                }
            }
        }
    }
    out.extend(open);
    // In the order of their first points: a workload whose points are few
    // (the renewing ones) fills its run slowly and must not wait behind
    // every full run of the others.
    let first = |r: &NewRun| {
        points
            .iter()
            .position(|p| r.points.first() == Some(&p.id))
            .unwrap_or(usize::MAX)
    };
    out.sort_by_key(first);
    out
}

/// Runs alone a candidate gets at most: it is confirmed by the first
/// that shows it again (an anomaly a landed fault shows now and then may
/// miss one short run).
pub const CONFIRM_TRIES: usize = 3;

/// Whether an outcome has a hit judged a finding.
pub fn has_finding(o: &super::finding::PointOutcome) -> bool {
    o.hits
        .iter()
        .any(|h| h.hits > 0 && h.judged == super::finding::Judged::Finding)
}

/// The finished runs of `stage` of `point` alone.
pub fn alone_runs<'a>(s: &'a State, point: &str, stage: Stage) -> Vec<&'a super::state::RunRec> {
    s.runs
        .iter()
        .filter(|r| r.stage == stage && r.finished() && r.points.len() == 1 && r.points[0] == point)
        .collect()
}

/// Points of the search runs with a candidate finding (a hit judged a
/// finding) that no run alone has shown again yet, with runs alone left
/// ([`CONFIRM_TRIES`]), in the order found.
pub fn candidates(s: &State) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for o in s.search_outcomes().filter(|o| has_finding(o)) {
        let alone = alone_runs(s, &o.point, Stage::Confirm);
        let shown = alone
            .iter()
            .filter_map(|r| r.outcome.as_ref())
            .flat_map(|x| x.outcomes())
            .any(has_finding);
        if !shown
            && alone.len() < CONFIRM_TRIES
            && !out.contains(&o.point)
            && s.point(&o.point).is_some()
        {
            out.push(o.point.clone());
        }
    }
    out
}

/// The runs that confirm `points`: each alone, and (once) with lockjaw's
/// own client when the explore has `--client`.
fn confirmations(s: &State, points: &[String]) -> Vec<NewRun> {
    let mut out = vec![];
    for id in points {
        let Some(p) = s.point(id) else { continue };
        let workload = workload_for(p, &s.workloads);
        out.push(NewRun {
            stage: Stage::Confirm,
            workload: workload.clone(),
            points: vec![id.clone()],
        });
        if s.settings.client.is_some()
            && s.settings.second_opinion
            && alone_runs(s, id, Stage::Builtin).is_empty()
        {
            out.push(NewRun {
                stage: Stage::Builtin,
                workload,
                points: vec![id.clone()],
            });
        }
    }
    out
}

/// Whether a point still wants a try: never tried, or tried fewer than
/// [`MAX_TRIES`] times without landing its minimum.
fn wants(s: &State, p: &Point, first: bool) -> bool {
    let tries = s.tries(&p.id);
    if first {
        tries == 0
    } else {
        tries > 0 && tries < MAX_TRIES && s.landed(&p.id) < s.settings.min_landed.max(1)
    }
}

/// The next runs. Confirmations go first and regardless of the budget (a
/// finding is never reported unconfirmed); a search wave (at most
/// `--jobs` runs) starts only when `left` seconds cover one run of
/// `run_secs`.
pub fn next(s: &State, left: f64, run_secs: f64) -> Next {
    let c = candidates(s);
    if !c.is_empty() {
        return Next::Runs(confirmations(s, &c));
    }
    if left < run_secs {
        return Next::Done;
    }
    let jobs = s.settings.jobs.max(1);
    let per = s.settings.per_run;
    let singles: Vec<&Point> = s.plan.iter().flat_map(|p| p.points.iter()).collect();
    for (stage, first) in [(Stage::Search, true), (Stage::Retry, false)] {
        let mut want: Vec<&Point> = singles
            .iter()
            .copied()
            .filter(|p| wants(s, p, first))
            .collect();
        if first {
            want = changed_groups_first(s, want);
        }
        // A point a run never injected (an earlier point of its sequence
        // waited to the run's end) is retried alone, or it would wait
        // behind the same point again.
        let (solo, rest): (Vec<&Point>, Vec<&Point>) = want
            .iter()
            .partition(|p| !first && s.injections(&p.id) == 0);
        let mut runs = batches(&solo, &s.workloads, 1, stage);
        runs.extend(batches(&rest, &s.workloads, per, stage));
        if !runs.is_empty() {
            runs.truncate(jobs);
            return Next::Runs(runs);
        }
    }
    let Some(pairs) = &s.pairs else {
        return Next::Pairs;
    };
    let want: Vec<&Point> = pairs
        .iter()
        .filter(|p| wants(s, p, true) || wants(s, p, false))
        .collect();
    let mut runs = batches(&want, &s.workloads, per, Stage::Pair);
    runs.truncate(jobs);
    if runs.is_empty() {
        Next::Done
    } else {
        Next::Runs(runs)
    }
}

/// `want` (untried single points, in the plan's order) with those whose
/// group of like points ([`super::plan::group_of`]) has a point that
/// changed what the client sent moved ahead of the others; each part
/// keeps the plan's order (its round robin over groups).
pub fn changed_groups_first<'a>(s: &State, want: Vec<&'a Point>) -> Vec<&'a Point> {
    let hot: std::collections::BTreeSet<String> = s
        .plan
        .iter()
        .flat_map(|p| p.points.iter())
        .filter(|p| s.changed_sending(&p.id))
        .map(super::plan::group_of)
        .collect();
    if hot.is_empty() {
        return want;
    }
    let (mut first, rest): (Vec<&Point>, Vec<&Point>) = want
        .into_iter()
        .partition(|p| hot.contains(&super::plan::group_of(p)));
    first.extend(rest);
    first
}

/// The single points that landed at least once (what pairs are made of).
pub fn landed_points(s: &State) -> Vec<String> {
    s.plan
        .iter()
        .flat_map(|p| p.points.iter())
        .filter(|p| s.landed(&p.id) > 0)
        .map(|p| p.id.clone())
        .collect()
}

/// Single points with an allowed or undecided anomaly in the search: the
/// pairs start with them.
pub fn promising_points(s: &State) -> Vec<String> {
    let mut t = super::finding::Tallies::new();
    for o in s.search_outcomes() {
        t.entry(o.point.clone()).or_default().push(o.clone());
    }
    super::finding::promising_ids(&t).into_iter().collect()
}

/// The points the pairs start with: the promising ones
/// ([`promising_points`]), then the landed ones that changed what the
/// client sent.
pub fn pair_first_points(s: &State) -> Vec<String> {
    let mut out = promising_points(s);
    for id in landed_points(s) {
        if s.changed_sending(&id) && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// The file name of a point's nemesis file (`DIR/points/<name>`): its id
/// with anything but letters, digits and `._+:-` as `_`.
pub fn point_file_name(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._+:-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}.toml")
}

/// What one point's file says of its timing (ms): quiet time before its
/// first injection, between injections, and one injection's length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub first_delay_ms: u64,
    pub interval_ms: u64,
    pub length_ms: u64,
}

/// Read a point's timing from its nemesis text, leniently (a field it
/// lacks: two leases).
pub fn timing(nemesis: &str, lease_ms: u64) -> Timing {
    let t: toml::Table = toml::from_str(nemesis).unwrap_or_default();
    let int = |k: &str| {
        t.get(k)
            .and_then(toml::Value::as_integer)
            .map(|v| v.max(0) as u64)
    };
    let leases = t
        .get("duration_leases")
        .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)));
    let window = t
        .get("strike")
        .and_then(|s| s.get("window_ms"))
        .and_then(toml::Value::as_integer)
        .map(|v| v.max(0) as u64);
    let length_ms = int("duration_ms")
        .or_else(|| leases.map(|l| (l * lease_ms as f64).ceil() as u64))
        .or(window)
        .unwrap_or(2 * lease_ms);
    let interval_ms = int("interval_ms").unwrap_or(1000);
    Timing {
        first_delay_ms: int("first_delay_ms").unwrap_or(interval_ms),
        interval_ms,
        length_ms,
    }
}

/// The quiet gap between two injections of a search run: the planner's
/// (two leases, at least 500 ms).
pub use super::plan::gap_ms;

/// A search run's nemesis file: `mixed` in `sequence` order over the
/// points' files, one injection each, two leases quiet between them.
pub fn batch_nemesis(n: usize, files: &[&Path], lease_ms: u64) -> String {
    let gap = gap_ms(lease_ms);
    let list: Vec<String> = files
        .iter()
        .map(|f| format!("  {:?},", f.display().to_string()))
        .collect();
    format!(
        "# lockjaw explore: search run {n}, its points in order, one injection each.\n\
         name = \"explore-run-{n}\"\nfault = \"mixed\"\norder = \"sequence\"\ntarget = \"all\"\n\
         interval_ms = {gap}\nfirst_delay_ms = {gap}\nmax_injections = {}\nfaults = [\n{}\n]\n",
        files.len(),
        list.join("\n")
    )
}

/// Whole seconds a run needs: its first quiet gap, each point's gap and
/// length, and two leases and a second after the last (the window an
/// anomaly must fall in). `alone`: a point run on its own file's
/// schedule, given room for three injections.
pub fn time_limit_s(timings: &[Timing], lease_ms: u64, alone: bool) -> u64 {
    let tail = 2 * lease_ms + 1000;
    let ms = match (alone, timings) {
        (true, [t]) => t.first_delay_ms + 3 * (t.interval_ms + t.length_ms) + tail,
        _ => {
            let gap = gap_ms(lease_ms);
            gap + timings.iter().map(|t| gap + t.length_ms).sum::<u64>() + tail
        }
    };
    ms.div_ceil(1000).max(2)
}

/// The `lockjaw run` command of a run.
pub fn argv(
    st: &Settings,
    workload: &str,
    nemesis: &str,
    stage: Stage,
    time_limit: u64,
    seed: u64,
    dir: &Path,
) -> Vec<String> {
    let mut v: Vec<String> = [
        "lockjaw",
        "run",
        "--system",
        &st.system,
        "--workload",
        workload,
    ]
    .map(String::from)
    .to_vec();
    v.extend(["--nemesis".into(), nemesis.into()]);
    if let (Some(c), false) = (&st.client, stage == Stage::Builtin) {
        v.extend(["--client".into(), c.clone()]);
    }
    v.extend([
        "--ttl-ms".into(),
        st.ttl_ms.to_string(),
        "--concurrency".into(),
        st.concurrency.to_string(),
        "--time-limit".into(),
        time_limit.to_string(),
        "--seed".into(),
        seed.to_string(),
        "--out".into(),
        dir.display().to_string(),
        "--no-progress".into(),
    ]);
    // Learn runs tap the wire to learn what the client sends; search runs
    // to see whether a fault changed it ([`super::feedback`]).
    if stage == Stage::Learn || stage.searches() {
        v.push("--tap-wire".into());
    }
    v
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
