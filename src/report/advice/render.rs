//! The lease-advice box as text (`lockjaw advise`), Markdown (summary.md)
//! and HTML (report.html): the same rows and sentences in each.

use super::Advice;
use crate::report::html::esc;

/// The sentence every box ends with.
pub const UNBOUNDED: &str = "No lease length is safe without fencing when pauses are unbounded: \
     a holder paused longer than any lease wakes up believing it still holds the lock, so only a \
     fencing token checked by the resource stops its late writes.";

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// (part, value, how it was measured) per row.
fn rows(a: &Advice) -> Vec<(&'static str, String, String)> {
    let val = |v: Option<f64>| v.map_or("not measured".to_string(), |v| format!("{} ms", num(v)));
    let mut r = vec![
        (
            "acquire round trip",
            val(a.acquire.ms),
            a.acquire.how.clone(),
        ),
        (
            "critical section",
            val(a.critical_section.ms),
            a.critical_section.how.clone(),
        ),
    ];
    if a.renews {
        r.push((
            "renew interval",
            val(a.renew_interval.ms),
            a.renew_interval.how.clone(),
        ));
        r.push((
            "renew round trip",
            val(a.renew_rtt.ms),
            a.renew_rtt.how.clone(),
        ));
    } else {
        r.push((
            "renewals",
            "none".into(),
            "the run did not renew its leases".into(),
        ));
    }
    r.push(("pause budget", val(a.pause.ms), a.pause.how.clone()));
    r.push((
        "clock drift ρ, error ε",
        format!("{}, {} ms", a.drift, num(a.epsilon_ms)),
        "as the checker used them (the history's meta record, else the defaults)".into(),
    ));
    let failover = match a.failover {
        Some((median, max, n)) => format!("{} ms max ({} ms median, {n})", num(max), num(median)),
        None => "not measured".into(),
    };
    r.push((
        "failover after a holder fault",
        failover,
        "time without a holder after each fault aimed at one (results.json failover.from_fault)"
            .into(),
    ));
    r
}

/// The sentences under the rows: the rule with its numbers, the verdict,
/// the failover cost, the limit.
fn sentences(a: &Advice) -> Vec<String> {
    let fmt = |v: Option<f64>| v.map_or("?".to_string(), num);
    let mut terms = vec![fmt(a.acquire.ms), fmt(a.cs_term_ms)];
    if a.renews {
        terms.push(fmt(a.renew_interval.ms));
        terms.push(fmt(a.renew_rtt.ms));
    }
    terms.push(fmt(a.pause.ms));
    let mut rule = format!(
        "Recommended: lease > ({}) / (1 − {}) + {} = {} ms",
        terms.join(" + "),
        a.drift,
        num(a.epsilon_ms),
        num(a.bound_ms)
    );
    if a.renews {
        rule.push_str(
            " (with renewals the critical-section term is min(critical section, renew interval): \
             only the part between two proofs of the lease is at risk)",
        );
    }
    rule.push('.');
    if !a.missing.is_empty() {
        rule.push_str(&format!(
            " Not measured, so counted as 0: {}; the bound is at least this.",
            a.missing.join(", ")
        ));
    }
    let verdict = format!(
        "Verdict: the run's lease of {} ms {} the recommended bound of {} ms{}.",
        num(a.lease_ms),
        if a.met { "met" } else { "did not meet" },
        num(a.bound_ms),
        if a.missing.is_empty() {
            ""
        } else {
            " (a partial bound)"
        }
    );
    let failover = format!(
        "Failover: a crashed holder blocks the lock for up to one lease ({} ms) before another \
         worker can take it; a longer lease buys safety margin at that cost.",
        num(a.lease_ms)
    );
    vec![rule, verdict, failover, UNBOUNDED.to_string()]
}

/// The box as plain text (for a terminal).
pub fn text(title: &str, a: &Advice) -> String {
    let mut o = format!("lease advice: {title}\n  lease: {} ms\n", num(a.lease_ms));
    for (name, v, how) in rows(a) {
        o.push_str(&format!("  {name:<30} {v:>16}  {how}\n"));
    }
    for s in sentences(a) {
        o.push_str(&format!("  {s}\n"));
    }
    o
}

/// The box as a summary.md section.
pub fn markdown(a: &Advice) -> String {
    let mut o = format!(
        "## Lease advice\n\nThe run's lease: **{} ms**.\n\n| part | value | how it was measured |\n|---|---:|---|\n",
        num(a.lease_ms)
    );
    for (name, v, how) in rows(a) {
        o.push_str(&format!("| {name} | {v} | {} |\n", how.replace('|', "\\|")));
    }
    o.push('\n');
    for s in sentences(a) {
        o.push_str(&format!("{s}\n\n"));
    }
    o
}

/// The box as a report.html section.
pub fn html(a: &Advice) -> String {
    let mut h = format!(
        r#"<section id="lease-advice"><h2>Lease advice</h2><p>The run's lease: <b>{} ms</b>.</p><table class="t"><tr><th>part</th><th>value</th><th>how it was measured</th></tr>"#,
        num(a.lease_ms)
    );
    for (name, v, how) in rows(a) {
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            esc(&v),
            esc(&how)
        ));
    }
    h.push_str("</table>");
    for s in sentences(a) {
        h.push_str(&format!("<p>{}</p>", esc(&s)));
    }
    h.push_str("</section>");
    h
}
