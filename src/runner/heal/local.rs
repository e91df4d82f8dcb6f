//! Taking back effects on this machine that need only the process layer:
//! a started or stopped process group, the run's cgroup group, a frozen
//! node cgroup, a libfaketime control file beneath the run directory, an
//! iptables rule of this run.

use crate::process::{self, Signal};
use crate::undo::{explain, iptables, RunDir, Scope, Trust};
use rustix::fs::{Mode, OFlags};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Who must own a process before it is signalled: nobody to prove for the
/// run's own children; the run directory's owner for records read back.
pub(super) fn owner(trust: Trust, dir: &Path) -> Result<Option<process::Owner>, String> {
    match trust {
        Trust::Mine => Ok(None),
        Trust::Prove => process::Owner::of_dir(dir)
            .map(Some)
            .map_err(|e| format!("{}: {e}", dir.display())),
    }
}

/// SIGCONT, SIGTERM, `grace`, SIGKILL to a recorded process group.
pub(super) async fn stop(
    proc: &process::ProcId,
    scope: &Scope,
    trust: Trust,
    grace: Duration,
) -> Result<(), String> {
    let p = *proc;
    let owner = owner(trust, scope.dir.path())?;
    tokio::task::spawn_blocking(move || match owner {
        None => process::stop_recorded(&p, grace),
        Some(o) => process::stop_owned(&p, &o, grace),
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

/// SIGCONT to a process group stopped with SIGSTOP.
pub(super) fn resume(proc: &process::ProcId, scope: &Scope, trust: Trust) -> Result<(), String> {
    match owner(trust, scope.dir.path())? {
        None => proc.signal_group(Signal::Cont),
        Some(o) => process::signal_owned(proc, &o, Signal::Cont),
    }
    .map(drop)
    .map_err(|e| e.to_string())
}

/// [`remove_group`] off the async threads.
pub(super) async fn cgroup(group: &str, scope: &Scope) -> Result<(), String> {
    let (g, d) = (group.to_string(), scope.dir.path().to_path_buf());
    tokio::task::spawn_blocking(move || remove_group(&g, &d))
        .await
        .map_err(|e| e.to_string())?
}

/// Delete a local iptables rule, if it is this run's.
pub(super) async fn iptables(rule: &iptables::Rule, scope: &Scope) -> Result<(), String> {
    rule.check(scope.run_id.as_deref())
        .map_err(|e| format!("{e}: skipped"))?;
    iptables_delete(&rule.args()).await
}

/// Thaw a node's cgroup, if it is a leaf of this run's group (its id in
/// the path; read from a file, the group must also carry the run
/// directory's owner tag). A cgroup that is gone needs nothing.
pub(super) fn thaw(
    rel: &str,
    run_id: Option<&str>,
    run_dir: &Path,
    trust: Trust,
) -> Result<(), String> {
    let group = check_leaf(rel, run_id).map_err(|e| format!("{e}: skipped"))?;
    let Some(root) = process::Cgroup::root() else {
        return Ok(());
    };
    if let Some(o) = owner(trust, run_dir)? {
        if process::Cgroup::proven_group(&root, &group, o.tag())?.is_none() {
            return Ok(());
        }
    }
    let dir = root.join(rel);
    if !dir.is_dir() {
        return Ok(());
    }
    process::cgroup::freeze(&dir, false).map_err(|e| format!("{}: {e}", dir.display()))
}

/// The group of `rel` if it is a node's cgroup in this run's group
/// (`lockjaw/<run-id>/<node>`); why not otherwise.
pub(super) fn check_leaf(rel: &str, run_id: Option<&str>) -> Result<String, String> {
    let Some((group, _)) = process::cgroup::split_leaf(rel) else {
        return Err(format!(
            "{rel:?} is not a node's cgroup lockjaw/<run-id>/<node>"
        ));
    };
    if !run_id.is_some_and(|id| process::cgroup::group_name(&group) == Ok(id)) {
        return Err(format!("{rel:?} is not in this run's cgroup group"));
    }
    Ok(group)
}

/// Kill what is left in the run's cgroup group and remove it, leaves
/// first, if it carries the run directory's owner tag.
fn remove_group(group: &str, run_dir: &Path) -> Result<(), String> {
    let Some(root) = process::Cgroup::root() else {
        // Nothing could have been created without a writable cgroup v2.
        return Ok(());
    };
    let owner =
        process::Owner::of_dir(run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    match process::Cgroup::proven_group(&root, group, owner.tag())? {
        Some(dir) => process::Cgroup::remove_tree(&dir),
        None => Ok(()),
    }
}

/// Write `previous` back into the libfaketime control file `file`, opened
/// beneath the run directory. A file that is gone needs nothing.
pub(super) fn set_clock(run: &RunDir, file: &Path, previous: &str) -> Result<(), String> {
    if !is_offset(previous) {
        return Err(format!(
            "{previous:?} is not a libfaketime offset such as +4.000s: skipped"
        ));
    }
    let rel = run.relative(file).map_err(|e| format!("{e}: skipped"))?;
    let mut f = match run.open_file(&rel, OFlags::WRONLY, Mode::empty()) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {}: skipped", file.display(), explain(&e))),
    };
    f.set_len(0)
        .and_then(|_| f.write_all(format!("{previous}\n").as_bytes()))
        .map_err(|e| format!("{}: {e}", file.display()))
}

/// `+4.000s`, `-0.250s`, `+0`: a sign, digits, an optional fraction and unit.
fn is_offset(t: &str) -> bool {
    let Some(rest) = t.strip_prefix(['+', '-']) else {
        return false;
    };
    let num = rest.strip_suffix(['s', 'm', 'h', 'd', 'y']).unwrap_or(rest);
    let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
    t.len() <= 32
        && !int.is_empty()
        && !frac.is_empty()
        && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
}

async fn iptables_delete(args: &[String]) -> Result<(), String> {
    let out = tokio::process::Command::new("iptables")
        .arg("-w")
        .arg("-D")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("cannot run iptables: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    // iptables says "does a matching rule exist" when there is none left.
    if text.contains("does a matching rule exist") || text.contains("No chain/target/match") {
        return Ok(());
    }
    Err(text.trim().to_string())
}
