//! Whether a recorded process is provably a run's (or a `cluster up`'s)
//! before `heal` or `cluster down` signals it: the files they read
//! (`undo.jsonl`, `cluster.json`) may have been written by someone else.
//!
//! A process is the directory's when its PID still has the recorded start
//! time **and** it runs inside a cgroup group whose owner tag is this
//! directory's identity ([`Owner::tag`]: device and inode). Every process
//! lockjaw starts joins such a group before it execs; the tag can only be
//! set by whoever may write the cgroup tree (root), and a copied or
//! forged directory has another inode. A PID + start time alone proves
//! nothing (a file can name any process), and a token in the process's
//! environment does not last (Redis rewrites that memory for its title).
//!
//! Without a writable cgroup v2 (an ordinary user, or a host without
//! cgroup2) nothing proves membership. Then:
//! - as root, nothing recorded is signalled: [`Proof::Unprovable`] says so
//!   and names the PID, for the user to look at;
//! - as an ordinary user, a process whose PID and start time match and
//!   that runs as that same user is taken as the directory's: the kernel
//!   lets the user signal only their own processes, and the files (in a
//!   directory only the user may write) can only have been written by the
//!   user, so a forged record can only name what the user could kill anyway.

use super::{cgroup, proc_stat, Cgroup, ProcId};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The directory a run's or cluster's processes are proven against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    tag: String,
}

/// What [`Owner::check`] found out about a recorded process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proof {
    /// The process runs and is the directory's.
    Ours,
    /// No process has this PID and start time any more.
    Gone,
    /// It runs but is not the directory's: never signal it.
    NotOurs(String),
    /// It runs, and nothing on this host can prove whose it is.
    Unprovable(String),
}

impl Owner {
    /// The owner identity of `dir` (a run or cluster directory).
    pub fn of_dir(dir: &Path) -> std::io::Result<Owner> {
        let m = std::fs::metadata(dir)?;
        Ok(Owner {
            tag: format!("{}:{}", m.dev(), m.ino()),
        })
    }

    /// The value of a group's owner tag.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Whether `id` is the directory's (see the module doc).
    pub fn check(&self, id: &ProcId) -> Proof {
        let Some(stat) = proc_stat(id.pid) else {
            return Proof::Gone;
        };
        if stat.start_time != id.start_time {
            return Proof::Gone;
        }
        match Cgroup::root() {
            Some(root) => self.check_cgroup(&root, id.pid),
            None => check_without_cgroups(id.pid),
        }
    }

    fn check_cgroup(&self, root: &Path, pid: i32) -> Proof {
        let Some(path) = cgroup::of_pid(pid) else {
            return Proof::Gone;
        };
        let not_ours = |why: String| {
            Proof::NotOurs(format!(
                "pid {pid} is not this directory's: {why}; not signalled"
            ))
        };
        let mut parts = path.trim_start_matches('/').splitn(3, '/');
        let (Some(top), Some(name)) = (parts.next(), parts.next()) else {
            return not_ours(format!("it runs in cgroup {path}, outside lockjaw's"));
        };
        let group = format!("{top}/{name}");
        if top != cgroup::TOP || cgroup::group_name(&group).is_err() {
            return not_ours(format!("it runs in cgroup {path}, outside lockjaw's"));
        }
        match Cgroup::proven_group(root, &group, &self.tag) {
            Ok(Some(_)) => Proof::Ours,
            Ok(None) => Proof::Gone,
            Err(why) => not_ours(why),
        }
    }

    /// True when `check` says [`Proof::Ours`].
    pub fn owns(&self, id: &ProcId) -> bool {
        self.check(id) == Proof::Ours
    }
}

fn check_without_cgroups(pid: i32) -> Proof {
    // SAFETY: plain getter syscall.
    let me = unsafe { libc::geteuid() };
    if me == 0 {
        return Proof::Unprovable(format!(
            "pid {pid} still runs, and this host has no writable cgroup v2, so nothing proves it is this directory's; not signalled (hint: check it, e.g. `ps -o pid,lstart,args -p {pid}`, and stop it by hand if it is lockjaw's)"
        ));
    }
    // /proc/PID belongs to the process's effective user.
    match std::fs::metadata(format!("/proc/{pid}")) {
        Ok(m) if m.uid() == me => Proof::Ours,
        Ok(m) => Proof::NotOurs(format!(
            "pid {pid} runs as user {}, not as this user ({me}); not signalled",
            m.uid()
        )),
        Err(_) => Proof::Gone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_outside_lockjaws_cgroups_is_not_ours_and_a_gone_one_is_gone() {
        let d = tempfile::tempdir().unwrap();
        let owner = Owner::of_dir(d.path()).unwrap();
        let child = super::super::spawn(&super::super::Spec::new("sleep").arg("30")).unwrap();
        let id = child.id();
        let p = owner.check(&id);
        if Cgroup::root().is_some() {
            assert!(matches!(p, Proof::NotOurs(_)), "{p:?}");
        }
        let stale = ProcId {
            pid: id.pid,
            start_time: id.start_time + 1,
        };
        assert_eq!(owner.check(&stale), Proof::Gone);
        child.kill().unwrap();
    }

    #[test]
    fn without_cgroups_root_proves_nothing_and_a_user_only_their_own() {
        let child = super::super::spawn(&super::super::Spec::new("sleep").arg("30")).unwrap();
        let p = check_without_cgroups(child.pid());
        // SAFETY: plain getter syscall.
        if unsafe { libc::geteuid() } == 0 {
            assert!(
                matches!(&p, Proof::Unprovable(m) if m.contains("no writable cgroup v2")),
                "{p:?}"
            );
        } else {
            assert_eq!(p, Proof::Ours);
            // pid 1 runs as root.
            assert!(matches!(check_without_cgroups(1), Proof::NotOurs(_)));
        }
        child.kill().unwrap();
    }
}
