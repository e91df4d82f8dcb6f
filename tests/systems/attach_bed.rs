//! The attach fixture (`attach_util`) and the cheap checks of `lockjaw run
//! --attach` on it: servers started on bed hosts by plain SSH, each found
//! by its pidfile and by executable and argument; a decoy (the same
//! executable, another node's arguments) is a real process of that
//! executable in the host's namespace and is never signalled; `down`
//! leaves nothing of the bed.

use crate::attach_util::{exe_of, BedCluster, Control};
use crate::testbed::{assert_gone, namespaces};
use std::os::unix::fs::MetadataExt;

fn netns_of(pid: u32) -> (u64, u64) {
    let m = std::fs::metadata(format!("/proc/{pid}/ns/net")).unwrap();
    (m.dev(), m.ino())
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[tokio::test]
async fn the_fixture_starts_etcd_on_three_hosts_by_itself_and_down_leaves_nothing() {
    let c = BedCluster::etcd(Control::Exe).await;
    let ns = namespaces(&c.bed);
    c.all_answer().await.unwrap();
    let pids = c.pids();
    assert_eq!(pids.len(), 3);
    // Each member runs on its own host: the etcd executable, its name as a
    // whole argument, the host's network namespace.
    for ((name, pid), n) in pids.iter().zip(c.nodes()) {
        assert_eq!(exe_of(*pid).as_deref(), Some("/usr/bin/etcd"), "{name}");
        assert!(cmdline(*pid).contains(&format!("--name={name}")), "{name}");
        let (_, dev, ino) = &ns[n.host];
        assert_eq!(
            netns_of(*pid),
            (*dev, *ino),
            "{name} in its host's namespace"
        );
    }
    // The hosts file: one node per member, each with its attach table.
    let hosts: toml::Value =
        toml::from_str(&std::fs::read_to_string(&c.hosts_file).unwrap()).unwrap();
    let nodes = hosts["node"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    for (t, n) in nodes.iter().zip(c.nodes()) {
        let a = &t["attach"];
        assert_eq!(a["exe"].as_str(), Some("/usr/bin/etcd"));
        assert_eq!(
            a["arg"].as_str(),
            Some(format!("--name={}", n.name).as_str())
        );
        assert!(a["start"].as_str().unwrap().contains("start-e"));
        assert_eq!(a["client"].as_str(), Some(n.client.as_str()));
    }
    // A start while the member runs does nothing (a service manager's
    // start of a running unit).
    let script = c.node("e1").script();
    c.ssh_ok(0, &format!("sh {}", script.display()));
    assert_eq!(c.pids(), pids);
    // A decoy on e1's host with e1's name: etcd, not bound to the real
    // ports (the members still answer), in h1's namespace.
    let d = c.decoy("h1", "e1").await;
    assert_eq!(exe_of(d).as_deref(), Some("/usr/bin/etcd"));
    assert!(cmdline(d).contains(&"--name=e1".to_string()));
    assert_eq!(netns_of(d), (ns[0].1, ns[0].2));
    c.all_answer().await.unwrap();
    assert_eq!(c.started_pids().len(), 4);
    let ids: Vec<_> = c.started_pids();
    let bed = c.bed.clone();
    c.down().await;
    assert!(ids.iter().all(|p| !p.is_alive()));
    assert_gone(&bed, &ns);
}
