//! Learning what a client sends: fault-free runs with the wire tap on
//! (`lockjaw run --tap-wire`, `wire.jsonl` in each run directory), read
//! back with the history, give every request kind each framed link
//! carried, the phases it was sent in (from the history's op intervals
//! and the adapter's `renewed` events), the lease and the timings.
//!
//! How a request gets its phase: its worker is the proxy's slot
//! ([`tap::link_of`]); its moment (the run clock, as the history's) falls
//! in that worker's op intervals: a `renew` op (lockjaw's own `"N-lease"`,
//! the client's `"N-keepalive"`, the adapter's `renewed` events as
//! `"N-adapter"`), a `release`, an `acquire`, a storage op (`write`),
//! tried in that order; else between an `ok` acquire and the next release
//! (or `lost`, or acquire) it is `hold`; else `idle`. Keep-alives (pings,
//! ZooKeeper's session traffic) are no request kind: a strike passes over
//! them.
//!
//! Wire renewals: requests on a lock link with a successful reply (`ok`, a
//! positive integer, or a value) sent inside a renew op, or during a hold
//! carrying the worker's owner token (the tap marks those: a library that
//! renews by itself without `renewed` events shows that way; a release,
//! also carrying the token, is inside its own op).

use crate::report::{RunDir, Timeline};
use crate::runner::renewal_check::{self, RenewalCheck};
use crate::toxiproxy::tap::{self, Dir, WireRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Where in a worker's cycle a request was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Inside an acquire op's interval.
    Acquire,
    /// Between a grant and the release, outside a write or renewal.
    Hold,
    /// Inside a protected write's interval (storage).
    Write,
    /// Inside a release op's interval.
    Release,
    /// Inside a renewal (lockjaw's `renew` op or the library's own, as the
    /// adapter's `renewed` event or the wire showed it).
    Renew,
    /// None of these: between cycles, background traffic.
    Idle,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Acquire,
        Phase::Hold,
        Phase::Write,
        Phase::Release,
        Phase::Renew,
        Phase::Idle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Acquire => "acquire",
            Phase::Hold => "hold",
            Phase::Write => "write",
            Phase::Release => "release",
            Phase::Renew => "renew",
            Phase::Idle => "idle",
        }
    }
}

/// Which link carried a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkKind {
    /// A worker's link to a lock-service node.
    Lock,
    /// A worker's link to the storage.
    Storage,
}

/// One kind of request a link carried, as a strike can match it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestKind {
    /// `redis` or `zookeeper`.
    pub proto: String,
    pub link: LinkKind,
    /// Redis: the command name upper case (`SET`, `EVALSHA`); ZooKeeper:
    /// the op name (`create`, `getChildren2`). What `strike.command` takes.
    pub command: String,
    /// `EVAL`/`EVALSHA`: the script's SHA1 (what `strike.sha1` takes).
    pub sha1: Option<String>,
    /// `EVAL`/`EVALSHA`: the first words of the script, when the proxy saw
    /// it (for people; a strike matches by `sha1`).
    pub words: Option<String>,
    /// The phases it was sent in.
    pub phases: BTreeSet<Phase>,
    /// How many were sent, over every learn run.
    pub count: u64,
    /// Replies that were errors (RESP `-`, a ZooKeeper error code).
    pub errors: u64,
}

impl RequestKind {
    /// `SET`, `EVALSHA 1a2b3c4d (if redis.call("get",...)`, `create`.
    pub fn label(&self) -> String {
        let short = short_label(&self.command, self.sha1.as_deref());
        match (&self.sha1, &self.words) {
            (Some(_), Some(w)) => format!("{short} ({w})"),
            _ => short,
        }
    }
}

/// A request's label without a script's first words: `SET`, `EVALSHA
/// 1a2b3c4d` (the SHA1's first 8 characters), `create`.
pub fn short_label(name: &str, sha1: Option<&str>) -> String {
    match sha1 {
        Some(s) => format!("{name} {}", &s[..s.len().min(8)]),
        None => name.to_string(),
    }
}

/// A link that was not framed (etcd's gRPC, SQL, TLS): faults on it act
/// per connection, by phase and time only.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpaqueLink {
    pub link: LinkKind,
    /// The node (or `storage`) it leads to.
    pub node: String,
    /// Why it is opaque (`TLS`, `HTTP/2 (gRPC)`, `PostgreSQL`, ...).
    pub why: String,
}

/// Everything the learn runs showed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// The learn runs read, in order.
    pub runs: Vec<PathBuf>,
    /// The lease (ms) the runs used.
    pub lease_ms: u64,
    /// Every framed request kind, sorted.
    pub kinds: Vec<RequestKind>,
    /// Links no request could be framed on.
    pub opaque: Vec<OpaqueLink>,
    /// Median and p99 of the lock requests' round trips (ms).
    pub rtt_ms: (f64, f64),
    /// Mean seconds one learn run took, start to end (for the budget).
    pub run_secs: f64,
    /// Renewals seen on the wire (the owner's token, a successful reply).
    pub wire_renewals: u64,
    /// Renewals the adapter reported (`renewed` events).
    pub adapter_renewals: u64,
    /// Anomalies the fault-free runs showed (findings at point `none`):
    /// (run directory, the report's kind slug, count).
    pub anomalies: Vec<(PathBuf, String, u64)>,
    /// Per learn run where the library renewed by itself: its renewals on
    /// the wire paired with the adapter's `renewed` events
    /// ([`crate::runner::renewal_check`]); a disagreement is reported.
    #[serde(default)]
    pub renewal_checks: Vec<(PathBuf, RenewalCheck)>,
    /// Which request followed which on one connection of a lock link
    /// ([`super::feedback::bigrams`]): what a search run's wire is held
    /// against. `None` in a state learned before it (nothing is then
    /// judged a new transition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bigrams: Option<BTreeSet<(String, String)>>,
}

/// Read finished learn runs (each a run directory with `wire.jsonl`).
pub fn learn(dirs: &[PathBuf]) -> Result<Learned, String> {
    if dirs.is_empty() {
        return Err(
            "learn: no learn run given (hint: learn runs are `lockjaw run --tap-wire` \
                    run directories)"
                .into(),
        );
    }
    let mut acc = Acc::default();
    for d in dirs {
        acc.run(d)?;
    }
    Ok(acc.finish(dirs))
}

/// Everything read so far, over runs.
#[derive(Default)]
struct Acc {
    kinds: BTreeMap<(String, LinkKind, String, Option<String>), RequestKind>,
    /// (link, node) → why, for connections that were not framed.
    opaque: BTreeMap<(LinkKind, String), String>,
    /// (link, node) that carried a framed request.
    framed: BTreeSet<(LinkKind, String)>,
    rtt_ns: Vec<u64>,
    secs: Vec<f64>,
    lease_ms: u64,
    wire_renewals: u64,
    adapter_renewals: u64,
    anomalies: Vec<(PathBuf, String, u64)>,
    renewal_checks: Vec<(PathBuf, RenewalCheck)>,
    bigrams: BTreeSet<(String, String)>,
}

impl Acc {
    fn run(&mut self, dir: &Path) -> Result<(), String> {
        let rd = RunDir::open(dir).map_err(|e| e.to_string())?;
        let wire_path = dir.join(tap::FILE);
        if !wire_path.is_file() {
            return Err(format!(
                "{}: missing (hint: a learn run is a `lockjaw run --tap-wire` run, with the \
                 embedded Toxiproxy)",
                wire_path.display()
            ));
        }
        let wire = tap::read(&wire_path)?;
        if wire.is_empty() {
            return Err(format!(
                "{}: no record: the run's proxies carried nothing (hint: run it again with \
                 `lockjaw run --tap-wire`, and no --toxiproxy)",
                wire_path.display()
            ));
        }
        let conc = crate::report::summary::concurrency(&rd);
        let t = Timeline::read(&rd.history_path(), conc).map_err(|e| e.to_string())?;
        let phases = Phases::of(&t);
        self.adapter_renewals += phases.adapter_renewals;
        self.bigrams.extend(super::feedback::bigrams(&wire));
        if wire_tells_renewals(rd.run.system.as_deref()) {
            self.renewal_check(dir, &rd.history_path(), &wire, conc)?;
        }
        let ttl = rd.run.ttl_ms.or_else(|| rd.run.workload.as_ref()?.ttl_ms);
        self.lease_ms = self.lease_ms.max(ttl.unwrap_or(0));
        self.secs
            .push(run_secs(dir).unwrap_or(t.end_ns as f64 / 1e9));
        let replies: HashMap<(&str, u64, u64), &WireRecord> = wire
            .iter()
            .filter(|r| r.dir == Dir::Reply && r.seq > 0)
            .map(|r| ((r.proxy.as_str(), r.conn, r.seq), r))
            .collect();
        for r in &wire {
            let Some((slot, node)) = tap::link_of(&r.proxy) else {
                return Err(format!(
                    "{}: proxy `{}` is not a worker's link (`lockjaw-<run>-w<slot>-<node>`) \
                     (hint: wire.jsonl comes from `lockjaw run --tap-wire`)",
                    wire_path.display(),
                    r.proxy
                ));
            };
            let link = if node == "storage" {
                LinkKind::Storage
            } else {
                LinkKind::Lock
            };
            if r.proto == "opaque" {
                self.opaque.entry((link, node)).or_insert(r.name.clone());
                continue;
            }
            if r.dir != Dir::Request {
                continue;
            }
            self.framed.insert((link, node));
            if r.keepalive {
                continue;
            }
            let reply = replies
                .get(&(r.proxy.as_str(), r.conn, r.seq))
                .filter(|p| p.name == r.name);
            let phase = phases.at(slot, r.t_ns);
            self.request(r, link, phase, reply.copied());
        }
        for (kind, n) in crate::report::trials::of_run(&rd, &t, &rd.results_view()).anomalies {
            if n > 0 {
                self.anomalies.push((dir.to_path_buf(), kind, n));
            }
        }
        Ok(())
    }

    fn request(
        &mut self,
        r: &WireRecord,
        link: LinkKind,
        phase: Phase,
        reply: Option<&WireRecord>,
    ) {
        let key = (r.proto.clone(), link, r.name.clone(), r.sha1.clone());
        let k = self.kinds.entry(key).or_insert_with(|| RequestKind {
            proto: r.proto.clone(),
            link,
            command: r.name.clone(),
            sha1: r.sha1.clone(),
            words: None,
            phases: BTreeSet::new(),
            count: 0,
            errors: 0,
        });
        if k.words.is_none() {
            k.words.clone_from(&r.words);
        }
        k.phases.insert(phase);
        k.count += 1;
        let said = reply.and_then(|p| p.reply.as_deref());
        if said == Some("error") {
            k.errors += 1;
        }
        if link != LinkKind::Lock {
            return;
        }
        if let Some(p) = reply {
            self.rtt_ns.push(p.t_ns.saturating_sub(r.t_ns));
        }
        let renewal = phase == Phase::Renew || (phase == Phase::Hold && r.token);
        if renewal && said.is_some_and(succeeded) {
            self.wire_renewals += 1;
        }
    }

    fn finish(mut self, dirs: &[PathBuf]) -> Learned {
        let opaque = std::mem::take(&mut self.opaque)
            .into_iter()
            .filter(|(k, _)| !self.framed.contains(k))
            .map(|((link, node), why)| OpaqueLink { link, node, why })
            .collect();
        self.rtt_ns.sort_unstable();
        let ms = |q: f64| percentile(&self.rtt_ns, q) as f64 / 1e6;
        Learned {
            runs: dirs.to_vec(),
            lease_ms: self.lease_ms,
            kinds: self.kinds.into_values().collect(),
            opaque,
            rtt_ms: (ms(0.5), ms(0.99)),
            run_secs: self.secs.iter().sum::<f64>() / self.secs.len().max(1) as f64,
            wire_renewals: self.wire_renewals,
            adapter_renewals: self.adapter_renewals,
            anomalies: self.anomalies,
            renewal_checks: self.renewal_checks,
            bigrams: Some(self.bigrams),
        }
    }

    /// The wire's renewals against the adapter's `renewed` events.
    fn renewal_check(
        &mut self,
        dir: &Path,
        history: &Path,
        wire: &[WireRecord],
        workers: Option<i64>,
    ) -> Result<(), String> {
        // Slots need the worker count (run.json's workload).
        let Some(workers) = workers
            .and_then(|c| usize::try_from(c).ok())
            .filter(|&c| c > 0)
        else {
            return Ok(());
        };
        let (meta, ops) = crate::history::jsonl::read_all(history)
            .map_err(|e| format!("{}: {e}", history.display()))?;
        // Only a library that renews by itself (lockjaw's own renewals are
        // its workers' `renew` ops, not events).
        let renews_itself = meta
            .as_ref()
            .and_then(|m| m.params.get("client"))
            .and_then(|c| c.get("renewals"))
            .and_then(serde_json::Value::as_str)
            == Some("all");
        if !renews_itself {
            return Ok(());
        }
        let slot =
            |p: i64| crate::runner::wire_tap::slot_of(&crate::history::Process::Num(p), workers);
        let [events, holds, own] = renewal_check::spans(&ops, slot);
        let c = renewal_check::cross_check(wire, &events, &holds, &own);
        self.renewal_checks.push((dir.to_path_buf(), c));
        Ok(())
    }
}

/// Whether the wire can show a library's own renewals on this system, as
/// for the run's lease source (`runner::wire_lease::applies`): framed RESP
/// links, one node holding the key. Elsewhere (etcd's gRPC, ZooKeeper,
/// Redlock, SQL) the adapter's events are the renewals, with nothing on
/// the wire to hold them against: no check, rather than a "disagree".
fn wire_tells_renewals(system: Option<&str>) -> bool {
    use crate::service::{Keeps, System, Wire};
    system.and_then(System::named).is_some_and(|s| {
        let f = s.facts();
        f.wire == Wire::Resp && matches!(f.keeps, Keeps::KeyOnOneNode | Keeps::KeyOnPrimary)
    })
}

/// A reply that says the request did what it asked: `ok`, a positive
/// integer, or a value (not an error, nil or 0).
fn succeeded(reply: &str) -> bool {
    match reply.strip_prefix("int:") {
        Some(n) => n.parse::<i64>().is_ok_and(|n| n > 0),
        None => reply == "ok" || reply == "other",
    }
}

/// The nearest-rank percentile of sorted values (0 when empty).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// run.json's `duration_s` (what `lockjaw run` measured, start to end).
fn run_secs(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(crate::report::rundir::RUN)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("duration_s")?.as_f64()
}

/// Disjoint sorted ranges (ns, both ends inclusive).
#[derive(Default)]
struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    /// Sort and merge what was pushed.
    fn merged(mut self) -> Ranges {
        self.0.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.0.len());
        for (s, e) in self.0 {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        Ranges(out)
    }

    fn holds(&self, t: u64) -> bool {
        let i = self.0.partition_point(|r| r.0 <= t);
        i > 0 && t <= self.0[i - 1].1
    }
}

/// Each worker's phases over the run, from the history (a search run's
/// too: [`super::feedback`]).
#[derive(Default)]
pub(super) struct Phases {
    /// Slot → the phases tried in order, each with its ranges.
    slots: HashMap<usize, Vec<(Phase, Ranges)>>,
    adapter_renewals: u64,
}

/// The order a moment's phase is decided in (hold after these, idle last).
const ORDER: [Phase; 5] = [
    Phase::Renew,
    Phase::Release,
    Phase::Acquire,
    Phase::Write,
    Phase::Hold,
];

impl Phases {
    pub(super) fn of(t: &Timeline) -> Phases {
        use crate::report::timeline::{LaneKind, Outcome};
        let slot_of_lane: Vec<Option<usize>> = t
            .lanes
            .iter()
            .map(|l| match l.kind {
                LaneKind::Worker | LaneKind::Process => l.id.get(1..)?.parse().ok(),
                _ => None,
            })
            .collect();
        let mut raw: HashMap<usize, HashMap<Phase, Ranges>> = HashMap::new();
        let mut open: HashMap<usize, u64> = HashMap::new();
        let mut out = Phases::default();
        for iv in &t.intervals {
            let Some(slot) = slot_of_lane[iv.lane as usize] else {
                continue;
            };
            let end = iv.end.unwrap_or(t.end_ns);
            let f = t.f(iv);
            let mut close_hold = |at: u64, raw: &mut HashMap<usize, HashMap<Phase, Ranges>>| {
                if let Some(s) = open.remove(&slot) {
                    let r = raw.entry(slot).or_default().entry(Phase::Hold).or_default();
                    r.0.push((s, at));
                }
            };
            let phase = match f {
                "acquire" => {
                    close_hold(iv.start, &mut raw);
                    Phase::Acquire
                }
                "release" => {
                    close_hold(iv.start, &mut raw);
                    Phase::Release
                }
                "lost" => {
                    close_hold(iv.start, &mut raw);
                    continue;
                }
                // The adapter's events are `renewed` where the wire is the
                // lease source (`runner::wire_lease`).
                "renew" | "renewed" => {
                    let proc = &t.procs[iv.process as usize];
                    if proc.ends_with("-adapter") && iv.outcome == Outcome::Ok {
                        out.adapter_renewals += 1;
                    }
                    Phase::Renew
                }
                _ => Phase::Write,
            };
            let r = raw.entry(slot).or_default().entry(phase).or_default();
            r.0.push((iv.start, end));
            if f == "acquire" && iv.outcome == Outcome::Ok {
                open.insert(slot, end);
            }
        }
        for (slot, s) in open {
            let r = raw.entry(slot).or_default().entry(Phase::Hold).or_default();
            r.0.push((s, t.end_ns.max(s)));
        }
        for (slot, mut by) in raw {
            let list = ORDER
                .iter()
                .filter_map(|p| by.remove(p).map(|r| (*p, r.merged())))
                .collect();
            out.slots.insert(slot, list);
        }
        out
    }

    /// Worker `slot`'s phase at `t` (ns, run clock).
    pub(super) fn at(&self, slot: usize, t: u64) -> Phase {
        self.slots
            .get(&slot)
            .and_then(|l| l.iter().find(|(_, r)| r.holds(t)).map(|(p, _)| *p))
            .unwrap_or(Phase::Idle)
    }
}

#[cfg(test)]
#[path = "learn_tests.rs"]
mod tests;
