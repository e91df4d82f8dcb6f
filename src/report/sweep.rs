//! Sweep tables: the rate of each anomaly kind per landed injection
//! against a varied fault or workload parameter, per system, as sweep.md,
//! sweep.html (self-contained, with one SVG plot per system) and
//! sweep.json; and `--find-boundary`'s result as one sentence.
//!
//! Planning and running a sweep is the runner's job
//! (`crate::runner::sweep`); this module only renders.

use super::html::esc;
use super::trials::{kind_label, pct, Rate, Tally, ANY};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The varied parameter, and what it means for the axis and the sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// `duration_leases`, `offset_ms`, `latency_ms`, `hold_ms` or `ttl_ms`.
    pub param: String,
    /// The nemesis's fault (`pause-holder`, `clock-jump`, ...).
    pub fault: String,
    /// The workload's lease (with `--ttl-ms`); the varied value when the
    /// sweep varies `ttl_ms`.
    pub ttl_ms: u64,
}

impl Axis {
    pub fn unit(&self) -> &'static str {
        if self.param == "duration_leases" {
            "leases"
        } else {
            "ms"
        }
    }

    /// Where the plot marks one lease: x = 1 for `duration_leases`, the
    /// lease in ms for the other ms parameters, none for `ttl_ms`.
    pub fn lease_mark(&self) -> Option<f64> {
        match self.param.as_str() {
            "duration_leases" => Some(1.0),
            "ttl_ms" => None,
            _ => Some(self.ttl_ms as f64),
        }
    }

    /// A value in leases (None for `ttl_ms`, which is the lease).
    pub fn leases(&self, v: f64) -> Option<f64> {
        match self.param.as_str() {
            "duration_leases" => Some(v),
            "ttl_ms" => None,
            _ => (self.ttl_ms > 0).then(|| v / self.ttl_ms as f64),
        }
    }

    /// What the value measures, e.g. "a clock jump".
    pub fn what(&self) -> String {
        match (self.param.as_str(), self.fault.as_str()) {
            ("duration_leases", "pause-holder") => "a holder pause".into(),
            ("duration_leases", "partition-holder") => "a holder partition".into(),
            ("duration_leases", f) => format!("a {f} fault"),
            ("offset_ms", "clock-strobe") => "a clock strobe".into(),
            ("offset_ms", _) => "a clock jump".into(),
            ("latency_ms", _) => "an added latency".into(),
            ("hold_ms", _) => "a critical section".into(),
            _ => "a lease".into(),
        }
    }

    /// The x axis' label.
    pub fn label(&self) -> String {
        format!("{} ({}, {})", self.what(), self.param, self.unit())
    }

    /// `lo`-`hi` in leases and in the parameter's own unit.
    pub fn span(&self, lo: f64, hi: f64) -> String {
        let n = num;
        match (self.leases(lo), self.leases(hi), self.param.as_str()) {
            (Some(a), Some(b), "duration_leases") => format!(
                "{}-{} leases ({}-{} ms at a {} ms lease)",
                n(a),
                n(b),
                n(lo * self.ttl_ms as f64),
                n(hi * self.ttl_ms as f64),
                self.ttl_ms
            ),
            (Some(a), Some(b), _) => format!("{}-{} leases ({}-{} ms)", n(a), n(b), n(lo), n(hi)),
            _ => format!("{}-{} ms", n(lo), n(hi)),
        }
    }
}

/// A number for a sentence: at most two decimals, whole ones bare.
pub fn num(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A table's value: up to four decimals, whole numbers bare.
fn value_text(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A probe's side of 50 %.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    Above,
    Below,
}

/// One probe of a bisection: its value, runs and rate; no side when it
/// stayed undecided.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeRecord {
    pub value: f64,
    pub runs: u32,
    pub rate: Rate,
    pub side: Option<Side>,
}

/// What `--find-boundary` found.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Found {
    /// The rate crosses 50 % between `lo` and `hi`.
    Bracket { lo: f64, hi: f64 },
    /// Both ends lie on the same side of 50 %.
    NoCrossing {
        from: f64,
        to: f64,
        from_rate: Rate,
        to_rate: Rate,
    },
    /// The rate at `at` could not be told from 50 % within the run cap;
    /// the crossing lies in `lo`..`hi` as far as the decided probes say.
    Undecided { at: f64, lo: f64, hi: f64 },
    /// A run failed or the sweep was interrupted.
    Stopped { lo: f64, hi: f64, error: String },
}

/// A system's boundary search.
#[derive(Clone, Debug, Serialize)]
pub struct Boundary {
    pub kind: String,
    pub found: Found,
    pub probes: Vec<ProbeRecord>,
    pub runs: u32,
    pub sentence: String,
}

/// The sentence that reports a search, e.g. "redlock: two holders at 50 %
/// from a clock jump of 0.94-1.02 leases (1880-2040 ms) (46 runs)".
pub fn sentence(system: &str, axis: &Axis, kind: &str, found: &Found, runs: u32) -> String {
    let k = kind_label(kind);
    let what = axis.what();
    match found {
        Found::Bracket { lo, hi } => format!(
            "{system}: {k} at 50 % from {what} of {} ({runs} runs)",
            axis.span(*lo, *hi)
        ),
        Found::NoCrossing {
            from,
            to,
            from_rate,
            to_rate,
        } => format!(
            "{system}: {k} does not cross 50 % in {}: {} at {}, {} at {} ({runs} runs)",
            axis.span(*from, *to),
            from_rate.text(),
            num(*from),
            to_rate.text(),
            num(*to)
        ),
        Found::Undecided { at, lo, hi } => format!(
            "{system}: {k} at {what} of {} {} is indistinguishable from 50 % within the run cap; the crossing lies in {} ({runs} runs)",
            num(*at),
            axis.unit(),
            axis.span(*lo, *hi)
        ),
        Found::Stopped { lo, hi, error } => format!(
            "{system}: the search for {k} stopped ({error}) with the crossing in {} ({runs} runs)",
            axis.span(*lo, *hi)
        ),
    }
}

/// One value of a system's sweep: its runs' tally.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub value: f64,
    pub tally: Tally,
    /// The rate of every kind the tables show (`any` included).
    pub rates: BTreeMap<String, Rate>,
    /// The runs' report.html, relative to the sweep's directory.
    pub reports: Vec<String>,
    /// A run of this value failed: the rows' figures hold the runs before it.
    pub error: Option<String>,
}

/// One system's sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SystemSweep {
    pub system: String,
    pub rows: Vec<Row>,
    pub boundary: Option<Boundary>,
}

/// A whole sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    pub title: String,
    pub nemesis: String,
    pub axis: Axis,
    /// The kinds the tables show, `any` last.
    pub kinds: Vec<String>,
    pub systems: Vec<SystemSweep>,
    pub interrupted: bool,
}

impl Sweep {
    /// A sweep over `systems`, with the kinds seen in any row (and `also`,
    /// the searched kind) as columns, and each row's rates filled in.
    pub fn new(
        title: String,
        nemesis: String,
        axis: Axis,
        mut systems: Vec<SystemSweep>,
        also: Option<&str>,
        interrupted: bool,
    ) -> Sweep {
        let mut kinds: Vec<String> = vec![];
        let seen = systems
            .iter()
            .flat_map(|s| s.rows.iter().flat_map(|r| r.tally.kinds()));
        for k in seen.chain(also.filter(|k| *k != ANY)) {
            if !kinds.iter().any(|x| x == k) {
                kinds.push(k.to_string());
            }
        }
        kinds.sort_by_key(|k| super::trials::KINDS.iter().position(|x| x == k));
        kinds.push(ANY.to_string());
        for s in &mut systems {
            s.rows.sort_by(|a, b| a.value.total_cmp(&b.value));
            for r in &mut s.rows {
                r.rates = kinds.iter().map(|k| (k.clone(), r.tally.rate(k))).collect();
            }
        }
        Sweep {
            title,
            nemesis,
            axis,
            kinds,
            systems,
            interrupted,
        }
    }
}

/// A rate cell: "2 of 4: 50 % [15 %, 85 %]".
fn rate_cell(r: &Rate) -> String {
    match r.rate() {
        None => "0 of 0".into(),
        Some(x) => format!(
            "{} of {}: {} [{}, {}]",
            r.k,
            r.n,
            pct(x),
            pct(r.lo),
            pct(r.hi)
        ),
    }
}

fn header(s: &Sweep) -> Vec<String> {
    let mut h = vec![
        format!("{} ({})", s.axis.param, s.axis.unit()),
        "runs".into(),
        "landed injections".into(),
    ];
    h.extend(s.kinds.iter().map(|k| kind_label(k).to_string()));
    h.extend(["anomalies".into(), "runs with any anomaly".into()]);
    h
}

fn cells(s: &Sweep, r: &Row) -> Vec<String> {
    let t = &r.tally;
    let mut c = vec![
        value_text(r.value),
        t.runs.to_string(),
        format!("{} of {}", t.landed, t.injections),
    ];
    c.extend(s.kinds.iter().map(|k| rate_cell(&r.rates[k])));
    c.push(t.anomalies.values().sum::<u64>().to_string());
    c.push(format!("{} of {}", t.runs_with_anomaly, t.runs));
    if let Some(e) = &r.error {
        c[1] = format!("{} (stopped: {e})", t.runs);
    }
    c
}

/// One system's table as Markdown.
pub fn table_md(s: &Sweep, sys: &SystemSweep) -> String {
    let h = header(s);
    let mut m = format!("| {} |\n|{}\n", h.join(" | "), "---:|".repeat(h.len()));
    for r in &sys.rows {
        let _ = writeln!(m, "| {} |", cells(s, r).join(" | "));
    }
    m
}

const NOTE: &str = "A trial is a landed injection (a fault that struck a holder inside its critical section, or the node it targeted); it counts for a kind when at least one anomaly of that kind is attributed to it (the anomaly's latest witness op lies between the injection's start and its stop plus two leases). Rates with their 95 % Wilson interval.";

/// sweep.md.
pub fn sweep_md(s: &Sweep) -> String {
    let mut m = format!("# {}\n\n", s.title);
    if s.interrupted {
        m.push_str("Interrupted: the tables hold the runs that finished.\n\n");
    }
    for sys in &s.systems {
        let _ = writeln!(m, "## {}\n", sys.system);
        if let Some(b) = &sys.boundary {
            let _ = writeln!(m, "**{}**\n", b.sentence);
        }
        m.push_str(&table_md(s, sys));
        m.push('\n');
    }
    let _ = writeln!(m, "{NOTE}");
    m
}

/// sweep.html: the tables and one plot per system, self-contained.
pub fn sweep_html(s: &Sweep) -> String {
    let mut h = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{t}</title><style>{css}
svg.sweep {{ max-width: 760px; }}</style></head><body><h1>{t}</h1>"#,
        t = esc(&s.title),
        css = include_str!("assets/report.css")
    );
    if s.interrupted {
        h.push_str("<p><b>Interrupted</b>: the tables hold the runs that finished.</p>");
    }
    for sys in &s.systems {
        let _ = write!(
            h,
            r#"<section class="system" data-system="{n}"><h2>{n}</h2>"#,
            n = esc(&sys.system)
        );
        if let Some(b) = &sys.boundary {
            let _ = write!(h, r#"<p class="boundary"><b>{}</b></p>"#, esc(&b.sentence));
        }
        h.push_str(&super::sweep_plot::render(s, sys));
        h.push_str(r#"<table class="t sweep"><tr>"#);
        for c in header(s) {
            let _ = write!(h, "<th>{}</th>", esc(&c));
        }
        h.push_str("<th>reports</th></tr>");
        for r in &sys.rows {
            h.push_str("<tr>");
            for c in cells(s, r) {
                let _ = write!(h, "<td>{}</td>", esc(&c));
            }
            let links: Vec<String> = r
                .reports
                .iter()
                .enumerate()
                .map(|(i, p)| format!(r#"<a href="{}">{}</a>"#, esc(p), i + 1))
                .collect();
            let _ = write!(h, "<td>{}</td></tr>", links.join(" "));
        }
        h.push_str("</table></section>");
    }
    let _ = write!(h, r#"<p class="note">{}</p></body></html>"#, esc(NOTE));
    h
}

/// Write sweep.md, sweep.html and sweep.json into `out`.
pub fn write_sweep(out: &Path, s: &Sweep) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("sweep.md"), sweep_md(s))?;
    std::fs::write(out.join("sweep.html"), sweep_html(s))?;
    let json = serde_json::to_string_pretty(s).map_err(std::io::Error::other)?;
    std::fs::write(out.join("sweep.json"), json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(param: &str, fault: &str) -> Axis {
        Axis {
            param: param.into(),
            fault: fault.into(),
            ttl_ms: 2000,
        }
    }

    #[test]
    fn sentences_give_leases_and_the_parameters_unit() {
        let a = axis("offset_ms", "clock-jump");
        let s = sentence(
            "redlock",
            &a,
            "two-holders",
            &Found::Bracket {
                lo: 1880.0,
                hi: 2040.0,
            },
            46,
        );
        assert_eq!(
            s,
            "redlock: two holders at 50 % from a clock jump of 0.94-1.02 leases (1880-2040 ms) (46 runs)"
        );
        let a = axis("duration_leases", "pause-holder");
        let s = sentence(
            "redis",
            &a,
            "stale-writes",
            &Found::NoCrossing {
                from: 0.5,
                to: 0.75,
                from_rate: Rate::new(0, 6),
                to_rate: Rate::new(0, 6),
            },
            4,
        );
        assert!(
            s.contains("does not cross 50 % in 0.5-0.75 leases (1000-1500 ms"),
            "{s}"
        );
    }

    #[test]
    fn tables_show_every_kind_seen_and_any() {
        let tally = Tally {
            runs: 2,
            landed: 4,
            injections: 5,
            any: Rate::new(1, 4),
            per_kind: [("stale-writes".to_string(), Rate::new(1, 4))].into(),
            ..Tally::default()
        };
        let row = |value| Row {
            value,
            tally: tally.clone(),
            rates: BTreeMap::new(),
            reports: vec!["runs/x/report.html".into()],
            error: None,
        };
        let s = Sweep::new(
            "t".into(),
            "pause-holder".into(),
            axis("duration_leases", "pause-holder"),
            vec![SystemSweep {
                system: "redis".into(),
                rows: vec![row(2.0), row(0.3), row(1.25)],
                boundary: None,
            }],
            Some("two-holders"),
            false,
        );
        assert_eq!(s.kinds, ["two-holders", "stale-writes", "any"]);
        let md = sweep_md(&s);
        assert!(
            md.contains("| 0.3 | 2 | 4 of 5 | 0 of 4: 0 % [0 %, 49 %] | 1 of 4: 25 %"),
            "{md}"
        );
        assert!(md.contains("\n| 1.25 | 2 |"), "{md}");
        let html = sweep_html(&s);
        assert!(
            html.contains("<svg") && html.contains("runs/x/report.html"),
            "{html}"
        );
    }
}
