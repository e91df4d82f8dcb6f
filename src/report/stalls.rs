//! Worker stalls: `stalls.json` of a run directory (what each worker's
//! stall meter saw: the times its process woke up late), and the pause
//! budget they give: the longest stall outside injected faults.
//!
//! A stall overlapping an injection of `nemesis.json` that could stop that
//! worker or its links never counts: an injection aimed at that worker's
//! slot (pause-holder, kill-holder, partition-holder, ...), or one aimed at
//! no single worker (it may reach every worker's links). Injected pauses
//! are the faults under test, not the host's own pauses.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// The file name in a run directory.
pub const STALLS: &str = "stalls.json";

/// One stall a worker's meter observed (times in ns since the run's start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    /// The worker slot.
    pub slot: usize,
    /// When the meter went to sleep, and when it woke.
    pub start_ns: u64,
    pub end_ns: u64,
    /// How late it woke: `end - start` minus the meter's interval.
    pub late_ms: f64,
}

/// `stalls.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StallFile {
    /// The meter's sleep interval.
    pub interval_ms: f64,
    /// Stalls shorter than this were not reported.
    pub threshold_ms: f64,
    pub stalls: Vec<Stall>,
}

/// The longest stall outside injected faults.
#[derive(Clone, Debug, PartialEq)]
pub struct StallBudget {
    /// The longest counted stall; the meter's threshold when none was
    /// counted (every stall was shorter).
    pub ms: f64,
    /// Stalls counted, and stalls left out because an injection overlapped.
    pub counted: usize,
    pub excluded: usize,
    pub threshold_ms: f64,
}

/// The injections of nemesis.json: the slot each aimed at (None: no
/// single worker) and its window [start, stop] in ns (stop None: never
/// stopped).
#[derive(Clone, Debug, Default)]
pub struct Injections(Vec<(Option<u64>, u64, Option<u64>)>);

impl Injections {
    /// Read from nemesis.json (`Null`: none).
    pub fn of(nemesis: &Value) -> Injections {
        let Some(list) = nemesis.get("injections").and_then(Value::as_array) else {
            return Injections::default();
        };
        Injections(
            list.iter()
                .filter_map(|i| {
                    let start = i.get("start_ns")?.as_u64()?;
                    let slot = i.get("target").and_then(|t| t.get("slot")?.as_u64());
                    Some((slot, start, i.get("stop_ns").and_then(Value::as_u64)))
                })
                .collect(),
        )
    }

    /// Whether an injection could have stopped worker `slot` (or its
    /// links) at some time in [start, end].
    pub fn hits(&self, slot: u64, start: u64, end: u64) -> bool {
        self.0.iter().any(|&(aim, from, stop)| {
            aim.map_or(true, |w| w == slot)
                && end >= from
                && stop.map_or(true, |stop| start <= stop)
        })
    }
}

/// The pause budget the stalls give, with `nemesis` (nemesis.json, or
/// `Null`) naming the injections to leave out.
pub fn budget(file: &StallFile, nemesis: &Value) -> StallBudget {
    let inj = Injections::of(nemesis);
    let (out, kept): (Vec<&Stall>, Vec<&Stall>) =
        (file.stalls.iter()).partition(|s| inj.hits(s.slot as u64, s.start_ns, s.end_ns));
    let longest = kept
        .iter()
        .map(|s| s.late_ms)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    StallBudget {
        ms: longest.unwrap_or(file.threshold_ms),
        counted: kept.len(),
        excluded: out.len(),
        threshold_ms: file.threshold_ms,
    }
}

/// `DIR/stalls.json`: `Ok(None)` when the run has none (written before
/// the meter existed); a broken file is an error naming it.
pub fn read(dir: &Path) -> Result<Option<StallFile>, String> {
    let path = dir.join(STALLS);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        format!(
            "{}:{}: {e} (hint: `lockjaw run` writes this file; delete it to report the pause budget as not measured)",
            path.display(),
            e.line()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stall(slot: usize, start_ms: u64, late_ms: f64) -> Stall {
        Stall {
            slot,
            start_ns: start_ms * 1_000_000,
            end_ns: start_ms * 1_000_000 + (late_ms as u64 + 5) * 1_000_000,
            late_ms,
        }
    }

    #[test]
    fn injected_pauses_never_count() {
        // Worker 1 paused by pause-holder from 1000 to 2500 ms; a
        // partition of no single worker from 5000 ms, never stopped.
        let nemesis = json!({"injections": [
            {"fault": "pause-holder", "start_ns": 1_000_000_000u64, "stop_ns": 2_500_000_000u64,
             "target": {"slot": 1, "process": 1}},
            {"fault": "partition-node", "start_ns": 5_000_000_000u64, "target": {"node": "n1"}},
        ]});
        let file = StallFile {
            interval_ms: 5.0,
            threshold_ms: 10.0,
            stalls: vec![
                stall(1, 990, 1500.0), // the injected pause: out
                stall(0, 1200, 40.0),  // another worker at the same time: in
                stall(1, 3000, 25.0),  // worker 1 after the pause: in
                stall(2, 6000, 90.0),  // during the endless partition: out
            ],
        };
        let b = budget(&file, &nemesis);
        assert_eq!((b.ms, b.counted, b.excluded), (40.0, 2, 2));
        // Without nemesis.json every stall counts.
        assert_eq!(budget(&file, &Value::Null).ms, 1500.0);
        // No stall counted: the meter's threshold bounds them.
        let quiet = StallFile {
            stalls: vec![stall(1, 1000, 700.0)],
            ..file.clone()
        };
        let b = budget(&quiet, &nemesis);
        assert_eq!((b.ms, b.counted, b.excluded), (10.0, 0, 1));
    }

    #[test]
    fn a_broken_file_is_named_and_a_missing_one_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read(d.path()), Ok(None));
        std::fs::write(d.path().join(STALLS), "{").unwrap();
        let e = read(d.path()).unwrap_err();
        assert!(e.contains("stalls.json:1:"), "{e}");
    }
}
