//! The fault points: one injection each, each printed as a nemesis file
//! `lockjaw run --nemesis` accepts, in search order.
//!
//! [`plan`] takes the candidates of each family ([`super::candidates`]:
//! strikes on every learned request kind, the holder paused and killed,
//! client clocks, one worker's links, server faults on lockjaw's own
//! cluster), loads each as `lockjaw run` would, keeps those the fault
//! registry applies to the system under a learned workload (the others go
//! to [`Plan::refused`] with the registry's reason), and orders them:
//! strikes first (those on acquire and release requests, and crash-after,
//! before the rest: they change what the client sends next), then
//! process, client clock, network and server faults. Pairs of landed
//! points are [`super::pairs`]'.

use super::candidates::{self as cand, Ctx};
use super::learn::{Learned, Phase};
use crate::nemesis::registry;
use crate::nemesis::scope::{ClientChoice, Placement, Scope, ToxiproxyChoice};
use crate::nemesis::spec::{self, NemesisSpec};
use crate::service::System;
use crate::toml_file::Source;
use crate::workload::Kind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The fault family of a point (the coverage's columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// `strike-command` on one learned request kind.
    Strike,
    /// The holder (or a waiter, a renewer) paused or killed in a phase.
    Process,
    /// A client's clock jumped or strobed.
    ClientClock,
    /// One worker's links cut, delayed, one direction at a time.
    Network,
    /// A server fault (lockjaw's own cluster only).
    Server,
    /// Two faults as one injection (`fault = "together"`).
    Together,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::Strike,
        Family::Process,
        Family::ClientClock,
        Family::Network,
        Family::Server,
        Family::Together,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Strike => "strike",
            Family::Process => "process",
            Family::ClientClock => "client clock",
            Family::Network => "network",
            Family::Server => "server",
            Family::Together => "together",
        }
    }
}

/// One fault point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Stable over a plan: `strike-crash-after-SETNX`,
    /// `pause-holder-2.5l`, `together:<a>+<b>`. The nemesis file's `name`.
    pub id: String,
    pub family: Family,
    /// The nemesis file (TOML text) that injects exactly this point (a
    /// `together` point: its parts by file name; [`Point::file_text`]
    /// gives the text with their paths).
    pub nemesis: String,
    /// The learned request kind it strikes (`RequestKind::label`).
    pub kind: Option<String>,
    /// The phase it is aimed at.
    pub phase: Option<Phase>,
    /// Its effects outlive its window, or its anomaly shows only at the
    /// final read: it gets a run of its own.
    pub own_run: bool,
    /// A note for the coverage (`server fault: lockjaw's own cluster`).
    pub label: Option<String>,
    /// `together`: the ids of its two points.
    pub parts: Vec<String>,
    /// The learned workloads (names) it applies under, as the fault
    /// registry says (added after the contract; empty in older state).
    #[serde(default)]
    pub workloads: Vec<String>,
}

impl Point {
    /// The point's nemesis file name in a directory of points.
    pub fn file_name(&self) -> String {
        super::search::point_file_name(&self.id)
    }

    /// The nemesis text to write under `dir`: a `together` point names
    /// its parts' files there by path.
    pub fn file_text(&self, dir: &Path) -> String {
        match (self.family, self.parts.as_slice()) {
            (Family::Together, [a, b]) => super::pairs::together_text(
                &self.id,
                &dir.join(super::search::point_file_name(a))
                    .display()
                    .to_string(),
                &dir.join(super::search::point_file_name(b))
                    .display()
                    .to_string(),
            ),
            _ => self.nemesis.clone(),
        }
    }

    /// The point's nemesis, loaded as `lockjaw run` loads it.
    pub fn spec(&self) -> Result<NemesisSpec, String> {
        let src = Source {
            name: self.file_name(),
            text: self.nemesis.clone(),
        };
        spec::from_source(&src).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
impl Point {
    /// A point of `family` that pauses the holder for `ms` (driver tests).
    pub fn sample(id: &str, family: Family, own_run: bool, ms: u64) -> Point {
        Point {
            id: id.into(),
            family,
            nemesis: format!(
                "name = \"{id}\"\nfault = \"pause-holder\"\ntarget = \"holder\"\nduration_ms = {ms}\n"
            ),
            kind: None,
            phase: None,
            own_run,
            label: None,
            parts: vec![],
            workloads: vec![],
        }
    }
}

/// What the planner is told beside what was learned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// The system (`redis`, `etcd`, ...), as `--system` takes it.
    pub system: String,
    /// The cluster is lockjaw's own (server faults allowed).
    pub own_cluster: bool,
    /// The workloads (shipped names) the client supports that were learned.
    pub workloads: Vec<String>,
    /// The library renews by itself (`renewals = "all"`): lockjaw sends
    /// no renewal, so nothing aims at one of lockjaw's renewals (the
    /// `renewer` target, `renew-race`).
    pub library_renews: bool,
}

/// A candidate the plan left out, and why (for the coverage).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refused {
    pub id: String,
    pub family: Family,
    pub kind: Option<String>,
    pub phase: Option<Phase>,
    pub why: String,
}

/// Every point, single points first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub points: Vec<Point>,
    /// Candidates that do not apply here, with the registry's reason
    /// (added after the contract).
    #[serde(default)]
    pub refused: Vec<Refused>,
    /// The lease the files were written for (ms; added after the contract).
    #[serde(default)]
    pub lease_ms: u64,
}

impl Plan {
    pub fn get(&self, id: &str) -> Option<&Point> {
        self.points.iter().find(|p| p.id == id)
    }
}

/// The quiet time between injections: two leases, at least half a second.
pub fn gap_ms(lease_ms: u64) -> u64 {
    (2 * lease_ms).max(500)
}

/// The plan for what was learned.
pub fn plan(learned: &Learned, opts: &PlanOptions) -> Plan {
    let lease_ms = if learned.lease_ms == 0 {
        1000
    } else {
        learned.lease_ms
    };
    let c = Ctx {
        learned,
        lease_ms,
        gap_ms: gap_ms(lease_ms),
        renewing: opts.workloads.iter().any(|w| w.ends_with("-renewing")),
        lockjaw_renews: !opts.library_renews,
    };
    let mut cands: Vec<cand::Candidate> = vec![];
    for k in &learned.kinds {
        cands.extend(cand::strikes(&c, k));
    }
    cands.extend(cand::process(&c));
    cands.extend(cand::clock(&c));
    cands.extend(cand::network(&c));
    if opts.own_cluster {
        cands.extend(cand::server(&c));
    }
    let mut out = Plan {
        lease_ms,
        ..Plan::default()
    };
    let system = <System as clap::ValueEnum>::from_str(&opts.system, true);
    let kinds = workload_kinds(&opts.workloads);
    // How long each learned workload holds the lock (ms), loaded once.
    let ov = crate::workload::Overrides {
        ttl_ms: Some(lease_ms),
        ..Default::default()
    };
    let holds: std::collections::HashMap<&str, u64> = opts
        .workloads
        .iter()
        .map(|w| {
            let hold = crate::workload::load(w, &ov).map_or(0, |w| w.hold_ms);
            (w.as_str(), hold)
        })
        .collect();
    let hold_of = |w: &str| holds.get(w).copied().unwrap_or(0);
    for mut p in cands {
        if out.points.iter().any(|q| q.id == p.id) {
            continue;
        }
        let refuse = |why: String| Refused {
            id: p.id.clone(),
            family: p.family,
            kind: p.kind.clone(),
            phase: p.phase,
            why,
        };
        let spec = match p.spec() {
            Ok(s) => s,
            Err(e) => {
                out.refused.push(refuse(format!("does not load: {e}")));
                continue;
            }
        };
        let Ok(system) = system else {
            out.refused
                .push(refuse(format!("unknown system {:?}", opts.system)));
            continue;
        };
        match applies(&spec, system, opts.own_cluster, &kinds) {
            Ok(w) => p.workloads = w,
            Err(why) => {
                out.refused.push(refuse(why));
                continue;
            }
        }
        // A strike into the critical section needs a hold that long (a
        // holder that released first is never struck, and a run's
        // sequence would wait for it to its end): the renewing workloads
        // hold three leases, the others a fraction of one.
        if spec.strike_after_ms > 0 {
            p.workloads.retain(|w| hold_of(w) > spec.strike_after_ms);
            if p.workloads.is_empty() {
                out.refused.push(refuse(format!(
                    "strikes {} ms into a critical section: no learned workload holds the lock that long (the renewing ones hold three leases; they are learned when the client renews)",
                    spec.strike_after_ms
                )));
                continue;
            }
        }
        // Lost updates show only at the final read: a storage fault under
        // the counter gets a run of its own.
        if spec.fault == "delay-storage"
            && p.workloads.iter().any(|w| w.starts_with("fenced-counter"))
        {
            p.own_run = true;
            p.label = Some("lost updates show at the final read: a run of its own".into());
        }
        out.points.push(p);
    }
    out.points = order(out.points, c.renewing);
    out
}

/// The learned workloads (names) with their kinds: a shipped workload
/// `<kind>` or `<kind>-renewing` (`lock` when none was named).
fn workload_kinds(names: &[String]) -> Vec<(String, Kind)> {
    let v: Vec<(String, Kind)> = names
        .iter()
        .filter_map(|n| {
            let base = n.strip_suffix("-renewing").unwrap_or(n);
            let k = Kind::ALL.into_iter().find(|k| k.name() == base)?;
            Some((n.clone(), k))
        })
        .collect();
    if v.is_empty() {
        vec![("lock".into(), Kind::Lock)]
    } else {
        v
    }
}

/// The workloads (names) under which the registry applies `spec` to
/// `system`; the first refusal when none.
fn applies(
    spec: &NemesisSpec,
    system: System,
    own: bool,
    kinds: &[(String, Kind)],
) -> Result<Vec<String>, String> {
    let mut why = None;
    let mut ok = vec![];
    for (name, k) in kinds {
        let k = *k;
        let scope = Scope {
            system,
            client: ClientChoice::Builtin,
            workload: k,
            nemesis: spec.clone(),
            placement: if own {
                Placement::Local
            } else {
                Placement::Endpoints
            },
            toxiproxy: ToxiproxyChoice::Embedded,
        };
        match registry::supports(&scope) {
            Ok(()) => ok.push(name.clone()),
            Err(e) => {
                why.get_or_insert(e);
            }
        }
    }
    if ok.is_empty() {
        Err(why.unwrap_or_else(|| "no learned workload".into()))
    } else {
        Ok(ok)
    }
}

/// Search order: round robin over the groups of like points (one fault
/// on one target; for strikes, one request kind), in family order, so that a
/// short budget reaches every family and every kind of fault before the
/// variations of any one. Inside a group: when renewing workloads were
/// learned, points only they carry (they reach the library's own
/// renewals, which named faults rarely do) alternate with the others,
/// first; for strikes, the requests of acquire and release first and
/// background ones (idle: pings, keep-alives) last.
fn order(mut points: Vec<Point>, renewing: bool) -> Vec<Point> {
    points.sort_by_key(inner_key);
    let mut groups: Vec<(String, std::collections::VecDeque<Point>)> = vec![];
    for p in points {
        let g = group_of(&p);
        match groups.iter_mut().find(|(k, _)| *k == g) {
            Some((_, q)) => q.push_back(p),
            None => groups.push((g, [p].into())),
        }
    }
    // Inside a group, alternate the points every workload carries with
    // those only the renewing ones carry (these first when renewing), so
    // neither kind starves the other.
    for (_, q) in &mut groups {
        let (mut long, mut rest): (std::collections::VecDeque<Point>, _) =
            q.drain(..).partition(|p| renewing && renewing_only(p));
        while !long.is_empty() || !rest.is_empty() {
            q.extend(long.pop_front());
            q.extend(rest.pop_front());
        }
    }
    let mut out = vec![];
    while groups.iter().any(|(_, q)| !q.is_empty()) {
        for (_, q) in &mut groups {
            out.extend(q.pop_front());
        }
    }
    out
}

/// The group of like points a point belongs to (see [`order`]): one fault
/// on one target; for strikes, one request kind (its actions in the
/// candidates' order, crash-after first: CrashTuner's heuristic, a crash
/// right after a reply changes what the client sends next).
pub(super) fn group_of(p: &Point) -> String {
    let t: toml::Table = toml::from_str(&p.nemesis).unwrap_or_default();
    let get = |k: &str| t.get(k).map(ToString::to_string).unwrap_or_default();
    let kind = match p.family {
        Family::Strike => p.kind.clone().unwrap_or_default(),
        _ => String::new(),
    };
    format!("{:?} {} {} {kind}", p.family, get("fault"), get("target"))
}

/// The order inside a group before the alternation: family first (groups
/// appear in family order), then a strike's phase.
fn inner_key(p: &Point) -> (usize, u8) {
    let family = Family::ALL.iter().position(|f| *f == p.family).unwrap_or(9);
    let phase = match (p.family, p.phase) {
        (Family::Strike, Some(Phase::Acquire | Phase::Release)) => 0,
        (Family::Strike, Some(Phase::Idle) | None) => 2,
        (Family::Strike, Some(_)) => 1,
        _ => 0,
    };
    (family, phase)
}

/// A point only the renewing workloads carry (held long enough for it).
fn renewing_only(p: &Point) -> bool {
    !p.workloads.is_empty() && p.workloads.iter().all(|w| w.ends_with("-renewing"))
}

/// Write each point's nemesis file under `dir` (`<id>.toml`); their paths.
pub fn write_points(dir: &Path, points: &[Point]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create the directory: {e}", dir.display()))?;
    points
        .iter()
        .map(|p| {
            let path = dir.join(p.file_name());
            std::fs::write(&path, p.file_text(dir))
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            Ok(path)
        })
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
