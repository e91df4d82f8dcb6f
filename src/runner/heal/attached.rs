//! Taking back what a run did to servers it attached to (`--attach`):
//! continue paused processes that still carry their stamps, start a
//! killed server again with the start command of the run directory's
//! copy of the hosts file (or of `lockjaw heal --hosts FILE`). Heal acts on no process it cannot prove: a
//! signal goes only to a pid whose start time and cgroup are still the
//! recorded ones (checked on the host right before the `kill`), and the
//! start command is taken only from a copy of the hosts file no other
//! user could have written, whose node is described as the entry says.

use crate::process::Signal;
use crate::remote::attach::{self, AttachSpec, Running, RUN_HOSTS_FILE};
use crate::remote::{hosts, Find, Host, HostsFile, ProcStamp};
use crate::undo::{check_private, Scope};
use rustix::fs::{Mode, OFlags};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long heal waits for a started server's process to show.
const START_WAIT: Duration = Duration::from_secs(30);

/// `node` is a node name, and each stamp a plain one.
pub(super) fn check_paused(node: &str, procs: &[ProcStamp]) -> Result<(), String> {
    check_node(node)?;
    if procs.is_empty() {
        return Err(format!("node {node}: no process recorded"));
    }
    for p in procs {
        if p.pid <= 1 || p.start == 0 || p.cgroup.chars().any(|c| c.is_control()) {
            return Err(format!(
                "node {node}: the stamp of pid {} ({}, {:?}) is not one discovery makes",
                p.pid, p.start, p.cgroup
            ));
        }
    }
    Ok(())
}

pub(super) fn check_node(node: &str) -> Result<(), String> {
    if hosts::valid_name(node) {
        Ok(())
    } else {
        Err(format!("{node:?} is not a node name"))
    }
}

/// `lockjaw heal --hosts FILE`: the hosts file the start commands come
/// from instead of the run directory's copy (set for the heal's length).
static HOSTS: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Take the start commands from `file` (None: `RUN_DIR/hosts.toml`).
pub fn use_hosts(file: Option<PathBuf>) {
    *HOSTS.lock().unwrap_or_else(|e| e.into_inner()) = file;
}

fn hosts_override() -> Option<PathBuf> {
    HOSTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Where the start commands come from, for messages.
fn source(scope: &Scope) -> String {
    match hosts_override() {
        Some(p) => format!("{} (given with --hosts)", p.display()),
        None => scope.dir.path().join(RUN_HOSTS_FILE).display().to_string(),
    }
}

/// The hosts file's text: `--hosts FILE` (a regular file of this user
/// that no other can write), else the run directory's copy (the same,
/// opened beneath the run directory).
fn hosts_text(scope: &Scope) -> Result<(PathBuf, String), String> {
    let mut text = String::new();
    if let Some(p) = hosts_override() {
        let mut f = std::fs::File::open(&p).map_err(|e| format!("--hosts {}: {e}", p.display()))?;
        check_private(&f, &p)?;
        f.read_to_string(&mut text)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        return Ok((p, text));
    }
    let shown = scope.dir.path().join(RUN_HOSTS_FILE);
    let hint = "(hint: the run writes it before it touches the cluster; give a hosts file with `lockjaw heal --hosts FILE`, or start the server by hand)";
    let mut f = scope
        .dir
        .open_file(Path::new(RUN_HOSTS_FILE), OFlags::RDONLY, Mode::empty())
        .map_err(|e| format!("{}: {} {hint}", shown.display(), crate::undo::explain(&e)))?;
    check_private(&f, &shown)?;
    f.read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", shown.display()))?;
    Ok((shown, text))
}

/// Node `node`'s `attach` table from the run directory's copy of the
/// hosts file (or `heal --hosts FILE`), which must be a regular file of
/// this user that no other can write, and must describe the node's
/// server as `find` does.
pub(super) fn spec(scope: &Scope, node: &str, find: &Find) -> Result<AttachSpec, String> {
    check_node(node)?;
    let (shown, text) = hosts_text(scope)?;
    let file = HostsFile::parse_copy(&shown, &text)?;
    let n = file
        .nodes
        .iter()
        .find(|n| n.name == node)
        .ok_or_else(|| format!("{}: no node {node}", shown.display()))?;
    let a = n
        .attach
        .clone()
        .ok_or_else(|| format!("{}: node {node} has no attach table", shown.display()))?;
    if a.find != *find {
        return Err(format!(
            "{}: node {node} is described as {:?}, but the run recorded {find:?}; its start command is not the run's",
            shown.display(),
            a.find
        ));
    }
    Ok(a)
}

/// SIGCONT each of `procs` that still carries its stamp; a changed or
/// gone one counts as continued (it is not the process that was paused),
/// and is named on stderr.
pub(super) async fn resume(h: &Host, node: &str, procs: &[ProcStamp]) -> Result<(), String> {
    let r = attach::signal(h, procs, Signal::Cont)
        .await
        .map_err(|e| e.to_string())?;
    if !r.gone.is_empty() {
        let pids: Vec<String> = r.gone.iter().map(|p| p.pid.to_string()).collect();
        eprintln!(
            "heal: host {}: node {node}: pid(s) {} gone or now another process: not signalled, nothing to continue",
            h.name(),
            pids.join(" ")
        );
    }
    Ok(())
}

/// Unless a process of `a` runs, run its start command (from
/// [`source`]) and wait until one does (at most [`START_WAIT`]).
pub(super) async fn start(
    h: &Host,
    node: &str,
    a: &AttachSpec,
    scope: &Scope,
) -> Result<(), String> {
    let why = match attach::running(h, a).await.map_err(|e| e.to_string())? {
        Running::Yes => return Ok(()),
        Running::No(why) => why,
    };
    let from = source(scope);
    attach::start(h, a).await.map_err(|e| {
        format!("{e} (the start command of {from}) (hint: fix what it printed, or give a corrected hosts file with `lockjaw heal --hosts FILE RUN_DIR`)")
    })?;
    let t0 = Instant::now();
    loop {
        match attach::running(h, a).await.map_err(|e| e.to_string())? {
            Running::Yes => {
                eprintln!(
                    "heal: host {}: node {node} was down ({why}): started with `{}`, the start command of {from}",
                    h.name(),
                    a.start
                );
                return Ok(());
            }
            Running::No(now) if t0.elapsed() >= START_WAIT => {
                return Err(format!(
                    "node {node}: `{}` returned, but {} s later: {now}",
                    a.start,
                    START_WAIT.as_secs()
                ))
            }
            Running::No(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::undo::RunDir;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    const HOSTS: &str = "[[node]]\nname = \"e1\"\nhost = \"10.0.0.1\"\n[node.attach]\npidfile = \"/run/e1.pid\"\nstart = \"/srv/start-e1.sh\"\n";

    fn scope(dir: &Path) -> Scope {
        Scope {
            dir: Arc::new(RunDir::open(dir).unwrap()),
            run_id: Some("ab12".into()),
        }
    }

    #[test]
    fn the_start_command_comes_only_from_a_private_copy_that_agrees() {
        let t = tempfile::tempdir().unwrap();
        let s = scope(t.path());
        let find = Find::Pidfile {
            pidfile: "/run/e1.pid".into(),
            exe: None,
        };
        let e = spec(&s, "e1", &find).unwrap_err();
        assert!(e.contains("hosts.toml") && e.contains("hint"), "{e}");
        let f = t.path().join(RUN_HOSTS_FILE);
        std::fs::write(&f, HOSTS).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(spec(&s, "e1", &find).unwrap().start, "/srv/start-e1.sh");
        let other = Find::Pidfile {
            pidfile: "/run/other.pid".into(),
            exe: None,
        };
        let e = spec(&s, "e1", &other).unwrap_err();
        assert!(e.contains("not the run's"), "{e}");
        let e = spec(&s, "e2", &find).unwrap_err();
        assert!(e.contains("no node e2"), "{e}");
        assert!(spec(&s, "E 1", &find).is_err());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o620)).unwrap();
        let e = spec(&s, "e1", &find).unwrap_err();
        assert!(e.contains("writable by its group"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&f, "[[node]]\nname = \"e1\"\nhost = \"10.0.0.1\"\n").unwrap();
        let e = spec(&s, "e1", &find).unwrap_err();
        assert!(e.contains("no attach table"), "{e}");
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &f).unwrap();
        let e = spec(&s, "e1", &find).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn a_paused_entry_needs_plain_stamps() {
        let p = |pid, start, cg: &str| ProcStamp {
            pid,
            start,
            cgroup: cg.into(),
        };
        check_paused("e1", &[p(100, 5, "0::/a")]).unwrap();
        assert!(check_paused("e1", &[]).is_err());
        assert!(check_paused("e1", &[p(1, 5, "0::/")]).is_err());
        assert!(check_paused("e1", &[p(100, 0, "0::/")]).is_err());
        assert!(check_paused("e1", &[p(100, 5, "0::/\nx")]).is_err());
        assert!(check_paused("../e1", &[p(100, 5, "0::/")]).is_err());
    }
}
