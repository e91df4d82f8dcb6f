//! Reading the small TOML files that describe workloads and nemeses, with
//! errors that name the file, the line and the field at fault.
//!
//! Both `workloads/*.toml` and `nemesis/*.toml` go through [`parse`] (syntax,
//! unknown fields, wrong types) and then their own checks, which report
//! through [`FileError::field`] so a bad value points at its own line. A name
//! that is not a path is looked up in `./<dir>/<name>.toml` first and then in
//! the copies compiled into lockjaw, then in `<dir>/` beside the binary (an
//! unpacked `make dist` tarball) ([`find`]), so `lockjaw run` works from any
//! directory.
//!
//! A utility: the workload and nemesis modules both read through it.

use serde::de::DeserializeOwned;
use std::fmt;
use std::path::{Path, PathBuf};

/// A workload or nemesis file that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    /// The file, as the user named it (or `<builtin>/dir/name.toml`).
    pub file: String,
    /// 1-based line; 0 when the error concerns the whole file.
    pub line: usize,
    /// The field at fault, if one is.
    pub field: Option<String>,
    pub msg: String,
    /// How to fix it, if known.
    pub hint: Option<String>,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.msg)?;
        if let Some(h) = &self.hint {
            write!(f, " (hint: {h})")?;
        }
        Ok(())
    }
}

/// A file's text and the name to use in errors.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub text: String,
}

impl Source {
    /// An error about `field`, pointing at the line that sets it (or at
    /// the whole file when the field is absent).
    pub fn field(&self, field: &str, msg: impl Into<String>, hint: Option<&str>) -> FileError {
        FileError {
            file: self.name.clone(),
            line: line_of_key(&self.text, field),
            field: Some(field.to_string()),
            msg: msg.into(),
            hint: hint.map(str::to_string),
        }
    }

    /// An error about `field` when its value, if given, lies outside `r`.
    pub fn in_range<N: Number>(
        &self,
        field: &str,
        v: Option<N>,
        r: &Range,
    ) -> Result<(), FileError> {
        match v.and_then(|v| r.refuse(v)) {
            Some((msg, hint)) => Err(self.field(field, msg, Some(&hint))),
            None => Ok(()),
        }
    }

    /// An error about the whole file.
    pub fn whole(&self, msg: impl Into<String>, hint: Option<&str>) -> FileError {
        FileError {
            file: self.name.clone(),
            line: 0,
            field: None,
            msg: msg.into(),
            hint: hint.map(str::to_string),
        }
    }
}

/// A number a file may give: compared as `f64` (exact for every bound
/// used, all far below 2^53), shown as written (`1e308`, not 309 digits).
pub trait Number: Copy {
    fn to_f64(self) -> f64;
    fn show(self) -> String;
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Number for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn show(self) -> String {
                self.to_string()
            }
        }
    )*};
}
integer!(u64, i64, usize);

impl Number for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn show(self) -> String {
        format!("{self:?}")
    }
}

/// The values a numeric field accepts, both ends included, and its unit
/// (" ms", " s", "" for a count).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
    pub unit: &'static str,
}

/// One day in milliseconds: the longest length a file may give in ms.
pub const DAY_MS: f64 = 86_400_000.0;

impl Range {
    pub const fn new(min: f64, max: f64, unit: &'static str) -> Range {
        Range { min, max, unit }
    }

    /// None when `v` lies in the range (NaN never does); else what is
    /// wrong and the hint.
    pub fn refuse<N: Number>(&self, v: N) -> Option<(String, String)> {
        let x = v.to_f64();
        if x >= self.min && x <= self.max {
            return None;
        }
        Some((
            format!("{}{} is out of range", v.show(), self.unit),
            format!("use {} to {}{}", self.min, self.max, self.unit),
        ))
    }
}

/// Parse `src` as TOML into `T`; syntax errors, unknown fields and wrong
/// types name the line and, where there is one, the field.
pub fn parse<T: DeserializeOwned>(src: &Source) -> Result<T, FileError> {
    toml::from_str(&src.text).map_err(|e| {
        let msg = e.message().trim().to_string();
        let (line, key) = match e.span() {
            Some(span) => {
                let line = src.text[..span.start.min(src.text.len())]
                    .matches('\n')
                    .count()
                    + 1;
                (line, key_on_line(&src.text, line))
            }
            None => (0, None),
        };
        let field = field_in_message(&msg).or(key);
        let hint = if msg.starts_with("unknown field") {
            Some("remove it or fix its spelling; the accepted fields are listed above".to_string())
        } else if msg.starts_with("missing field") {
            Some("add it to the file".to_string())
        } else {
            None
        };
        FileError {
            file: src.name.clone(),
            line,
            field,
            msg,
            hint,
        }
    })
}

/// The field a serde message names: "unknown field `x`", "missing field `x`".
fn field_in_message(msg: &str) -> Option<String> {
    for prefix in ["unknown field `", "missing field `", "duplicate field `"] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            return rest.split('`').next().map(str::to_string);
        }
    }
    None
}

/// The key set on `line` (1-based), for `key = value` lines.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let (k, _) = l.split_once('=')?;
    let k = k.trim().trim_matches('"');
    (!k.is_empty() && !k.starts_with('#') && !k.starts_with('[')).then(|| k.to_string())
}

/// The 1-based line that sets `key`, or 0. A dotted `table.field` (e.g.
/// `strike.command`) is found where the file sets it: as a dotted key
/// (`strike.command = ...`), in the `[strike]` section (`command = ...`),
/// or in an inline table (`strike = { command = ... }`); without the
/// field, at the table's first line.
pub fn line_of_key(text: &str, key: &str) -> usize {
    let Some((table, field)) = key.split_once('.') else {
        return text
            .lines()
            .position(|l| l.split_once('=').is_some_and(|(k, _)| bare(k) == key))
            .map_or(0, |i| i + 1);
    };
    let mut section: Option<&str> = None;
    let mut opener = 0;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if let Some(name) = t.strip_prefix('[') {
            let name = name.split(']').next().unwrap_or_default();
            section = Some(bare(name));
            if section == Some(table) && opener == 0 {
                opener = i + 1;
            }
            continue;
        }
        let Some((k, v)) = t.split_once('=') else {
            continue;
        };
        let k = bare(k);
        match section {
            None if k.replace(' ', "") == key => return i + 1,
            None if k == table => {
                let inline = v.trim_start().strip_prefix('{').unwrap_or_default();
                let sets_field = inline
                    .split([',', '{'])
                    .any(|kv| kv.split_once('=').is_some_and(|(k, _)| bare(k) == field));
                if sets_field {
                    return i + 1;
                }
                if opener == 0 {
                    opener = i + 1;
                }
            }
            None if opener == 0
                && k.strip_prefix(table)
                    .is_some_and(|r| r.trim_start().starts_with('.')) =>
            {
                opener = i + 1;
            }
            Some(s) if s == table && k == field => return i + 1,
            _ => {}
        }
    }
    opener
}

/// A key as written, without spaces and quotes.
fn bare(k: &str) -> &str {
    k.trim().trim_matches('"').trim_matches('\'')
}

/// Where a named file was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A file on disk.
    Path(PathBuf),
    /// The copy compiled into lockjaw.
    Builtin,
}

/// `<dir>` in the binary's directory and in each of its parents: where an
/// unpacked `make dist` tarball (`bin/lockjaw` beside `clients/`, `bugs/`,
/// `workloads/`, `nemesis/`) or a checkout (`target/*/lockjaw`) keeps its
/// data, found from any working directory.
pub fn beside_binary(dir: &str) -> Vec<PathBuf> {
    let Ok(exe) = std::env::current_exe() else {
        return Vec::new();
    };
    let Some(bin) = exe.parent() else {
        return Vec::new();
    };
    bin.ancestors().map(|a| a.join(dir)).collect()
}

/// Find `name` (a path, or a name looked up in `./<dir>/<name>.toml`, then
/// among `builtins`, given as `(name, text)`, then in `<dir>/` beside the
/// binary, [`beside_binary`]). Errors list what exists.
pub fn find(
    name: &str,
    dir: &str,
    builtins: &[(&str, &str)],
) -> Result<(Source, Origin), FileError> {
    let as_path = Path::new(name);
    let looks_like_path = name.contains('/') || name.ends_with(".toml");
    let candidates: Vec<PathBuf> = if looks_like_path {
        vec![as_path.to_path_buf()]
    } else {
        vec![Path::new(dir).join(format!("{name}.toml"))]
    };
    if let Some(found) = read_first(&candidates)? {
        return Ok(found);
    }
    if !looks_like_path {
        if let Some((n, text)) = builtins.iter().find(|(n, _)| *n == name) {
            let src = Source {
                name: format!("<builtin>/{dir}/{n}.toml"),
                text: text.to_string(),
            };
            return Ok((src, Origin::Builtin));
        }
        let beside: Vec<PathBuf> = beside_binary(dir)
            .into_iter()
            .map(|d| d.join(format!("{name}.toml")))
            .collect();
        if let Some(found) = read_first(&beside)? {
            return Ok(found);
        }
    }
    let known: Vec<&str> = builtins.iter().map(|(n, _)| *n).collect();
    Err(FileError {
        file: candidates[0].display().to_string(),
        line: 0,
        field: None,
        msg: "no such file".into(),
        hint: Some(format!(
            "name one of {} or give a path to a .toml file",
            known.join(", ")
        )),
    })
}

/// The first of `paths` that is a file, read.
fn read_first(paths: &[PathBuf]) -> Result<Option<(Source, Origin)>, FileError> {
    for p in paths {
        if p.is_file() {
            let text = std::fs::read_to_string(p).map_err(|e| FileError {
                file: p.display().to_string(),
                line: 0,
                field: None,
                msg: format!("cannot read: {e}"),
                hint: None,
            })?;
            let src = Source {
                name: p.display().to_string(),
                text,
            };
            return Ok(Some((src, Origin::Path(p.clone()))));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct T {
        name: String,
        hold_ms: u64,
    }

    fn src(text: &str) -> Source {
        Source {
            name: "w.toml".into(),
            text: text.into(),
        }
    }

    /// A table's field is found where the file sets it, in each of the
    /// three ways TOML allows; an absent one at the table's opening line.
    #[test]
    fn a_tables_field_is_found_on_its_own_line() {
        let inline = "name = \"x\"\nstrike = { action = \"hold\", command = \"\" }\n";
        assert_eq!(line_of_key(inline, "strike.command"), 2);
        assert_eq!(line_of_key(inline, "strike.script"), 2, "the table's line");
        let section = "name = \"x\"\ncommand = 1\n[strike]\naction = \"hold\"\ncommand = \"|\"\n";
        assert_eq!(line_of_key(section, "strike.command"), 5);
        assert_eq!(line_of_key(section, "strike.sha1"), 3);
        assert_eq!(line_of_key(section, "command"), 2, "plain keys as before");
        let dotted = "name = \"x\"\nstrike.action = \"hold\"\nstrike.command = \"SET NX\"\n";
        assert_eq!(line_of_key(dotted, "strike.command"), 3);
        assert_eq!(line_of_key(dotted, "strike.window_ms"), 2);
        let e = src(section).field("strike.command", "bad", Some("fix"));
        assert_eq!(
            e.to_string(),
            "w.toml:5: field `strike.command`: bad (hint: fix)"
        );
    }

    #[test]
    fn wrong_type_names_line_and_field() {
        let e = parse::<T>(&src("name = \"a\"\nhold_ms = \"ten\"\n")).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (2, Some("hold_ms")), "{e}");
        assert!(
            e.to_string().starts_with("w.toml:2: field `hold_ms`: "),
            "{e}"
        );
    }

    #[test]
    fn unknown_field_is_named_with_a_hint() {
        let e = parse::<T>(&src("name = \"a\"\nhold_ms = 1\nhodl = 3\n")).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (3, Some("hodl")), "{e}");
        assert!(e.hint.is_some());
    }

    #[test]
    fn missing_field_is_named() {
        let e = parse::<T>(&src("name = \"a\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("hold_ms"), "{e}");
    }

    #[test]
    fn syntax_error_names_line() {
        let e = parse::<T>(&src("name = \"a\"\nhold_ms = = 1\n")).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn field_error_points_at_its_line() {
        let s = src("# c\nname = \"a\"\n  hold_ms = 0\n");
        let e = s.field("hold_ms", "must be positive", Some("use 1 or more"));
        assert_eq!(
            e.to_string(),
            "w.toml:3: field `hold_ms`: must be positive (hint: use 1 or more)"
        );
    }

    #[test]
    fn a_number_outside_its_range_names_value_field_and_bounds() {
        let s = src("name = \"a\"\nhold_ms = 1e308\n");
        let r = Range::new(0.0, DAY_MS, " ms");
        let e = s.in_range("hold_ms", Some(1e308), &r).unwrap_err();
        assert_eq!(
            e.to_string(),
            "w.toml:2: field `hold_ms`: 1e308 ms is out of range (hint: use 0 to 86400000 ms)"
        );
        assert!(s.in_range("hold_ms", Some(f64::NAN), &r).is_err());
        assert!(s.in_range("hold_ms", Some(u64::MAX), &r).is_err());
        assert!(s.in_range("hold_ms", Some(86_400_000u64), &r).is_ok());
        assert!(s.in_range::<u64>("hold_ms", None, &r).is_ok());
    }

    #[test]
    fn find_lists_builtins_when_missing() {
        let e = find("nope", "workloads-none-here", &[("lock", "")]).unwrap_err();
        assert!(e.to_string().contains("lock"), "{e}");
        let (s, o) = find("lock", "workloads-none-here", &[("lock", "x = 1")]).unwrap();
        assert_eq!((s.text.as_str(), o), ("x = 1", Origin::Builtin));
    }
}
