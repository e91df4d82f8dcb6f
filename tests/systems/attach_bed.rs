//! The attach fixture (`attach_util`) and the cheap checks of `lockjaw run
//! --attach` on it: servers started on bed hosts by plain SSH, each found
//! by its pidfile and by executable and argument; a decoy (the same
//! executable, another node's arguments) is a real process of that
//! executable in the host's namespace; `down` leaves nothing of the bed.
//! With members described by executable and argument, a decoy with a
//! member's own argument on its host is refused (two processes match),
//! and decoys with other members' arguments are never signalled by
//! `pause-node`.

use crate::attach_long::Watch;
use crate::attach_util::{exe_of, BedCluster, Control};
use crate::run_util::{lockjaw, run};
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

/// The fixture: 3 etcd members started on 3 bed hosts by plain SSH, each
/// the etcd executable with its name, in its host's namespace; a second
/// start is a no-op; `down` leaves nothing. With the members described by
/// executable and argument: a decoy with a member's name on its host makes
/// the description match two processes, and `--plan` (discovery) refuses
/// it naming the host and both; with decoys of other members' names on
/// every host instead, `pause-node` stops the leader and never a decoy
/// (their states watched in /proc through the run), and leaves them
/// running.
#[tokio::test]
async fn the_fixture_and_attach_by_exe_and_arg_a_twin_refused_decoys_never_signalled() {
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
    let t = tempfile::tempdir().unwrap();
    // A twin: etcd with e1's name on e1's host (its own data dir and
    // loopback ports: the members still answer).
    let twin = c.decoy("h1", "e1").await;
    assert_eq!(exe_of(twin).as_deref(), Some("/usr/bin/etcd"));
    assert!(cmdline(twin).contains(&"--name=e1".to_string()));
    assert_eq!(netns_of(twin), (ns[0].1, ns[0].2));
    c.all_answer().await.unwrap();
    let out = lockjaw()
        .args(["run", "--system", "etcd", "--hosts"])
        .arg(&c.hosts_file)
        .args(["--attach", "--plan", "--nemesis", "pause-node"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let e1 = c.pids()[0].1;
    for want in [
        c.bed.hosts[0].address.to_string(),
        twin.to_string(),
        e1.to_string(),
    ] {
        assert!(err.contains(&want), "{want}: {err}");
    }
    c.kill(twin);

    let (decoys, ids) = c.decoys_with_the_next_nodes_args().await;
    let before = c.pids();
    let mut watched = decoys.clone();
    watched.extend(before.iter().map(|p| p.1));
    let w = Watch::start(watched);
    let r = run(
        "attach-exe-decoys",
        &t.path().join("pause"),
        &[
            "--system",
            "etcd",
            "--hosts",
            c.hosts_file.to_str().unwrap(),
            "--attach",
            "--nemesis",
            "pause-node",
            "--ttl-ms",
            "2000",
            "--seed",
            "17",
            "--time-limit",
            "4",
        ],
    );
    let seen = w.end();
    assert_eq!(r.code, 0, "valid: {}", r.stderr);
    assert_eq!(&seen[..3], &[0, 0, 0], "a decoy was seen stopped");
    assert!(
        seen[3..].iter().any(|k| *k > 0),
        "the paused member was seen stopped: {seen:?}"
    );
    assert!(ids.iter().all(|p| p.is_alive()), "the decoys run on");
    assert_eq!(c.pids(), before);
    c.all_answer().await.unwrap();
    // down ends what the fixture started and leaves nothing of the bed.
    let ours = c.started_pids();
    assert_eq!(ours.len(), 6, "3 members, 3 decoys");
    let bed = c.bed.clone();
    c.down().await;
    assert!(ours.iter().all(|p| !p.is_alive()));
    assert_gone(&bed, &ns);
}
