//! Reading the catalogue: `bugs/ID.toml` files parsed with the project's
//! TOML errors (file, line, field, hint), checked (id = file stem, the
//! run flags parse as `lockjaw run` parses them, inline `[workload]` and
//! `[nemesis]` tables are valid workload and nemesis files), and the
//! catalogue directory found as `clients/` is.

use super::expect::Expect;
use crate::toml_file::{self as file, FileError, Source};
use clap::Parser;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// What a bug breaks: a safety promise or a liveness one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    Run,
    Injection,
}

/// The buggy or the fixed release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    Buggy,
    Fixed,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Buggy => "buggy",
            Role::Fixed => "fixed",
        }
    }
}

/// A row that cannot be replayed here, or one whose bug no release has
/// fixed yet (`open`: replayed on its buggy side only).
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
#[derive(Clone, Debug, PartialEq)]
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
    status: Option<Status>,
    reason: Option<String>,
}

/// One catalogue row, checked.
#[derive(Clone, Debug, PartialEq)]
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
    /// may lack them.
    pub buggy: Option<String>,
    pub fixed: Option<String>,
    /// Why the row is not replayed (`status = "not-reproduced"`).
    pub not_reproduced: Option<String>,
    /// `status = "open"`: a bug no release is known to fix (found by
    /// `lockjaw explore`, reported to its maintainers); no `[fixed]` side.
    pub open: bool,
    /// The file it came from.
    pub file: PathBuf,
}

impl Bug {
    pub fn client(&self, role: Role) -> Option<&str> {
        match role {
            Role::Buggy => self.buggy.as_deref(),
            Role::Fixed => self.fixed.as_deref(),
        }
    }

    /// `buggy → fixed` clients.
    pub fn sides_text(&self) -> String {
        format!(
            "{} → {}",
            self.buggy.as_deref().unwrap_or("—"),
            self.fixed.as_deref().unwrap_or("—")
        )
    }
}

/// Runs per side of a row without `runs`.
pub const DEFAULT_RUNS: u32 = 10;

/// The flags a bug's `args` may not set: `lockjaw bugs run` sets them.
const RESERVED: [&str; 10] = [
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
    let not_reproduced = not_reproduced(src, f.status, f.reason)?;
    let open = f.status == Some(Status::Open);
    check_sides(src, &f.buggy, &f.fixed, not_reproduced.is_some())?;
    if open && f.fixed.is_some() {
        return Err(src.field(
            "status",
            "an open row has a [fixed] side: a release fixes the bug",
            Some("remove status = \"open\" now that a release fixes it, or remove [fixed]"),
        ));
    }
    if f.runs == Some(0) {
        return Err(src.field(
            "runs",
            "0 runs per side measure nothing",
            Some("give 1 or more, or leave runs out (10)"),
        ));
    }
    let workload = part(src, "workload", f.workload, "fenced-counter")?;
    let nemesis = part(src, "nemesis", f.nemesis, "none")?;
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
        buggy: f.buggy.map(|s| s.client),
        fixed: f.fixed.map(|s| s.client),
        not_reproduced,
        open,
        file: path.to_path_buf(),
    })
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
        (Some(Status::NotReproduced), Some(r)) if !r.trim().is_empty() => Some(r),
        (Some(Status::NotReproduced), _) => {
            return Err(src.field(
                "reason",
                "a not-reproduced row needs its reason",
                Some("say what was found in the library's source, e.g. reason = \"0.4.0 does not import on Python 3.11\""),
            ))
        }
        (None | Some(Status::Open), Some(_)) => {
            return Err(src.field(
                "reason",
                "a reason is given, but the row is not marked not-reproduced",
                Some("add status = \"not-reproduced\", or remove the reason"),
            ))
        }
        (None | Some(Status::Open), None) => None,
    })
}

/// `[buggy]`, `[fixed]`: a replayable row has its buggy side; the fixed
/// side may wait for a release that fixes the bug (a row `lockjaw
/// explore` wrote: `bugs run` then runs the buggy side and says so).
fn check_sides(
    src: &Source,
    buggy: &Option<SideFile>,
    fixed: &Option<SideFile>,
    not_reproduced: bool,
) -> Result<(), FileError> {
    if !not_reproduced && buggy.is_none() {
        return Err(src.whole(
            "no [buggy] side",
            Some("add [buggy] with client = \"NAME@VERSION\", or mark the row status = \"not-reproduced\" with its reason"),
        ));
    }
    for (name, side) in [("buggy", buggy), ("fixed", fixed)] {
        if side.as_ref().is_some_and(|s| s.client.trim().is_empty()) {
            return Err(src.field(
                "client",
                format!("[{name}] names no client"),
                Some("use builtin, an adapter name, NAME@VERSION or a path"),
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

/// Read one bug file.
pub fn load_file(path: &Path) -> Result<Bug, FileError> {
    let text = std::fs::read_to_string(path).map_err(|e| FileError {
        file: path.display().to_string(),
        line: 0,
        field: None,
        msg: format!("cannot read: {e}"),
        hint: None,
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let src = Source {
        name: path.display().to_string(),
        text,
    };
    from_source(&src, &stem, path)
}

/// Every `*.toml` of `dir`, by id.
pub fn load_dir(dir: &Path) -> Result<Vec<Bug>, FileError> {
    let rd = std::fs::read_dir(dir).map_err(|e| FileError {
        file: dir.display().to_string(),
        line: 0,
        field: None,
        msg: format!("cannot read the catalogue: {e}"),
        hint: Some("give --catalogue DIR or set LOCKJAW_BUGS to the folder of bug files".into()),
    })?;
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
        .collect();
    paths.sort();
    paths.iter().map(|p| load_file(p)).collect()
}

/// Find bug `id` in `dir`; the error lists the ids there are.
pub fn find(dir: &Path, id: &str) -> Result<Bug, FileError> {
    let all = load_dir(dir)?;
    let ids: Vec<&str> = all.iter().map(|b| b.id.as_str()).collect();
    if let Some(b) = all.iter().find(|b| b.id == id) {
        return Ok(b.clone());
    }
    Err(FileError {
        file: dir.join(format!("{id}.toml")).display().to_string(),
        line: 0,
        field: None,
        msg: format!("no bug {id:?} in the catalogue"),
        hint: Some(if ids.is_empty() {
            "the catalogue is empty".into()
        } else {
            format!("use one of {} (lockjaw bugs list)", ids.join(", "))
        }),
    })
}

/// The catalogue directory: `--catalogue`/`LOCKJAW_BUGS` when given, else
/// the current directory's `bugs/`, else `bugs/` next to the binary or in
/// one of its parent directories (a checkout's `target/*/lockjaw`).
pub fn resolve_dir(given: Option<&Path>) -> PathBuf {
    if let Some(d) = given {
        return d.to_path_buf();
    }
    let mut dirs = vec![PathBuf::from("bugs")];
    if let Ok(exe) = std::env::current_exe() {
        if let Some(bin) = exe.parent() {
            dirs.extend(bin.ancestors().map(|a| a.join("bugs")));
        }
    }
    dirs.iter()
        .find(|d| d.is_dir())
        .cloned()
        .unwrap_or_else(|| PathBuf::from("bugs"))
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
        not_reproduced: not_reproduced.map(String::from),
        open: false,
        file: Default::default(),
    }
}

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod tests;
