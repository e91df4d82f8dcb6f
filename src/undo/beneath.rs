//! The run directory as the one root of everything an undo touches on
//! disk. A path read from `undo.jsonl` or `cluster.json` becomes a path
//! relative to the run directory and is opened from the directory's
//! descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: no
//! `..`, absolute path or symbolic link can lead out of it, and nothing is
//! checked first and acted on later. Directories are removed by a walk over
//! descriptors that unlinks symbolic links instead of following them.
//! Also the ownership rule `lockjaw heal` applies before it trusts a run
//! directory or its undo log. Built on rustix's `openat2`, `Dir`,
//! `unlinkat` and `fstat`; the walk itself is ours.

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// Never leave the directory, never follow a symbolic link.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS);

/// How deep a data directory may nest before its removal gives up.
const MAX_DEPTH: usize = 256;

/// A run directory, opened once; every path under it is resolved from this
/// descriptor.
#[derive(Debug)]
pub struct RunDir {
    fd: OwnedFd,
    /// The directory as it was given (for messages).
    shown: PathBuf,
    /// Its absolute and canonical spellings: an absolute path read from a
    /// file is under the run directory when it starts with one of them.
    names: Vec<PathBuf>,
}

impl RunDir {
    /// Open `dir` (a symbolic link in the path the user gave is followed:
    /// it is their argument, not a file's).
    pub fn open(dir: &Path) -> io::Result<RunDir> {
        let fd = rfs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut names = Vec::new();
        for n in [std::path::absolute(dir), std::fs::canonicalize(dir)]
            .into_iter()
            .flatten()
        {
            if !names.contains(&n) {
                names.push(n);
            }
        }
        Ok(RunDir {
            fd,
            shown: dir.to_path_buf(),
            names,
        })
    }

    /// The directory as it was given.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// `recorded` (absolute, or relative to the run directory) as a path
    /// relative to the run directory, or why it is not under it.
    pub fn relative(&self, recorded: &Path) -> Result<PathBuf, String> {
        let rest = if recorded.is_absolute() {
            self.names
                .iter()
                .find_map(|n| recorded.strip_prefix(n).ok())
                .ok_or_else(|| {
                    format!(
                        "{} is outside the run directory {}",
                        recorded.display(),
                        self.shown.display()
                    )
                })?
        } else {
            recorded
        };
        let mut out = PathBuf::new();
        for c in rest.components() {
            match c {
                Component::Normal(n) => out.push(n),
                Component::CurDir => {}
                _ => {
                    return Err(format!(
                        "{} leaves the run directory {}",
                        recorded.display(),
                        self.shown.display()
                    ))
                }
            }
        }
        Ok(out)
    }

    /// Open `rel` beneath the run directory (`.` for an empty path),
    /// following no symbolic link.
    pub fn open_at(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        Ok(rfs::openat2(
            &self.fd,
            rel,
            flags | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            mode,
            RESOLVE,
        )?)
    }

    /// Open a regular file beneath the run directory (never a FIFO or a
    /// device: no open blocks and nothing but a file is written).
    pub fn open_file(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<File> {
        let fd = self.open_at(rel, flags | OFlags::NONBLOCK, mode)?;
        let st = rfs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(io::Error::other("not a regular file"));
        }
        // Reads and writes block as usual from here on.
        let fl = rfs::fcntl_getfl(&fd)?;
        rfs::fcntl_setfl(&fd, fl - OFlags::NONBLOCK)?;
        Ok(File::from(fd))
    }

    /// The whole content of a regular file beneath the run directory.
    pub fn read(&self, rel: &Path) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.open_file(rel, OFlags::RDONLY, Mode::empty())?
            .read_to_end(&mut buf)?;
        Ok(buf)
    }

    /// A path naming the directory `rel` (beneath the run directory, opened
    /// now) for code that takes paths: `/proc/self/fd/N` of the returned
    /// descriptor, which must be kept open while the path is used.
    pub fn dir_path(&self, rel: &Path) -> io::Result<(OwnedFd, PathBuf)> {
        let fd = self.open_at(rel, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())?;
        let p = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        Ok((fd, p))
    }

    /// Remove the directory `rel` (strictly beneath the run directory) and
    /// everything in it. A symbolic link inside is removed, never followed;
    /// `rel` itself must be a directory, not a link to one. A directory
    /// that is already gone counts as removed.
    pub fn remove_tree(&self, rel: &Path) -> io::Result<()> {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(io::Error::other("is the run directory itself"));
        };
        let parent = self.open_at(parent, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())?;
        let name = c_name(name)?;
        let dir = match rfs::openat2(
            &parent,
            &name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE,
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        empty_dir(&dir, 0)?;
        rfs::unlinkat(&parent, &name, AtFlags::REMOVEDIR)?;
        Ok(())
    }

    /// Remove the file `rel` beneath the run directory (a symbolic link
    /// is removed, never followed); a file already gone counts as removed.
    pub fn remove_file(&self, rel: &Path) -> io::Result<()> {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(io::Error::other("is the run directory itself"));
        };
        let parent = self.open_at(parent, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())?;
        match rfs::unlinkat(&parent, &c_name(name)?, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Refuse a run directory another user could have written to.
    pub fn check_private(&self) -> Result<(), String> {
        check_private(&self.fd, &self.shown)
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_encoded_bytes()).map_err(|_| io::Error::other("a NUL byte in the name"))
}

/// Remove everything inside the open directory `dir`.
fn empty_dir(dir: &OwnedFd, depth: usize) -> io::Result<()> {
    let mut entries = Vec::new();
    for e in rfs::Dir::read_from(dir)? {
        let e = e?;
        let name = e.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        entries.push((name.to_owned(), e.file_type()));
    }
    for (name, ty) in entries {
        let ty = match ty {
            FileType::Unknown => {
                FileType::from_raw_mode(rfs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)?.st_mode)
            }
            t => t,
        };
        if ty == FileType::Directory {
            if depth >= MAX_DEPTH {
                return Err(io::Error::other(format!(
                    "nested deeper than {MAX_DEPTH} directories"
                )));
            }
            let sub = rfs::openat2(
                dir,
                &name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
                RESOLVE,
            )?;
            empty_dir(&sub, depth + 1)?;
            rfs::unlinkat(dir, &name, AtFlags::REMOVEDIR)?;
        } else {
            rfs::unlinkat(dir, &name, AtFlags::empty())?;
        }
    }
    Ok(())
}

/// Refuse a file or directory (open as `fd`) that is owned by another user
/// than the one running lockjaw or that its group or others may write to:
/// whoever could write it could make heal act as us.
pub fn check_private(fd: impl AsFd, shown: &Path) -> Result<(), String> {
    let st = rfs::fstat(fd).map_err(|e| format!("{}: {e}", shown.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(format!(
            "{}: owned by uid {}, not by uid {me} who runs heal; heal trusts only files of its own user (hint: run `lockjaw heal` as the user who ran the test, or `chown` it after checking its content)",
            shown.display(),
            st.st_uid
        ));
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "its group and every user",
            (true, false) => "its group",
            _ => "every user",
        };
        return Err(format!(
            "{}: writable by {who} (mode {mode:o}); heal trusts only files no other user can change (hint: check its content, then `chmod go-w {}`)",
            shown.display(),
            shown.display()
        ));
    }
    Ok(())
}

/// Whether an I/O error says a symbolic link or `..` stood in the way.
pub fn explain(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ELOOP) => "it is, or passes through, a symbolic link".into(),
        Some(libc::EXDEV) => "it leads out of the run directory".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn recorded_paths_map_beneath_the_run_directory_or_not_at_all() {
        let t = tempfile::tempdir().unwrap();
        let run = RunDir::open(t.path()).unwrap();
        let rel = run.relative(&t.path().join("faketime/n1.offset")).unwrap();
        assert_eq!(rel, Path::new("faketime/n1.offset"));
        assert_eq!(run.relative(Path::new("a/./b")).unwrap(), Path::new("a/b"));
        for bad in [
            t.path().join("../victim"),
            PathBuf::from("/etc/passwd"),
            PathBuf::from("a/../../b"),
        ] {
            assert!(run.relative(&bad).is_err(), "{}", bad.display());
        }
    }

    #[test]
    fn a_symlink_is_neither_opened_nor_followed_by_the_walk() {
        let t = tempfile::tempdir().unwrap();
        let (inside, outside) = (t.path().join("run"), t.path().join("outside"));
        std::fs::create_dir_all(inside.join("data/sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::fs::write(inside.join("data/sub/f"), "y").unwrap();
        symlink(&outside, inside.join("data/sub/out")).unwrap();
        symlink(&outside, inside.join("link")).unwrap();
        let run = RunDir::open(&inside).unwrap();
        let e = run
            .open_file(Path::new("link/keep"), OFlags::RDONLY, Mode::empty())
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert!(run.remove_tree(Path::new("link")).is_err());
        run.remove_tree(Path::new("data")).unwrap();
        assert!(!inside.join("data").exists());
        assert!(outside.join("keep").exists());
        run.remove_tree(Path::new("data")).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let run = RunDir::open(t.path()).unwrap();
        run.check_private().unwrap();
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = run.check_private().unwrap_err();
        assert!(e.contains("every user") && e.contains("chmod go-w"), "{e}");
    }
}
