//! The dead man's switch: a timer lockjaw leaves on a host before a fault
//! acts there, which takes the fault back by itself if lockjaw does not
//! come back in time (its machine or its network died mid-fault).
//!
//! A switch is one `sh` started detached on the host (`setsid`, its
//! input and output on `/dev/null`, in a session of its own, so it
//! outlives the SSH session), whose environment carries
//! `LOCKJAW_DEADMAN=<tag>` (tag `lockjaw-<run-id>-<node>-dm<n>`, see
//! [`tag`]). It `sleep`s for the fault's planned length plus a margin,
//! counted on the host's own clock, then drops the tag from its
//! environment and runs the undo of the fault: the same scripts lockjaw
//! and `lockjaw heal` run ([`undo_script`]). Disarming kills the tagged
//! processes (the shell leads its own process group: the group, with its
//! `sleep`); once the switch has fired no process carries the tag, so
//! disarming finds nothing ([`Disarmed::FiredOrGone`]).
//!
//! Every script here is made by a pure function, so `--plan` can print
//! what a run would send.

use super::attach::{script, AttachSpec};
use super::host::{quote, SBIN_PATH};
use super::{Host, RemoteError};
use crate::process::Signal;
use crate::undo::RemoteEffect;
use std::time::Duration;

/// The environment variable that tags a switch's processes.
pub const VAR: &str = "LOCKJAW_DEADMAN";

/// The programs a switch runs on the host (besides `sh`, `grep`, `sed`
/// and `cut`, which every remote script uses).
pub const TOOLS: &[&str] = &["setsid", "sleep"];

/// The tag of run `run_id`'s `n`th switch on node `node`.
pub fn tag(run_id: &str, node: &str, n: u64) -> String {
    format!("lockjaw-{run_id}-{node}-dm{n}")
}

/// Whether `tag` is a switch's tag of run `run_id` on node `node`.
pub fn check_tag(tag: &str, run_id: &str, node: &str) -> Result<(), String> {
    super::procs::check_tag(tag)?;
    let n = tag
        .strip_prefix(&format!("lockjaw-{run_id}-{node}-dm"))
        .unwrap_or_default();
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "the tag {tag:?} is not lockjaw-{run_id}-{node}-dm<n>"
        ));
    }
    Ok(())
}

/// How long a switch sleeps for `after`: whole seconds, rounded up
/// (`sleep` takes whole seconds everywhere), at least 1.
pub fn seconds(after: Duration) -> u64 {
    after.as_millis().div_ceil(1000).max(1) as u64
}

/// The script that takes `effect` back on its host, as lockjaw's own undo
/// does: SIGCONT to the stamped processes of an attached pause (each
/// still carrying its start time and cgroup), SIGCONT by tag for a
/// server lockjaw started, `iptables -D` of a rule, the previous offset
/// written back to a clock file, and for a killed attached server its
/// start command unless discovery finds a process of its description (or
/// cannot tell: nothing is started on a guess). `start` is the node's
/// `attach` table (needed only for `AttachedDown`). Err for an effect
/// that is no fault.
pub fn undo_script(effect: &RemoteEffect, start: Option<&AttachSpec>) -> Result<String, String> {
    Ok(match effect {
        RemoteEffect::AttachedPaused { procs, .. } => script::signal(procs, Signal::Cont),
        RemoteEffect::Paused { tag } => {
            super::procs::check_tag(tag)?;
            super::procs::signal_script(tag, Signal::Cont)
        }
        RemoteEffect::Iptables(rule) => super::rule_script(rule, false),
        RemoteEffect::Clock { file, previous } => super::clock_back_script(file, previous),
        RemoteEffect::AttachedDown { node, .. } => {
            let a = start.ok_or_else(|| format!("node {node}: no attach table to start it"))?;
            format!(
                "( {} ) >/dev/null 2>&1\n[ $? -eq 1 ] || exit 0\n{}",
                script::discover(a),
                script::start(a)
            )
        }
        other => return Err(format!("{} is no fault", other.describe())),
    })
}

/// The script that arms switch `tag`: refused while a process of the tag
/// runs; then the timer, detached, which after `after` ([`seconds`]) runs
/// `action` (each part in a subshell of its own) untagged; then a wait
/// (at most 5 s) until the tagged timer runs. Prints its pids.
pub fn arm_script(tag: &str, after: Duration, action: &[String]) -> String {
    let body: String = action.iter().map(|a| format!("(\n{a}\n)\n")).collect();
    format!(
        r#"{SBIN_PATH}
{pids}
[ -z "$(lj_pids)" ] || {{ echo "a switch tagged {tag} runs already: $(lj_pids | tr '\n' ' ')" >&2; exit 1; }}
cd / || exit 1
{VAR}={tag} setsid sh -c 'sleep {secs} && {{ unset {VAR}; exec sh -c "$1"; }}' lockjaw-deadman {body} </dev/null >/dev/null 2>&1 &
lj_i=0
while lj_p=$(lj_pids); [ -z "$lj_p" ]; do
  lj_i=$((lj_i + 1)); [ $lj_i -ge 500 ] && {{ echo "the switch {tag} did not start within 5 s" >&2; exit 1; }}
  sleep 0.01
done
echo $lj_p
"#,
        pids = pids_fn(tag),
        secs = seconds(after),
        body = quote(&body),
    )
}

/// `lj_pids`: the pids of switch `tag`'s processes.
fn pids_fn(tag: &str) -> String {
    super::procs::env_pids_fn("lj_pids", VAR, tag)
}

/// The script that disarms switch `tag`: SIGKILL to the process group of
/// each tagged process that leads one (the timer's shell, with its
/// `sleep`), SIGKILL to any other tagged one, then a wait (at most 10 s)
/// until none is left. Prints `disarmed`, or `gone` when no process
/// carried the tag (it fired, or never ran).
pub fn disarm_script(tag: &str) -> String {
    format!(
        r#"{SBIN_PATH}
{pids}
lj_p=$(lj_pids)
[ -n "$lj_p" ] || {{ echo gone; exit 0; }}
for lj_x in $lj_p; do
  lj_g=$(sed 's/.*) //' /proc/$lj_x/stat 2>/dev/null | cut -d' ' -f3)
  if [ "$lj_g" = "$lj_x" ]; then kill -s KILL -- "-$lj_x" 2>/dev/null; else kill -s KILL "$lj_x" 2>/dev/null; fi
done
lj_i=0
while [ -n "$(lj_pids)" ]; do
  lj_i=$((lj_i + 1)); [ $lj_i -ge 100 ] && {{ echo "switch {tag} still runs 10 s after SIGKILL: $(lj_pids | tr '\n' ' ')" >&2; exit 1; }}
  sleep 0.1
done
echo disarmed
"#,
        pids = pids_fn(tag)
    )
}

/// What disarming found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disarmed {
    /// The timer still ran, and is gone now: it will not fire.
    Disarmed,
    /// No process carried the tag: the switch had fired already (or was
    /// never started, or someone else ended it).
    FiredOrGone,
}

impl Disarmed {
    /// How the injection's detail and heal say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Disarmed::Disarmed => "disarmed",
            Disarmed::FiredOrGone => "fired or gone",
        }
    }
}

/// Arm switch `tag` on `host` (through the connection's kept-open shell:
/// on a fault's path); its pids once it runs.
pub async fn arm(
    host: &Host,
    tag: &str,
    after: Duration,
    action: &[String],
) -> Result<Vec<u32>, RemoteError> {
    super::procs::check_tag(tag).map_err(|e| RemoteError::on(host, e))?;
    let out = host.quick(&arm_script(tag, after, action)).await?;
    let pids: Vec<u32> = out
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    if pids.is_empty() {
        return Err(RemoteError::on(
            host,
            format!("arming the switch {tag} printed {out:?}, not its pids"),
        ));
    }
    Ok(pids)
}

/// Disarm switch `tag` on `host`.
pub async fn disarm(host: &Host, tag: &str) -> Result<Disarmed, RemoteError> {
    super::procs::check_tag(tag).map_err(|e| RemoteError::on(host, e))?;
    let out = host.quick(&disarm_script(tag)).await?;
    match out.trim() {
        "disarmed" => Ok(Disarmed::Disarmed),
        "gone" => Ok(Disarmed::FiredOrGone),
        other => Err(RemoteError::on(
            host,
            format!("disarming the switch {tag} printed {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests;
