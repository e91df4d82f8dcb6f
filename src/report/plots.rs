//! The report's charts: latency over time (p50 and p99 per operation kind,
//! per time bucket, log scale) and throughput (completions per second by
//! outcome, and successful acquires), each with the fault bands.

use super::summary::percentile;
use super::svg::{render, Chart, Series};
use super::timeline::{LaneKind, Outcome, Timeline};
use crate::check::lock::LockFun;

/// How many time buckets a chart has (fewer for very short runs).
const BUCKETS: usize = 120;
pub(super) const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

struct Buckets {
    n: usize,
    width_ns: f64,
}

impl Buckets {
    fn new(t: &Timeline) -> Buckets {
        let n = BUCKETS.min((t.intervals.len() / 4).max(10));
        Buckets {
            n,
            width_ns: (t.end_ns.max(1) as f64) / n as f64,
        }
    }
    fn of(&self, ns: u64) -> usize {
        ((ns as f64 / self.width_ns) as usize).min(self.n - 1)
    }
    fn mid_s(&self, i: usize) -> f64 {
        (i as f64 + 0.5) * self.width_ns / 1e9
    }
}

/// The client operation kinds with the most completions, at most six.
fn top_fs(t: &Timeline) -> Vec<u32> {
    let mut count = vec![0usize; t.fs.len()];
    for iv in &t.intervals {
        if t.lanes[iv.lane as usize].kind != LaneKind::Nemesis && iv.end.is_some() {
            count[iv.f as usize] += 1;
        }
    }
    let mut fs: Vec<u32> = (0..t.fs.len() as u32)
        .filter(|&f| count[f as usize] > 0)
        .collect();
    fs.sort_by_key(|&f| std::cmp::Reverse(count[f as usize]));
    fs.truncate(3);
    fs.sort_by_key(|&f| t.fs[f as usize].clone());
    fs
}

/// Latency over time: for the three commonest op kinds, p50 (solid) and
/// p99 (dashed) of ok/fail completions per bucket.
pub fn latency_chart(t: &Timeline) -> String {
    let b = Buckets::new(t);
    let fs = top_fs(t);
    let mut series = vec![];
    for (k, &f) in fs.iter().enumerate() {
        let mut per: Vec<Vec<f64>> = vec![vec![]; b.n];
        for iv in t
            .intervals
            .iter()
            .filter(|iv| iv.f == f && matches!(iv.outcome, Outcome::Ok | Outcome::Fail))
        {
            if let (Some(e), Some(l)) = (iv.end, iv.latency()) {
                per[b.of(e)].push(l as f64 / 1e6);
            }
        }
        let name = &t.fs[f as usize];
        for (p, dashed, label) in [(0.5, false, "p50"), (0.99, true, "p99")] {
            let points = per
                .iter_mut()
                .enumerate()
                .map(|(i, v)| (b.mid_s(i), percentile(v, p).unwrap_or(f64::NAN)))
                .collect();
            series.push(Series {
                name: format!("{name} {label}"),
                color: COLORS[k],
                dashed,
                points,
            });
        }
    }
    render(&Chart {
        title: "Latency over time (ok and fail completions)",
        y_unit: "ms",
        log_y: true,
        x_max: t.end_ns as f64 / 1e9,
        series,
        bands: &t.bands,
    })
}

/// Throughput: client completions per second by outcome, and acquires.
pub fn throughput_chart(t: &Timeline) -> String {
    let b = Buckets::new(t);
    let mut counts = vec![[0u64; 4]; b.n];
    // Grants: acquires and won campaigns.
    let grant: Vec<bool> =
        t.fs.iter()
            .map(|f| LockFun::parse(f) == Some(LockFun::Acquire))
            .collect();
    for iv in &t.intervals {
        if t.lanes[iv.lane as usize].kind == LaneKind::Nemesis {
            continue;
        }
        let Some(e) = iv.end else { continue };
        let c = &mut counts[b.of(e)];
        c[iv.outcome as usize] += 1;
        if grant[iv.f as usize] && iv.outcome == Outcome::Ok {
            c[3] += 1;
        }
    }
    let per_s = b.width_ns / 1e9;
    let line = |k: usize, name: &str, color, dashed| Series {
        name: name.into(),
        color,
        dashed,
        points: counts
            .iter()
            .enumerate()
            .map(|(i, c)| (b.mid_s(i), c[k] as f64 / per_s))
            .collect(),
    };
    let mut series = vec![
        line(0, "ok", "#2ca02c", false),
        line(1, "fail", "#d62728", false),
    ];
    series.push(line(2, "info", "#7f7f7f", false));
    if grant.iter().any(|g| *g) {
        series.push(line(3, "acquired", "#1f77b4", true));
    }
    render(&Chart {
        title: "Throughput (completions per second)",
        y_unit: "/s",
        log_y: false,
        x_max: t.end_ns as f64 / 1e9,
        series,
        bands: &t.bands,
    })
}
