//! cgroup v2 directories for what lockjaw starts, found from
//! /proc/self/mountinfo (pure v2 or the hybrid `unified` mount).
//!
//! Layout: `lockjaw/GROUP/LEAF` under the v2 root. A GROUP is one run
//! (`lockjaw/<run-id>`) or one `cluster up` (`lockjaw/SYSTEM-BASEPORT`);
//! every child lives in a LEAF of its own (a node, a worker incarnation),
//! so a partition nemesis can match a node's sockets with `iptables -A
//! OUTPUT -m cgroup --path PATH`, and closing one child never touches
//! another. The child joins its leaf between fork and exec
//! ([`super::spawn`]), so nothing it runs is ever outside it.
//!
//! A group carries an owner tag (an extended attribute on its directory:
//! the device and inode of the run or cluster directory that created it).
//! Only root (or whoever may write the cgroup directory) can set it, so
//! `heal` and `cluster down` can prove that a group, and every process in
//! it, belongs to the directory they were given; see [`super::Owner`].

use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A cgroup v2 directory for one child, so `iptables -m cgroup --path
/// <iptables_path>` rules in the OUTPUT chain can match its sockets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroup {
    /// Absolute directory, e.g. `/sys/fs/cgroup/unified/lockjaw/redis-17000/redis1`.
    pub dir: PathBuf,
    /// The path relative to the cgroup v2 root, as iptables' `--path` wants it.
    pub iptables_path: String,
}

/// The extended attributes a group's owner tag is stored in: `trusted.`
/// (settable by root only) where the kernel allows it, else `user.`.
const TAG_ATTRS: [&str; 2] = ["trusted.lockjaw.owner", "user.lockjaw.owner"];

/// The directory every lockjaw cgroup lives under, relative to the v2 root.
pub const TOP: &str = "lockjaw";

impl Cgroup {
    /// The cgroup v2 mount point (`/sys/fs/cgroup` on a pure v2 host,
    /// `/sys/fs/cgroup/unified` on a hybrid one), if writable.
    pub fn root() -> Option<PathBuf> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let root = info.lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            if post.split_whitespace().next()? != "cgroup2" {
                return None;
            }
            Some(PathBuf::from(pre.split_whitespace().nth(4)?))
        })?;
        // SAFETY: access(2) on a NUL-terminated path we own.
        let c = CString::new(root.as_os_str().as_encoded_bytes()).ok()?;
        (unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0).then_some(root)
    }

    /// A cgroup at `rel` (e.g. `lockjaw/redis-17000/redis1`) under the v2
    /// root; `None` when this host has no writable cgroup v2.
    pub fn under_root(rel: &str) -> Option<Cgroup> {
        Some(Cgroup {
            dir: Cgroup::root()?.join(rel),
            iptables_path: rel.to_string(),
        })
    }

    /// Create the group `rel` (`lockjaw/NAME`) and tag it with `tag` (see
    /// [`super::Owner`]). Idempotent for the same tag. A group that exists
    /// with another tag is taken over only when no process is left in it.
    /// `Ok(None)`: this host has no writable cgroup v2.
    pub fn create_group(rel: &str, tag: &str) -> Result<Option<PathBuf>, String> {
        let Some(root) = Cgroup::root() else {
            return Ok(None);
        };
        group_name(rel)?;
        let dir = root.join(rel);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        match read_tag(&dir) {
            Some(t) if t == tag => return Ok(Some(dir)),
            Some(_) if populated(&dir) => {
                return Err(format!(
                    "cgroup {} belongs to another run or cluster directory and still has processes (hint: stop that one first, e.g. `lockjaw cluster down --dir` or `lockjaw heal`)",
                    dir.display()
                ))
            }
            _ => {}
        }
        write_tag(&dir, tag).map_err(|e| {
            format!(
                "{}: cannot set its owner tag: {e} (hint: lockjaw needs root and a cgroup v2 mount that keeps extended attributes)",
                dir.display()
            )
        })?;
        Ok(Some(dir))
    }

    /// The absolute directory of the group `rel` if it exists and carries
    /// `tag`. `Err` says why not (missing: `Ok(None)`).
    pub fn proven_group(root: &Path, rel: &str, tag: &str) -> Result<Option<PathBuf>, String> {
        group_name(rel)?;
        let dir = root.join(rel);
        if !dir.is_dir() {
            return Ok(None);
        }
        match read_tag(&dir) {
            Some(t) if t == tag => Ok(Some(dir)),
            Some(_) => Err(format!(
                "cgroup {} belongs to another run or cluster directory: left alone",
                dir.display()
            )),
            // A creator killed between making the group and tagging it
            // leaves it untagged; with no process in it (read, not
            // guessed), removing it signals nobody.
            None if certainly_empty(&dir) => Ok(Some(dir)),
            None => Err(format!(
                "cgroup {} carries no owner tag and has processes, so nothing proves it is this directory's: left alone",
                dir.display()
            )),
        }
    }

    /// Kill everything left in a cgroup directory (`cgroup.kill`, which
    /// covers its descendants) and remove it, its sub-directories first.
    /// Idempotent. Only directories under `lockjaw/` are touched. `Err`
    /// names what could not be removed within a few seconds.
    pub fn remove_tree(dir: &Path) -> Result<(), String> {
        if !dir.components().any(|c| c.as_os_str() == TOP) || !dir.is_dir() {
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            kill(dir);
            let sub: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path())
                        .collect()
                })
                .unwrap_or_default();
            for s in &sub {
                // Leaves first; what fails is retried below.
                let _ = Cgroup::remove_tree(s);
            }
            match std::fs::remove_dir(dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("cannot remove cgroup {}: {e}", dir.display()))
                }
                // Busy: the killed processes are still exiting, or a child
                // joined between the kill and now. Kill again.
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// [`Cgroup::remove_tree`], best effort (a warning in the log).
    pub fn remove_dir(dir: &Path) {
        if let Err(e) = Cgroup::remove_tree(dir) {
            tracing::warn!("{e}");
        }
    }

    /// Remove the group directory if nothing is left in it (no process, no
    /// sub-directory); leaves it otherwise.
    pub fn remove_if_empty(dir: &Path) {
        if dir.components().any(|c| c.as_os_str() == TOP) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Check `rel` is `lockjaw/NAME` with one plain NAME (no `/`, `.`, `..`).
pub fn group_name(rel: &str) -> Result<&str, String> {
    match rel.split('/').collect::<Vec<_>>().as_slice() {
        [top, name] if *top == TOP && plain(name) => Ok(name),
        _ => Err(format!(
            "{rel:?} is not a lockjaw cgroup group (lockjaw/NAME)"
        )),
    }
}

/// A leaf path `lockjaw/NAME/LEAF` split into its group and leaf name.
pub fn split_leaf(rel: &str) -> Option<(String, &str)> {
    let (group, leaf) = rel.rsplit_once('/')?;
    (group_name(group).is_ok() && plain(leaf)).then(|| (group.to_string(), leaf))
}

fn plain(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The cgroup v2 path of a process (`/lockjaw/ID/worker-0.0`), from
/// `/proc/PID/cgroup`.
pub fn of_pid(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// True while a process is in the cgroup or one below it.
pub fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|t| t.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

/// Whether `cgroup.events` says the group and its descendants have no
/// process (false when it cannot be read).
fn certainly_empty(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .is_ok_and(|t| t.lines().any(|l| l == "populated 0"))
}

/// Freeze (`true`) or thaw a cgroup and everything below it
/// (`cgroup.freeze`), then wait up to 2 s until `cgroup.events` says so.
/// Unlike SIGSTOP to a process group, this reaches processes that left
/// the group with `setsid()`.
pub fn freeze(dir: &Path, on: bool) -> std::io::Result<()> {
    std::fs::write(dir.join("cgroup.freeze"), if on { "1" } else { "0" })?;
    let want = if on { "frozen 1" } else { "frozen 0" };
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let events = std::fs::read_to_string(dir.join("cgroup.events"))?;
        if events.lines().any(|l| l == want) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{}: not {want} within 2 s", dir.display()),
    ))
}

/// True while the cgroup is frozen (`cgroup.freeze` is 1).
pub fn is_frozen(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.freeze")).is_ok_and(|t| t.trim() == "1")
}

/// SIGKILL everything in the cgroup and below and wait up to `limit`
/// until it is empty; `false` if something is left.
pub fn kill_all(dir: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if !populated(dir) {
            return true;
        }
        kill(dir);
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// SIGKILL every process in the cgroup and below: `cgroup.kill` (Linux
/// 5.14), else each PID `cgroup.procs` lists (none can escape a cgroup by
/// itself, so each is the cgroup's own).
fn kill(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: plain syscall on a PID listed by the cgroup we own.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn cpath(p: &Path) -> Option<CString> {
    CString::new(p.as_os_str().as_encoded_bytes()).ok()
}

fn read_tag(dir: &Path) -> Option<String> {
    let c = cpath(dir)?;
    TAG_ATTRS.iter().find_map(|name| {
        let n = CString::new(*name).ok()?;
        let mut buf = [0u8; 128];
        // SAFETY: getxattr(2) into a buffer of the size we pass.
        let len =
            unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        (len > 0).then(|| String::from_utf8_lossy(&buf[..len as usize]).into_owned())
    })
}

fn write_tag(dir: &Path, tag: &str) -> std::io::Result<()> {
    let c = cpath(dir).ok_or(std::io::ErrorKind::InvalidInput)?;
    let mut last = std::io::Error::from(std::io::ErrorKind::Unsupported);
    for name in TAG_ATTRS {
        let n = CString::new(name).expect("no NUL");
        // SAFETY: setxattr(2) with a value buffer of the length we pass.
        let rc =
            unsafe { libc::setxattr(c.as_ptr(), n.as_ptr(), tag.as_ptr().cast(), tag.len(), 0) };
        if rc == 0 {
            return Ok(());
        }
        last = std::io::Error::last_os_error();
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_and_leaf_names_are_checked() {
        assert_eq!(group_name("lockjaw/abc-1").unwrap(), "abc-1");
        for bad in [
            "lockjaw",
            "lockjaw/..",
            "lockjaw/a/b",
            "x/a",
            "lockjaw/",
            "lockjaw/a b",
        ] {
            assert!(group_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            split_leaf("lockjaw/abc/worker-0.1"),
            Some(("lockjaw/abc".to_string(), "worker-0.1"))
        );
        assert_eq!(split_leaf("lockjaw/abc/../x"), None);
        assert_eq!(split_leaf("lockjaw/abc"), None);
    }
}
