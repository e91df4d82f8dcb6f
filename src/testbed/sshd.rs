//! The sshd of a test bed's hosts: the keys and the one configuration
//! they share (in the bed directory; nothing under `/etc/ssh`), one sshd
//! per host in its network namespace under `unshare --time`, and the
//! checks that every one accepts connections and a real `ssh` logs in.

use super::network::NetHost;
use super::{push, read, run, write, Bed, BedHost, OFFSET_STEP_S, SSHD};
use crate::process::{self, ProcId};
use crate::undo::{Undo, UndoLog};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long `up` waits for every sshd to accept connections.
const SSHD_WAIT: Duration = Duration::from_secs(10);

/// The files every host's sshd and the control host's ssh share.
pub(super) struct Keys {
    /// The client key every host's root accepts.
    pub identity_file: PathBuf,
    /// The one host key of every host.
    pub host_key: PathBuf,
    pub config: PathBuf,
}

/// Make the keys and the shared sshd configuration in `dir` (nothing to
/// undo: they go with the bed directory).
pub(super) fn prepare(dir: &Path) -> Result<Keys, String> {
    let keys = Keys {
        identity_file: dir.join("id_ed25519"),
        host_key: dir.join("host_key"),
        config: dir.join("sshd_config"),
    };
    keygen(&keys.host_key)?;
    keygen(&keys.identity_file)?;
    let pubkey = read(&keys.identity_file.with_extension("pub"))?;
    write(&dir.join("authorized_keys"), &pubkey)?;
    write(&keys.config, &sshd_config(dir))?;
    Ok(keys)
}

/// Start one sshd per host, host I's clocks I × [`OFFSET_STEP_S`] ahead,
/// in the bed's cgroup if there is one (then written into the undo log).
pub(super) fn start(
    log: &UndoLog,
    dir: &Path,
    keys: &Keys,
    hosts: Vec<NetHost>,
    cgroup: Option<&Path>,
) -> Result<Vec<BedHost>, String> {
    // sshd's privilege-separation directory (Debian's service makes it).
    std::fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
    let mut started = Vec::new();
    for (i, h) in hosts.into_iter().enumerate() {
        let offset = (i as u64 + 1) * OFFSET_STEP_S;
        let sshd = spawn_sshd(dir, &h.name, &h.netns, offset, &keys.config, cgroup)?;
        // Without a cgroup nothing could prove to `heal` that the sshd is
        // the bed's (as root it would refuse it): the namespace's entry,
        // which kills whatever runs in it, stops it then.
        if cgroup.is_some() {
            let what = format!("sshd of bed host {} ({})", h.name, h.netns);
            push(log, Undo::Process { what, proc: sshd })?;
        }
        started.push(BedHost {
            name: h.name,
            netns: h.netns,
            veth: h.veth,
            address: h.address,
            clock_offset_s: offset,
            data_dir: h.data_dir,
            sshd,
        });
    }
    Ok(started)
}

/// Every host's address with the bed's host key, into `known_hosts`.
pub(super) fn write_known_hosts(bed: &Bed, host_key: &Path) -> Result<(), String> {
    let key = read(&host_key.with_extension("pub"))?;
    let key: Vec<&str> = key.split_whitespace().take(2).collect();
    let known: String = bed
        .hosts
        .iter()
        .map(|h| format!("{} {}\n", h.address, key.join(" ")))
        .collect();
    write(&bed.known_hosts, &known)
}

fn spawn_sshd(
    dir: &Path,
    name: &str,
    netns: &str,
    offset: u64,
    config: &Path,
    cgroup: Option<&Path>,
) -> Result<ProcId, String> {
    let offset = offset.to_string();
    let spec = process::Spec {
        log: Some(dir.join(name).join("sshd.out")),
        cgroup: cgroup.map(|g| g.join(name)),
        ..process::Spec::new("ip").args([
            "netns",
            "exec",
            netns,
            "unshare",
            "--time",
            "--monotonic",
            &offset,
            "--boottime",
            &offset,
            SSHD,
            "-D",
            "-f",
            &config.display().to_string(),
            "-E",
            &dir.join(name).join("sshd.log").display().to_string(),
        ])
    };
    let mut child = process::spawn(&spec).map_err(|e| format!("sshd of {name}: {e}"))?;
    // It outlives `testbed up`; the undo log stops it.
    child.detach();
    Ok(child.id())
}

/// Every sshd accepts a TCP connection on ADDR:22 within [`SSHD_WAIT`].
pub(super) fn wait_sshd(bed: &Bed) -> Result<(), String> {
    let deadline = Instant::now() + SSHD_WAIT;
    for h in &bed.hosts {
        let addr = SocketAddr::from((h.address, 22));
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                break;
            }
            if Instant::now() >= deadline || !h.sshd.is_alive() {
                let why = if h.sshd.is_alive() {
                    format!(
                        "accepts no connection on {addr} within {} s",
                        SSHD_WAIT.as_secs()
                    )
                } else {
                    "exited".to_string()
                };
                return Err(format!(
                    "the sshd of bed host {} {why}; its log:\n{}",
                    h.name,
                    log_tail(&bed.dir.join(&h.name))
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

/// The last lines of a host's sshd logs.
fn log_tail(host_dir: &Path) -> String {
    let mut out = String::new();
    for f in ["sshd.log", "sshd.out"] {
        let text = std::fs::read_to_string(host_dir.join(f)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(10)..] {
            out.push_str(&format!("  {f}: {l}\n"));
        }
    }
    if out.is_empty() {
        out.push_str("  (empty)\n");
    }
    out
}

/// One real `ssh … true` to the first host.
pub(super) fn check_ssh(bed: &Bed) -> Result<(), String> {
    let h = &bed.hosts[0];
    let out = bed
        .ssh(h)
        .arg("true")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ssh: {e} (hint: install openssh-client)"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "ssh to bed host {} ({}) failed: {}; its sshd log:\n{}",
        h.name,
        h.address,
        String::from_utf8_lossy(&out.stderr).trim(),
        log_tail(&bed.dir.join(&h.name))
    ))
}

fn sshd_config(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "# sshd of a lockjaw test bed: one per host, each in its own network namespace.\n\
         HostKey {d}/host_key\n\
         AuthorizedKeysFile {d}/authorized_keys\n\
         PidFile none\n\
         ListenAddress 0.0.0.0:22\n\
         PermitRootLogin prohibit-password\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         UsePAM no\n\
         StrictModes no\n\
         MaxStartups 100\n\
         MaxSessions 100\n\
         LogLevel ERROR\n\
         # bash reads ~/.bashrc for a command sshd runs unless SHLVL says it\n\
         # is nested: root's rc file (pyenv here) would add ~0.4 s to each.\n\
         SetEnv SHLVL=1\n"
    )
}

fn keygen(path: &Path) -> Result<(), String> {
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "lockjaw-testbed",
            "-f",
            &path.display().to_string(),
        ],
    )
    .map(drop)
}
