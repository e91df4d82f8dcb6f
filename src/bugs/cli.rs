//! `lockjaw bugs list | run | table`: the catalogue's command line. A row
//! is replayed side by side ([`super::replay`]), each side summed and
//! judged ([`super::side`]); `table` does every row and prints (or writes
//! into docs/bugs.md) the markdown of [`super::table`].

use super::catalogue::{self, Bug, Role};
use super::replay;
use super::side::{RunResult, Side};
use super::table::{self, Measured};
use crate::exit::Exit;
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// The bug catalogue: real lock-library bugs replayed on the buggy and
/// the fixed release (docs/bugs.md).
#[derive(Args, Debug)]
pub struct BugsArgs {
    /// The folder of bug files (default: ./bugs, else bugs/ next to the
    /// binary or in one of its parent directories).
    #[arg(long, global = true, env = "LOCKJAW_BUGS", value_name = "DIR")]
    pub catalogue: Option<PathBuf>,
    #[command(subcommand)]
    pub command: BugsCommand,
}

#[derive(Subcommand, Debug)]
pub enum BugsCommand {
    /// List the bugs: id, library, class, system, buggy → fixed, status.
    List,
    /// Replay one bug: `lockjaw run` N times per side, then per side the
    /// landed injections, anomalies of the expected kind, their rate with
    /// its 95 % Wilson interval, and whether the side met its expectation.
    ///
    /// Exit 0: every side run met it (buggy: the interval excludes 0;
    /// fixed: 0 of the kind in at least --required trials); 1: a side
    /// contradicts it; 2: not enough evidence, or interrupted; 3: bad
    /// input or a run that failed. A not-reproduced row prints its reason
    /// and exits 0 without running.
    Run(RunBugArgs),
    /// Replay every bug, both sides, and print the measured table as
    /// markdown (`make bugs`); --write FILE puts it between FILE's
    /// generated markers.
    Table(TableArgs),
}

/// Which sides to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Version {
    Buggy,
    Fixed,
    /// The row's reference (a row no release fixes yet).
    Reference,
    /// The buggy side and the clean one (fixed, else the reference).
    Both,
}

impl Version {
    pub(super) fn roles(self) -> Vec<Role> {
        match self {
            Version::Buggy => vec![Role::Buggy],
            Version::Fixed => vec![Role::Fixed],
            Version::Reference => vec![Role::Reference],
            Version::Both => vec![Role::Buggy, Role::Fixed, Role::Reference],
        }
    }
}

/// How many runs and trials a measurement takes.
#[derive(Args, Debug, Clone)]
pub struct Effort {
    /// Runs per side (default: the row's `runs`, else 10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// Trials (landed injections, or runs for a bug that needs no fault) a
    /// side needs before its 0 counts, or its absence of the anomaly
    /// contradicts the buggy side.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub required: u64,
    /// Seed of every side's first run (run i gets seed + i - 1; both sides
    /// the same seeds). Default: from the clock.
    #[arg(long)]
    pub seed: Option<u64>,
    /// First port of the local clusters (as `lockjaw run --base-port`), so
    /// that several catalogues or machines' shards do not meet.
    #[arg(long, value_parser = crate::runner::cli::base_port_flag)]
    pub base_port: Option<u16>,
    /// Runs of one side at once, each on its own ports (as `lockjaw run
    /// --jobs`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
}

impl Effort {
    /// Runs per side of `bug`: `--runs`, else the row's own.
    pub fn runs(&self, bug: &Bug) -> u32 {
        self.runs.unwrap_or(bug.runs)
    }
}

#[derive(Args, Debug)]
pub struct RunBugArgs {
    /// The bug's id (`lockjaw bugs list`).
    pub id: String,
    /// Which release to run.
    #[arg(long, value_enum, default_value = "both")]
    pub version: Version,
    #[command(flatten)]
    pub effort: Effort,
    /// Write the runs under DIR/<side>/run-<i>/ instead of
    /// histories/bugs-<id>-<UTC>/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub ci: crate::report::ci::CiArgs,
}

#[derive(Args, Debug)]
pub struct TableArgs {
    #[command(flatten)]
    pub effort: Effort,
    /// Write the runs under DIR/<id>/ instead of histories/bugs-<id>-<UTC>/,
    /// and the table to DIR/bugs-table.md.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run only shard K of N of the rows' sides (positions K, K+N, ... of
    /// the replayable rows' sides in catalogue order; needs --seed and
    /// --out) and write OUT/shard.json for `lockjaw merge` (docs/ci.md).
    #[arg(long, value_name = "K/N", value_parser = crate::runner::shard::shard_flag)]
    pub shard: Option<crate::runner::shard::Shard>,
    #[command(flatten)]
    pub ci: crate::report::ci::CiArgs,
    /// Replace the region between the generated markers of this markdown
    /// file (docs/bugs.md) with the table, instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
}

/// Run a `bugs` subcommand.
pub fn bugs(a: BugsArgs) -> Exit {
    let dir = catalogue::resolve_dir(a.catalogue.as_deref());
    match a.command {
        BugsCommand::List => list(&dir),
        BugsCommand::Run(r) => run(&dir, r),
        BugsCommand::Table(t) => table_cmd(&dir, t),
    }
}

fn list(dir: &Path) -> Exit {
    let all = match catalogue::load_dir(dir) {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    println!("id\tlibrary\tclass\tsystem\tbuggy → fixed\tstatus");
    for b in &all.bugs {
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            b.id,
            b.library,
            b.class.name(),
            b.system,
            b.sides_text(),
            b.status()
        );
    }
    if all.bugs.is_empty() && all.broken.is_empty() {
        eprintln!("no bug files in {}", dir.display());
    }
    broken(&all.broken)
}

/// Each broken row's error on stderr: 3 when there is one (the good rows
/// were still listed or run), else 0.
pub(super) fn broken(errors: &[crate::toml_file::FileError]) -> Exit {
    for e in errors {
        eprintln!("error: broken row: {e}");
    }
    match errors.is_empty() {
        true => Exit::Valid,
        false => Exit::Error,
    }
}

pub(super) fn bad(e: impl std::fmt::Display) -> Exit {
    eprintln!("error: {e}");
    Exit::Error
}

/// A bar over `total` runs (hidden when stderr is no terminal).
pub(super) fn bar(total: u64) -> ProgressBar {
    let pb = ProgressBar::new(total);
    if let Ok(st) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} runs, {elapsed}") {
        pb.set_style(st.progress_chars("=> "));
    }
    pb
}

fn run(dir: &Path, a: RunBugArgs) -> Exit {
    let bug = match catalogue::find(dir, &a.id) {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    let baseline = match a.ci.load() {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    if let Some(r) = &bug.not_reproduced {
        println!("{}: not reproduced here: {r}", bug.id);
        let m = Measured {
            bug: bug.clone(),
            buggy: None,
            fixed: None,
            errors: vec![],
        };
        let cases = super::ci::cases(&[m], |_, _| String::new());
        return a.ci.finish(&baseline, cases).unwrap_or(Exit::Valid);
    }
    let (roles, missing) = sides(&bug, a.version.roles());
    let running = roles
        .iter()
        .map(|r| r.name())
        .collect::<Vec<_>>()
        .join(" and ");
    if bug.open {
        println!(
            "{}: open: no release fixes it yet: running the {running} side{}",
            bug.id,
            if roles.len() > 1 { "s" } else { " only" }
        );
    }
    for r in missing.iter().filter(|_| !bug.open) {
        println!(
            "{}: the row has no [{}] side: running the {running} side only",
            bug.id,
            r.name()
        );
    }
    if roles.is_empty() {
        return bad(format!(
            "{}: the row has none of the sides asked for",
            bug.id
        ));
    }
    let root = a.out.unwrap_or_else(|| replay::default_root(&bug.id));
    let pb = bar(a.effort.runs(&bug) as u64 * roles.len() as u64);
    let (m, _) = measure(&bug, &roles, &a.effort, &root, &pb);
    pb.finish_and_clear();
    print_measured(&m, &root);
    let cases = super::ci::cases(std::slice::from_ref(&m), |_, r| {
        root.join(r.name()).display().to_string()
    });
    a.ci.finish(&baseline, cases)
        .unwrap_or_else(|| measured_exit(&m))
}

/// The `roles` the row has, and those it lacks (an open row has no fixed
/// side; `both` asks for the buggy and the one clean side a row has).
pub(super) fn sides(bug: &Bug, roles: Vec<Role>) -> (Vec<Role>, Vec<Role>) {
    let both = roles.len() == 3;
    let (have, lack): (Vec<Role>, Vec<Role>) =
        roles.into_iter().partition(|&r| bug.client(r).is_some());
    match both {
        // Of fixed and reference, only the one the row has is missing.
        true if have.len() == 2 => (have, vec![]),
        true => (have, lack.into_iter().take(1).collect()),
        false => (have, lack),
    }
}

/// Each side's runs as they ended, or why the side could not run.
pub(super) type Raw = Vec<(Role, Result<Vec<RunResult>, String>)>;

/// Replay `bug`'s `roles` into `root/<side>/`.
pub(super) fn measure(
    bug: &Bug,
    roles: &[Role],
    effort: &Effort,
    root: &Path,
    pb: &ProgressBar,
) -> (Measured, Raw) {
    let mut raw = vec![];
    let mut m = Measured {
        bug: bug.clone(),
        buggy: None,
        fixed: None,
        errors: vec![],
    };
    for &role in roles {
        if replay::interrupted() {
            break;
        }
        pb.set_message(format!("{} {}", bug.id, role.name()));
        let side =
            replay::command(bug, role, root, effort.seed, effort.base_port).and_then(|argv| {
                let argv = argv.ok_or_else(|| format!("the row has no [{}] side", role.name()))?;
                let out = root.join(role.name());
                let (runs, jobs) = (effort.runs(bug) as usize, effort.jobs as usize);
                replay::run_side(&argv, bug.expect, runs, jobs, &out, pb)
            });
        if side.is_err() {
            pb.inc(effort.runs(bug) as u64);
        }
        raw.push((role, side.clone()));
        fill(&mut m, role, side, bug, effort.required);
    }
    (m, raw)
}

/// Put a side's runs (or why it could not run) into `m`.
pub(super) fn fill(
    m: &mut Measured,
    role: Role,
    side: Result<Vec<RunResult>, String>,
    bug: &Bug,
    required: u64,
) {
    match side {
        Ok(results) => {
            let s = Side::of(&results);
            let met = s.met(role, bug.per, required);
            match role {
                Role::Buggy => m.buggy = Some((s, met)),
                Role::Fixed | Role::Reference => m.fixed = Some((s, met)),
            }
        }
        Err(e) => m.errors.push((role, e)),
    }
}

fn print_measured(m: &Measured, root: &Path) {
    let b = &m.bug;
    let clean = b.clean_role().unwrap_or(Role::Fixed);
    println!("{}: {} ({})", b.id, b.title, b.library);
    println!(
        "expect {} on the buggy side, per {}; the {} side 0 of it",
        b.expect.name(),
        match b.per {
            catalogue::Per::Run => "run",
            catalogue::Per::Injection => "landed injection",
        },
        clean.name()
    );
    for (role, e) in &m.errors {
        println!("== {}: failed: {e}", role.name());
    }
    for (role, side) in [(Role::Buggy, &m.buggy), (clean, &m.fixed)] {
        let Some((s, met)) = side else { continue };
        println!("== {} ({})", role.name(), b.client(role).unwrap_or("?"));
        for l in s.lines(b.per, b.expect.name(), met) {
            println!("   {l}");
        }
    }
    println!("runs in {}", root.display());
    let e = measured_exit(m);
    if replay::interrupted() {
        println!("interrupted: the counts cover the runs made until then (the last one cut short)");
    }
    println!(
        "{}",
        match e {
            Exit::Valid => "every side run met its expectation",
            Exit::Invalid => "a side contradicts its expectation",
            Exit::Unknown => "not enough evidence for every side run",
            Exit::Error => "a side could not be run",
        }
    );
}

/// 0 when every side run met its expectation, 1 when one contradicts,
/// 2 when one lacks evidence or the runs were interrupted, 3 when one
/// could not be run or a run failed.
pub(super) fn measured_exit(m: &Measured) -> Exit {
    let mut e = Exit::Valid;
    if !m.errors.is_empty() {
        e = e.merge(Exit::Error);
    }
    for (s, met) in [&m.buggy, &m.fixed].into_iter().flatten() {
        e = e.merge(s.exit(met));
    }
    if replay::interrupted() {
        e = e.merge(Exit::Unknown);
    }
    if m.bug.not_reproduced.is_none() && m.buggy.is_none() && m.fixed.is_none() {
        e = e.merge(Exit::Unknown);
    }
    e
}

/// Both sides of every replayable row (a not-reproduced row, or every
/// row after Ctrl-C, is listed unmeasured); runs under `out/<id>/` or
/// `histories/bugs-<id>-<UTC>/`.
fn measure_all(bugs: &[Bug], effort: &Effort, out: Option<&Path>, stamp: &str) -> Vec<Measured> {
    let total: u64 = bugs
        .iter()
        .filter(|b| b.not_reproduced.is_none())
        .map(|b| sides(b, Version::Both.roles()).0.len() as u64 * effort.runs(b) as u64)
        .sum();
    let pb = bar(total);
    let mut rows = Vec::new();
    for b in bugs {
        if b.not_reproduced.is_some() || replay::interrupted() {
            rows.push(Measured {
                bug: b.clone(),
                buggy: None,
                fixed: None,
                errors: vec![],
            });
            continue;
        }
        let root = root_of(out, stamp, &b.id);
        let (roles, _) = sides(b, Version::Both.roles());
        rows.push(measure(b, &roles, effort, &root, &pb).0);
    }
    pb.finish_and_clear();
    rows
}

/// Where a row's runs go: `out/<id>/`, else `histories/bugs-<id>-<UTC>/`.
fn root_of(out: Option<&Path>, stamp: &str, id: &str) -> PathBuf {
    match out {
        Some(d) => d.join(id),
        None => PathBuf::from("histories").join(format!("bugs-{id}-{stamp}")),
    }
}

fn table_cmd(dir: &Path, a: TableArgs) -> Exit {
    let all = match catalogue::load_dir(dir) {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    // A broken row is said at once and at the end; the others run.
    let mut broken_rows = broken(&all.broken);
    let bugs = all.bugs;
    let baseline = match a.ci.load() {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    if let Some(f) = &a.write {
        // Refuse a file without markers before hours of runs.
        let doc = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()));
        if let Err(e) = doc.and_then(|d| table::replace_region(&d, "")) {
            return bad(format!("{}: {e}", f.display()));
        }
    }
    if let Some(s) = a.shard {
        return super::shard::table(&bugs, &all.broken, &a, s, &baseline).merge(broken_rows);
    }
    let stamp = crate::runner::rundir::utc_stamp();
    let rows = measure_all(&bugs, &a.effort, a.out.as_deref(), &stamp);
    let md = table::markdown(&rows, a.effort.runs);
    if let Some(out) = &a.out {
        broken_rows = broken_rows.merge(table::write_file(out, &md));
    }
    let cases = super::ci::cases(&rows, |id, r| {
        let root = root_of(a.out.as_deref(), &stamp, id);
        root.join(r.name()).display().to_string()
    });
    let mut e = match a.ci.finish(&baseline, cases) {
        Some(ci) => ci.merge(broken_rows),
        None => rows
            .iter()
            .fold(broken_rows, |e, m| e.merge(measured_exit(m))),
    };
    match &a.write {
        None => print!("{md}"),
        Some(f) if broken_rows == Exit::Error => {
            // Not written: the page would lose the broken rows' lines.
            eprintln!(
                "{} not written: {} broken row(s) (above)",
                f.display(),
                all.broken.len()
            );
            print!("{md}");
        }
        Some(f) => {
            let written = std::fs::read_to_string(f)
                .map_err(|e| e.to_string())
                .and_then(|d| table::replace_region(&d, &md))
                .and_then(|d| std::fs::write(f, d).map_err(|e| e.to_string()));
            match written {
                Ok(()) => println!("{md}\nwritten into {}", f.display()),
                Err(err) => e = e.merge(bad(format!("{}: {err}", f.display()))),
            }
        }
    }
    if !all.broken.is_empty() {
        eprintln!(
            "{} broken row(s) not run: {}",
            all.broken.len(),
            all.broken
                .iter()
                .map(|b| b.file.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bugs::catalogue::sample;
    use crate::bugs::side::Met;

    fn measured(buggy: Option<Met>, fixed: Option<Met>) -> Measured {
        let s = Side::default();
        Measured {
            bug: sample("x", None),
            buggy: buggy.map(|m| (s.clone(), m)),
            fixed: fixed.map(|m| (s.clone(), m)),
            errors: vec![],
        }
    }

    /// Issue 41, item 7: a row without its fixed side runs its buggy side.
    #[test]
    fn a_row_without_a_fixed_side_runs_its_buggy_side() {
        let mut b = sample("x", None);
        assert_eq!(
            sides(&b, Version::Both.roles()),
            (vec![Role::Buggy, Role::Fixed], vec![])
        );
        b.fixed = None;
        assert_eq!(
            sides(&b, Version::Both.roles()),
            (vec![Role::Buggy], vec![Role::Fixed])
        );
        assert_eq!(
            sides(&b, Version::Fixed.roles()),
            (vec![], vec![Role::Fixed])
        );
    }

    #[test]
    fn the_exit_is_0_only_when_every_side_run_met_it() {
        let c = || Met::Contradicts("x".into());
        let n = || Met::NotEnough("x".into());
        assert_eq!(
            measured_exit(&measured(Some(Met::Met), Some(Met::Met))),
            Exit::Valid
        );
        assert_eq!(measured_exit(&measured(Some(Met::Met), None)), Exit::Valid);
        assert_eq!(
            measured_exit(&measured(Some(c()), Some(n()))),
            Exit::Invalid
        );
        assert_eq!(
            measured_exit(&measured(Some(Met::Met), Some(n()))),
            Exit::Unknown
        );
        assert_eq!(measured_exit(&measured(None, None)), Exit::Unknown);
        let mut m = measured(Some(Met::Met), None);
        m.errors.push((Role::Fixed, "no adapter".into()));
        assert_eq!(measured_exit(&m), Exit::Error);
    }
}
