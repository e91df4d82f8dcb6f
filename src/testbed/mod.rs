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
//! `lockjaw heal BED_DIR` take it all back.

pub mod cli;

use crate::process::{self, Cgroup, Owner, ProcId};
use crate::undo::{Heal, Undo, UndoLog, UNDO_FILE};
use serde::{Deserialize, Serialize};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
/// How long `up` waits for every sshd to accept connections.
const SSHD_WAIT: Duration = Duration::from_secs(10);

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

async fn build(count: usize, file: &Path, dir: &Path, log: &UndoLog) -> Result<Bed, String> {
    let push = |u: Undo| {
        log.push(u)
            .map_err(|e| format!("{}: {e}", log.path().display()))
    };
    // Keys and the shared sshd configuration first: nothing to undo.
    let identity_file = dir.join("id_ed25519");
    let host_key = dir.join("host_key");
    keygen(&host_key)?;
    keygen(&identity_file)?;
    let pubkey = read(&identity_file.with_extension("pub"))?;
    write(&dir.join("authorized_keys"), &pubkey)?;
    let config = dir.join("sshd_config");
    write(&config, &sshd_config(dir))?;

    let (index, bridge) = claim_bridge(log)?;
    let subnet = |last: u8| Ipv4Addr::new(10, 213, index, last);
    let control = subnet(1);
    let owner = Owner::of_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let group = format!("{}/{bridge}", process::cgroup::TOP);
    let cgroup = match Cgroup::root() {
        Some(_) => {
            push(Undo::Cgroup {
                group: group.clone(),
            })?;
            Cgroup::create_group(&group, owner.tag())?
        }
        None => None,
    };
    ip(&["addr", "add", &format!("{control}/24"), "dev", &bridge])?;
    ip(&["link", "set", &bridge, "up"])?;

    let mut hosts = Vec::new();
    for i in 1..=count {
        let name = format!("h{i}");
        let netns = format!("{bridge}-{name}");
        let veth = format!("{bridge}{name}");
        let address = subnet(10 + i as u8);
        push(Undo::Netns {
            name: netns.clone(),
        })?;
        ip(&["netns", "add", &netns])?;
        push(Undo::Link { name: veth.clone() })?;
        ip(&[
            "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns,
        ])?;
        ip(&["link", "set", &veth, "master", &bridge, "up"])?;
        ip(&[
            "-n",
            &netns,
            "addr",
            "add",
            &format!("{address}/24"),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", &netns, "link", "set", "eth0", "up"])?;
        ip(&["-n", &netns, "link", "set", "lo", "up"])?;
        let data_dir = dir.join(&name).join("data");
        std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
        hosts.push((name, netns, veth, address, data_dir));
    }

    // sshd's privilege-separation directory (Debian's service makes it).
    std::fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
    let mut started = Vec::new();
    for (i, (name, netns, veth, address, data_dir)) in hosts.into_iter().enumerate() {
        let offset = (i as u64 + 1) * OFFSET_STEP_S;
        let sshd = spawn_sshd(dir, &name, &netns, offset, &config, cgroup.as_deref())?;
        // Without a cgroup nothing could prove to `heal` that the sshd is
        // the bed's (as root it would refuse it): the namespace's entry,
        // which kills whatever runs in it, stops it then.
        if cgroup.is_some() {
            push(Undo::Process {
                what: format!("sshd of bed host {name} ({netns})"),
                proc: sshd,
            })?;
        }
        started.push(BedHost {
            name,
            netns,
            veth,
            address,
            clock_offset_s: offset,
            data_dir,
            sshd,
        });
    }
    let bed = Bed {
        index,
        dir: dir.to_path_buf(),
        hosts_file: file.to_path_buf(),
        bridge,
        control_address: control,
        identity_file,
        known_hosts: dir.join("known_hosts"),
        hosts: started,
    };
    let key = read(&host_key.with_extension("pub"))?;
    let key: Vec<&str> = key.split_whitespace().take(2).collect();
    let known: String = bed
        .hosts
        .iter()
        .map(|h| format!("{} {}\n", h.address, key.join(" ")))
        .collect();
    write(&bed.known_hosts, &known)?;
    let state = serde_json::to_string_pretty(&bed).map_err(|e| e.to_string())?;
    write(&dir.join(STATE_FILE), &state)?;
    wait_sshd(&bed)?;
    check_ssh(&bed)?;
    write(file, &hosts_file(&bed))?;
    Ok(bed)
}

/// The first free bed: no link `ljbedK`, no namespace `ljbedK-*`, no
/// route of this machine overlapping 10.213.K.0/24. Claimed by creating
/// the bridge (written into the undo log first); one another `up` created
/// meanwhile is left to it.
fn claim_bridge(log: &UndoLog) -> Result<(u8, String), String> {
    let routes = routes()?;
    let namespaces: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    let links = links()?;
    for k in 0..MAX_BEDS {
        let bridge = format!("{PREFIX}{k}");
        let net = u32::from(Ipv4Addr::new(10, 213, k, 0));
        if links.contains(&bridge)
            || namespaces
                .iter()
                .any(|n| n.starts_with(&format!("{bridge}-")))
            || routes.iter().any(|&(r, len)| overlaps(r, len, net, 24))
        {
            continue;
        }
        let id = log
            .push(Undo::Link {
                name: bridge.clone(),
            })
            .map_err(|e| format!("{}: {e}", log.path().display()))?;
        match run("ip", &["link", "add", &bridge, "type", "bridge"]) {
            Ok(_) => return Ok((k, bridge)),
            Err(e) if e.contains("File exists") => log.forget(id),
            Err(e) => return Err(e),
        }
    }
    Err(format!(
        "no free bed: {PREFIX}0..{PREFIX}{} are taken, or routes of this machine cover 10.213.0.0/16 (hint: `lockjaw testbed down` the beds you no longer need; `ip route` shows the routes)",
        MAX_BEDS - 1
    ))
}

/// Whether two IPv4 prefixes share an address.
fn overlaps(a: u32, alen: u8, b: u32, blen: u8) -> bool {
    let len = alen.min(blen);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a & mask == b & mask
}

/// Every IPv4 route destination of this machine (all tables), the default
/// routes left out.
fn routes() -> Result<Vec<(u32, u8)>, String> {
    let text = run("ip", &["-4", "-o", "route", "show", "table", "all"])?;
    Ok(text.lines().filter_map(route_prefix).collect())
}

/// The destination of one `ip -o route` line: the first word that is an
/// address or prefix (a type such as `local` or `broadcast` may come
/// first).
fn route_prefix(line: &str) -> Option<(u32, u8)> {
    line.split_whitespace().take(2).find_map(|w| {
        let (addr, len) = w.split_once('/').unwrap_or((w, "32"));
        let addr: Ipv4Addr = addr.parse().ok()?;
        let len: u8 = len.parse().ok().filter(|l| *l <= 32)?;
        (len > 0).then_some((u32::from(addr), len))
    })
}

/// The names of this machine's network links.
fn links() -> Result<Vec<String>, String> {
    let text = run("ip", &["-o", "link", "show"])?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let name = l.split(": ").nth(1)?;
            Some(name.split('@').next()?.to_string())
        })
        .collect())
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
fn wait_sshd(bed: &Bed) -> Result<(), String> {
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
fn check_ssh(bed: &Bed) -> Result<(), String> {
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

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args).map(drop)
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
    fn routes_covering_a_beds_subnet_are_seen() {
        let bed0 = u32::from(Ipv4Addr::new(10, 213, 0, 0));
        let lines = [
            ("default via 10.0.0.1 dev eth0", None),
            (
                "10.0.0.0/8 dev tun0 scope link",
                Some((u32::from(Ipv4Addr::new(10, 0, 0, 0)), 8)),
            ),
            (
                "local 10.213.0.1 dev ljbed0 table local",
                Some((u32::from(Ipv4Addr::new(10, 213, 0, 1)), 32)),
            ),
            (
                "10.213.1.0/24 dev ljbed1 proto kernel",
                Some((u32::from(Ipv4Addr::new(10, 213, 1, 0)), 24)),
            ),
        ];
        for (line, want) in lines {
            assert_eq!(route_prefix(line), want, "{line}");
        }
        assert!(overlaps(u32::from(Ipv4Addr::new(10, 0, 0, 0)), 8, bed0, 24));
        assert!(overlaps(
            u32::from(Ipv4Addr::new(10, 213, 0, 1)),
            32,
            bed0,
            24
        ));
        assert!(!overlaps(
            u32::from(Ipv4Addr::new(10, 213, 1, 0)),
            24,
            bed0,
            24
        ));
        assert!(!overlaps(
            u32::from(Ipv4Addr::new(192, 168, 0, 0)),
            16,
            bed0,
            24
        ));
    }

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
