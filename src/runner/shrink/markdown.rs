//! `RUN_DIR/shrink/shrink.md`: the steps a shrink took (each command's
//! change, its counts and 95 % interval, kept or dropped and why), the
//! final command with its confirmed rate, and a witness of a reproducing
//! confirmation run.

use super::state::{Outcome, Role, State, Step};
use super::stats;
use std::path::Path;

/// The file's name in `RUN_DIR/shrink/`.
pub const FILE: &str = "shrink.md";

/// How the shrink stands.
pub enum Status<'a> {
    /// `command` was confirmed.
    Confirmed { command: &'a str },
    /// The original command does not reproduce.
    NotReproducing,
    /// Stopped before a confirmation (budget or Ctrl-C).
    Stopped { why: &'a str },
}

fn result(s: &Step) -> String {
    let (k, n) = (s.reproduced(), s.total());
    let rule = match s.role {
        Role::Confirm => "≥ half",
        _ => "≥ 2/3",
    };
    let met = if s.kept { "met" } else { "not met" };
    let word = match (s.role, s.kept) {
        (_, _) if s.undone => "kept, then taken back: its command did not confirm",
        (Role::Original, true) => "reproduces",
        (Role::Original, false) => "does not reproduce",
        (Role::Confirm, true) => "confirmed",
        (Role::Confirm, false) => "not confirmed",
        (_, true) => "kept",
        (_, false) => "dropped",
    };
    let failed = s
        .runs
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .count();
    let failed = if failed > 0 {
        format!(" ({failed} failed to run)")
    } else {
        String::new()
    };
    format!("{word} ({rule} {met}){failed}; {k}/{n}")
}

fn why_missed(s: &Step) -> Option<String> {
    let whys: Vec<&str> = s
        .runs
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Missed { why } => Some(why.as_str()),
            Outcome::Failed { error } => Some(error.as_str()),
            Outcome::Reproduced => None,
        })
        .collect();
    (!whys.is_empty()).then(|| whys.join("; "))
}

/// The text of shrink.md. Paths are shown relative to the file's own
/// directory, `run_dir/shrink`.
pub fn render(st: &State, run_dir: &Path, status: &Status) -> String {
    let here = run_dir.join(super::state::DIR);
    let rel = |p: &Path| p.strip_prefix(&here).unwrap_or(p).display().to_string();
    let mut md = format!(
        "# lockjaw shrink\n\nRun: `{}`. Anomaly: **{}** following a landed **{}** injection.\n\n\
         A run reproduces when an anomaly of that kind falls in the window of a landed injection of that fault \
         (its start to its end plus two leases); a candidate is kept when at least 2 of 3 runs reproduce; \
         the final command is confirmed on fresh seeds, at 5 of 10 or more. Intervals are 95 % Wilson intervals.\n\n",
        st.run.display(),
        crate::report::trials::kind_label(&st.kind),
        st.fault
    );
    md.push_str(&match status {
        Status::Confirmed { command } => {
            let c = st.confirmed();
            let (k, n) = c.map_or((0, 0), |c| (c.reproduced(), c.total()));
            let mut s = format!(
                "## The shrunk command\n\n```sh\n{command}\n```\n\nReproduces in {} (fresh seeds, none of them used to select it).\n",
                stats::runs_text(k, n)
            );
            if let Some(w) = c.and_then(|c| c.runs.iter().find_map(|r| r.witness.clone())) {
                s.push_str(&format!("\nWitness of a reproducing run: [{0}]({0}).\n", rel(&w)));
            }
            s
        }
        Status::NotReproducing => {
            let last = st.steps.last();
            let (k, n) = last.map_or((0, 0), |s| (s.reproduced(), s.total()));
            format!(
                "## The original does not reproduce\n\nIt reproduced in {}: below the rule, so there is nothing to shrink from.\n",
                stats::runs_text(k, n)
            )
        }
        Status::Stopped { why } => {
            let mut c = why.chars();
            let why: String = c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default();
            format!(
                "## Not finished\n\n{why}. Run `lockjaw shrink {}` again to continue from here.\n",
                st.run.display()
            )
        }
    });
    md.push_str("\n## Steps\n\n| step | change | reproduced | interval | result | runs |\n|---|---|---|---|---|---|\n");
    for s in &st.steps {
        let dir = s
            .runs
            .first()
            .and_then(|r| r.dir.parent())
            .map(|d| format!("[{0}]({0})", rel(d)))
            .unwrap_or_default();
        md.push_str(&format!(
            "| {} | {} | {} of {} | {} | {} | {} |\n",
            s.n,
            s.change.replace('|', "\\|"),
            s.reproduced(),
            s.total(),
            stats::interval(s.reproduced(), s.total()),
            result(s),
            dir
        ));
    }
    md.push_str("\nEach step's command, and why runs did not reproduce:\n\n");
    for s in &st.steps {
        md.push_str(&format!("{}. `{}`", s.n, s.command));
        if let Some(w) = why_missed(s) {
            md.push_str(&format!(" (not reproduced: {w})"));
        }
        md.push('\n');
    }
    md.push_str(
        "\nEvery run is an ordinary run directory (`lockjaw report DIR`, `lockjaw check DIR`).\n",
    );
    md
}

/// Write shrink.md into `run_dir/shrink/`.
pub fn write(st: &State, run_dir: &Path, status: &Status) -> Result<std::path::PathBuf, String> {
    let p = run_dir.join(super::state::DIR).join(FILE);
    std::fs::write(&p, render(st, run_dir, status)).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::shrink::search::Search;
    use crate::runner::shrink::state::RunRecord;
    use std::path::PathBuf;

    fn step(n: u64, role: Role, hits: &[bool], change: &str) -> Step {
        Step {
            n,
            role,
            change: change.into(),
            command: format!("lockjaw run --step {n}"),
            runs: hits
                .iter()
                .enumerate()
                .map(|(i, h)| RunRecord {
                    seed: i as u64,
                    dir: PathBuf::from(format!("/r/shrink/runs/step-{n}/run-{}", i + 1)),
                    outcome: if *h {
                        Outcome::Reproduced
                    } else {
                        Outcome::Missed {
                            why: "no two holders".into(),
                        }
                    },
                    wall_ms: 0,
                    witness: h.then(|| {
                        PathBuf::from(format!(
                            "/r/shrink/runs/step-{n}/run-{}/witness-two-holders.jsonl",
                            i + 1
                        ))
                    }),
                })
                .collect(),
            kept: false,
            undone: false,
        }
    }

    #[test]
    fn the_steps_their_counts_and_the_final_command_are_written() {
        let mut st = State::new(
            Path::new("/r"),
            "two-holders",
            "clock-jump",
            Search::default(),
            0,
        );
        st.record(
            step(
                0,
                Role::Original,
                &[true, true, true],
                "the original command",
            ),
            0,
        );
        let cand = Role::Candidate {
            knob: 0,
            value: 2,
            previous: 5,
        };
        st.record(step(1, cand, &[true, false, false], "workers 5 → 2"), 0);
        let confirm = [true, true, true, true, true, true, true, true, true, false];
        st.record(step(2, Role::Confirm, &confirm, "confirm"), 0);
        let md = render(
            &st,
            Path::new("/r"),
            &Status::Confirmed {
                command: "lockjaw run --x",
            },
        );
        assert!(md.contains("```sh\nlockjaw run --x\n```"), "{md}");
        assert!(
            md.contains("Reproduces in 9 of 10 runs [60 %, 98 %]"),
            "{md}"
        );
        assert!(
            md.contains(
                "| 1 | workers 5 → 2 | 1 of 3 | [6 %, 79 %] | dropped (≥ 2/3 not met); 1/3 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("[runs/step-2/run-1/witness-two-holders.jsonl]")
                && md.contains("[runs/step-1](runs/step-1)"),
            "{md}"
        );
        assert!(md.contains("not reproduced: no two holders"), "{md}");
        let md = render(
            &st,
            Path::new("/r"),
            &Status::Stopped {
                why: "the budget ran out",
            },
        );
        assert!(
            md.contains("The budget ran out. Run `lockjaw shrink /r` again"),
            "{md}"
        );
    }
}
