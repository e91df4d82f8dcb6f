//! Taking back a test bed's network namespaces and links
//! ([`crate::undo::Undo::Netns`], [`crate::undo::Undo::Link`]). Only names a bed
//! gives (`ljbed` followed by letters, digits and `-`) are touched, so a
//! forged entry cannot delete a namespace or link of someone else's.

use crate::process::{ProcId, Signal};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

/// The prefix of every namespace and link a test bed makes.
pub const BED_PREFIX: &str = "ljbed";

/// How long the processes of a namespace get to disappear after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

pub(super) fn check_name(name: &str) -> Result<(), String> {
    let rest = name.strip_prefix(BED_PREFIX).unwrap_or("");
    if rest.is_empty()
        || name.len() > 64
        || !rest
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(format!(
            "{name:?} is not a test bed's name ({BED_PREFIX}…): skipped"
        ));
    }
    Ok(())
}

/// The processes (not zombies) whose network namespace is `(dev, ino)`.
pub fn processes_in(dev: u64, ino: u64) -> Vec<ProcId> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
        })
        .filter_map(ProcId::of)
        .filter(ProcId::is_alive)
        .collect()
}

/// The identity (device, inode) of the named network namespace, `None`
/// when it does not exist.
pub fn netns_id(name: &str) -> Option<(u64, u64)> {
    let m = std::fs::metadata(format!("/run/netns/{name}")).ok()?;
    Some((m.dev(), m.ino()))
}

/// SIGKILL everything in the namespace, wait until it is gone, delete the
/// namespace. A namespace that is gone needs nothing.
pub fn delete_netns(name: &str) -> Result<(), String> {
    check_name(name)?;
    let Some((dev, ino)) = netns_id(name) else {
        return Ok(());
    };
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        let left = processes_in(dev, ino);
        if left.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let pids: Vec<String> = left.iter().map(|p| p.pid.to_string()).collect();
            return Err(format!(
                "processes {} of network namespace {name} survived SIGKILL for {} s",
                pids.join(", "),
                KILL_WAIT.as_secs()
            ));
        }
        for p in &left {
            // Checks the start time first: a PID reused meanwhile is spared.
            p.signal(Signal::Kill).map_err(|e| e.to_string())?;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ip(&["netns", "del", name], &["No such file"])
}

/// Delete a bridge or veth of a bed; one that is gone needs nothing.
pub async fn delete_link(name: &str) -> Result<(), String> {
    check_name(name)?;
    let name = name.to_string();
    tokio::task::spawn_blocking(move || ip(&["link", "del", &name], &["Cannot find device"]))
        .await
        .map_err(|e| e.to_string())?
}

/// Run `ip ARGS`; a failure whose message holds one of `gone` is success.
fn ip(args: &[&str], gone: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || gone.iter().any(|g| text.contains(g)) {
        return Ok(());
    }
    Err(format!("ip {}: {}", args.join(" "), text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_beds_names_are_touched() {
        for good in ["ljbed0", "ljbed12-h3", "ljbed7h2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "eth0",
            "ljbed",
            "docker0",
            "ljbed0/../x",
            "ljbed0 x",
            "LJBED0",
            "lo",
        ] {
            assert!(check_name(bad).unwrap_err().contains("skipped"), "{bad}");
        }
    }
}
