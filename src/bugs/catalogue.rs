//! Reading the catalogue: `bugs/ID.toml` files parsed with the project's
//! TOML errors (file, line, field, hint), checked (id = file stem, the
//! run flags parse as `lockjaw run` parses them, inline `[workload]` and
//! `[nemesis]` tables are valid workload and nemesis files), and the
//! catalogue directory found as `clients/` is.

use super::expect::Expect;
pub use super::folder::{find, load_dir, load_file, resolve_dir, Catalogue};
use crate::toml_file::{self as file, FileError, Source};
use clap::Parser;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a bug breaks: a safety promise or a liveness one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Safety,
    Liveness,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Safety => "safety",
            Class::Liveness => "liveness",
        }
    }
}

/// The trial of a rate: a landed fault injection, or a whole run (a bug
/// that needs no fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    Run,
    Injection,
}

/// The buggy release, the release that fixed it, or a reference: another
/// library (or release) that must stay clean under the same run, for a
/// row no release fixes yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    Buggy,
    Fixed,
    Reference,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Buggy => "buggy",
            Role::Fixed => "fixed",
            Role::Reference => "reference",
        }
    }
}

/// A row that cannot be replayed here, or one no release fixes yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Status {
    NotReproduced,
    Open,
}

/// A workload or nemesis: a name (or path), or a table with the fields of
/// its file.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum PartFile {
    Name(String),
    Table(toml::Table),
}

/// A workload or nemesis of a bug, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Part {
    /// A name of `workloads/`/`nemesis/`, or a path: given to `lockjaw run`.
    Name(String),
    /// An inline table: the text of a workload or nemesis file, written
    /// into the bug's run directory and passed by its path.
    Inline(String),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SideFile {
    client: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BugFile {
    id: String,
    library: String,
    title: String,
    #[serde(default)]
    links: Vec<String>,
    class: Class,
    system: String,
    workload: Option<PartFile>,
    nemesis: Option<PartFile>,
    #[serde(default)]
    args: Vec<String>,
    expect: Expect,
    per: Per,
    runs: Option<u32>,
    buggy: Option<SideFile>,
    fixed: Option<SideFile>,
    reference: Option<SideFile>,
    status: Option<Status>,
    reason: Option<String>,
}

/// One catalogue row, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bug {
    pub id: String,
    pub library: String,
    pub title: String,
    pub links: Vec<String>,
    pub class: Class,
    pub system: String,
    pub workload: Part,
    pub nemesis: Part,
    pub args: Vec<String>,
    pub expect: Expect,
    pub per: Per,
    /// Runs per side when `--runs` is not given (the row's `runs`, default
    /// [`DEFAULT_RUNS`]): a bug whose injections are rare takes fewer,
    /// longer runs.
    pub runs: u32,
    /// The client (`--client` value) of each side; a not-reproduced row
    /// may lack them. At most one of `fixed` and `reference` (the clean
    /// side). Relative paths in them are the row file's, made absolute.
    pub buggy: Option<String>,
    pub fixed: Option<String>,
    pub reference: Option<String>,
    /// Why the row is not replayed (`status = "not-reproduced"`).
    pub not_reproduced: Option<String>,
    /// No release fixes it yet (`status = "open"`, or a row without a
    /// `[fixed]` side): `bugs run` runs the buggy side (and a reference).
    pub open: bool,
    /// The file it came from.
    pub file: PathBuf,
}

impl Bug {
    pub fn client(&self, role: Role) -> Option<&str> {
        match role {
            Role::Buggy => self.buggy.as_deref(),
            Role::Fixed => self.fixed.as_deref(),
            Role::Reference => self.reference.as_deref(),
        }
    }

    /// The side that must stay clean: the fixed release, else a
    /// reference, if the row has either.
    pub fn clean_role(&self) -> Option<Role> {
        [Role::Fixed, Role::Reference]
            .into_iter()
            .find(|&r| self.client(r).is_some())
    }

    /// `buggy → fixed` clients (`→ C (reference)`, `→ — (open)`).
    pub fn sides_text(&self) -> String {
        let clean = match (self.clean_role(), self.open) {
            (Some(Role::Reference), _) => {
                format!("{} (reference)", self.reference.as_deref().unwrap_or("—"))
            }
            (Some(r), _) => self.client(r).unwrap_or("—").to_string(),
            (None, true) => "— (open)".into(),
            (None, false) => "—".into(),
        };
        format!("{} → {clean}", self.buggy.as_deref().unwrap_or("—"))
    }

    /// `replayable`, `open` or `not-reproduced`.
    pub fn status(&self) -> &'static str {
        match (&self.not_reproduced, self.open) {
            (Some(_), _) => "not-reproduced",
            (None, true) => "open",
            (None, false) => "replayable",
        }
    }
}

/// Runs per side of a row without `runs`.
pub const DEFAULT_RUNS: u32 = 10;

/// The flags a bug's `args` may not set: `lockjaw bugs run` sets them.
const RESERVED: [&str; 11] = [
    "--shard",
    "--system",
    "--workload",
    "--nemesis",
    "--client",
    "--out",
    "--runs",
    "--test-count",
    "--jobs",
    "--seed",
    "--histories",
];

/// `lockjaw run`'s flags, parsed only (nothing loaded), to check `args`.
#[derive(Parser)]
#[command(name = "lockjaw run")]
struct RunLine {
    #[command(flatten)]
    _run: crate::runner::cli::RunArgs,
}

/// Parse and check one bug file's text; `stem` is its file name without
/// `.toml`.
pub fn from_source(src: &Source, stem: &str, path: &Path) -> Result<Bug, FileError> {
    let f: BugFile = file::parse(src)?;
    check_id(src, &f.id, stem)?;
    use clap::ValueEnum;
    if crate::service::System::from_str(&f.system, false).is_err() {
        return Err(src.field(
            "system",
            format!("unknown system {:?}", f.system),
            Some("use a value `lockjaw run --system` accepts (lockjaw run --help lists them)"),
        ));
    }
    check_args(src, &f.args)?;
    let not_reproduced = not_reproduced(src, f.status, f.reason.clone())?;
    check_sides(src, &f, not_reproduced.is_some())?;
    let open = not_reproduced.is_none() && f.fixed.is_none();
    // Paths in a row are the row's: a catalogue kept anywhere travels.
    let here = path.parent().unwrap_or(Path::new("."));
    let here = std::path::absolute(here).unwrap_or_else(|_| here.to_path_buf());
    let client = |s: Option<SideFile>| s.map(|s| row_client(&here, &s.client));
    if f.runs == Some(0) {
        return Err(src.field(
            "runs",
            "0 runs per side measure nothing",
            Some("give 1 or more, or leave runs out (10)"),
        ));
    }
    let workload = row_part(&here, part(src, "workload", f.workload, "fenced-counter")?);
    let nemesis = row_part(&here, part(src, "nemesis", f.nemesis, "none")?);
    let no_fault = nemesis == Part::Name("none".into());
    if f.per == Per::Injection && no_fault && not_reproduced.is_none() {
        return Err(src.field(
            "per",
            "per = \"injection\" with nemesis \"none\": no injection can land",
            Some("use per = \"run\" for a bug that needs no fault, or name the fault"),
        ));
    }
    Ok(Bug {
        id: f.id,
        library: f.library,
        title: f.title,
        links: f.links,
        class: f.class,
        system: f.system,
        workload,
        nemesis,
        args: f.args,
        expect: f.expect,
        per: f.per,
        runs: f.runs.unwrap_or(DEFAULT_RUNS),
        buggy: client(f.buggy),
        fixed: client(f.fixed),
        reference: client(f.reference),
        not_reproduced,
        open,
        file: path.to_path_buf(),
    })
}

/// Whether a workload, nemesis or adapter value is a path (as `lockjaw
/// run` tells: a `/`, or a `.toml` ending for the files).
fn is_path(s: &str) -> bool {
    s.contains('/') || s.ends_with(".toml")
}

/// A relative path `p` of a row in the folder `here`, absolute.
fn in_row_dir(here: &Path, p: &str) -> String {
    match Path::new(p).is_relative() {
        true => here.join(p).display().to_string(),
        false => p.to_string(),
    }
}

/// A workload or nemesis named by a relative path: the row's folder's.
fn row_part(here: &Path, p: Part) -> Part {
    match p {
        Part::Name(n) if is_path(&n) => Part::Name(in_row_dir(here, &n)),
        p => p,
    }
}

/// A side's client with its relative paths made the row's: `PATH`,
/// `PATH@VERSION` and the source tree of `NAME@PATH`; names stay.
fn row_client(here: &Path, c: &str) -> String {
    match c.split_once('@') {
        Some((name, pin)) if !name.contains('/') => match pin.contains('/') {
            true => format!("{name}@{}", in_row_dir(here, pin)),
            false => c.to_string(),
        },
        _ if !c.contains('/') => c.to_string(),
        _ => in_row_dir(here, c),
    }
}

/// `id`: the file's stem, and letters, digits, `.`, `_` and `-`.
fn check_id(src: &Source, id: &str, stem: &str) -> Result<(), FileError> {
    if id != stem {
        return Err(src.field(
            "id",
            format!("id {id:?} is not the file's name {stem:?}"),
            Some(&format!("name the file {id}.toml or set id = {stem:?}")),
        ));
    }
    let id_ok = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if id.is_empty() || !id_ok || id.starts_with('.') {
        return Err(src.field(
            "id",
            "not a bug id",
            Some("use letters, digits, `.`, `_` and `-`"),
        ));
    }
    Ok(())
}

/// `status` and `reason`: the reason of a not-reproduced row, `None` for a
/// replayable one.
fn not_reproduced(
    src: &Source,
    status: Option<Status>,
    reason: Option<String>,
) -> Result<Option<String>, FileError> {
    Ok(match (status, reason) {
        (Some(Status::Open), Some(_)) => {
            return Err(src.field(
                "reason",
                "an open row is replayed: it takes no reason",
                Some("say what is known in the title or a comment, or use status = \"not-reproduced\" with its reason"),
            ))
        }
        (Some(Status::Open), None) => None,
        (Some(Status::NotReproduced), Some(r)) if !r.trim().is_empty() => Some(r),
        (Some(Status::NotReproduced), _) => {
            return Err(src.field(
                "reason",
                "a not-reproduced row needs its reason",
                Some("say what was found in the library's source, e.g. reason = \"0.4.0 does not import on Python 3.11\""),
            ))
        }
        (None, Some(_)) => {
            return Err(src.field(
                "reason",
                "a reason is given, but no status",
                Some("add status = \"not-reproduced\", or remove the reason"),
            ))
        }
        (None, None) => None,
    })
}

/// `[buggy]`, `[fixed]`, `[reference]`: a replayable row has its buggy
/// side; the fixed side may wait for a release that fixes the bug
/// (`status = "open"`, or a row `lockjaw explore` wrote: `bugs run` then
/// runs the buggy side and says so), and a reference, another library
/// that must stay clean, may stand beside it. An open row has no fixed
/// side, and a row has at most one clean side.
fn check_sides(src: &Source, f: &BugFile, not_reproduced: bool) -> Result<(), FileError> {
    if !not_reproduced && f.buggy.is_none() {
        return Err(src.whole(
            "no [buggy] side",
            Some("add [buggy] with client = \"NAME@VERSION\", or mark the row status = \"not-reproduced\" with its reason"),
        ));
    }
    if f.status == Some(Status::Open) && f.fixed.is_some() {
        return Err(src.field(
            "status",
            "an open row has a [fixed] side",
            Some("remove status = \"open\" now that a release fixes it, or remove [fixed]"),
        ));
    }
    if f.fixed.is_some() && f.reference.is_some() {
        return Err(src.whole(
            "both a [fixed] and a [reference] side",
            Some("keep [fixed] (the release that fixed it); a [reference] stands in only while no release does"),
        ));
    }
    let sides = [
        ("buggy", &f.buggy),
        ("fixed", &f.fixed),
        ("reference", &f.reference),
    ];
    for (name, side) in sides {
        if side.as_ref().is_some_and(|s| s.client.trim().is_empty()) {
            return Err(src.field(
                "client",
                format!("[{name}] names no client"),
                Some("use builtin, an adapter name, NAME@VERSION, a path or PATH@VERSION"),
            ));
        }
    }
    Ok(())
}

/// `args`: no flag `bugs run` sets, and `lockjaw run` accepts them.
fn check_args(src: &Source, args: &[String]) -> Result<(), FileError> {
    for a in args {
        let flag = a.split('=').next().unwrap_or(a);
        if RESERVED.contains(&flag) {
            return Err(src.field(
                "args",
                format!("{flag} is set by `lockjaw bugs run`"),
                Some("use the row's own fields (system, workload, nemesis, [buggy]/[fixed] client) and `bugs run --runs/--out/--seed`"),
            ));
        }
    }
    let argv = ["lockjaw run", "--system", "redis"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    RunLine::try_parse_from(argv).map(|_| ()).map_err(|e| {
        let msg = e.render().to_string();
        let first = msg.lines().next().unwrap_or("").trim();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        src.field(
            "args",
            format!("`lockjaw run` refuses them: {first}"),
            Some("give flags of `lockjaw run --help`, each flag and value its own string"),
        )
    })
}

/// A workload or nemesis field: a name, or an inline table checked as
/// its file would be, errors pointing at the bug file's lines.
fn part(src: &Source, field: &str, p: Option<PartFile>, default: &str) -> Result<Part, FileError> {
    let table = match p {
        None => return Ok(Part::Name(default.into())),
        Some(PartFile::Name(n)) if n.trim().is_empty() => {
            return Err(src.field(
                field,
                "empty",
                Some("name a file of workloads/ or nemesis/, or give an inline table"),
            ))
        }
        Some(PartFile::Name(n)) => return Ok(Part::Name(n)),
        Some(PartFile::Table(t)) => t,
    };
    let text = toml::to_string(&table).map_err(|e| src.field(field, e.to_string(), None))?;
    // A `[workload]` section is checked on the file's own lines (the lines
    // before it blank), so an error names the line the user wrote.
    let own = section(&src.text, field).unwrap_or_else(|| text.clone());
    let inner = Source {
        name: src.name.clone(),
        text: own,
    };
    let checked = match field {
        "workload" => crate::workload::from_source(&inner, &Default::default()).map(|_| ()),
        _ => crate::nemesis::spec::from_source(&inner).map(|_| ()),
    };
    checked.map_err(|mut e| {
        if e.line == 0 || section(&src.text, field).is_none() {
            e.line = file::line_of_key(&src.text, field);
        }
        e.field = Some(match e.field {
            Some(f) => format!("{field}.{f}"),
            None => field.to_string(),
        });
        e
    })?;
    Ok(Part::Inline(text))
}

/// The text of the `[name]` section with every earlier line blank, or
/// `None` when the file has no such header.
fn section(text: &str, name: &str) -> Option<String> {
    let header = format!("[{name}]");
    let lines: Vec<&str> = text.lines().collect();
    let h = lines.iter().position(|l| l.trim() == header)?;
    let mut out = "\n".repeat(h + 1);
    for l in &lines[h + 1..] {
        if l.trim_start().starts_with('[') {
            break;
        }
        out.push_str(l);
        out.push('\n');
    }
    Some(out)
}

/// A replayable row for other modules' tests (id `id`, sides `a@1` and
/// `a@2`, library `lib | a`).
#[cfg(test)]
pub(crate) fn sample(id: &str, not_reproduced: Option<&str>) -> Bug {
    Bug {
        id: id.into(),
        library: "lib | a".into(),
        title: "t".into(),
        links: vec![],
        class: Class::Safety,
        system: "redis".into(),
        workload: Part::Name("lock".into()),
        nemesis: Part::Name("none".into()),
        args: vec![],
        expect: Expect::TwoHolders,
        per: Per::Run,
        runs: 10,
        buggy: Some("a@1".into()),
        fixed: Some("a@2".into()),
        reference: None,
        not_reproduced: not_reproduced.map(String::from),
        open: false,
        file: Default::default(),
    }
}

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod tests;
