//! A test bed on one machine (`lockjaw testbed up|down`): N "hosts", each
//! a network namespace joined to this machine by a veth on a bridge, with
//! its own time namespace and its own `sshd`, so everything lockjaw does
//! over SSH can be tested without other machines.
//!
//! Bed K (0–63, the first free one) is the bridge `ljbedK` with
//! 10.213.K.1/24 (the control host's address on the bed) and, for host I,
//! the namespace `ljbedK-hI`, the veth `ljbedKhI` (its other end `eth0`
//! inside) and 10.213.K.(10+I)/24. No namespace has a default route: the
//! addresses exist only inside this machine. Host I's sshd runs under
//! `unshare --time` with its monotonic and boot-time clocks I × 10⁶ s
//! ahead of the control host's, so a remote time that leaks into a
//! history stands out.
//!
//! Everything lives in the bed directory (the hosts file's name with the
//! extension `.bed`): keys, `sshd_config`, `known_hosts`, per host `hI/`
//! (sshd's log, `hI/data` its data directory), `bed.json` and the undo
//! log `undo.jsonl`. Nothing under `/etc/ssh` is read or written. Every
//! link, namespace, cgroup and sshd is written into the undo log before
//! (for sshd: right after) it is made, so `down`, a failed `up` and
//! `lockjaw heal BED_DIR` take it all back. Each link and namespace
//! carries the bed's nonce (a random number chosen by `up`, in
//! `bed.json` and every record of them) as its alias, and is deleted only
//! if it still does: a stale copy of a bed directory cannot take down a
//! bed made later with the same names.
//!
//! This file is the bed as a whole (its state, `up` and `down`, the hosts
//! file); the bridge and namespaces are in `network`, the keys and sshd
//! in `sshd`.

pub mod cli;
mod network;
mod sshd;

use crate::process::{self, Cgroup, Owner, ProcId};
use crate::undo::{Heal, Undo, UndoLog, UNDO_FILE};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// The prefix of every bridge, veth and namespace of a bed.
pub const PREFIX: &str = "ljbed";
/// Bed indexes tried, 0..MAX_BEDS; bed K uses 10.213.K.0/24.
pub const MAX_BEDS: u8 = 64;
/// Hosts per bed.
pub const MAX_HOSTS: usize = 64;
/// Seconds host I's monotonic and boot-time clocks run ahead, times I.
pub const OFFSET_STEP_S: u64 = 1_000_000;
/// The state file in the bed directory.
pub const STATE_FILE: &str = "bed.json";
/// The sshd every host runs (Debian's openssh-server).
pub const SSHD: &str = "/usr/sbin/sshd";

/// A bed that is up (also its `bed.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bed {
    /// K: the bridge `ljbedK`, the subnet 10.213.K.0/24.
    pub index: u8,
    /// The bed directory (absolute).
    pub dir: PathBuf,
    /// The hosts file `up` wrote (absolute).
    pub hosts_file: PathBuf,
    pub bridge: String,
    /// This machine's address on the bed (the control host).
    pub control_address: Ipv4Addr,
    /// The client key every host's root accepts.
    pub identity_file: PathBuf,
    /// Every host's address with the bed's host key.
    pub known_hosts: PathBuf,
    pub hosts: Vec<BedHost>,
    /// Chosen at random by `up` and set as the alias of each of the bed's
    /// links (the bridge, each veth, each namespace's `lo` and `eth0`):
    /// heal and `down` delete a namespace or link only if it carries it.
    #[serde(default)]
    pub nonce: String,
}

/// One host of a bed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BedHost {
    /// `hI`
    pub name: String,
    /// `ljbedK-hI`
    pub netns: String,
    /// The host-side end of its veth, `ljbedKhI`.
    pub veth: String,
    /// 10.213.K.(10+I)
    pub address: Ipv4Addr,
    /// How far its monotonic and boot-time clocks run ahead of this
    /// machine's, in seconds (I × 10⁶).
    pub clock_offset_s: u64,
    /// Its data directory (absolute; the hosts share this filesystem).
    pub data_dir: PathBuf,
    /// Its sshd.
    pub sshd: ProcId,
}

impl Bed {
    /// Read `bed.json` of the bed directory `dir`.
    pub fn read(dir: &Path) -> Result<Bed, String> {
        let path = dir.join(STATE_FILE);
        let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// `ssh` (the system's client) to `host` as root with the bed's key and
    /// known_hosts (strict), no configuration file; append the command.
    pub fn ssh(&self, host: &BedHost) -> Command {
        let mut c = Command::new("ssh");
        c.arg("-F")
            .arg("/dev/null")
            .arg("-i")
            .arg(&self.identity_file)
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", self.known_hosts.display()))
            .args([
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "ConnectTimeout=5",
                "-l",
                "root",
            ])
            .arg(host.address.to_string());
        c
    }
}

/// The bed directory of a hosts file: its extension replaced by `.bed`.
pub fn bed_dir(out: &Path) -> PathBuf {
    out.with_extension("bed")
}

/// The bed directory `path` names: a bed directory itself, or the hosts
/// file of one (`x/hosts.toml` → `x/hosts.bed`). `None`: not a bed.
pub fn bed_of(path: &Path) -> Option<PathBuf> {
    if path.join(STATE_FILE).is_file() {
        return Some(path.to_path_buf());
    }
    let dir = bed_dir(path);
    (path.is_file() && dir != path && dir.join(STATE_FILE).is_file()).then_some(dir)
}

/// The hosts file `out` made absolute, after checking it can be written
/// where asked.
fn target(count: usize, out: &Path) -> Result<(PathBuf, PathBuf), String> {
    if count == 0 || count > MAX_HOSTS {
        return Err(format!("--count {count}: a bed has 1 to {MAX_HOSTS} hosts"));
    }
    let name = out
        .file_name()
        .ok_or_else(|| format!("--out {}: not a file name", out.display()))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!(
            "--out {}: the directory {} does not exist (hint: create it first)",
            out.display(),
            parent.display()
        ));
    }
    let parent = parent
        .canonicalize()
        .map_err(|e| format!("--out {}: {}: {e}", out.display(), parent.display()))?;
    let file = parent.join(name);
    let dir = bed_dir(&file);
    if dir == file {
        return Err(format!(
            "--out {}: the hosts file cannot end in .bed (that is the bed directory's name)",
            out.display()
        ));
    }
    if dir.exists() {
        return Err(format!(
            "{}: a bed directory is already there (hint: `lockjaw testbed down --out {}` first)",
            dir.display(),
            out.display()
        ));
    }
    Ok((file, dir))
}

/// Bring up a bed of `count` hosts and write its hosts file to `out`. On
/// failure everything made so far is taken back (and the bed directory
/// removed, by `healer`) before the error returns. Blocks its thread
/// while it works.
pub async fn up(count: usize, out: &Path, healer: Arc<dyn Heal>) -> Result<Bed, String> {
    let (file, dir) = target(count, out)?;
    // SAFETY: plain getter syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Err("testbed up needs root (network namespaces, a bridge, sshd)".into());
    }
    if !Path::new(SSHD).is_file() {
        return Err(format!(
            "{SSHD} not found (hint: `make deps` installs openssh-server)"
        ));
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let log = match UndoLog::open(&dir.join(UNDO_FILE), healer) {
        Ok(l) => l,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("{}: {e}", dir.join(UNDO_FILE).display()));
        }
    };
    match build(count, &file, &dir, &log).await {
        Ok(bed) => Ok(bed),
        Err(e) => {
            let errors = log.drain().await;
            let mut msg = e;
            if errors.is_empty() {
                drop(log);
                let _ = std::fs::remove_dir_all(&dir);
                let _ = std::fs::remove_file(&file);
                msg.push_str(" (everything the bed had made is taken back)");
            } else {
                for e in errors {
                    msg.push_str(&format!("\n  not taken back: {e}"));
                }
                msg.push_str(&format!(
                    "\n  (hint: fix that, then `lockjaw heal {}`)",
                    dir.display()
                ));
            }
            Err(msg)
        }
    }
}

/// Write `u` into the bed's undo log, before its effect.
fn push(log: &UndoLog, u: Undo) -> Result<u64, String> {
    log.push(u)
        .map_err(|e| format!("{}: {e}", log.path().display()))
}

/// Make the bed: keys, bridge, cgroup, each host's network, each sshd;
/// then its state, checked by a real login, and the hosts file.
async fn build(count: usize, file: &Path, dir: &Path, log: &UndoLog) -> Result<Bed, String> {
    let keys = sshd::prepare(dir)?;
    let nonce = format!("{:032x}", rand::random::<u128>());
    let (index, bridge) = network::claim_bridge(log, &nonce)?;
    let control = network::address(index, 1);
    let cgroup = bed_cgroup(log, dir, &bridge)?;
    network::bridge_up(&bridge, control)?;
    let hosts = (1..=count)
        .map(|i| network::add_host(log, dir, (index, &bridge, &nonce), i))
        .collect::<Result<Vec<_>, _>>()?;
    let started = sshd::start(log, dir, &keys, hosts, cgroup.as_deref())?;
    let bed = Bed {
        index,
        dir: dir.to_path_buf(),
        hosts_file: file.to_path_buf(),
        bridge,
        control_address: control,
        identity_file: keys.identity_file.clone(),
        known_hosts: dir.join("known_hosts"),
        hosts: started,
        nonce,
    };
    sshd::write_known_hosts(&bed, &keys.host_key)?;
    let state = serde_json::to_string_pretty(&bed).map_err(|e| e.to_string())?;
    write(&dir.join(STATE_FILE), &state)?;
    sshd::wait_sshd(&bed)?;
    sshd::check_ssh(&bed)?;
    write(file, &hosts_file(&bed))?;
    Ok(bed)
}

/// The bed's cgroup group (`lockjaw/ljbedK`, tagged as `dir`'s), which
/// every sshd joins; `None` without a writable cgroup v2.
fn bed_cgroup(log: &UndoLog, dir: &Path, bridge: &str) -> Result<Option<PathBuf>, String> {
    let owner = Owner::of_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if Cgroup::root().is_none() {
        return Ok(None);
    }
    let group = format!("{}/{bridge}", process::cgroup::TOP);
    push(
        log,
        Undo::Cgroup {
            group: group.clone(),
        },
    )?;
    Cgroup::create_group(&group, owner.tag())
}
/// The hosts file (docs/remote.md's format) of a bed: paths relative to
/// the file, each host its own data directory.
fn hosts_file(bed: &Bed) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let dir_name = bed
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut s = format!(
        "# lockjaw hosts file: the {} hosts of test bed {} (`lockjaw testbed up`).\n\
         [defaults]\n\
         user = \"root\"\n\
         identity_file = {}\n\
         known_hosts = {}\n",
        bed.hosts.len(),
        bed.bridge,
        q(&format!("{dir_name}/id_ed25519")),
        q(&format!("{dir_name}/known_hosts")),
    );
    for h in &bed.hosts {
        s.push_str(&format!(
            "\n[[node]]\nname = {}\nhost = {}\ndata_dir = {}\n",
            q(&h.name),
            q(&h.address.to_string()),
            q(&h.data_dir.display().to_string())
        ));
    }
    s
}

/// Take a bed down: drain its undo log (every sshd and whatever else runs
/// in its namespaces, the veths, namespaces, bridge and cgroup), then
/// remove the bed directory and its hosts file `out`. `healer` takes the
/// records back.
pub async fn down(out: &Path, healer: Arc<dyn Heal>) -> Result<(), String> {
    let dir = bed_dir(out);
    if !dir.join(UNDO_FILE).is_file() {
        return Err(format!(
            "{}: no test bed there (no {UNDO_FILE}) (hint: give the --out FILE that `testbed up` was given)",
            dir.display()
        ));
    }
    let healed = drain(&dir, healer).await?;
    if !healed.is_empty() {
        return Err(format!(
            "{}: {} (hint: fix that, then run `lockjaw testbed down --out {}` again)",
            dir.display(),
            healed.join("; "),
            out.display()
        ));
    }
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match std::fs::remove_file(out) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("{}: {e}", out.display()))
        }
        _ => Ok(()),
    }
}

/// Drain the undo log of the bed directory `dir` (refused when another
/// user could have written it); the entries that could not be undone.
async fn drain(dir: &Path, healer: Arc<dyn Heal>) -> Result<Vec<String>, String> {
    let run = crate::undo::RunDir::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    run.check_private()?;
    let log = UndoLog::open(&dir.join(UNDO_FILE), healer)
        .map_err(|e| format!("{}: {e}", dir.join(UNDO_FILE).display()))?;
    let mut problems: Vec<String> = log.skipped().to_vec();
    problems.extend(log.drain().await.iter().map(|e| e.to_string()));
    Ok(problems)
}
fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
/// Run a program; its stdout, or an error with the command and its stderr.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bed_directory_and_bad_requests() {
        assert_eq!(bed_dir(Path::new("x/hosts.toml")), Path::new("x/hosts.bed"));
        assert_eq!(bed_dir(Path::new("x/hosts")), Path::new("x/hosts.bed"));
        let t = tempfile::tempdir().unwrap();
        assert!(target(0, &t.path().join("h.toml"))
            .unwrap_err()
            .contains("--count 0"));
        let e = target(2, &t.path().join("no/h.toml")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        assert!(target(2, &t.path().join("h.bed"))
            .unwrap_err()
            .contains(".bed"));
        std::fs::create_dir(t.path().join("h.bed")).unwrap();
        let e = target(2, &t.path().join("h.toml")).unwrap_err();
        assert!(e.contains("already there"), "{e}");
    }
}
