//! The witness histories of a run directory (issue 30) as the report shows
//! them: [`ensure`] writes `witness-<kind>.jsonl` for an invalid run that
//! has none (or only ones older than its history), [`load`] reads them
//! back, and [`markdown`] / [`html`] render each: a link, three plain
//! sentences ([`plain`]), the ops inline with their roles ([`lines`]) and
//! a Mermaid sequence diagram ([`mermaid`]) when it is short.

pub mod lines;
pub mod mermaid;
pub mod plain;

use super::rundir::RunDir;
use crate::check::minimal::{self, WitnessHistory, WitnessOptions, WITNESS_PREFIX};
use crate::check::Validity;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// Witnesses of at most this many op lines are printed inline.
pub const INLINE_MAX: u64 = 30;

/// One witness file of a run directory.
#[derive(Clone, Debug)]
pub struct Shown {
    /// The file's name (`witness-<kind>.jsonl`), relative to the run
    /// directory.
    pub file: String,
    pub w: WitnessHistory,
}

/// Witnesses [`ensure`] wrote, with the seconds the whole search took.
#[derive(Debug, Default)]
pub struct Made {
    pub written: Vec<(PathBuf, minimal::WitnessInfo)>,
    pub seconds: f64,
}

impl Made {
    /// One line per witness, for stdout: file, size, minimal, seconds.
    pub fn lines(&self) -> Vec<String> {
        self.written
            .iter()
            .map(|(p, i)| {
                format!(
                    "witness: {} ({} of {} op lines, {}, {:.1} s)",
                    p.display(),
                    i.witness_ops,
                    i.history_ops,
                    if i.minimal {
                        "minimal".to_string()
                    } else {
                        format!("not minimal: {}", i.why_not_minimal())
                    },
                    i.seconds
                )
            })
            .collect()
    }
}

/// The witness files in `dir`, sorted by name.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(WITNESS_PREFIX) && n.ends_with(".jsonl"))
        })
        .collect();
    out.sort();
    out
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Whether the witness files in `dir` are missing or older than its
/// history.
fn stale(dir: &Path, history: &Path) -> bool {
    let have = files(dir);
    let Some(h) = modified(history) else {
        return have.is_empty();
    };
    have.is_empty() || have.iter().any(|p| modified(p).map_or(true, |m| m < h))
}

/// For an invalid run (results.json `valid: false`) without witness files,
/// or with files older than its history: search the witnesses and write
/// them into `dir` (older witness files are removed first). Nothing for a
/// run that is not invalid or whose witnesses are current. An error
/// never changes a verdict: the caller reports it as a warning.
pub fn ensure(dir: &Path, opts: &WitnessOptions) -> Result<Made, String> {
    let rd = RunDir::open(dir).map_err(|e| e.to_string())?;
    let history = rd.history_path();
    if rd.results.valid != Validity::False || !stale(dir, &history) {
        return Ok(Made::default());
    }
    let start = Instant::now();
    let found = minimal::find(&history, opts).map_err(|e| format!("witness search: {e}"))?;
    for old in files(dir) {
        std::fs::remove_file(&old)
            .map_err(|e| format!("cannot remove the old witness {}: {e}", old.display()))?;
    }
    let mut made = Made::default();
    for w in &found {
        let p = minimal::write(dir, w).map_err(|e| {
            format!(
                "cannot write {}: {e}",
                dir.join(minimal::file_name(&w.info.kind)).display()
            )
        })?;
        made.written.push((p, w.info.clone()));
    }
    made.seconds = start.elapsed().as_secs_f64();
    Ok(made)
}

/// The witness files of `dir`, read; a file that cannot be read is left
/// out with its error (the page says so).
pub fn load(dir: &Path) -> (Vec<Shown>, Vec<String>) {
    let mut shown = Vec::new();
    let mut errors = Vec::new();
    for p in files(dir) {
        let file = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match minimal::read(&p) {
            Ok(w) => shown.push(Shown { file, w }),
            Err(e) => errors.push(format!("{file}: {e}")),
        }
    }
    (shown, errors)
}

/// "minimal" or why not.
pub fn minimal_note(w: &WitnessHistory) -> String {
    let i = &w.info;
    if i.minimal {
        format!(
            "minimal: no process or op can go ({} checks)",
            i.oracle_calls
        )
    } else {
        format!(
            "**not minimal**: {} first (`--witness-budget` raises the budget)",
            i.why_not_minimal()
        )
    }
}

/// The summary.md section: per witness, a link, three sentences, and when
/// short the ops inline and a Mermaid diagram. Empty without witnesses.
pub fn markdown(shown: &[Shown], errors: &[String]) -> String {
    if shown.is_empty() && errors.is_empty() {
        return String::new();
    }
    let mut o = String::from("## Witness histories\n\n");
    o.push_str(
        "Each file is the smallest part of the history that `lockjaw check` alone still judges invalid for \
         the same anomaly between the same clients; its ops keep their indexes in history.jsonl.\n\n",
    );
    for s in shown {
        let i = &s.w.info;
        let _ = writeln!(
            o,
            "### {}\n\n[{}]({}): {} of {} op lines; {}.\n",
            i.kind,
            s.file,
            s.file,
            i.witness_ops,
            i.history_ops,
            minimal_note(&s.w)
        );
        let _ = writeln!(o, "{}\n", plain::sentences(&s.w).join(" "));
        if let Some(rule) = &i.rule {
            let _ = writeln!(o, "{}\n", rule_line(rule));
        }
        if i.witness_ops <= INLINE_MAX {
            let _ = writeln!(o, "```text\n{}```\n", lines::block(&s.w));
            let _ = writeln!(o, "```mermaid\n{}```\n", mermaid::diagram(&s.w));
        } else {
            let _ = writeln!(
                o,
                "({} op lines: too long to print here; open {} or `lockjaw check {}`.)\n",
                i.witness_ops, s.file, s.file
            );
        }
    }
    for e in errors {
        let _ = writeln!(o, "- unreadable witness: {e}");
    }
    if !errors.is_empty() {
        o.push('\n');
    }
    o
}

/// The report.html section: the same as [`markdown`], as plain HTML (the
/// diagram's text in a `<pre>`: the page loads nothing from the network).
pub fn html(shown: &[Shown], errors: &[String]) -> String {
    use super::html::esc;
    if shown.is_empty() && errors.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        r#"<section id="witness-histories"><h2>Witness histories</h2><p class="note">Each file is the smallest part of the history that <code>lockjaw check</code> alone still judges invalid for the same anomaly between the same clients; its ops keep their indexes.</p>"#,
    );
    for s in shown {
        let i = &s.w.info;
        let note = minimal_note(&s.w).replace("**", "").replace('`', "");
        let _ = write!(
            h,
            r#"<h3>{}</h3><p><a href="{}">{}</a>: {} of {} op lines; {}.</p><p>{}</p>"#,
            esc(&i.kind),
            esc(&s.file),
            esc(&s.file),
            i.witness_ops,
            i.history_ops,
            esc(&note),
            esc(&plain::sentences(&s.w).join(" "))
        );
        if let Some(rule) = &i.rule {
            let _ = write!(h, "<p>{}</p>", esc(&rule_line(rule)));
        }
        if i.witness_ops <= INLINE_MAX {
            let _ = write!(
                h,
                r#"<pre class="cmd">{}</pre><p class="note">Sequence diagram (Mermaid; GitHub draws it from summary.md):</p><pre class="cmd">{}</pre>"#,
                esc(&lines::block(&s.w)),
                esc(&mermaid::diagram(&s.w))
            );
        } else {
            let _ = write!(
                h,
                "<p class=\"note\">{} op lines: too long to print here.</p>",
                i.witness_ops
            );
        }
    }
    for e in errors {
        let _ = write!(h, "<p>unreadable witness: {}</p>", esc(e));
    }
    h.push_str("</section>");
    h
}

#[cfg(test)]
mod tests;

/// How the witness proves its anomaly, as a sentence.
fn rule_line(rule: &str) -> String {
    match rule {
        "same-value" => "How it is proven: same-value (two acknowledged writes of one value; \
                         no other write is needed)."
            .into(),
        "overwritten" => "How it is proven: overwritten (a write begun after another was \
                          acknowledged wrote a lower value; no other write is needed)."
            .into(),
        other => format!("How the total is proven: {other}."),
    }
}
