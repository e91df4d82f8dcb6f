//! Reading a file that holds credentials, or names them: only a regular
//! file on a real file system (never a FIFO, a device, a directory or a
//! `/proc` or `/sys` file such as `/proc/self/environ`), opened once
//! without blocking, checked on the open descriptor, and read up to a cap
//! (a larger file is refused before it is read, and a file that grows
//! while it is read stops at the cap).

use std::io::Read;
use std::path::Path;

/// The cap of an auth file (its TOML).
pub const AUTH_FILE_CAP: u64 = 64 * 1024;
/// The cap of a PEM file: a certificate chain or a private key.
pub const PEM_CAP: u64 = 256 * 1024;
/// The cap of a password or digest file.
pub const PASSWORD_CAP: u64 = 4 * 1024;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// It could not be opened or read.
    Io(std::io::Error),
    /// It is not a regular file: what it is instead.
    NotRegular(&'static str),
    /// It is larger than `cap` bytes.
    TooLarge { cap: u64 },
    /// It is not UTF-8 text.
    NotText,
}

impl ReadError {
    /// The message about `path` (without a hint).
    pub fn message(&self, path: &Path) -> String {
        let p = path.display();
        match self {
            ReadError::Io(e) => format!("cannot read {p}: {e}"),
            ReadError::NotRegular(what) => format!("{p} is {what}, not a regular file"),
            ReadError::TooLarge { cap } => {
                format!("{p} is larger than the cap of {}", size(*cap))
            }
            ReadError::NotText => format!("{p} is not UTF-8 text"),
        }
    }

    /// The hint that goes with [`ReadError::message`].
    pub fn hint(&self) -> &'static str {
        match self {
            ReadError::Io(_) => "paths are relative to the auth file's directory",
            ReadError::NotRegular(_) => {
                "give a regular file (not a FIFO, device, directory, or a file under /proc or /sys)"
            }
            ReadError::TooLarge { .. } => "is it the right file? credentials are a few KiB",
            ReadError::NotText => "give the file as text (PEM, or a password on one line)",
        }
    }
}

fn size(b: u64) -> String {
    if b % 1024 == 0 {
        format!("{} KiB", b / 1024)
    } else {
        format!("{b} bytes")
    }
}

/// A file read by [`read_capped`]: its text and its permission bits.
pub struct Capped {
    pub text: String,
    pub mode: u32,
}

/// Read `path`: a regular file of at most `cap` bytes, on neither procfs
/// nor sysfs. The checks are made on the opened descriptor, so what is
/// checked is what is read.
pub fn read_capped(path: &Path, cap: u64) -> Result<Capped, ReadError> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| ReadError::Io(e.into()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| ReadError::Io(e.into()))?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => None,
        FileType::Directory => Some("a directory"),
        FileType::Fifo => Some("a FIFO"),
        FileType::CharacterDevice | FileType::BlockDevice => Some("a device"),
        FileType::Socket => Some("a socket"),
        _ => Some("not a file"),
    };
    if let Some(k) = kind {
        return Err(ReadError::NotRegular(k));
    }
    let fs = rustix::fs::fstatfs(&fd).map_err(|e| ReadError::Io(e.into()))?;
    let magic = fs.f_type as i64;
    if magic == libc::PROC_SUPER_MAGIC {
        return Err(ReadError::NotRegular("a /proc file"));
    }
    if magic == libc::SYSFS_MAGIC {
        return Err(ReadError::NotRegular("a /sys file"));
    }
    if st.st_size as u64 > cap {
        return Err(ReadError::TooLarge { cap });
    }
    let mut buf = Vec::new();
    std::fs::File::from(fd)
        .take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(ReadError::Io)?;
    if buf.len() as u64 > cap {
        return Err(ReadError::TooLarge { cap });
    }
    let text = String::from_utf8(buf).map_err(|_| ReadError::NotText)?;
    Ok(Capped {
        text,
        mode: st.st_mode & 0o7777,
    })
}

/// A password file given on the command line (`--postgres-password-file`):
/// capped, regular, readable by its owner only; the password is its
/// first line (a trailing newline is not part of it). The error names the
/// file and ends with a hint.
pub fn password_file(path: &Path, flag: &str) -> Result<super::Secret, String> {
    let c = read_capped(path, PASSWORD_CAP).map_err(|e| {
        format!(
            "{flag} {}: {} (hint: {})",
            path.display(),
            e.message(path),
            e.hint()
        )
    })?;
    if c.mode & 0o077 != 0 {
        return Err(format!(
            "{flag} {}: the file holds a secret but is readable by group or others (mode {:04o}) (hint: chmod 600 {})",
            path.display(),
            c.mode & 0o777,
            path.display()
        ));
    }
    let line = c.text.lines().next().unwrap_or_default();
    if line.is_empty() {
        return Err(format!(
            "{flag} {}: the password is empty (hint: write the password on the file's first line)",
            path.display()
        ));
    }
    Ok(super::Secret::new(line))
}
