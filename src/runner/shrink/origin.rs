//! The run `lockjaw shrink` starts from: its directory read and checked
//! (run.json, results.json, nemesis.json through the report's reader), the
//! anomaly kind to reproduce and the fault it must follow, the command
//! that reproduces it, and the search's knobs with their floors.

use super::command;
use super::search::{Dim, Knob, Search};
use crate::report::trials::{kind_label, parse_kind, RunTrials, ANY, KINDS};
use crate::report::RunSummary;
use crate::runner::rundir::{RunInfo, RUN};
use crate::toml_file::Source;
use std::path::{Path, PathBuf};

/// What shrink reproduces, and from what.
pub struct Origin {
    /// The run directory, absolute.
    pub dir: PathBuf,
    pub info: RunInfo,
    /// The anomaly kind (a slug: `two-holders`).
    pub kind: String,
    /// The fault whose landed injection it must follow (`clock-jump`).
    pub fault: String,
    /// The original `lockjaw run` command without `--seed`, `--out`,
    /// `--runs`, `--jobs`, `--base-port` and `--no-progress`.
    pub argv: Vec<String>,
    /// The original nemesis file.
    pub nemesis: Source,
    /// Landed injections of the fault in the original run.
    pub landed: u64,
}

/// Read and check `dir`; `anomaly` picks the kind when the run has several.
pub fn read(dir: &Path, anomaly: Option<&str>) -> Result<Origin, String> {
    let shown = dir.display();
    if !dir.is_dir() {
        return Err(format!(
            "{shown}: no such directory (hint: give the run directory `lockjaw run` printed)"
        ));
    }
    if !dir.join(RUN).is_file() {
        let of_runs = ["run-1", "cells", "runs"]
            .iter()
            .any(|d| dir.join(d).is_dir());
        return Err(if of_runs {
            format!("{shown} is a directory of runs, not one run (hint: shrink one of them, e.g. `lockjaw shrink {shown}/run-1`)")
        } else {
            format!("{shown}: not a run directory: no {RUN} (hint: give the directory `lockjaw run` printed)")
        });
    }
    let dir = std::path::absolute(dir).map_err(|e| format!("{shown}: {e}"))?;
    let run_path = dir.join(RUN);
    let text =
        std::fs::read_to_string(&run_path).map_err(|e| format!("{}: {e}", run_path.display()))?;
    let info: RunInfo = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: line {}: {e} (hint: a run.json of another lockjaw version? run the test again with this one)",
            run_path.display(),
            e.line()
        )
    })?;
    if !dir.join(crate::runner::rundir::RESULTS).is_file() {
        return Err(format!("{shown}: no results.json: the run ended before its check (hint: `lockjaw report {shown}` or run it again)"));
    }
    if info.nemesis.fault == "none" {
        return Err(format!("{shown}: the run had no faults (--nemesis none): shrink reduces a run whose anomaly follows a fault"));
    }
    let has = |f: &str| info.command.iter().any(|a| a.starts_with(f));
    if has("--postgres-url")
        && !has("--postgres-password-file")
        && std::env::var_os(crate::runner::cli::PGPASSWORD).is_none()
    {
        return Err(format!("{shown}: the run used --postgres-url, whose password run.json leaves out (hint: give it in the environment: export PGPASSWORD, then shrink again)"));
    }
    let summary = RunSummary::from_dir(&dir).map_err(|e| e.to_string())?;
    let (kind, fault) = target(&summary.trials, anomaly).map_err(|e| format!("{shown}: {e}"))?;
    let landed = summary
        .trials
        .trials
        .iter()
        .filter(|t| t.landed && t.fault == fault)
        .count() as u64;
    let argv = command::original(&summary.command)?;
    let nemesis = nemesis_source(&argv, &info)?;
    Ok(Origin {
        dir,
        info,
        kind,
        fault,
        argv,
        nemesis,
        landed,
    })
}

/// The kind to reproduce and its fault: `anomaly`, or the first kind (in
/// the report's order) attributed to a landed injection.
pub fn target(t: &RunTrials, anomaly: Option<&str>) -> Result<(String, String), String> {
    let found: Vec<(&str, &str)> = KINDS
        .into_iter()
        .filter_map(|k| {
            let tr = t
                .trials
                .iter()
                .find(|tr| tr.landed && tr.kinds.contains(k))?;
            Some((k, tr.fault.as_str()))
        })
        .collect();
    let listed = || found.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ");
    if let Some(a) = anomaly {
        let k = parse_kind(a)?;
        if k == ANY {
            return Err(format!(
                "--anomaly {ANY}: shrink follows one kind (hint: one of {})",
                listed()
            ));
        }
        return match found.iter().find(|(f, _)| *f == k) {
            Some((k, f)) => Ok((k.to_string(), f.to_string())),
            None if found.is_empty() => Err(no_target(t)),
            None => Err(format!(
                "no {} follows a landed injection in this run (hint: --anomaly {})",
                kind_label(k),
                listed()
            )),
        };
    }
    match found.first() {
        Some((k, f)) => Ok((k.to_string(), f.to_string())),
        None => Err(no_target(t)),
    }
}

fn no_target(t: &RunTrials) -> String {
    let seen: Vec<String> = t
        .anomalies
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{} ({n})", kind_label(k)))
        .collect();
    if seen.is_empty() {
        return "the run found no anomaly: there is nothing to shrink".into();
    }
    format!(
        "its anomalies ({}) follow no landed injection of its fault (lost updates, for one, show only at the final read): shrink keeps a command only while the anomaly follows a landed fault",
        seen.join(", ")
    )
}

/// The run's nemesis file: `--nemesis` of its command, else its name.
fn nemesis_source(argv: &[String], info: &RunInfo) -> Result<Source, String> {
    let name = command::flag(argv, "--nemesis").unwrap_or_else(|| info.nemesis.name.clone());
    crate::toml_file::find(&name, "nemesis", crate::nemesis::spec::BUILTIN)
        .map(|(s, _)| s)
        .map_err(|e| {
            format!(
                "{e} (hint: run shrink where the run was started, so its nemesis file is found)"
            )
        })
}

/// The search's knobs for this run, in the order they are tried.
pub fn knobs(info: &RunInfo, kind: &str, landed: u64) -> Search {
    let w = &info.workload;
    let n = &info.nemesis;
    let ttl = info.ttl_ms;
    // First: a shorter run makes every later step, and the confirmation,
    // cheaper. Its floor follows the fault's length (`refloor_time`), so
    // a shorter fault lets it shrink again.
    let time_ms = (w.time_limit_s * 1000.0).round() as u64;
    let mut k = vec![Knob::new(Dim::TimeLimit, time_ms, time_ms)];
    if w.concurrency > 2 {
        k.push(Knob::new(Dim::Workers, w.concurrency as u64, 2));
    }
    let injections = n.max_injections.unwrap_or(landed);
    if injections > 1 {
        k.push(Knob::new(Dim::Injections, injections, 1));
    }
    if n.fault != "mixed" {
        match (n.duration_ms, n.duration_leases) {
            (Some(ms), _) if ms > 1 => k.push(Knob::new(Dim::DurationMs, ms, 1)),
            (None, Some(l)) if l > 0.001 => k.push(Knob::new(
                Dim::DurationLeases,
                (l * 1000.0).round() as u64,
                1,
            )),
            _ => {}
        }
        if n.fault.starts_with("clock-") {
            let off = n.offset_ms.unwrap_or(2 * ttl as i64);
            if off > 1 {
                k.push(Knob::new(Dim::OffsetMs, off as u64, 1));
            }
        }
        if n.latency_ms > 1 {
            k.push(Knob::new(Dim::LatencyMs, n.latency_ms, 1));
        }
    }
    if w.think_ms > 0 {
        k.push(Knob::new(Dim::ThinkMs, w.think_ms, 0));
    }
    if w.hold_ms > 0 {
        k.push(Knob::new(Dim::HoldMs, w.hold_ms, 0));
    }
    if kind == "two-holders" && w.name == "fenced-counter" {
        k.push(Knob::new(Dim::Workload, 1, 0));
    }
    let mut s = Search { knobs: k };
    s.refloor_time(|s| time_floor(info, s));
    s
}

/// The shortest run `s` may ask for: the first fault must be able to land
/// and its anomaly to follow within the window the trials allow (two
/// leases after the fault's end), plus a second, in whole seconds.
pub fn time_floor(info: &RunInfo, s: &Search) -> u64 {
    let n = &info.nemesis;
    let ttl = info.ttl_ms;
    let lease = std::time::Duration::from_millis(ttl);
    let fault_ms = match (s.value(Dim::DurationMs), s.value(Dim::DurationLeases)) {
        (Some(ms), _) => ms,
        (None, Some(l)) => l * ttl / 1000,
        (None, None) => n.duration(lease).as_millis() as u64,
    };
    (n.first_delay_ms + fault_ms + 2 * ttl + 1000).div_ceil(1000) * 1000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::trials::Trial;

    fn trial(fault: &str, landed: bool, kinds: &[&str]) -> Trial {
        Trial::sample(fault, landed, kinds)
    }

    #[test]
    fn the_target_is_a_kind_that_follows_a_landed_injection() {
        let mut t = RunTrials {
            trials: vec![
                trial("pause-holder", false, &["two-holders"]),
                trial("pause-holder", true, &["stale-writes"]),
            ],
            ..Default::default()
        };
        t.anomalies.insert("lost-updates".into(), 3);
        let (k, f) = target(&t, None).unwrap();
        assert_eq!((k.as_str(), f.as_str()), ("stale-writes", "pause-holder"));
        let e = target(&t, Some("two-holders")).unwrap_err();
        assert!(e.contains("--anomaly stale-writes"), "{e}");
        assert!(target(&t, Some("any")).is_err());
        assert!(target(&t, Some("stale")).unwrap_err().contains("hint"));
        t.trials.pop();
        let e = target(&t, None).unwrap_err();
        assert!(
            e.contains("lost updates (3)") && e.contains("final read"),
            "{e}"
        );
        t.anomalies.clear();
        assert!(target(&t, None).unwrap_err().contains("no anomaly"));
    }

    #[test]
    fn knobs_follow_the_run_and_floors_let_a_fault_land() {
        let text = r#"{"command": ["lockjaw", "run"], "system": "redlock", "local_cluster": true,
            "endpoints": [], "nodes": [], "server_version": null, "toxiproxy_url": null,
            "toxiproxy_embedded": true, "toxiproxy_version": null, "lockjaw_version": "0",
            "workload": WORKLOAD, "nemesis": NEMESIS, "fencing": "off", "seed": 1,
            "ttl_ms": 2000, "effective_lease_ms": null, "started_utc": "", "finished_utc": null,
            "duration_s": null, "counts": COUNTS, "final_value": null, "outcome": "completed", "exit_code": 1}"#;
        let mut w = crate::workload::load("fenced-counter", &Default::default()).unwrap();
        w.time_limit_s = 20.0;
        let n = crate::nemesis::spec::load("clock-jump").unwrap();
        let text = text
            .replace("WORKLOAD", &serde_json::to_string(&w).unwrap())
            .replace("NEMESIS", &serde_json::to_string(&n).unwrap())
            .replace(
                "COUNTS",
                &serde_json::to_string(&crate::runner::rundir::Counts::default()).unwrap(),
            );
        let info: RunInfo = serde_json::from_str(&text).unwrap();
        let s = knobs(&info, "two-holders", 5);
        let dims: Vec<Dim> = s.knobs.iter().map(|k| k.dim).collect();
        assert_eq!(
            dims,
            [
                Dim::TimeLimit,
                Dim::Workers,
                Dim::Injections,
                Dim::DurationLeases,
                Dim::OffsetMs,
                Dim::ThinkMs,
                Dim::HoldMs,
                Dim::Workload
            ]
        );
        let time = &s.knobs[0];
        // First fault after 1 s, 1 lease long, 2 leases of window, 1 s.
        assert_eq!((time.original, time.floor), (20_000, 8_000));
        assert_eq!(s.knobs[4].original, 4000, "the default offset: 2 leases");
        let mut shorter = s.clone();
        shorter.knobs[3].current = 250;
        shorter.refloor_time(|s| time_floor(&info, s));
        assert_eq!(
            shorter.knobs[0].floor, 7_000,
            "a quarter-lease fault: 1 + 0.5 + 4 + 1 s, rounded up"
        );
        let s = knobs(&info, "stale-writes", 1);
        assert!(s.value(Dim::Injections).is_none() && s.value(Dim::Workload).is_none());
    }
}
