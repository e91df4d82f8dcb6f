//! report.html: one self-contained page (inline CSS, script, SVG and data;
//! no network): verdicts with counts, anomalies linked to their witness
//! ops, the timeline (drawn by the inline script from embedded JSON), the
//! linearizability counterexample, latency and throughput charts, and the
//! run's parameters.

use super::anomaly::Anomaly;
use super::summary::{RunSummary, SideVerdict};
use super::timeline::Timeline;
use super::{embed, linear, plots};
use crate::check::Validity;
use serde_json::Value;
use std::fmt::Write as _;

const CSS: &str = include_str!("assets/report.css");
const JS: &str = include_str!("assets/report.js");

/// Catches script errors into `#lj-errors` (and the console), so a
/// headless browser's DOM dump shows them.
const ERROR_HOOK: &str = r#"window.__ljErrors=[];function __ljErr(m){window.__ljErrors.push(String(m));var e=document.getElementById("lj-errors");if(e){e.textContent=window.__ljErrors.join("\n");e.hidden=false;}}
window.addEventListener("error",function(ev){__ljErr("error: "+ev.message+" (line "+ev.lineno+")");});
window.addEventListener("unhandledrejection",function(ev){__ljErr("unhandled rejection: "+ev.reason);});
(function(){var ce=console.error;console.error=function(){__ljErr(Array.prototype.join.call(arguments," "));ce.apply(console,arguments);};})();
document.addEventListener("DOMContentLoaded",function(){if(window.__ljErrors.length)__ljErr("(earlier errors)");});"#;

/// Escape text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A verdict as a coloured badge.
pub fn badge(v: Validity, applicable: bool) -> String {
    let (class, word) = match (v, applicable) {
        (Validity::True, false) => ("v-na", "valid (not applicable)"),
        (Validity::True, _) => ("v-valid", "valid"),
        (Validity::False, _) => ("v-invalid", "invalid"),
        (Validity::Unknown, _) => ("v-unknown", "unknown"),
    };
    format!(r#"<span class="badge {class}">{word}</span>"#)
}

fn side_badge(s: &Option<SideVerdict>) -> String {
    s.map_or_else(|| "—".to_string(), |s| badge(s.valid, s.applicable))
}

fn verdicts(s: &RunSummary, results: &Value) -> String {
    let mut h = String::from(r#"<section id="verdicts"><h2>Verdicts</h2><table class="t">"#);
    let _ = write!(
        h,
        "<tr><th>overall</th><td>{}</td></tr>",
        badge(s.overall, true)
    );
    if s.service.is_some() || s.resource.is_some() {
        let _ = write!(
            h,
            "<tr><th>service (the lock service's guarantees)</th><td>{}</td></tr>",
            side_badge(&s.service)
        );
        let _ = write!(
            h,
            "<tr><th>resource (damage to the protected storage)</th><td>{}</td></tr>",
            side_badge(&s.resource)
        );
    }
    if let Some(l) = s.linearizable {
        let _ = write!(
            h,
            "<tr><th>linearizable</th><td>{}</td></tr>",
            badge(l, true)
        );
    }
    h.push_str("</table>");
    if !s.checks.is_empty() {
        h.push_str(r#"<table class="t" id="checks"><tr><th>side</th><th>check</th><th>verdict</th><th>found</th><th>counts</th><th>note</th></tr>"#);
        for c in &s.checks {
            let counts: Vec<String> = c
                .counts
                .iter()
                .map(|(k, v)| format!("{} {v}", esc(k)))
                .collect();
            let _ = write!(
                h,
                r#"<tr><td>{}</td><td>{}</td><td>{}</td><td class="num">{}</td><td>{}</td><td>{}</td></tr>"#,
                esc(&c.side),
                esc(&c.name),
                badge(c.valid, c.applicable),
                c.count,
                counts.join(", "),
                esc(c.note.as_deref().unwrap_or(""))
            );
        }
        h.push_str("</table>");
    }
    let _ = write!(
        h,
        r#"<p>Storage requests refused for a stale fence: {} write(s), {} read(s).{}{}</p>"#,
        s.stale_writes_rejected,
        s.stale_reads_rejected,
        match (s.stale_holders, s.possibly_stale) {
            (Some(a), Some(b)) => format!(
                " Stale holders (information): {a} certain, {b} not decidable from the history."
            ),
            _ => String::new(),
        },
        esc(&s.guard_sentence())
    );
    h.push_str(&faults(s));
    for n in results
        .get("notes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let _ = write!(
            h,
            r#"<p class="note">note: {}</p>"#,
            esc(n.as_str().unwrap_or_default())
        );
    }
    h.push_str("</section>");
    h
}

fn faults(s: &RunSummary) -> String {
    let mut h = String::new();
    if let Some(f) = s.faults {
        let _ = write!(h, "<p>Faults injected: {f}");
        if let Some((inside, judged)) = s.landed_inside {
            let _ = write!(
                h,
                "; {inside} of {judged} landed inside the critical section"
            );
        }
        if s.not_started > 0 {
            let _ = write!(
                h,
                "; {} more not started (the run ended first)",
                s.not_started
            );
        }
        if !s.reacquire_after_kill_ms.is_empty() {
            let g: Vec<String> = s
                .reacquire_after_kill_ms
                .iter()
                .map(|x| format!("{x:.0} ms"))
                .collect();
            let _ = write!(
                h,
                "; re-acquired after each holder crash in {}",
                g.join(", ")
            );
        }
        h.push_str(".</p>");
    }
    if let Some(r) = s.rates_sentence() {
        let _ = write!(
            h,
            r#"<p class="rates">{} (95 % Wilson intervals).</p>"#,
            esc(&r)
        );
    }
    if let Some(e) = &s.checker_error {
        let _ = write!(h, r#"<p class="note">checker error: {}</p>"#, esc(e));
    }
    if let Some(v) = &s.run_verdict {
        let _ = write!(h, r#"<p class="note">run verdict: {}</p>"#, esc(&v.line()));
        for w in &v.warnings {
            let _ = write!(h, r#"<p class="note">warning: {}</p>"#, esc(w));
        }
    }
    h
}

/// Op indexes as links that focus the timeline on them.
pub fn op_links(ops: &[u64]) -> String {
    ops.iter()
        .map(|i| format!(r##"<a class="oplink" href="#op-{i}" data-op="{i}">#{i}</a>"##))
        .collect()
}

fn anomalies(s: &RunSummary) -> String {
    let mut h = String::from(r#"<section id="anomalies"><h2>Anomalies</h2>"#);
    let (info, found): (Vec<_>, Vec<_>) = s
        .anomalies
        .iter()
        .enumerate()
        .partition(|(_, a)| a.side == "information");
    if found.is_empty() {
        h.push_str("<p>None found.</p>");
    } else {
        h.push_str(r#"<p class="note">Click an anomaly to zoom the timeline to its witness ops and list them; click an op index to show that op.</p><ol class="anoms">"#);
        for (i, a) in found {
            h.push_str(&anomaly_item(i, a));
        }
        h.push_str("</ol>");
    }
    if !info.is_empty() {
        let _ = write!(
            h,
            r#"<details class="anoms-info"><summary>Information, not a verdict: {} stale-holder overlap(s) listed</summary><ol class="anoms">"#,
            info.len()
        );
        for (i, a) in info {
            h.push_str(&anomaly_item(i, a));
        }
        h.push_str("</ol></details>");
    }
    let capped = |c: &&super::anomaly::CheckRow| {
        c.count as usize > c.witnesses && c.witnesses >= crate::check::lock::MAX_WITNESSES
    };
    for c in s.checks.iter().filter(capped) {
        let _ = write!(
            h,
            r#"<p class="note">{}: {} found, results.json lists the first {} (the counts cover all).</p>"#,
            esc(&c.name),
            c.count,
            c.witnesses
        );
    }
    h.push_str("</section>");
    h
}

fn anomaly_item(i: usize, a: &Anomaly) -> String {
    format!(
        r##"<li class="side-{side}" id="anom-{i}"><span class="tag">[{side} · {check}]</span><a class="anom-link" href="#anom-{i}" data-anom="{i}">{text}</a> <span class="note">ops:</span>{ops}</li>"##,
        side = esc(&a.side),
        check = esc(&a.check),
        text = esc(&a.text),
        ops = op_links(&a.ops)
    )
}

fn timeline(t: &Timeline) -> String {
    let mut h = String::from(
        r#"<section id="timeline"><h2>Timeline</h2><div class="controls"><button data-act="fit">fit all</button><button data-act="in">zoom in</button><button data-act="out">zoom out</button><button data-act="left">◀</button><button data-act="right">▶</button><span class="range" id="tl-range"></span><span class="note">wheel: zoom · drag: pan · click an op for its details</span></div>"#,
    );
    h.push_str(r#"<div class="legend">holds<span class="sw" style="background:#84caff"></span>lock held (label: fence)<span class="sw" style="background:#fecdca"></span>held past its lease end | lease end ≈ latest refresh sent + lease_ms<span class="sw" style="background:#b2ddff"></span>acquire<span class="sw" style="background:#d9d6fe"></span>release<span class="sw" style="background:#99f6e0"></span>renew<span class="sw" style="background:#eaecf0"></span>failed (e.g. lock held)<span class="sw" style="background:#32d583"></span>write accepted<span class="sw" style="background:#a6f4c5"></span>read accepted<span class="sw" style="background:#f97066"></span>rejected (stale fence, ✕)<span class="sw" style="background:#d0d5dd"></span>indeterminate<span class="sw" style="background:#f7900955"></span>fault period · red outline: witness of an anomaly</div>"#);
    h.push_str(r#"<div id="overview"></div><div class="tl"><div class="tl-labels">"#);
    for l in &t.lanes {
        let procs = l.processes.join(" ");
        let _ = write!(
            h,
            r#"<div class="lane-label" data-lane="{}" data-kind="{}" data-processes="{}" title="processes: {}">{}<small>{}</small></div>"#,
            esc(&l.id),
            l.kind.as_str(),
            esc(&procs),
            esc(&procs),
            esc(&l.label),
            esc(&l.processes.join(", "))
        );
    }
    h.push_str(
        r#"</div><div class="tl-plot" id="tl-plot"></div></div><div id="details"></div></section>"#,
    );
    h
}

fn run_section(s: &RunSummary) -> String {
    let mut h = String::from(r#"<section id="run"><h2>Run</h2><p>Reproduce:</p>"#);
    let _ = write!(h, r#"<pre class="cmd">{}</pre>"#, esc(&s.command));
    if let Some(n) = super::summary::secret_note(&s.command) {
        let _ = write!(h, "<p>{}</p>", esc(n));
    }
    if let Some(l) = super::markdown::shrunk(&s.dir) {
        let _ = write!(
            h,
            r#"<p>A smaller command that reproduces it: <a href="{l}">{l}</a> (<code>lockjaw shrink</code>)</p>"#
        );
    }
    h.push_str(r#"<p>Re-check the attached history: <code>lockjaw check history.jsonl</code></p><table class="t">"#);
    for (k, v) in &s.versions {
        let _ = write!(
            h,
            "<tr><th>version: {}</th><td>{}</td></tr>",
            esc(k),
            esc(v)
        );
    }
    for (k, v) in &s.params {
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    let _ = write!(
        h,
        "<tr><th>history</th><td>{} op lines over {:.3} s; {} acquire attempts, {} acquisitions</td></tr></table></section>",
        s.op_lines,
        s.duration_ns as f64 / 1e9,
        s.acquire_attempts,
        s.acquisitions
    );
    h
}

/// The whole page; `witness_histories` is the section of the run's
/// witness files ([`super::witness::html`]), empty without them.
pub fn page(s: &RunSummary, t: &Timeline, results: &Value, witness_histories: &str) -> String {
    let title = s.title();
    let mut h = String::with_capacity(64 * 1024 + t.intervals.len() * 80);
    let _ = write!(
        h,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>lockjaw report: {}</title><style>{CSS}</style><script>{ERROR_HOOK}</script></head><body><pre id="lj-errors" hidden></pre>"#,
        esc(&title)
    );
    let _ = write!(
        h,
        r#"<header><h1>lockjaw report: {}</h1><p class="sub">overall {} · {} op lines · {:.1} s</p></header>"#,
        esc(&title),
        badge(s.overall, true),
        s.op_lines,
        s.duration_ns as f64 / 1e9
    );
    h.push_str(&verdicts(s, results));
    h.push_str(&anomalies(s));
    h.push_str(witness_histories);
    if let Some(l) = &s.liveness {
        h.push_str(&liveness(l));
    }
    if let Some(a) = &s.advice {
        h.push_str(&super::advice::html(a));
    }
    h.push_str(&timeline(t));
    if let Some(v) = super::anomaly::violation(results) {
        h.push_str(&linear::section(v));
    }
    let _ = write!(
        h,
        r#"<section id="charts"><h2>Latency and throughput</h2>{}{}<p class="note">Shaded: fault periods. Latency on a log scale, per time bucket.</p></section>"#,
        plots::latency_chart(t),
        plots::throughput_chart(t)
    );
    h.push_str(&run_section(s));
    let _ = write!(
        h,
        r#"<footer class="note">Generated by lockjaw {} (<code>lockjaw report DIR</code> rebuilds this page).</footer><script type="application/json" id="lj-data">{}</script><script>{JS}</script></body></html>"#,
        env!("CARGO_PKG_VERSION"),
        embed::timeline_json(t, &s.anomalies)
    );
    h
}

/// The liveness figures and their witnesses (information).
fn liveness(l: &crate::check::lock::Liveness) -> String {
    let item = |x: String| format!("<li>{}</li>", esc(&x));
    let figures: String = l.lines().into_iter().map(item).collect();
    let witnesses: String = l
        .witness_lines(crate::check::lock::MAX_WITNESSES)
        .into_iter()
        .map(item)
        .collect();
    format!(
        r#"<section id="liveness"><h2>Liveness</h2><p class="note">Information, never a verdict or the exit code.</p><ul>{figures}</ul><ol class="anoms">{witnesses}</ol></section>"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert!(op_links(&[3, 7]).contains(r#"data-op="7""#));
    }

    #[test]
    fn the_liveness_section_lists_each_figure_and_escapes_reasons() {
        use crate::check::lock::{Figure, Liveness, OrphanedRenewals, StuckLock};
        let l = Liveness {
            stuck_lock: Figure::Value(StuckLock {
                count: 2,
                epsilon_from: "op_timeout_ms".into(),
                ..StuckLock::default()
            }),
            zombie_time: Figure::NotApplicable {
                reason: "<no storage>".into(),
            },
            orphaned_renewals: Figure::Value(OrphanedRenewals::default()),
        };
        let h = liveness(&l);
        assert!(h.contains("stuck lock: 2 acquire(s)"), "{h}");
        assert!(
            h.contains("zombie time: not applicable (&lt;no storage&gt;)"),
            "{h}"
        );
        assert!(h.contains("orphaned renewals: 0 renewal(s)"), "{h}");
    }
}
