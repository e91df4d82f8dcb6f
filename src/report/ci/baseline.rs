//! `--baseline FILE`: the outcomes a library documents, accepted with a
//! reason. A TOML file of `[[accept]]` tables:
//!
//! ```toml
//! [[accept]]
//! kind = "stale-writes"        # an anomaly kind (compare cells, runs) or a row's expect kind
//! client = "python-redis-py"   # optional: system, client, nemesis, fencing (on/off), bug, side
//! fencing = "off"
//! reason = "documented: no fencing token"
//! ```
//!
//! An entry matches a failed case when its kind is one of the case's and
//! each key it gives equals the case's; it needs a `reason` and a `kind`
//! or a `bug`. Bad input is an error naming the file, the line and the
//! field.

use crate::toml_file::{self as file, FileError, Source};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The keys an entry may match on, besides `kind`.
pub const KEYS: [&str; 7] = [
    "system", "client", "nemesis", "fencing", "bug", "side", "family",
];

/// A baseline file, read and checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Baseline {
    /// The file as named (for messages).
    pub file: String,
    pub entries: Vec<Entry>,
}

/// One accepted outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The line of its `[[accept]]`.
    pub line: usize,
    pub kind: Option<String>,
    pub keys: BTreeMap<String, String>,
    pub reason: String,
}

impl Entry {
    /// Whether it accepts anomaly `kind` in a case with `keys`.
    pub fn matches(&self, kind: &str, keys: &BTreeMap<String, String>) -> bool {
        self.kind.as_deref().map_or(true, |k| k == kind)
            && self.keys.iter().all(|(k, v)| keys.get(k) == Some(v))
    }

    /// What it accepts, in words: `stale-writes with client = x`.
    pub fn what(&self) -> String {
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        match (&self.kind, keys.is_empty()) {
            (Some(k), true) => k.clone(),
            (Some(k), false) => format!("{k} with {}", keys.join(", ")),
            (None, _) => keys.join(", "),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineFile {
    #[serde(default)]
    accept: Vec<EntryFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    kind: Option<String>,
    system: Option<String>,
    client: Option<String>,
    nemesis: Option<String>,
    fencing: Option<String>,
    bug: Option<String>,
    side: Option<String>,
    family: Option<String>,
    reason: Option<String>,
}

impl Baseline {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<Baseline, FileError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| FileError {
            file: name.clone(),
            line: 0,
            field: None,
            msg: format!("cannot read: {e}"),
            hint: None,
        })?;
        Baseline::parse(&Source { name, text })
    }

    /// Parse and check a baseline's text.
    pub fn parse(src: &Source) -> Result<Baseline, FileError> {
        let f: BaselineFile = file::parse(src)?;
        let headers: Vec<usize> = src
            .text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim().replace(' ', "") == "[[accept]]")
            .map(|(i, _)| i + 1)
            .collect();
        let mut entries = vec![];
        for (i, e) in f.accept.into_iter().enumerate() {
            let line = headers.get(i).copied().unwrap_or(0);
            let err = |field: &str, msg: &str, hint: &str| FileError {
                file: src.name.clone(),
                line: field_line(&src.text, line, headers.get(i + 1).copied(), field),
                field: Some(field.into()),
                msg: format!("entry {}: {msg}", i + 1),
                hint: Some(hint.into()),
            };
            let reason = e.reason.clone().unwrap_or_default();
            if reason.trim().is_empty() {
                return Err(err(
                    "reason",
                    "an accepted outcome needs its reason",
                    "reason = \"documented: no fencing token\"",
                ));
            }
            if e.kind.is_none() && e.bug.is_none() {
                return Err(err(
                    "kind",
                    "accepts nothing: give a kind, or a bug (a row of the catalogue)",
                    "kind = \"stale-writes\", or bug = \"ID\" with side = \"buggy\"",
                ));
            }
            if let Some(f) = e.fencing.as_deref().filter(|f| !["on", "off"].contains(f)) {
                return Err(err(
                    "fencing",
                    &format!("`{f}` is not on or off"),
                    "fencing = \"off\"",
                ));
            }
            if let Some(s) = e
                .side
                .as_deref()
                .filter(|s| !["buggy", "fixed", "reference"].contains(s))
            {
                return Err(err(
                    "side",
                    &format!("`{s}` is no side"),
                    "side = \"buggy\", \"fixed\" or \"reference\"",
                ));
            }
            let values = [
                e.system, e.client, e.nemesis, e.fencing, e.bug, e.side, e.family,
            ];
            let keys = KEYS
                .iter()
                .zip(values)
                .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                .collect();
            entries.push(Entry {
                line,
                kind: e.kind,
                keys,
                reason,
            });
        }
        Ok(Baseline {
            file: src.name.clone(),
            entries,
        })
    }
}

/// The line setting `field` between an entry's header and the next one,
/// else the header's.
fn field_line(text: &str, header: usize, next: Option<usize>, field: &str) -> usize {
    text.lines()
        .enumerate()
        .skip(header)
        .take(next.map_or(usize::MAX, |n| n.saturating_sub(header + 1)))
        .find(|(_, l)| l.split_once('=').is_some_and(|(k, _)| k.trim() == field))
        .map_or(header, |(i, _)| i + 1)
}
