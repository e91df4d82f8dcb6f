//! A shard's run directory made available under the merged output at the
//! path the unsharded command gives it: a relative symbolic link into the
//! shard's directory (the shards and the merge move together), or with
//! `--copy` a copy (the merge stands alone).

use std::path::{Component, Path, PathBuf};

/// Where merged run directories come from.
pub struct Placer {
    pub out: PathBuf,
    pub copy: bool,
}

impl Placer {
    /// Make `shard/rel` available as `out/rel`; returns that path and
    /// `rel`. A link merge left before is replaced; anything else in the
    /// way is an error naming it.
    pub fn place(&self, shard: &Path, rel: &str) -> Result<(PathBuf, String), String> {
        let rel_path = Path::new(rel);
        if rel_path.is_absolute()
            || rel_path
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(format!(
                "{}: run directory `{rel}` is not beneath the shard (hint: a shard's runs stay under its --out)",
                shard.display()
            ));
        }
        let from = shard.join(rel_path);
        let to = self.out.join(rel_path);
        if !from.is_dir() {
            return Err(format!("{}: no such run directory", from.display()));
        }
        let parent = to.parent().unwrap_or(&self.out);
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        clear_link(&to)?;
        let done = if self.copy {
            copy_dir(&from, &to)
        } else {
            let target = relative(parent, &from)?;
            std::os::unix::fs::symlink(target, &to)
        };
        done.map_err(|e| format!("{}: {e}", to.display()))?;
        Ok((to, rel.to_string()))
    }
}

impl Placer {
    /// Make the whole directory `shard` available as `out/name` (a link,
    /// or a copy); returns that path.
    pub fn place_dir(&self, shard: &Path, name: &str) -> Result<PathBuf, String> {
        let to = self.out.join(name);
        std::fs::create_dir_all(&self.out).map_err(|e| format!("{}: {e}", self.out.display()))?;
        clear_link(&to)?;
        let done = if self.copy {
            copy_dir(shard, &to)
        } else {
            std::os::unix::fs::symlink(relative(&self.out, shard)?, &to)
        };
        done.map_err(|e| format!("{}: {e}", to.display()))?;
        std::path::absolute(&to).map_err(|e| format!("{}: {e}", to.display()))
    }
}

/// The path of `to` seen from the directory `from` (both made absolute).
fn relative(from: &Path, to: &Path) -> Result<PathBuf, String> {
    let abs = |p: &Path| std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()));
    let (f, t) = (abs(from)?, abs(to)?);
    let common = f
        .components()
        .zip(t.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut r = PathBuf::new();
    for _ in f.components().skip(common) {
        r.push("..");
    }
    for c in t.components().skip(common) {
        r.push(c);
    }
    Ok(r)
}

/// Copy a directory tree: files, directories and symbolic links (as links).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type()?;
        if t.is_dir() {
            copy_dir(&src, &dst)?;
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if t.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Remove a link a merge left at `to` before; anything else there is an
/// error (a merge writes into a new directory).
fn clear_link(to: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(to) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::remove_file(to).map_err(|e| format!("{}: {e}", to.display()))
        }
        Ok(_) => Err(format!(
            "{}: already there (hint: merge into a new directory)",
            to.display()
        )),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_linked_relatively_or_copied() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("s1/cells/a-0");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("run.json"), "{}").unwrap();
        let p = Placer {
            out: t.path().join("all"),
            copy: false,
        };
        let (to, rel) = p.place(&t.path().join("s1"), "cells/a-0").unwrap();
        assert_eq!(rel, "cells/a-0");
        assert_eq!(
            std::fs::read_link(&to).unwrap(),
            PathBuf::from("../../s1/cells/a-0")
        );
        assert_eq!(std::fs::read_to_string(to.join("run.json")).unwrap(), "{}");
        p.place(&t.path().join("s1"), "cells/a-0").unwrap();
        let c = Placer {
            out: t.path().join("copy"),
            copy: true,
        };
        let (to, _) = c.place(&t.path().join("s1"), "cells/a-0").unwrap();
        assert!(!std::fs::symlink_metadata(&to)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(c
            .place(&t.path().join("s1"), "cells/a-0")
            .unwrap_err()
            .contains("already there"));
        assert!(p
            .place(&t.path().join("s1"), "../x")
            .unwrap_err()
            .contains("not beneath"));
    }
}
