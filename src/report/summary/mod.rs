//! [`RunSummary`]: the figures of one run that a report, a bug report and a
//! comparison cell show, computed from a run directory (run.json for the
//! parameters, the typed results.json for verdicts and counts, the history for
//! acquisitions, latencies, rejected writes and re-acquire gaps:
//! [`history`]). The reproduce command is rebuilt in [`reproduce`].

use super::anomaly::{self, Anomaly, CheckRow};
use super::rundir::{value_bool, value_text, ReportError, RunDir, RunFile};
use super::timeline::Timeline;
use super::trials::{self, RunTrials};
use crate::check::lock::LockReport;
use crate::check::Validity;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

mod history;
mod reproduce;
pub mod verdict;

pub use history::percentile;
pub use reproduce::secret_note;

/// A composed verdict (service or resource).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SideVerdict {
    pub valid: Validity,
    /// False when the history has nothing this verdict judges.
    pub applicable: bool,
}

/// What one run showed.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    pub dir: PathBuf,
    pub system: Option<String>,
    pub workload: Option<String>,
    pub nemesis: Option<String>,
    pub fencing: Option<bool>,
    /// `builtin` or the client adapter (`--client`).
    pub client: Option<String>,
    pub seed: Option<String>,
    /// The command line that reproduces the run, with its seed.
    pub command: String,
    /// Component → version (lockjaw, each server), as run.json gives them.
    pub versions: Vec<(String, String)>,
    /// Other scalar parameters from run.json (name, value).
    pub params: Vec<(String, String)>,
    pub op_lines: u64,
    pub duration_ns: u64,
    pub acquire_attempts: u64,
    pub acquisitions: u64,
    /// Workers of the run (run.json's workload).
    pub concurrency: Option<i64>,
    /// Protected writes the storage applied (`ok` writes and job applies).
    pub updates: u64,
    /// Tries that did not become an update: acquires refused because the
    /// lock was held, conditional writes refused by a version conflict.
    pub retries: u64,
    /// Latency of successful acquires (ms).
    pub acquire_p50_ms: Option<f64>,
    pub acquire_p99_ms: Option<f64>,
    pub overall: Validity,
    pub service: Option<SideVerdict>,
    pub resource: Option<SideVerdict>,
    /// Linearizability verdict (register workloads).
    pub linearizable: Option<Validity>,
    pub safety_violations: Option<u64>,
    pub fence_order_errors: Option<u64>,
    pub stale_writes_accepted: Option<u64>,
    /// Writes the storage refused with `stale-fence` (from the history).
    pub stale_writes_rejected: u64,
    /// Reads the storage refused with `stale-fence`.
    pub stale_reads_rejected: u64,
    pub lost_updates: Option<i64>,
    pub lost_updates_valid: Option<Validity>,
    pub stale_holders: Option<u64>,
    pub possibly_stale: Option<u64>,
    /// Unprotected writes (information): invoked after the writer's lease
    /// had certainly ended (`None` inside: unknown), and past the lower
    /// bound of its end.
    pub unprotected_writes: Option<(Option<u64>, u64)>,
    /// With the lease guard on: the protected writes it abandoned.
    pub abandoned_writes: Option<u64>,
    /// For each holder crash (a `kill...` fault): ms from the kill to the
    /// next successful acquire.
    pub reacquire_after_kill_ms: Vec<f64>,
    /// Time without a holder after the faults aimed at one (results.json
    /// `failover.from_fault`): (median ms, max ms, failovers).
    pub failover_ms: Option<(f64, f64, u64)>,
    /// Liveness figures (information; results.json `lock.liveness`).
    pub liveness: Option<crate::check::lock::Liveness>,
    /// Lease advice (runs whose grants carry a lease).
    pub advice: Option<super::advice::Advice>,
    /// Fault injections (nemesis.json), and how many of those judged
    /// landed inside the critical section: (inside, judged).
    pub faults: Option<u64>,
    /// Starts the run's end cut off (nemesis.json `not_started`).
    pub not_started: u64,
    pub landed_inside: Option<(u64, u64)>,
    /// The checker's own error, when results.json reports one.
    pub checker_error: Option<String>,
    /// The run's verdict (results.json `run`), when `lockjaw run` wrote it.
    pub run_verdict: Option<verdict::RunVerdict>,
    pub checks: Vec<CheckRow>,
    pub anomalies: Vec<Anomaly>,
    /// The run's injections as trials, with the anomalies attributed to
    /// each ([`super::trials`]).
    pub trials: RunTrials,
}

impl RunSummary {
    /// A summary of nothing: every count zero, every figure absent
    /// (tests, and tables built by hand).
    pub fn empty() -> RunSummary {
        RunSummary {
            dir: PathBuf::new(),
            system: None,
            workload: None,
            nemesis: None,
            fencing: None,
            client: None,
            seed: None,
            command: String::new(),
            versions: vec![],
            params: vec![],
            op_lines: 0,
            duration_ns: 0,
            acquire_attempts: 0,
            acquisitions: 0,
            concurrency: None,
            updates: 0,
            retries: 0,
            acquire_p50_ms: None,
            acquire_p99_ms: None,
            overall: Validity::True,
            service: None,
            resource: None,
            linearizable: None,
            safety_violations: None,
            fence_order_errors: None,
            stale_writes_accepted: None,
            stale_writes_rejected: 0,
            stale_reads_rejected: 0,
            lost_updates: None,
            lost_updates_valid: None,
            stale_holders: None,
            possibly_stale: None,
            unprotected_writes: None,
            abandoned_writes: None,
            reacquire_after_kill_ms: vec![],
            failover_ms: None,
            liveness: None,
            advice: None,
            faults: None,
            not_started: 0,
            landed_inside: None,
            checker_error: None,
            run_verdict: None,
            checks: vec![],
            anomalies: vec![],
            trials: RunTrials::default(),
        }
    }

    /// The run's injections as a measurement: landed faults and the rate
    /// of each anomaly kind per landed fault (`None` without injections).
    pub fn rates_sentence(&self) -> Option<String> {
        let t = super::trials::Tally::of(&[self]);
        (t.injections > 0).then(|| {
            format!(
                "{} of {} faults landed; anomalies per landed fault: {}",
                t.landed,
                t.injections,
                t.rates_text()
            )
        })
    }

    /// The unprotected writes and the lease guard's abandoned writes, as a
    /// sentence (empty when there is neither).
    pub fn guard_sentence(&self) -> String {
        let mut s = String::new();
        if let Some((end, lower)) = self.unprotected_writes {
            let end = end.map_or("an unknown number".to_string(), |n| n.to_string());
            s.push_str(&format!(
                " Unprotected writes (information): {end} invoked after the writer's lease had \
                 certainly ended, {lower} past the lower bound of its end."
            ));
        }
        if let Some(n) = self.abandoned_writes {
            s.push_str(&format!(
                " Lease guard on: {n} protected write(s) abandoned."
            ));
        }
        s
    }
}

fn side(v: &crate::check::lock::Verdict) -> SideVerdict {
    SideVerdict {
        valid: v.valid,
        applicable: v.applicable,
    }
}

/// A side's verdict, unknown when the run tested nothing (its verdict
/// unknown for a reason: [`verdict::RunVerdict::unknown`]), so every
/// table that shows the sides shows unknown; invalid stays invalid.
fn untested(rd: &RunDir, s: SideVerdict) -> SideVerdict {
    match &rd.verdict {
        Some(v) if !v.unknown.is_empty() => SideVerdict {
            valid: s.valid.merge(Validity::Unknown),
            ..s
        },
        _ => s,
    }
}

/// Lost updates: the counter's `lost`, else the check's count.
fn lost_updates(l: &LockReport) -> i64 {
    let c = &l.checks.lost_updates;
    c.counts.get("lost").copied().unwrap_or(c.count as i64)
}

/// The versions run.json names: lockjaw's, the server's, a client
/// adapter's library, Toxiproxy's.
fn versions(run: &RunFile) -> Vec<(String, String)> {
    [
        ("lockjaw", &run.lockjaw_version),
        ("server", &run.server_version),
        ("client library", &run.client_library),
        ("toxiproxy", &run.toxiproxy_version),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
    .collect()
}

/// The run's parameters as (name, value), as run.json gives them.
fn params(run: &RunFile) -> Vec<(String, String)> {
    let w = run.workload.clone().unwrap_or_default();
    let n = run.nemesis.clone().unwrap_or_default();
    let s = |v: &Option<String>| v.clone();
    [
        ("run_id", s(&run.run_id)),
        ("system", s(&run.system)),
        ("client", s(&run.client)),
        ("storage", s(&run.storage)),
        ("workload", w.name),
        ("nemesis", n.name),
        ("fault", n.fault),
        ("fencing", s(&run.fencing)),
        ("seed", run.seed.map(|x| x.to_string())),
        ("ttl_ms", run.ttl_ms.or(w.ttl_ms).map(|x| x.to_string())),
        ("concurrency", w.concurrency.map(|x| x.to_string())),
        ("time_limit_s", w.time_limit_s.map(|x| x.to_string())),
        ("hold_ms", w.hold_ms.map(|x| x.to_string())),
        ("think_ms", w.think_ms.map(|x| x.to_string())),
        ("outcome", s(&run.outcome)),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?)))
    .collect()
}

/// The lock report's failover figures, when it has some.
pub(crate) fn failover(l: &LockReport) -> Option<(f64, f64, u64)> {
    let f = &l.failover.as_ref()?.from_fault;
    Some((f.median_ms?, f.max_ms?, f.count))
}

/// A parameter of the history's meta record, as text.
fn meta_param(t: &Timeline, k: &str) -> Option<String> {
    t.meta
        .as_ref()
        .and_then(|m| m.params.get(k))
        .and_then(value_text)
}

/// Fencing on or off: run.json's, else the history's meta record's.
fn fencing(rd: &RunDir, t: &Timeline) -> Option<bool> {
    rd.run.fencing_on().or_else(|| {
        t.meta
            .as_ref()
            .and_then(|m| m.params.get("fencing"))
            .and_then(value_bool)
    })
}

/// With the lease guard on: the protected writes it abandoned.
fn abandoned_writes(run: &RunFile) -> Option<u64> {
    run.workload
        .as_ref()
        .filter(|w| w.lease_guard.as_deref() == Some("on"))
        .map(|_| {
            run.counts
                .as_ref()
                .and_then(|c| c.abandoned_writes)
                .unwrap_or(0)
        })
}

/// nemesis.json's holder faults judged inside the critical section:
/// (inside, judged).
fn landed_inside(nemesis: &Value) -> Option<(u64, u64)> {
    let l = nemesis.get("landed_inside")?;
    Some((l.get("inside")?.as_u64()?, l.get("judged")?.as_u64()?))
}

impl RunSummary {
    /// Read the run directory at `dir` and summarize it.
    pub fn from_dir(dir: &Path) -> Result<RunSummary, ReportError> {
        let rd = RunDir::open(dir)?;
        let t = Timeline::read(&rd.history_path(), concurrency(&rd))?;
        Ok(RunSummary::compute(&rd, &t))
    }

    /// Summarize an opened run directory and its history.
    pub fn compute(rd: &RunDir, t: &Timeline) -> RunSummary {
        RunSummary::compute_view(rd, t, &rd.results_view())
    }

    /// [`RunSummary::compute`] with the checks and anomalies taken from
    /// `view` (results.json as [`RunDir::results_view`] gives it, possibly
    /// with more witnesses).
    pub fn compute_view(rd: &RunDir, t: &Timeline, view: &Value) -> RunSummary {
        let run = &rd.run;
        let seed = run
            .seed
            .map(|s| s.to_string())
            .or_else(|| meta_param(t, "seed"));
        let r = &rd.results;
        let lock = r.lock.as_ref();
        let count = |f: fn(&LockReport) -> u64| lock.map(f);
        let mut ops = history::op_counts(t);
        RunSummary {
            dir: rd.dir.clone(),
            system: run.system.clone().or_else(|| meta_param(t, "system")),
            workload: (run.workload.as_ref())
                .and_then(|w| w.name.clone())
                .or_else(|| t.workload()),
            nemesis: (run.nemesis.as_ref())
                .and_then(|n| n.name.clone())
                .or_else(|| meta_param(t, "nemesis")),
            fencing: fencing(rd, t),
            client: run.client.clone(),
            command: reproduce::command(rd, &seed),
            seed,
            versions: versions(run),
            params: params(run),
            op_lines: t.op_lines,
            duration_ns: t.end_ns,
            acquire_attempts: ops.attempts,
            concurrency: concurrency(rd),
            updates: ops.updates,
            retries: ops.retries,
            acquisitions: ops.latencies.len() as u64,
            acquire_p50_ms: percentile(&mut ops.latencies, 0.5),
            acquire_p99_ms: percentile(&mut ops.latencies, 0.99),
            overall: r.valid,
            service: lock.map(|l| untested(rd, side(&l.service))),
            resource: lock.map(|l| untested(rd, side(&l.resource))),
            linearizable: (r.linearizable.as_ref()).map(|l| {
                untested(
                    rd,
                    SideVerdict {
                        valid: l.valid,
                        applicable: true,
                    },
                )
                .valid
            }),
            safety_violations: count(|l| l.checks.safety.count),
            fence_order_errors: count(|l| l.checks.fence_order.count),
            stale_writes_accepted: count(|l| l.checks.stale_writes.count),
            stale_writes_rejected: ops.rejected_writes,
            stale_reads_rejected: ops.rejected_reads,
            lost_updates: lock.map(lost_updates),
            lost_updates_valid: lock.map(|l| l.checks.lost_updates.valid),
            stale_holders: lock
                .filter(|l| l.stale_holders.unknown.is_none())
                .map(|l| l.stale_holders.stale),
            possibly_stale: lock
                .filter(|l| l.stale_holders.unknown.is_none())
                .map(|l| l.stale_holders.possibly_stale),
            unprotected_writes: lock
                .and_then(|l| l.unprotected_writes.as_ref())
                .map(|u| (u.after_lease_end, u.past_lower_bound)),
            abandoned_writes: abandoned_writes(run),
            failover_ms: lock.and_then(failover),
            liveness: lock.and_then(|l| l.liveness.clone()),
            advice: super::advice::for_run(rd, t, None),
            reacquire_after_kill_ms: history::reacquire_after_kill(&rd.nemesis, t),
            faults: rd
                .nemesis
                .get("injections")
                .and_then(Value::as_array)
                .map(|a| a.len() as u64),
            not_started: (rd.nemesis.get("not_started"))
                .and_then(Value::as_array)
                .map_or(0, |a| a.len() as u64),
            landed_inside: landed_inside(&rd.nemesis),
            checker_error: r.first_error().map(|e| e.to_string()),
            run_verdict: rd.verdict.clone(),
            checks: anomaly::check_rows(view),
            anomalies: anomaly::anomalies(view),
            trials: trials::of_run(rd, t, view),
        }
    }

    /// `system / workload / nemesis`, with `fencing on|off` when known.
    pub fn title(&self) -> String {
        let q = |o: &Option<String>| o.clone().unwrap_or_else(|| "?".into());
        let mut s = format!(
            "{} / {} / {}",
            q(&self.system),
            q(&self.workload),
            q(&self.nemesis)
        );
        if let Some(f) = self.fencing {
            s.push_str(if f { " / fencing on" } else { " / fencing off" });
        }
        s
    }
}

/// The run's concurrency (the process-number stride), from run.json.
pub fn concurrency(rd: &RunDir) -> Option<i64> {
    rd.run.workload.as_ref()?.concurrency
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run whose verdict is unknown for a reason shows its sides as
    /// unknown (so compare and sweep tables do); invalid stays invalid.
    #[test]
    fn an_untested_run_shows_its_sides_as_unknown() {
        let mut rd = RunDir {
            dir: PathBuf::from("x"),
            run: RunFile::default(),
            results: serde_json::from_value(
                json!({"version": 1, "valid": "unknown", "checkers": []}),
            )
            .unwrap(),
            verdict: Some(verdict::RunVerdict {
                valid: Validity::Unknown,
                unknown: vec!["no acquire succeeded (0 grants)".into()],
                ..verdict::RunVerdict::default()
            }),
            nemesis: Value::Null,
        };
        let valid = SideVerdict {
            valid: Validity::True,
            applicable: true,
        };
        let invalid = SideVerdict {
            valid: Validity::False,
            applicable: true,
        };
        assert_eq!(untested(&rd, valid).valid, Validity::Unknown);
        assert_eq!(untested(&rd, invalid).valid, Validity::False);
        rd.verdict = None;
        assert_eq!(untested(&rd, valid).valid, Validity::True);
    }
}
