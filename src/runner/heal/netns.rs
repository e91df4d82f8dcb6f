//! Taking back a test bed's network namespaces and links
//! ([`crate::undo::Undo::Netns`], [`crate::undo::Undo::Link`]). Only names a bed
//! gives (`ljbed` followed by letters, digits and `-`) are touched, and
//! only when they prove to be this bed's: a link carries the bed's nonce
//! (chosen at `testbed up`) as its alias, a namespace has it on its `lo`.
//! A name alone proves nothing: another bed made later reuses it (and a
//! namespace's inode number is reused too).

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

/// The nonce of a record, if it has one of the form a bed makes.
fn check_nonce<'a>(name: &str, nonce: Option<&'a str>) -> Result<&'a str, String> {
    match nonce {
        Some(n) if (16..=64).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(n)
        }
        Some(n) => Err(format!("{n:?} is not a test bed's nonce")),
        None => Err(format!(
            "the record of {name} names no nonce, so nothing proves it is this bed's (hint: a bed made by an older lockjaw: delete it by hand if it is, `ip netns del` / `ip link del`)"
        )),
    }
}

/// The alias of link `dev` (in namespace `netns`, or this one); `None`
/// when the link or the namespace does not exist.
fn alias(netns: Option<&str>, dev: &str) -> Result<Option<String>, String> {
    let mut args = Vec::new();
    if let Some(n) = netns {
        args.extend(["-n", n]);
    }
    args.extend(["-j", "link", "show", "dev", dev]);
    let out = std::process::Command::new("ip")
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stderr);
        if text.contains("does not exist") || text.contains("No such file") {
            return Ok(None);
        }
        return Err(format!("ip {}: {}", args.join(" "), text.trim()));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    let a = v
        .get(0)
        .and_then(|l| l.get("ifalias"))
        .and_then(|a| a.as_str());
    Ok(Some(a.unwrap_or_default().to_string()))
}

/// Why `what` (whose alias is `found`) is not this bed's; Ok when gone or
/// when its alias is the nonce.
fn proven(what: &str, found: Option<String>, nonce: &str) -> Result<(), String> {
    match found {
        None => Ok(()),
        Some(a) if a == nonce => Ok(()),
        Some(a) if a.is_empty() => Err(format!(
            "{what} carries no alias, so nothing proves it is this bed's (nonce {nonce}); left alone"
        )),
        Some(a) => Err(format!(
            "{what} carries the alias {a:?}, not this bed's nonce {nonce}: another bed's; left alone"
        )),
    }
}

/// Why the namespace `name` is not this bed's (its `lo` does not carry
/// `nonce`); Ok when it is, or when it is gone.
pub(super) fn check_netns(name: &str, nonce: Option<&str>) -> Result<(), String> {
    check_name(name)?;
    let nonce = check_nonce(name, nonce)?;
    if netns_id(name).is_none() {
        return Ok(());
    }
    proven(
        &format!("network namespace {name}"),
        alias(Some(name), "lo")?,
        nonce,
    )
}

/// Why the link `name` is not this bed's; Ok when it is, or is gone.
pub(super) fn check_link(name: &str, nonce: Option<&str>) -> Result<(), String> {
    check_name(name)?;
    let nonce = check_nonce(name, nonce)?;
    proven(&format!("network link {name}"), alias(None, name)?, nonce)
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
/// namespace; only if its `lo` carries the bed's nonce. A namespace that
/// is gone needs nothing.
pub fn delete_netns(name: &str, nonce: Option<&str>) -> Result<(), String> {
    check_netns(name, nonce)?;
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
    // Proven again right before: nothing of another bed is deleted.
    check_netns(name, nonce)?;
    ip(&["netns", "del", name], &["No such file"])
}

/// Delete a bridge or veth of a bed, if it carries the bed's nonce; one
/// that is gone needs nothing.
pub async fn delete_link(name: &str, nonce: Option<&str>) -> Result<(), String> {
    let (name, nonce) = (name.to_string(), nonce.map(str::to_string));
    tokio::task::spawn_blocking(move || {
        check_link(&name, nonce.as_deref())?;
        ip(&["link", "del", &name], &["Cannot find device"])
    })
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

    #[test]
    fn a_link_is_a_beds_only_with_its_nonce() {
        let n = "0123456789abcdef0123456789abcdef";
        assert!(check_nonce("x", Some(n)).is_ok());
        assert!(check_nonce("x", None)
            .unwrap_err()
            .contains("names no nonce"));
        assert!(check_nonce("x", Some("-F")).is_err());
        assert!(proven("l", None, n).is_ok());
        assert!(proven("l", Some(n.into()), n).is_ok());
        let e = proven("l", Some("ffff".into()), n).unwrap_err();
        assert!(
            e.contains("another bed's") && e.contains("left alone"),
            "{e}"
        );
        assert!(proven("l", Some(String::new()), n).is_err());
    }
}
