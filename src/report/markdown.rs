//! summary.md: a run, paste-ready for a bug report: system and versions,
//! the command that reproduces it (with its seed), the verdicts, the first
//! witnesses with op indexes, the witness histories (`super::witness`),
//! and how to re-check the attached history.
//! Deterministic: the same run directory always gives the same text.

use super::summary::{RunSummary, SideVerdict};
use crate::check::lock::MAX_WITNESSES;
use crate::check::Validity;
use std::fmt::Write as _;

/// How many witnesses per check the summary lists.
const PER_CHECK: usize = 3;

fn word(v: Validity, applicable: bool) -> &'static str {
    match (v, applicable) {
        (Validity::True, false) => "valid (not applicable)",
        (v, _) => v.as_str(),
    }
}

fn side(s: &Option<SideVerdict>) -> &'static str {
    s.map_or("—", |s| word(s.valid, s.applicable))
}

/// Escape a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn ms(v: Option<f64>) -> String {
    v.map_or("—".into(), |x| format!("{x:.1} ms"))
}

fn header(s: &RunSummary, o: &mut String) {
    let _ = writeln!(
        o,
        "# lockjaw: {}: {}\n",
        s.title(),
        s.overall.as_str().to_uppercase()
    );
    let mut line = format!("**Overall: {}**", s.overall.as_str());
    if s.service.is_some() || s.resource.is_some() {
        let _ = write!(
            line,
            " · service: {} · resource: {}",
            side(&s.service),
            side(&s.resource)
        );
    }
    if let Some(l) = s.linearizable {
        let _ = write!(line, " · linearizable: {}", l.as_str());
    }
    let _ = writeln!(o, "{line}\n");
    if let Some(v) = &s.run_verdict {
        let _ = writeln!(o, "Run verdict: {}\n", v.line());
        for w in &v.warnings {
            let _ = writeln!(o, "- warning: {w}");
        }
        if !v.warnings.is_empty() {
            let _ = writeln!(o);
        }
    }
    let _ = writeln!(o, "## System and versions\n");
    let q = |x: &Option<String>| x.clone().unwrap_or_else(|| "?".into());
    let fencing = s.fencing.map_or("?", |f| if f { "on" } else { "off" });
    let _ = writeln!(
        o,
        "- system: {}, workload: {}, nemesis: {}, fencing: {}, seed: {}",
        q(&s.system),
        q(&s.workload),
        q(&s.nemesis),
        fencing,
        q(&s.seed)
    );
    if !s.versions.is_empty() {
        let v: Vec<String> = s.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(o, "- versions: {}", v.join("; "));
    }
    let _ = writeln!(
        o,
        "- history: {} op lines over {:.1} s; {} acquisitions of {} attempts; acquire latency p50 {}, p99 {}",
        s.op_lines,
        s.duration_ns as f64 / 1e9,
        s.acquisitions,
        s.acquire_attempts,
        ms(s.acquire_p50_ms),
        ms(s.acquire_p99_ms)
    );
    if let Some(f) = s.faults {
        let inside = s
            .landed_inside
            .map(|(i, n)| format!(", {i} of {n} inside the critical section"))
            .unwrap_or_default();
        let cut = match s.not_started {
            0 => String::new(),
            k => format!("; {k} more not started (the run ended first)"),
        };
        let _ = writeln!(o, "- faults injected: {f}{inside}{cut}");
    }
    if let Some(r) = s.rates_sentence() {
        let _ = writeln!(o, "- {r} (95 % Wilson intervals)");
    }
    if let Some(e) = &s.checker_error {
        let _ = writeln!(o, "- checker error: {e}");
    }
    if let Some((median, max, n)) = s.failover_ms {
        let _ = writeln!(
            o,
            "- time without a holder after a fault aimed at it (failover): median {median:.0} ms, max {max:.0} ms over {n}"
        );
    }
    if !s.reacquire_after_kill_ms.is_empty() {
        let g: Vec<String> = s
            .reacquire_after_kill_ms
            .iter()
            .map(|x| format!("{x:.0} ms"))
            .collect();
        let _ = writeln!(
            o,
            "- re-acquired after each holder crash in: {}",
            g.join(", ")
        );
    }
    let _ = writeln!(o, "\n## Reproduce\n\n```sh\n{}\n```\n", s.command);
    if let Some(n) = super::summary::secret_note(&s.command) {
        let _ = writeln!(o, "{n}\n");
    }
    if let Some(l) = shrunk(&s.dir) {
        let _ = writeln!(
            o,
            "A smaller command that reproduces it: [{l}]({l}) (`lockjaw shrink`).\n"
        );
    }
}

/// `lockjaw shrink`'s steps of the run in `dir`, when it was shrunk.
pub fn shrunk(dir: &std::path::Path) -> Option<&'static str> {
    const SHRINK_MD: &str = "shrink/shrink.md";
    dir.join(SHRINK_MD).is_file().then_some(SHRINK_MD)
}

fn verdicts(s: &RunSummary, o: &mut String) {
    let _ = writeln!(o, "## Verdicts\n");
    if !s.checks.is_empty() {
        let _ = writeln!(
            o,
            "| side | check | verdict | found | counts |\n|---|---|---|---:|---|"
        );
        for c in &s.checks {
            let counts: Vec<String> = c.counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                c.side,
                cell(&c.name),
                word(c.valid, c.applicable),
                c.count,
                cell(&counts.join(", "))
            );
        }
        let _ = writeln!(o);
    }
    let _ = write!(
        o,
        "Storage requests refused for a stale fence: {} write(s), {} read(s).",
        s.stale_writes_rejected, s.stale_reads_rejected
    );
    if let (Some(a), Some(b)) = (s.stale_holders, s.possibly_stale) {
        let _ = write!(
            o,
            " Stale holders (information): {a} certain, {b} not decidable from the history."
        );
    }
    o.push_str(&s.guard_sentence());
    let _ = writeln!(o, "\n");
}

fn witnesses(s: &RunSummary, o: &mut String) {
    let mut shown: Vec<(&str, usize)> = vec![];
    let mut lines = vec![];
    for a in &s.anomalies {
        let n = match shown.iter_mut().find(|(c, _)| *c == a.check) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                shown.push((&a.check, 1));
                1
            }
        };
        // Stale holders are information: one example is enough here.
        if n > PER_CHECK || (a.side == "information" && n > 1) {
            continue;
        }
        let ops: Vec<String> = a.ops.iter().map(|i| format!("#{i}")).collect();
        let title = super::anomaly::check_title(&a.check).1;
        lines.push(format!(
            "- **{} / {}** (ops {}): {}",
            a.side,
            title,
            ops.join(", "),
            a.text
        ));
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(o, "## First witnesses\n\n{}\n", lines.join("\n"));
    // Witnesses left out: beyond the first few here, or beyond results.json's cap.
    let omitted: Vec<String> = s
        .checks
        .iter()
        .filter(|c| {
            c.witnesses > PER_CHECK
                || c.witnesses >= MAX_WITNESSES && c.count as usize > c.witnesses
        })
        .map(|c| {
            format!(
                "{}: {} found, the first {} listed",
                c.name,
                c.count,
                PER_CHECK.min(c.witnesses)
            )
        })
        .collect();
    if !omitted.is_empty() {
        let _ = writeln!(o, "({}; report.html lists them all.)\n", omitted.join("; "));
    }
}

/// The whole summary.md.
pub fn summary_md(s: &RunSummary) -> String {
    summary_md_with(s, "")
}

/// summary.md with the witness-histories section (issue 30;
/// [`super::witness::markdown`]) after the first witnesses.
pub fn summary_md_with(s: &RunSummary, witness_histories: &str) -> String {
    let mut o = String::new();
    header(s, &mut o);
    verdicts(s, &mut o);
    witnesses(s, &mut o);
    o.push_str(witness_histories);
    if let Some(l) = &s.liveness {
        let _ = writeln!(
            o,
            "## Liveness\n\nInformation, never a verdict or the exit code.\n\n- {}\n",
            l.lines().join("\n- ")
        );
        let w = l.witness_lines(PER_CHECK);
        if !w.is_empty() {
            let _ = writeln!(o, "Witnesses:\n\n- {}\n", w.join("\n- "));
        }
    }
    if let Some(a) = &s.advice {
        o.push_str(&super::advice::markdown(a));
    }
    let _ = writeln!(
        o,
        "## Re-check the attached history\n\nThe history's first line (its meta record) holds every parameter the \
         checkers need, so the file alone reproduces the verdict:\n\n```sh\nlockjaw check history.jsonl\n```\n\n\
         Exit code 0 = valid, 1 = anomalies found, 2 = unknown. `report.html` in the run directory shows \
         the timeline with every witness op."
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts the run's end cut off are counted beside the injections.
    #[test]
    fn the_faults_line_counts_the_starts_the_run_end_cut_off() {
        let mut s = RunSummary::empty();
        s.faults = Some(2);
        let md = summary_md(&s);
        assert!(md.contains("- faults injected: 2\n"), "{md}");
        s.not_started = 1;
        let md = summary_md(&s);
        assert!(
            md.contains("- faults injected: 2; 1 more not started (the run ended first)\n"),
            "{md}"
        );
    }
}
