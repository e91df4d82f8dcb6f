//! A cgroup v2 directory per child, so a partition nemesis can match the
//! child's sockets with `iptables -A OUTPUT -m cgroup --path PATH`; found
//! from /proc/self/mountinfo (pure v2 or the hybrid `unified` mount).

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

    /// Kill everything left in a cgroup directory (cgroup.kill) and remove it
    /// and its empty parents up to the `lockjaw` directory. Best effort.
    pub fn remove_dir(dir: &Path) {
        // Never touch a cgroup lockjaw did not create.
        if !dir.components().any(|c| c.as_os_str() == "lockjaw") || !dir.exists() {
            return;
        }
        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        let deadline = Instant::now() + Duration::from_secs(2);
        while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut p = dir.parent();
        while let Some(d) = p {
            if d.file_name().map_or(true, |n| n == "lockjaw") || std::fs::remove_dir(d).is_err() {
                break;
            }
            p = d.parent();
        }
    }
}
