//! The figures of a run that come from its history alone: acquire
//! attempts and latencies, updates and retries, storage refusals of stale
//! fences, and the gaps from a holder crash to the next grant.

use crate::report::timeline::{Outcome, Timeline};
use serde_json::Value;

/// The `p` quantile (0..=1) of `v` by nearest rank; `v` need not be sorted.
pub fn percentile(v: &mut [f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

pub(super) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// What the history's ops add up to.
#[derive(Default)]
pub(super) struct OpCounts {
    /// Acquire (and campaign) attempts.
    pub attempts: u64,
    /// Latencies of the successful ones (ms).
    pub latencies: Vec<f64>,
    /// Protected writes the storage applied.
    pub updates: u64,
    /// Acquires refused as held, writes refused by a version conflict.
    pub retries: u64,
    /// Writes and reads the storage refused with `stale-fence`.
    pub rejected_writes: u64,
    pub rejected_reads: u64,
}

/// Count the history's ops.
pub(super) fn op_counts(t: &Timeline) -> OpCounts {
    let mut c = OpCounts::default();
    for iv in &t.intervals {
        let f = t.f(iv);
        let error = iv.error.as_deref();
        match (f, iv.outcome) {
            ("write" | "apply", Outcome::Ok) => c.updates += 1,
            ("acquire", Outcome::Fail) if error == Some("held") => c.retries += 1,
            ("write", Outcome::Fail) if error == Some("version-conflict") => c.retries += 1,
            _ => {}
        }
        if f == "acquire" || f == "campaign" {
            c.attempts += 1;
            if iv.outcome == Outcome::Ok {
                c.latencies.extend(iv.latency().map(ms));
            }
        } else if iv.outcome == Outcome::Fail && error == Some("stale-fence") {
            match f {
                "write" => c.rejected_writes += 1,
                _ => c.rejected_reads += 1,
            }
        }
    }
    c
}

/// For each holder crash: ms to the next grant, the runner's own figures
/// (nemesis.json `kill_gaps`) or, without them, from the history.
pub(super) fn reacquire_after_kill(nemesis: &Value, t: &Timeline) -> Vec<f64> {
    kill_gaps(nemesis).unwrap_or_else(|| reacquire_gaps(t))
}

/// The runner's kill gaps (nemesis.json: kill to the next grant to
/// another owner), when it wrote them.
fn kill_gaps(nemesis: &Value) -> Option<Vec<f64>> {
    let gaps = nemesis.get("kill_gaps")?.as_array()?;
    Some(
        gaps.iter()
            .filter_map(|g| g.get("gap_ms")?.as_f64())
            .collect(),
    )
}

/// Gaps from each `kill...` fault's start to the next successful acquire
/// (for runs without nemesis.json).
fn reacquire_gaps(t: &Timeline) -> Vec<f64> {
    let acquires: Vec<u64> = t
        .intervals
        .iter()
        .filter(|iv| matches!(t.f(iv), "acquire" | "campaign") && iv.outcome == Outcome::Ok)
        .filter_map(|iv| iv.end)
        .collect();
    t.bands
        .iter()
        .filter(|b| b.label.starts_with("kill"))
        .filter_map(|b| {
            acquires
                .iter()
                .filter(|&&e| e >= b.start)
                .min()
                .map(|e| ms(e - b.start))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.5), Some(50.0));
        assert_eq!(percentile(&mut v, 0.99), Some(99.0));
        assert_eq!(percentile(&mut [3.0], 0.99), Some(3.0));
        assert_eq!(percentile(&mut [], 0.5), None);
    }
}
