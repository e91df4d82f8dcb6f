//! Data directories outside the cluster directory, for servers that run
//! as another system user who cannot reach it (PostgreSQL and MariaDB
//! refuse root, and a clone under `/root` is closed to the `postgres` and
//! `mysql` users): one
//! directory per node directly in the temporary directory, named
//! `lockjaw-<group>-<node>` (the group is the run's id, or
//! `SYSTEM-BASEPORT` for `cluster up`).
//!
//! The name is the proof: `heal` removes such a directory only when its
//! name carries the run's id, and only through a descriptor of the
//! temporary directory that follows no symbolic link
//! ([`crate::undo::RunDir::remove_tree`]).

use std::path::{Path, PathBuf};

/// The temporary directory the data directories live in.
pub fn root() -> PathBuf {
    std::env::temp_dir()
}

/// The data directory of node `node` of group `group`.
pub fn dir_for(group: &str, node: &str) -> PathBuf {
    root().join(format!("lockjaw-{group}-{node}"))
}

/// The file name of `path` if it is such a data directory (directly in
/// the temporary directory, named `lockjaw-…`), whatever its group.
fn name_of(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    (path.parent() == Some(root().as_path())
        && name.starts_with("lockjaw-")
        && name.len() > "lockjaw-".len()
        && !name.contains('/'))
    .then_some(name)
}

/// True if `path` is a data directory of this kind.
pub fn is_tmp_data(path: &Path) -> bool {
    name_of(path).is_some()
}

/// Remove the data directory `path` of node `node`, if its name is
/// `lockjaw-<group>-<node>`; refused (an error naming it) otherwise. A
/// directory already gone counts as removed.
pub fn remove(path: &Path, group: &str, node: &str) -> Result<(), String> {
    let expected = format!("lockjaw-{group}-{node}");
    match name_of(path) {
        Some(name) if name == expected => {}
        _ => {
            return Err(format!(
                "{} is not the data directory {expected} in {}: left alone",
                path.display(),
                root().display()
            ))
        }
    }
    let tmp =
        crate::undo::RunDir::open(&root()).map_err(|e| format!("{}: {e}", root().display()))?;
    match tmp.remove_tree(Path::new(&expected)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {}", path.display(), crate::undo::explain(&e))),
    }
}

/// Remove the data directory `path` of node `node` of run `run_id`: in
/// the run's own group, or in the group of the server a run starts beside
/// its system (`--storage postgres|mariadb`,
/// [`super::postgres::storage_group`], [`super::mariadb::storage_group`]).
pub fn remove_for_run(path: &Path, run_id: &str, node: &str) -> Result<(), String> {
    remove(path, run_id, node)
        .or_else(|_| remove(path, &super::postgres::storage_group(run_id), node))
        .or_else(|_| remove(path, &super::mariadb::storage_group(run_id), node))
}

/// Remove `path` after its node `node` stopped (lockjaw's own record, as
/// `Cluster::close` has it): any group, the node's name at the end.
pub fn remove_own(path: &Path, node: &str) -> Result<(), String> {
    let group = name_of(path)
        .and_then(|n| n.strip_prefix("lockjaw-"))
        .and_then(|n| n.strip_suffix(&format!("-{node}")))
        .filter(|g| !g.is_empty())
        .ok_or_else(|| {
            format!(
                "{} is not a data directory of node {node}: left alone",
                path.display()
            )
        })?;
    remove(path, group, node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_directory_of_the_group_is_removed() {
        let d = dir_for("lockjaw-test-tmpdata", "pg1");
        std::fs::create_dir_all(d.join("base")).unwrap();
        std::fs::write(d.join("base/x"), "x").unwrap();
        assert!(is_tmp_data(&d));
        assert!(!is_tmp_data(Path::new("/etc")));
        let e = remove(&d, "another-run", "pg1").unwrap_err();
        assert!(e.contains("left alone"), "{e}");
        assert!(d.exists());
        assert!(remove(Path::new("/etc/passwd"), "x", "passwd").is_err());
        remove(&d, "lockjaw-test-tmpdata", "pg1").unwrap();
        assert!(!d.exists());
        remove(&d, "lockjaw-test-tmpdata", "pg1").unwrap();
    }
}
