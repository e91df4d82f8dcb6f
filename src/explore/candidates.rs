//! The candidate fault points of each family, each as the nemesis file
//! that injects it once per injection: strikes on every learned request
//! kind, the holder paused and killed in its critical section, client
//! clock jumps and strobes, one worker's links cut or delayed, and server
//! faults. [`super::plan`] keeps those the fault registry applies to the
//! system and orders them.

use super::learn::{Learned, LinkKind, Phase, RequestKind};
use super::plan::{Family, Point};

/// A point before the registry was asked.
pub type Candidate = Point;
use crate::nemesis::registry;
use crate::nemesis::spec::Target;

/// The worker targets process and client-clock points are aimed at, each
/// where the fault's registry entry takes it (the others are skipped);
/// `renewer` only where the learn runs saw renewals. A strike keeps its
/// default target (every worker's next request of the kind): only the
/// workers in the kind's phase send it.
pub const WORKER_TARGETS: &[Target] = &[
    Target::Holder,
    Target::AllClients,
    Target::Waiter,
    Target::Renewer,
];

/// Hold a struck request for these many leases (besides "until another
/// worker is granted").
pub const HOLD_LEASES: &[f64] = &[1.0, 2.5];
/// Pause lengths of the holder, in leases: past the lease first (a
/// paused holder's lease ending under it is the classic failure), half a
/// lease (within it) last.
pub const PAUSE_LEASES: &[f64] = &[1.5, 2.5, 0.5];
/// How far into its critical section the holder is paused or killed, in
/// leases (0: at once after `holding`).
pub const STRIKE_AFTER_LEASES: &[f64] = &[0.0, 0.5];
/// Client clock jumps, in leases (forward and back).
pub const JUMP_LEASES: &[f64] = &[0.5, 2.0, -0.5, -2.0];
/// A jump left in place this many leases outlives its window.
pub const LEFT_MOVED_LEASES: f64 = 10.0;
/// Client clock strobe periods (ms).
pub const STROBE_PERIODS_MS: &[u64] = &[1, 10, 100];

/// A TOML basic string (JSON's escapes are TOML's).
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

/// `2.5l`, `1l`, `-0.5l`.
pub fn leases(k: f64) -> String {
    let t = format!("{k}");
    format!("{t}l")
}

/// An id part from learned text: letters, digits, `.`, `_` (others `_`).
fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One nemesis file's lines.
pub struct File {
    lines: Vec<String>,
}

impl File {
    pub fn new(id: &str, fault: &str, description: &str) -> File {
        File {
            lines: vec![
                format!("name = {}", quote(id)),
                format!("fault = {}", quote(fault)),
                format!("description = {}", quote(description)),
            ],
        }
    }

    /// `key = value`, the value written as given (numbers, tables).
    pub fn raw(mut self, key: &str, value: impl std::fmt::Display) -> File {
        self.lines.push(format!("{key} = {value}"));
        self
    }

    pub fn string(self, key: &str, value: &str) -> File {
        self.raw(key, quote(value))
    }

    pub fn text(self) -> String {
        self.lines.join("\n") + "\n"
    }
}

/// What every candidate shares: the lease and the quiet gap.
pub struct Ctx<'a> {
    pub learned: &'a Learned,
    pub lease_ms: u64,
    /// The quiet time before each injection when the file runs alone.
    pub gap_ms: u64,
    /// A renewing workload was learned (points aimed at a renewer run
    /// with one).
    pub renewing: bool,
    /// lockjaw's workers send the renewals (not a library that renews by
    /// itself): only theirs are announced, so only they can be aimed at.
    pub lockjaw_renews: bool,
}

/// A candidate of `family`.
fn point(id: String, family: Family, file: File, phase: Option<Phase>) -> Point {
    Point {
        id,
        family,
        nemesis: file.text(),
        kind: None,
        phase,
        own_run: false,
        label: None,
        parts: vec![],
        workloads: vec![],
    }
}

/// The targets of `WORKER_TARGETS` fault `fault` takes, each with its id
/// suffix (none for the entry's default target).
fn targets(fault: &str, c: &Ctx) -> Vec<(Target, String)> {
    let Some(e) = registry::find(fault) else {
        return vec![];
    };
    let renews = c.renewing
        && c.lockjaw_renews
        && c.learned
            .kinds
            .iter()
            .any(|k| k.phases.contains(&Phase::Renew));
    WORKER_TARGETS
        .iter()
        .filter(|t| e.targets.contains(t))
        .filter(|t| fault != "strike-command" || **t == e.targets[0])
        .filter(|t| **t != Target::Renewer || renews)
        .map(|&t| {
            let suffix = if t == e.targets[0] {
                String::new()
            } else {
                format!("-{}", t.name())
            };
            (t, suffix)
        })
        .collect()
}

/// The phase a kind is struck in: the first it was seen in, acquire and
/// release before the rest.
pub fn main_phase(k: &RequestKind) -> Option<Phase> {
    [
        Phase::Acquire,
        Phase::Release,
        Phase::Renew,
        Phase::Write,
        Phase::Hold,
        Phase::Idle,
    ]
    .into_iter()
    .find(|p| k.phases.contains(p))
}

/// How long an armed matcher waits for a kind: four of its mean gaps in
/// the learn runs, from 5 s to 60 s (10 s when the runs say nothing).
fn window_ms(c: &Ctx, k: &RequestKind) -> u64 {
    let secs = c.learned.run_secs * c.learned.runs.len().max(1) as f64;
    if k.count == 0 || secs <= 0.0 {
        return 10_000;
    }
    let gap_ms = secs * 1000.0 / k.count as f64;
    ((4.0 * gap_ms) as u64).clamp(5_000, 60_000)
}

/// The strike points of one learned kind on a lock link.
pub fn strikes(c: &Ctx, k: &RequestKind) -> Vec<Point> {
    if k.link != LinkKind::Lock {
        return vec![];
    }
    let name = match &k.sha1 {
        Some(s) => format!("{}-{}", safe(&k.command), safe(&s[..s.len().min(8)])),
        None => safe(&k.command),
    };
    let mut matcher = format!("command = {}", quote(&k.command));
    if let Some(s) = &k.sha1 {
        matcher.push_str(&format!(", sha1 = {}", quote(s)));
    }
    let window = window_ms(c, k);
    // (id part, action, extra fields, length in leases)
    let mut actions: Vec<(String, &str, String, Option<f64>)> = vec![
        ("crash-after".into(), "crash-after", String::new(), None),
        (
            "hold-grant".into(),
            "hold",
            ", until = \"grant\"".into(),
            None,
        ),
    ];
    for &l in HOLD_LEASES {
        actions.push((
            format!("hold-{}", leases(l)),
            "hold",
            String::new(),
            Some(l),
        ));
    }
    actions.push(("reset-before".into(), "reset-before", String::new(), None));
    actions.push(("reset-after".into(), "reset-after", String::new(), None));
    let mut out = vec![];
    for (t, suffix) in targets("strike-command", c) {
        for (part, action, extra, length) in &actions {
            let id = format!("strike-{part}-{name}{suffix}");
            let what = format!("{part} on the next {} (learned)", k.label());
            let mut f = File::new(&id, "strike-command", &what)
                .string("target", t.name())
                .raw("interval_ms", c.gap_ms);
            if let Some(l) = length {
                f = f.raw("duration_leases", l);
            }
            let table = format!(
                "{{ {matcher}, action = {}{extra}, window_ms = {window} }}",
                quote(action)
            );
            let mut p = point(id, Family::Strike, f.raw("strike", table), main_phase(k));
            p.kind = Some(k.label());
            out.push(p);
        }
    }
    out
}

/// The holder paused (each length, each moment of its critical section)
/// and killed (each moment).
pub fn process(c: &Ctx) -> Vec<Point> {
    let mut out = vec![];
    for (t, suffix) in targets("pause-holder", c) {
        for &after in strike_afters(t, STRIKE_AFTER_LEASES) {
            for &l in PAUSE_LEASES {
                let at = at_part(after);
                let id = format!("pause-holder-{}{at}{suffix}", leases(l));
                let what = format!("pause the {} for {l} leases{}", t.name(), at_words(after));
                let f = File::new(&id, "pause-holder", &what)
                    .string("target", t.name())
                    .raw("interval_ms", c.gap_ms)
                    .raw("duration_leases", l)
                    .raw("strike_after_ms", after_ms(c, after));
                out.push(point(id, Family::Process, f, Some(phase_of(t))));
            }
        }
    }
    for (t, suffix) in targets("kill-holder", c) {
        for &after in strike_afters(t, &[0.0, 0.5, 1.5]) {
            let at = at_part(after);
            let id = format!("kill-holder{at}{suffix}");
            let what = format!("kill the {}{}", t.name(), at_words(after));
            let f = File::new(&id, "kill-holder", &what)
                .string("target", t.name())
                .raw("interval_ms", c.gap_ms)
                .raw("strike_after_ms", after_ms(c, after));
            out.push(point(id, Family::Process, f, Some(phase_of(t))));
        }
    }
    out
}

/// The phase a worker target is struck in.
fn phase_of(t: Target) -> Phase {
    match t {
        Target::Waiter => Phase::Acquire,
        Target::Renewer => Phase::Renew,
        _ => Phase::Hold,
    }
}

/// How far into a critical section: only a holder has one.
fn strike_afters(t: Target, all: &[f64]) -> &[f64] {
    if t == Target::Holder {
        all
    } else {
        &all[..1]
    }
}

fn at_part(after: f64) -> String {
    if after == 0.0 {
        String::new()
    } else {
        format!("-after-{}", leases(after))
    }
}

fn at_words(after: f64) -> String {
    if after == 0.0 {
        " at once after its grant".into()
    } else {
        format!(" {after} leases into its critical section")
    }
}

fn after_ms(c: &Ctx, after: f64) -> u64 {
    (after * c.lease_ms as f64).round() as u64
}

/// Client clock jumps (forward and back, and two left moved past their
/// window) and strobes.
pub fn clock(c: &Ctx) -> Vec<Point> {
    let mut out = vec![];
    let offset = |l: f64| (l * c.lease_ms as f64).round() as i64;
    for (t, suffix) in targets("client-clock-jump", c) {
        let mut jumps: Vec<(f64, f64)> = JUMP_LEASES.iter().map(|&j| (j, 1.0)).collect();
        jumps.extend([(2.0, LEFT_MOVED_LEASES), (-2.0, LEFT_MOVED_LEASES)]);
        for (j, len) in jumps {
            let way = if j > 0.0 { "fwd" } else { "back" };
            let left = len > 1.0;
            let id = format!(
                "client-clock-jump-{way}-{}{}{suffix}",
                leases(j.abs()),
                if left { "-left" } else { "" }
            );
            let what = format!(
                "jump the {}'s wall clock by {j} leases for {len} lease(s)",
                t.name()
            );
            let f = File::new(&id, "client-clock-jump", &what)
                .string("target", t.name())
                .raw("interval_ms", c.gap_ms)
                .raw("offset_ms", offset(j))
                .raw("duration_leases", len);
            let mut p = point(id, Family::ClientClock, f, Some(phase_of(t)));
            if left {
                p.own_run = true;
                p.label = Some("clock left moved past the window: a run of its own".into());
            }
            out.push(p);
        }
    }
    for (t, suffix) in targets("client-clock-strobe", c) {
        for &period in STROBE_PERIODS_MS {
            let id = format!("client-clock-strobe-{period}ms{suffix}");
            let what = format!("flip the {}'s wall clock every {period} ms", t.name());
            let f = File::new(&id, "client-clock-strobe", &what)
                .string("target", t.name())
                .raw("interval_ms", c.gap_ms)
                .raw("period_ms", period)
                .raw("offset_ms", offset(2.0));
            out.push(point(id, Family::ClientClock, f, Some(phase_of(t))));
        }
    }
    out
}

/// Faults on one worker's links: (id, fault, extra lines, phase).
const NETWORK: &[(&str, &str, &str, Phase)] = &[
    ("partition-holder", "partition-holder", "", Phase::Hold),
    (
        "partition-holder-blackhole",
        "partition-holder",
        "blackhole = true",
        Phase::Hold,
    ),
    ("delay-grant", "delay-grant", "", Phase::Acquire),
    // Past the whole lease (a grant with no validity left to check), and
    // under the adapters' own socket timeouts (0.6 of the op timeout, 1.2
    // leases at the defaults), so that the late reply is delivered.
    (
        "delay-grant-1.1l",
        "delay-grant",
        "duration_leases = 1.1",
        Phase::Acquire,
    ),
    ("delay-release", "delay-release", "", Phase::Release),
    (
        "drop-release",
        "drop-release",
        "reset = \"before-forward\"",
        Phase::Release,
    ),
    (
        "drop-release-after",
        "drop-release",
        "reset = \"after-forward\"",
        Phase::Release,
    ),
    ("renew-race", "renew-race", "", Phase::Renew),
    ("delay-storage", "delay-storage", "", Phase::Write),
];

/// One worker's links cut or delayed, one direction at a time (each
/// fault's own default length).
pub fn network(c: &Ctx) -> Vec<Point> {
    let l = c.learned;
    // `renew-race` holds one of lockjaw's own renewals: a renewing
    // workload must have been learned.
    let renews = c.renewing
        && c.lockjaw_renews
        && (l.wire_renewals > 0 || l.kinds.iter().any(|k| k.phases.contains(&Phase::Renew)));
    NETWORK
        .iter()
        .filter(|(_, fault, _, _)| renews || *fault != "renew-race")
        .map(|&(id, fault, extra, phase)| {
            let summary = registry::find(fault).map_or("", |e| e.summary);
            let mut f = File::new(id, fault, summary).raw("interval_ms", c.gap_ms);
            if let Some((k, v)) = extra.split_once(" = ") {
                f = f.raw(k, v);
            }
            point(id.to_string(), Family::Network, f, Some(phase))
        })
        .collect()
}

/// Server faults (lockjaw's own cluster only), each with a run of its own.
const SERVER: &[&str] = &[
    "pause-node",
    "kill-node",
    "partition-node",
    "clock-jump",
    "clock-strobe",
    "failover",
];

pub fn server(c: &Ctx) -> Vec<Point> {
    SERVER
        .iter()
        .map(|&fault| {
            let summary = registry::find(fault).map_or("", |e| e.summary);
            let f = File::new(fault, fault, summary).raw("interval_ms", c.gap_ms);
            let mut p = point(fault.to_string(), Family::Server, f, None);
            p.own_run = true;
            p.label = Some("server fault: lockjaw's own cluster (a run of its own)".into());
            p
        })
        .collect()
}
