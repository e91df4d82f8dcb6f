//! Supervised child processes: spawn in its own process group, optionally
//! with a parent-death signal and inside its own cgroup v2; identify each
//! child by PID + start time ([`ProcId`]) and verify that identity before
//! every signal; pause, resume, kill, graceful stop; idempotent close with
//! Drop as a backstop.
//!
//! [`ProcId::signal`], [`ProcId::signal_group`] and [`stop_recorded`] work
//! from a PID + start time this lockjaw recorded itself. What a later
//! `lockjaw heal` or `cluster down` reads from a file is stopped with
//! [`stop_owned`] / [`signal_owned`] only: the process must also be inside
//! a cgroup that belongs to the run's directory ([`Owner`]).
//!
//! The parent-death signal (PR_SET_PDEATHSIG) fires when the *thread* that
//! forked the child exits, so children that must die with lockjaw are forked
//! from one dedicated spawner thread that lives as long as the process.

pub mod cgroup;
pub mod faketime;
mod owner;
pub mod ports;
mod spawn;

pub use cgroup::Cgroup;
pub use owner::{Owner, Proof};
use serde::{Deserialize, Serialize};
pub use spawn::{in_child, procs_file, spawn, Child, Spec, DEFAULT_GRACE};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Why a process operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot start {program}: {source} (hint: is it installed and on PATH?)")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open log file {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cgroup {path}: {source} (hint: lockjaw needs root and a cgroup v2 mount)")]
    Cgroup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("signal {sig:?} to pid {pid}: {source}")]
    Signal {
        pid: i32,
        sig: Signal,
        #[source]
        source: std::io::Error,
    },
    #[error("pid {pid} did not exit within {waited:?} after SIGKILL")]
    Unkillable { pid: i32, waited: Duration },
    /// A recorded process that is not provably the run's ([`Owner`]).
    #[error("{0}")]
    NotOurs(String),
}

/// The signals lockjaw sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Signal {
    Stop,
    Cont,
    Term,
    Kill,
    Int,
}

impl Signal {
    /// Its name as `kill -s` takes it: `STOP`, `CONT`, ...
    pub fn name(self) -> &'static str {
        match self {
            Signal::Stop => "STOP",
            Signal::Cont => "CONT",
            Signal::Term => "TERM",
            Signal::Kill => "KILL",
            Signal::Int => "INT",
        }
    }

    pub fn raw(self) -> libc::c_int {
        match self {
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::Int => libc::SIGINT,
        }
    }
}

/// A process identity that survives PID reuse: the PID and its start time
/// (field 22 of `/proc/PID/stat`, clock ticks since boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcId {
    pub pid: i32,
    pub start_time: u64,
}

/// The fields of `/proc/PID/stat` lockjaw uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub state: char,
    pub pgrp: i32,
    pub start_time: u64,
}

/// Read `/proc/PID/stat`; `None` if there is no such process.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<ProcStat> {
    // The command name (field 2) may hold spaces and parentheses: split
    // after the last ')'. Fields from 3 on are then space-separated.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

impl ProcId {
    /// The identity of a running process, read from /proc.
    pub fn of(pid: i32) -> Option<ProcId> {
        proc_stat(pid).map(|s| ProcId {
            pid,
            start_time: s.start_time,
        })
    }

    /// True if the PID is still this process (zombies included).
    pub fn is_same(&self) -> bool {
        proc_stat(self.pid).is_some_and(|s| s.start_time == self.start_time)
    }

    /// True if this process still runs (not a zombie, not gone).
    pub fn is_alive(&self) -> bool {
        proc_stat(self.pid)
            .is_some_and(|s| s.start_time == self.start_time && s.state != 'Z' && s.state != 'X')
    }

    /// True if this process is stopped (SIGSTOP).
    pub fn is_stopped(&self) -> bool {
        proc_stat(self.pid)
            .is_some_and(|s| s.start_time == self.start_time && (s.state == 'T' || s.state == 't'))
    }

    /// Signal this process alone, after checking the PID is still it.
    /// `Ok(false)`: it is gone (nothing was signalled).
    pub fn signal(&self, sig: Signal) -> Result<bool, ProcessError> {
        if !self.is_same() {
            return Ok(false);
        }
        kill_raw(self.pid, sig)
    }

    /// Signal the process group this process leads (it was started with
    /// `setpgid(0, 0)`). If the leader is gone, members of its group that
    /// started no earlier than it are signalled one by one. `Ok(false)`:
    /// nothing of the group is left.
    pub fn signal_group(&self, sig: Signal) -> Result<bool, ProcessError> {
        self.signal_group_if(sig, &|_| true)
    }

    /// [`ProcId::signal_group`], where a leaderless group's members are
    /// signalled only if `keep` says so.
    fn signal_group_if(&self, sig: Signal, keep: Keep) -> Result<bool, ProcessError> {
        match proc_stat(self.pid) {
            Some(s) if s.start_time == self.start_time => {
                // SAFETY: plain syscall; the group is ours (its leader is the
                // process we started, verified just above).
                let rc = unsafe { libc::killpg(self.pid, sig.raw()) };
                if rc == 0 {
                    return Ok(true);
                }
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() == Some(libc::ESRCH) {
                    return Ok(false);
                }
                Err(ProcessError::Signal {
                    pid: self.pid,
                    sig,
                    source: err,
                })
            }
            // The PID now belongs to someone else: the group is not ours.
            Some(_) => Ok(false),
            None => {
                let mut any = false;
                for m in self.orphaned_members(keep) {
                    any |= m.signal(sig)?;
                }
                Ok(any)
            }
        }
    }

    /// Processes still in this (leaderless) group that started after it
    /// and that `keep` accepts.
    fn orphaned_members(&self, keep: Keep) -> Vec<ProcId> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| {
                let s = proc_stat(pid)?;
                (s.pgrp == self.pid && s.start_time >= self.start_time).then_some(ProcId {
                    pid,
                    start_time: s.start_time,
                })
            })
            .filter(|m| keep(m))
            .collect()
    }

    /// True while the leader or any member of its group runs.
    pub fn group_alive(&self) -> bool {
        self.group_alive_if(&|_| true)
    }

    fn group_alive_if(&self, keep: Keep) -> bool {
        self.is_alive() || self.orphaned_members(keep).iter().any(|m| m.is_alive())
    }
}

/// Which members of a leaderless process group may be signalled.
type Keep<'a> = &'a dyn Fn(&ProcId) -> bool;

fn kill_raw(pid: i32, sig: Signal) -> Result<bool, ProcessError> {
    // SAFETY: plain syscall on a PID whose identity the caller verified.
    let rc = unsafe { libc::kill(pid, sig.raw()) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        return Ok(false);
    }
    Err(ProcessError::Signal {
        pid,
        sig,
        source: err,
    })
}

/// Stop a recorded process group without a child handle (after lockjaw
/// itself was killed): SIGCONT, SIGTERM, up to `grace` for it to exit, then
/// SIGKILL. Returns once nothing of the group runs (zombies whose parent is
/// gone are reaped by init). Safe to call on a process that is long gone.
pub fn stop_recorded(id: &ProcId, grace: Duration) -> Result<(), ProcessError> {
    stop_with(id, grace, &mut || {})
}

/// [`stop_recorded`] for a process read from a file: only if `owner`
/// proves it is the directory's ([`Owner::check`]); a process that is not
/// (or cannot be proven) is left alone and reported as
/// [`ProcessError::NotOurs`]. Of a group whose leader is gone, only the
/// members `owner` proves are signalled.
pub fn stop_owned(id: &ProcId, owner: &Owner, grace: Duration) -> Result<(), ProcessError> {
    prove(id, owner)?;
    stop_filtered(id, grace, &mut || {}, &|m| owner.owns(m))
}

/// Send `sig` to a recorded process group read from a file, if `owner`
/// proves it is the directory's (as [`stop_owned`]). `Ok(false)`: gone.
pub fn signal_owned(id: &ProcId, owner: &Owner, sig: Signal) -> Result<bool, ProcessError> {
    prove(id, owner)?;
    id.signal_group_if(sig, &|m| owner.owns(m))
}

fn prove(id: &ProcId, owner: &Owner) -> Result<(), ProcessError> {
    match owner.check(id) {
        Proof::Ours | Proof::Gone => Ok(()),
        Proof::NotOurs(why) | Proof::Unprovable(why) => Err(ProcessError::NotOurs(why)),
    }
}

pub(crate) fn stop_with(
    id: &ProcId,
    grace: Duration,
    reap: &mut dyn FnMut(),
) -> Result<(), ProcessError> {
    stop_filtered(id, grace, reap, &|_| true)
}

fn stop_filtered(
    id: &ProcId,
    grace: Duration,
    reap: &mut dyn FnMut(),
    keep: Keep,
) -> Result<(), ProcessError> {
    reap();
    if !id.group_alive_if(keep) {
        return Ok(());
    }
    // A stopped process does not act on SIGTERM until it is continued.
    id.signal_group_if(Signal::Cont, keep)?;
    if !grace.is_zero() {
        id.signal_group_if(Signal::Term, keep)?;
        if wait_gone(id, grace, reap, keep) {
            return Ok(());
        }
    }
    id.signal_group_if(Signal::Kill, keep)?;
    let waited = Duration::from_secs(10);
    if wait_gone(id, waited, reap, keep) {
        Ok(())
    } else {
        Err(ProcessError::Unkillable {
            pid: id.pid,
            waited,
        })
    }
}

fn wait_gone(id: &ProcId, limit: Duration, reap: &mut dyn FnMut(), keep: Keep) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        reap();
        if !id.group_alive_if(keep) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_and_parens_in_the_name() {
        let line = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.pgrp, 1234);
        assert_eq!(s.start_time, 98765);
    }

    #[test]
    fn a_recorded_identity_with_another_start_time_is_not_signalled() {
        let me = ProcId::of(std::process::id() as i32).unwrap();
        let impostor = ProcId {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        assert!(!impostor.is_same());
        // Would be SIGKILL to ourselves if the check were missing.
        assert!(!impostor.signal(Signal::Kill).unwrap());
        assert!(!impostor.signal_group(Signal::Kill).unwrap());
    }

    #[test]
    fn pause_resume_stop_a_child_group() {
        let child = spawn(&Spec::new("sleep").arg("30")).unwrap();
        assert!(child.is_alive());
        assert!(child.pause().unwrap());
        let deadline = Instant::now() + Duration::from_secs(5);
        while !child.id().is_stopped() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(child.id().is_stopped());
        assert!(child.resume().unwrap());
        // stop sends SIGCONT first, so a paused child stops too.
        child.pause().unwrap();
        child.stop(Duration::from_millis(500)).unwrap();
        assert!(!child.id().is_alive());
        child.close().unwrap();
        child.close().unwrap();
    }

    #[test]
    fn stop_recorded_works_without_the_handle() {
        let child = spawn(&Spec::new("sleep").arg("30").env("X", "1")).unwrap();
        let id = child.id();
        stop_recorded(&id, Duration::from_millis(200)).unwrap();
        child.try_wait();
        assert!(!id.is_alive());
    }

    #[test]
    fn stdout_can_be_piped_and_stderr_logged() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let mut spec = Spec::new("sh").args(["-c", "echo out; echo err >&2"]);
        spec.log = Some(dir.path().join("child.log"));
        spec.pipe_stdout = true;
        spec.die_with_parent = true;
        let child = spawn(&spec).unwrap();
        let mut out = String::new();
        child
            .take_stdout()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "out\n");
        assert!(child
            .wait_timeout(Duration::from_secs(5))
            .unwrap()
            .success());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("child.log")).unwrap(),
            "err\n"
        );
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let err = spawn(&Spec::new("/nonexistent/lockjaw-no-such-program")).unwrap_err();
        assert!(err.to_string().contains("lockjaw-no-such-program"), "{err}");
    }
}
