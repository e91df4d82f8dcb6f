//! The catalogue folder: its bug files read one by one (a broken file is
//! reported beside the good rows, never instead of them), a row found by
//! id, and the folder itself found as `clients/` is.

use super::catalogue::{from_source, Bug};
use crate::toml_file::{FileError, Source};
use std::path::{Path, PathBuf};

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

/// A catalogue folder read: its good rows by id, and the files that did
/// not read as rows (each error names its file, line and field). One
/// broken file blocks no other row.
#[derive(Debug, Default)]
pub struct Catalogue {
    pub bugs: Vec<Bug>,
    pub broken: Vec<FileError>,
}

/// Every `*.toml` of `dir`, by file name; an error only when the folder
/// cannot be read.
pub fn load_dir(dir: &Path) -> Result<Catalogue, FileError> {
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
    let mut c = Catalogue::default();
    for p in &paths {
        match load_file(p) {
            Ok(b) => c.bugs.push(b),
            Err(e) => c.broken.push(e),
        }
    }
    Ok(c)
}

/// Find bug `id` in `dir`: its row, or its file's error when that file
/// is broken; the error of an unknown id lists the ids there are.
pub fn find(dir: &Path, id: &str) -> Result<Bug, FileError> {
    let all = load_dir(dir)?;
    if let Some(b) = all.bugs.iter().find(|b| b.id == id) {
        return Ok(b.clone());
    }
    let file = dir.join(format!("{id}.toml"));
    if let Some(e) = all.broken.into_iter().find(|e| Path::new(&e.file) == file) {
        return Err(e);
    }
    let ids: Vec<&str> = all.bugs.iter().map(|b| b.id.as_str()).collect();
    Err(FileError {
        file: file.display().to_string(),
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
    dirs.extend(crate::toml_file::beside_binary("bugs"));
    dirs.iter()
        .find(|d| d.is_dir())
        .cloned()
        .unwrap_or_else(|| PathBuf::from("bugs"))
}
