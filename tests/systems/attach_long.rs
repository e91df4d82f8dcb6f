//! `lockjaw run --attach` on clusters lockjaw did not start (the bed
//! fixture of `attach_util`), in `make test-long`: ZooKeeper and etcd under
//! node faults on the leader, Sentinel's failover through the sentinels,
//! decoys never signalled, ambiguous descriptions refused, SIGKILL of the
//! run then `lockjaw heal`, `--plan` changing nothing, the systemd (stub)
//! variant; and the fixture's own ZooKeeper and Sentinel clusters.

use crate::attach_util::{exe_of, BedCluster, Control};

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The fixture's cluster of `system` answers, each node's pidfile names a
/// process of its executable with its identifying argument, a decoy with
/// a node's argument runs the same executable, and down ends them all.
async fn fixture_of(c: BedCluster) {
    c.all_answer().await.unwrap();
    for ((name, pid), n) in c.pids().iter().zip(c.nodes()) {
        assert_eq!(exe_of(*pid).as_deref(), Some(n.real_exe.as_str()), "{name}");
        assert!(
            cmdline(*pid).contains(&n.arg),
            "{name}: {:?}",
            cmdline(*pid)
        );
    }
    let n = c.nodes()[0].clone();
    let d = c.decoy(&c.nodes()[1].name, &n.name).await;
    assert_eq!(exe_of(d).as_deref(), Some(n.real_exe.as_str()));
    assert!(cmdline(d).contains(&n.arg), "{:?}", cmdline(d));
    c.all_answer().await.unwrap();
    let ours = c.started_pids();
    assert_eq!(ours.len(), c.nodes().len() + 1);
    c.down().await;
    assert!(ours.iter().all(|p| !p.is_alive()));
}

#[tokio::test]
#[ignore = "make test-long: ZooKeeper on 3 bed hosts, started by the fixture, ~15 s"]
async fn the_fixture_starts_zookeeper_on_three_hosts() {
    fixture_of(BedCluster::zookeeper(Control::Pidfile).await).await;
}

#[tokio::test]
#[ignore = "make test-long: Redis and 3 sentinels on 3 bed hosts, started by the fixture, ~10 s"]
async fn the_fixture_starts_redis_with_sentinels_on_three_hosts() {
    fixture_of(BedCluster::sentinel(Control::Exe).await).await;
}
