//! Replaying one side of a bug: its `lockjaw run` command (the row's
//! system, workload, nemesis, the side's client, the row's `args`), run
//! `N` times in-process through `runner::repeat` (so Ctrl-C heals and
//! stops as it does for `lockjaw run --runs`), each run an ordinary run
//! directory under `ROOT/<side>/run-<i>/`, each read back as the report
//! reads it and counted for the expected kind.

use super::catalogue::{Bug, Part, Role};
use super::expect::{observe, windows, Expect, Observed};
use super::side::RunResult;
use crate::exit::Exit;
use crate::report::{RunDir, RunSummary, Timeline};
use crate::runner::{controller, repeat};
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where a bug's runs go when `--out` is not given:
/// `histories/bugs-<id>-<UTC>/`.
pub fn default_root(id: &str) -> PathBuf {
    PathBuf::from("histories").join(format!("bugs-{id}-{}", crate::runner::rundir::utc_stamp()))
}

/// The `--workload`/`--nemesis` value of a part: its name, or the path of
/// the file its inline table is written to (`ROOT/<field>.toml`).
fn part_arg(p: &Part, root: &Path, field: &str) -> Result<String, String> {
    match p {
        Part::Name(n) => Ok(n.clone()),
        Part::Inline(text) => {
            let path = root.join(format!("{field}.toml"));
            std::fs::write(&path, text)
                .map_err(|e| format!("{}: cannot write the inline {field}: {e}", path.display()))?;
            Ok(path.display().to_string())
        }
    }
}

/// The `lockjaw run` command of a side, with inline parts written under
/// `root`; `None` when the row has no such side.
pub fn command(
    bug: &Bug,
    role: Role,
    root: &Path,
    seed: Option<u64>,
) -> Result<Option<Vec<String>>, String> {
    let Some(client) = bug.client(role) else {
        return Ok(None);
    };
    std::fs::create_dir_all(root)
        .map_err(|e| format!("{}: cannot create the directory: {e}", root.display()))?;
    let mut v: Vec<String> = ["lockjaw", "run", "--system", &bug.system]
        .map(String::from)
        .to_vec();
    v.extend([
        "--workload".into(),
        part_arg(&bug.workload, root, "workload")?,
        "--nemesis".into(),
        part_arg(&bug.nemesis, root, "nemesis")?,
        "--client".into(),
        client.to_string(),
    ]);
    v.extend(bug.args.iter().cloned());
    if let Some(s) = seed {
        v.extend(["--seed".into(), s.to_string()]);
    }
    Ok(Some(v))
}

/// A finished run read as the report reads it: its trials, liveness
/// figures, injection windows and nemesis.json.
pub struct ReadRun {
    pub trials: crate::report::trials::RunTrials,
    pub liveness: Option<crate::check::lock::Liveness>,
    pub windows: Vec<super::expect::Window>,
    pub nemesis: serde_json::Value,
}

/// Read a finished run as the report does.
pub fn read_run(dir: &Path) -> Result<ReadRun, String> {
    let rd = RunDir::open(dir).map_err(|e| e.to_string())?;
    let t = Timeline::read(&rd.history_path(), crate::report::summary::concurrency(&rd))
        .map_err(|e| e.to_string())?;
    let s = RunSummary::compute(&rd, &t);
    let lease_ms = rd
        .run
        .ttl_ms
        .or_else(|| rd.run.workload.as_ref().and_then(|w| w.ttl_ms))
        .unwrap_or(0);
    let windows = windows(&rd.nemesis, lease_ms.saturating_mul(1_000_000), t.end_ns);
    Ok(ReadRun {
        trials: s.trials,
        liveness: s.liveness,
        windows,
        nemesis: rd.nemesis,
    })
}

/// Read a finished run as the report does and count `kind` in it.
pub fn observe_dir(kind: Expect, dir: &Path) -> Result<Observed, String> {
    let r = read_run(dir)?;
    Ok(observe(kind, &r.trials, r.liveness.as_ref(), &r.windows))
}

/// A finished run as a result; `None` for a run that was interrupted
/// (it counts for nothing).
fn result(kind: Expect, f: &repeat::Finished) -> Option<RunResult> {
    match &f.result {
        Ok(o) if o.exit == Exit::Error => Some(RunResult {
            dir: Some(o.dir.clone()),
            exit: o.exit,
            observed: Err(o.error.clone().unwrap_or_else(|| "the run failed".into())),
        }),
        Ok(o) => Some(RunResult {
            dir: Some(o.dir.clone()),
            exit: o.exit,
            observed: observe_dir(kind, &o.dir).map_err(|e| format!("{}: {e}", o.dir.display())),
        }),
        Err(e) if e.exit != Exit::Error => None,
        Err(e) => Some(RunResult {
            dir: e.dir.clone(),
            exit: Exit::Error,
            observed: Err(e.msg.clone()),
        }),
    }
}

/// One line per finished run, on the bar (or stderr when it is hidden).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// Run `argv` `runs` times into `out/run-<i>`, counting `kind`; the bar
/// advances once per run. An error when the command cannot be run at all.
pub fn run_side(
    argv: &[String],
    kind: Expect,
    runs: usize,
    out: &Path,
    bar: &ProgressBar,
) -> Result<Vec<RunResult>, String> {
    let mut base = crate::runner::shrink::runs::config(argv)?;
    base.out = Some(out.to_path_buf());
    controller::validate(&base).map_err(|e| e.msg)?;
    let mut cfgs = repeat::configs(&base, runs, 1);
    if let [one] = cfgs.as_mut_slice() {
        one.out = Some(out.join("run-1"));
    }
    let got: Mutex<Vec<(usize, RunResult)>> = Mutex::new(vec![]);
    let done = |f: &repeat::Finished, total: usize| {
        bar.inc(1);
        let Some(r) = result(kind, f) else {
            say(bar, format!("  run {}/{total}: interrupted", f.index));
            return;
        };
        let what = match &r.observed {
            Ok(o) => match o.anomalies {
                Some(n) => format!(
                    "{n} {} in {} landed injection(s), {} with one",
                    kind.name(),
                    o.landed,
                    o.hits
                ),
                None => format!(
                    "undecided: {}",
                    o.why.as_deref().unwrap_or("the figure is unknown")
                ),
            },
            Err(e) => format!("failed: {e}"),
        };
        let dir = r
            .dir
            .as_ref()
            .map(|d| format!(" ({})", d.display()))
            .unwrap_or_default();
        say(
            bar,
            format!("  run {}/{total} (seed {}): {what}{dir}", f.index, f.seed),
        );
        got.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((f.index, r));
    };
    repeat::run_all(cfgs, 1, &done);
    let mut v = got.into_inner().unwrap_or_else(|e| e.into_inner());
    v.sort_by_key(|(i, _)| *i);
    Ok(v.into_iter().map(|(_, r)| r).collect())
}

/// Whether a run of this process was interrupted (Ctrl-C, SIGTERM).
pub fn interrupted() -> bool {
    controller::interrupted()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sides_command_carries_the_row_and_writes_inline_parts() {
        let dir = tempfile::tempdir().unwrap();
        let bug = Bug {
            id: "t".into(),
            library: "l".into(),
            title: "t".into(),
            links: vec![],
            class: super::super::Class::Safety,
            system: "redis".into(),
            workload: Part::Inline("name = \"w\"\nkind = \"lock\"\n".into()),
            nemesis: Part::Name("pause-holder".into()),
            args: vec!["--fencing".into(), "off".into()],
            expect: Expect::TwoHolders,
            per: super::super::Per::Injection,
            runs: 10,
            buggy: Some("python-x@1.0".into()),
            fixed: None,
            not_reproduced: None,
            open: false,
            file: PathBuf::new(),
        };
        let argv = command(&bug, Role::Buggy, dir.path(), Some(7))
            .unwrap()
            .unwrap();
        let w = dir.path().join("workload.toml");
        assert_eq!(
            argv,
            [
                "lockjaw",
                "run",
                "--system",
                "redis",
                "--workload",
                &w.display().to_string(),
                "--nemesis",
                "pause-holder",
                "--client",
                "python-x@1.0",
                "--fencing",
                "off",
                "--seed",
                "7"
            ]
        );
        assert_eq!(
            std::fs::read_to_string(w).unwrap(),
            "name = \"w\"\nkind = \"lock\"\n"
        );
        assert_eq!(command(&bug, Role::Fixed, dir.path(), None).unwrap(), None);
    }
}
