//! The network of a test bed: claiming a free bridge and subnet (no
//! link, namespace or route of this machine in the way), and for each
//! host a network namespace joined to the bridge by a veth. Every link
//! and namespace is written into the bed's undo log before it is made,
//! with the bed's nonce, which it carries as its alias right after.

use super::{push, run, MAX_BEDS, PREFIX};
use crate::undo::{Undo, UndoLog};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// A host's network, made; its sshd is not started yet.
pub(super) struct NetHost {
    /// `hI`
    pub name: String,
    /// `ljbedK-hI`
    pub netns: String,
    /// `ljbedKhI`
    pub veth: String,
    pub address: Ipv4Addr,
    /// `BED_DIR/hI/data`
    pub data_dir: PathBuf,
}

/// Address `last` of bed `index`'s subnet 10.213.K.0/24.
pub(super) fn address(index: u8, last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 213, index, last)
}

/// Give the bridge the control host's address and bring it up.
pub(super) fn bridge_up(bridge: &str, control: Ipv4Addr) -> Result<(), String> {
    ip(&["addr", "add", &format!("{control}/24"), "dev", bridge])?;
    ip(&["link", "set", bridge, "up"])
}

/// Host `i` of bed `index`: its namespace, its veth on `bridge` (`eth0`
/// inside) with its address, and its data directory beneath `dir`.
pub(super) fn add_host(
    log: &UndoLog,
    dir: &Path,
    (index, bridge, nonce): (u8, &str, &str),
    i: usize,
) -> Result<NetHost, String> {
    let name = format!("h{i}");
    let netns = format!("{bridge}-{name}");
    let veth = format!("{bridge}{name}");
    let address = address(index, 10 + i as u8);
    let n = nonce;
    let nonce = Some(nonce.to_string());
    push(
        log,
        Undo::Netns {
            name: netns.clone(),
            nonce: nonce.clone(),
        },
    )?;
    ip(&["netns", "add", &netns])?;
    // At once: until it carries the nonce, heal cannot prove it the bed's.
    ip(&["-n", &netns, "link", "set", "dev", "lo", "alias", n])?;
    push(
        log,
        Undo::Link {
            name: veth.clone(),
            nonce: nonce.clone(),
        },
    )?;
    ip(&[
        "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns,
    ])?;
    ip(&["link", "set", "dev", &veth, "alias", n])?;
    ip(&["-n", &netns, "link", "set", "dev", "eth0", "alias", n])?;
    ip(&["link", "set", &veth, "master", bridge, "up"])?;
    let cidr = format!("{address}/24");
    ip(&["-n", &netns, "addr", "add", &cidr, "dev", "eth0"])?;
    ip(&["-n", &netns, "link", "set", "eth0", "up"])?;
    ip(&["-n", &netns, "link", "set", "lo", "up"])?;
    let data_dir = dir.join(&name).join("data");
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    Ok(NetHost {
        name,
        netns,
        veth,
        address,
        data_dir,
    })
}

/// The first free bed: no link `ljbedK`, no namespace `ljbedK-*`, no
/// route of this machine overlapping 10.213.K.0/24. Claimed by creating
/// the bridge (written into the undo log first); one another `up` created
/// meanwhile is left to it.
pub(super) fn claim_bridge(log: &UndoLog, nonce: &str) -> Result<(u8, String), String> {
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
                nonce: Some(nonce.to_string()),
            })
            .map_err(|e| format!("{}: {e}", log.path().display()))?;
        match run("ip", &["link", "add", &bridge, "type", "bridge"]) {
            Ok(_) => {
                ip(&["link", "set", "dev", &bridge, "alias", nonce])?;
                return Ok((k, bridge));
            }
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

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args).map(drop)
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
}
