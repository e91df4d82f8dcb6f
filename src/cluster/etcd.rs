//! etcd members: command lines with a short heartbeat and election timeout
//! (so leases down to one second are possible), `/health`, and leader
//! discovery through each member's endpoint status.

use super::node::{Node, NodeInfo, NodeRole, Ports};
use super::servers::LeaderPoll;
use super::{Cluster, ClusterError, Plan};
use crate::auth::Auth;
use crate::client::etcd;
use crate::process::Spec;
use std::time::{Duration, Instant};

/// `--heartbeat-interval` in ms.
pub const HEARTBEAT_MS: u64 = 100;
/// `--election-timeout` in ms.
pub const ELECTION_MS: u64 = 500;

/// The smallest lease TTL etcd grants as configured: it raises any request
/// to ceil(1.5 × election ticks × heartbeat) seconds.
pub fn min_lease() -> Duration {
    let ticks = ELECTION_MS / HEARTBEAT_MS;
    let ms = (3 * ticks / 2) * HEARTBEAT_MS;
    Duration::from_secs(ms.div_ceil(1000).max(1))
}

pub(crate) fn plan(p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
    let (spec, _, n, base, cg) = p.parts();
    let peer = |i: usize| p.port(i, 2, 1);
    let initial: Vec<String> = (0..n)
        .map(|i| format!("etcd{}=http://{}:{}", i + 1, p.ip(i), peer(i)))
        .collect();
    let initial = initial.join(",");
    Ok((0..n)
        .map(|i| {
            let name = format!("etcd{}", i + 1);
            let client = p.port(i, 2, 0);
            let (ip, dir) = (p.ip(i), p.dir_of(i));
            let data = dir.join(&name);
            let c_url = format!("http://{ip}:{client}");
            let p_url = format!("http://{ip}:{}", peer(i));
            let mut launch = Spec::new("etcd").args([
                "--name".to_string(),
                name.clone(),
                "--data-dir".into(),
                data.display().to_string(),
                "--listen-client-urls".into(),
                c_url.clone(),
                "--advertise-client-urls".into(),
                c_url,
                "--listen-peer-urls".into(),
                p_url.clone(),
                "--initial-advertise-peer-urls".into(),
                p_url,
                "--initial-cluster".into(),
                initial.clone(),
                "--initial-cluster-state".into(),
                "new".into(),
                "--initial-cluster-token".into(),
                format!("lockjaw-{base}"),
                "--heartbeat-interval".into(),
                HEARTBEAT_MS.to_string(),
                "--election-timeout".into(),
                ELECTION_MS.to_string(),
                "--logger".into(),
                "zap".into(),
                "--log-outputs".into(),
                "stderr".into(),
            ]);
            launch.log = Some(dir.join("logs").join(format!("{name}.log")));
            let _ = spec;
            Node::planned(NodeInfo {
                name: name.clone(),
                role: NodeRole::Server,
                addr: format!("{ip}:{client}"),
                ports: Ports {
                    client,
                    peer: Some(peer(i)),
                    election: None,
                    bus: None,
                },
                log: launch.log.clone().unwrap_or_default(),
                data_dir: data,
                cgroup: cg(&name),
                faketime_file: None,
                launch: Some(launch),
                proc: None,
                remote: None,
            })
        })
        .collect())
}

/// `GET /health`: Ok when the member says it is healthy (it has a leader).
/// With `--auth` (TLS or a user) the gRPC status instead, over the same
/// credentials as the clients: healthy when it names a leader.
pub async fn probe(addr: &str, auth: &Auth, t: Duration) -> Result<(), String> {
    if !auth.is_empty() {
        return match status(addr, auth, t).await? {
            (_, 0) => Err(format!("{addr} reports no leader")),
            _ => Ok(()),
        };
    }
    let body = http_text(addr, "/health", t).await?;
    if body.contains("\"health\":\"true\"") {
        Ok(())
    } else {
        Err(format!("/health answered {}", body.trim()))
    }
}

/// One member's (own id, leader id) from its endpoint status.
pub async fn status(addr: &str, auth: &Auth, t: Duration) -> Result<(u64, u64), String> {
    member_status(addr, auth, t)
        .await
        .map(|(me, leader, _)| (me, leader))
}

/// One member's (own id, leader id, raft term) from its endpoint status.
async fn member_status(addr: &str, auth: &Auth, t: Duration) -> Result<(u64, u64, u64), String> {
    let opts = etcd::options(auth)?.with_connect_timeout(t).with_timeout(t);
    let fut = async {
        let mut c = etcd_client::Client::connect([etcd::url(addr, auth)], Some(opts))
            .await
            .map_err(|e| e.to_string())?;
        let s = c.status().await.map_err(|e| e.to_string())?;
        let me = s.header().map(|h| h.member_id()).unwrap_or(0);
        Ok((me, s.leader(), s.raft_term()))
    };
    tokio::time::timeout(t * 2, fut)
        .await
        .map_err(|_| format!("no status within {:?}", t * 2))?
}

/// What a member's status says of the leadership: `leader, term 4`,
/// `follower of 8e9e05c52164694d, term 4`, `no leader, term 5`.
fn leadership((me, leader, term): (u64, u64, u64)) -> String {
    match leader {
        0 => format!("no leader, term {term}"),
        l if l == me => format!("leader, term {term}"),
        l => format!("follower of {l:x}, term {term}"),
    }
}

/// Ask every member for its status: the member that reports itself as
/// leader, and each member's answer.
pub(crate) async fn poll_leader(c: &Cluster) -> LeaderPoll {
    let addrs: Vec<String> = c.servers().map(|n| n.addr.clone()).collect();
    let t = Duration::from_millis(800);
    let all = futures::future::join_all(addrs.iter().map(|a| member_status(a, &c.auth, t))).await;
    let mut poll = LeaderPoll::default();
    for (a, r) in addrs.iter().zip(all) {
        if let Ok((me, leader, _)) = r {
            if me != 0 && me == leader && poll.leader.is_none() {
                poll.leader = Some(a.clone());
            }
        }
        poll.answers
            .push((a.clone(), r.map(leadership).map_err(short)));
    }
    poll
}

/// A gRPC connect error's cause alone (`connection refused`), as a
/// person reads it; other errors as they are.
fn short(e: String) -> String {
    for (cause, said) in [
        ("Connection refused", "connection refused"),
        ("No route to host", "no route to host"),
        ("Network is unreachable", "network unreachable"),
    ] {
        if e.contains(cause) {
            return said.into();
        }
    }
    e
}

/// The address of the member that reports itself as leader.
pub(crate) async fn leader_addr(c: &Cluster) -> Result<Option<String>, ClusterError> {
    poll_leader(c).await.leader_or_error()
}

/// Wait (up to 2 s) until a member just spawned serves its peers (its
/// clients are served only once it has a leader). Members started all at
/// once each ask the others, at start, whether they joined already; a peer
/// that listens but does not serve yet holds that question for etcd's 1 s
/// bootstrap timeout, which cost up to 2 s of a 3-member cluster's start.
/// One after another, each asks members that serve (or refuse: not
/// started), and none waits. Without an answer in time it goes on: the
/// health wait that follows reports what is wrong.
pub(crate) async fn wait_serving(c: &Cluster, n: &Node) {
    let (Some(peer), true) = (n.ports.peer, c.auth.is_empty()) else {
        return;
    };
    let Some((host, _)) = n.addr.rsplit_once(':') else {
        return;
    };
    let addr = format!("{host}:{peer}");
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && n.exited().is_none() {
        if http_text(&addr, "/version", Duration::from_millis(200))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Wait until some member reports itself leader.
pub(crate) async fn wait_leader(
    c: &Cluster,
    deadline: Instant,
    waited: Duration,
) -> Result<(), ClusterError> {
    loop {
        let why = match leader_addr(c).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => "no member reports itself leader".to_string(),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(c.nodes()[0].unhealthy(waited, why));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The raft timing settings (`heartbeat-interval`, `election-timeout`, in
/// ms) as the member's command line in `/debug/vars` gives them. etcd 3.4
/// serves them nowhere else (not in its API nor `/metrics`), so a value
/// set by an `ETCD_*` environment variable, a `--config-file` or left at
/// its default is not known, and not recorded.
pub async fn settings(addr: &str, t: Duration) -> Result<Vec<(String, String)>, String> {
    let client = reqwest::Client::builder()
        .timeout(t)
        .build()
        .map_err(|e| e.to_string())?;
    let vars: serde_json::Value = client
        .get(format!("http://{addr}/debug/vars"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| format!("/debug/vars: {e}"))?;
    let cmdline: Vec<String> = vars["cmdline"]
        .as_array()
        .ok_or("/debug/vars has no cmdline")?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    Ok(flags_in(&cmdline))
}

/// `heartbeat-interval` and `election-timeout` among command line
/// arguments, in any of Go's flag forms (`-f v`, `--f v`, `-f=v`,
/// `--f=v`); the last one given wins, as in Go's flag package.
fn flags_in(args: &[String]) -> Vec<(String, String)> {
    let mut found = std::collections::BTreeMap::new();
    let mut it = args.iter().skip(1).peekable();
    while let Some(a) = it.next() {
        let Some(flag) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        if name != "heartbeat-interval" && name != "election-timeout" {
            continue;
        }
        if let Some(v) = value.or_else(|| it.next().cloned()) {
            found.insert(name.to_string(), v);
        }
    }
    found.into_iter().collect()
}

/// How many keys start with `prefix` (a count-only range query), asked
/// with the run's credentials (`auth`: TLS, a user) as its clients are.
pub async fn count_prefix(
    addr: &str,
    prefix: &str,
    auth: &Auth,
    t: Duration,
) -> Result<u64, String> {
    let opts = etcd::options(auth)?.with_connect_timeout(t).with_timeout(t);
    let fut = async {
        let mut c = etcd_client::Client::connect([etcd::url(addr, auth)], Some(opts))
            .await
            .map_err(|e| e.to_string())?;
        let o = etcd_client::GetOptions::new()
            .with_prefix()
            .with_count_only();
        let r = c.get(prefix, Some(o)).await.map_err(|e| e.to_string())?;
        Ok(u64::try_from(r.count()).unwrap_or(0))
    };
    tokio::time::timeout(t * 2, fut)
        .await
        .map_err(|_| format!("no answer from {addr} within {:?}", t * 2))?
}

/// The member's etcd version, e.g. `etcd 3.4.23`.
pub async fn version(addr: &str, auth: &Auth, t: Duration) -> Result<String, String> {
    let opts = etcd::options(auth)?.with_connect_timeout(t).with_timeout(t);
    let fut = async {
        let mut c = etcd_client::Client::connect([etcd::url(addr, auth)], Some(opts))
            .await
            .map_err(|e| e.to_string())?;
        let s = c.status().await.map_err(|e| e.to_string())?;
        Ok(format!("etcd {}", s.version()))
    };
    tokio::time::timeout(t * 2, fut)
        .await
        .map_err(|_| format!("no status from {addr} within {:?}", t * 2))?
}

/// The body of `GET http://ADDR/PATH` (plain HTTP), within `t`.
async fn http_text(addr: &str, path: &str, t: Duration) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(t)
        .build()
        .map_err(|e| e.to_string())?;
    client
        .get(format!("http://{addr}{path}"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn min_lease_follows_the_election_timeout() {
        // 500 ms election = 5 ticks of 100 ms; 3*5/2 = 7 ticks = 0.7 s → 1 s.
        assert_eq!(super::min_lease(), std::time::Duration::from_secs(1));
    }

    #[test]
    fn the_timing_flags_in_every_form_and_nothing_else() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            super::flags_in(&args(&[
                "etcd",
                "--name=e1",
                "--heartbeat-interval=100",
                "-election-timeout",
                "1000"
            ])),
            [
                pair("election-timeout", "1000"),
                pair("heartbeat-interval", "100")
            ]
        );
        assert_eq!(
            super::flags_in(&args(&[
                "/usr/bin/etcd",
                "-heartbeat-interval=50",
                "--heartbeat-interval",
                "200"
            ])),
            [pair("heartbeat-interval", "200")]
        );
        // Set elsewhere (environment, config file, default): not known.
        assert!(super::flags_in(&args(&["etcd", "--config-file=/etc/etcd.yml"])).is_empty());
        assert!(super::flags_in(&args(&["etcd", "--election-timeout"])).is_empty());
    }
}

/// The member's `process_start_time_seconds` (unix seconds) and its id
/// (`etcd_server_id`) from `/metrics` (the proof of an attached node,
/// [`super::proof`]); read over plain HTTP, so a member behind TLS gives
/// none (a user alone does not guard `/metrics`).
pub async fn identity(addr: &str, auth: &Auth, t: Duration) -> Result<(f64, String), String> {
    if auth.tls.is_some() {
        return Err("/metrics is read over plain HTTP, and --auth gives TLS".into());
    }
    parse_identity(&http_text(addr, "/metrics", t).await?)
}

/// `process_start_time_seconds` and the `server_id` label of
/// `etcd_server_id` in a `/metrics` text.
fn parse_identity(body: &str) -> Result<(f64, String), String> {
    let started = body
        .lines()
        .find_map(|l| l.strip_prefix("process_start_time_seconds "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or("/metrics has no process_start_time_seconds")?;
    let member = body
        .lines()
        .find_map(|l| l.strip_prefix("etcd_server_id{server_id=\""))
        .and_then(|v| v.split('"').next())
        .unwrap_or("(id not given)")
        .to_string();
    Ok((started, member))
}

#[cfg(test)]
mod identity_tests {
    #[test]
    fn metrics_give_the_start_and_the_member_id() {
        let body = "# HELP x\netcd_server_id{server_id=\"4bd163d13bf70741\"} 1\nprocess_start_time_seconds 1.79662233398e+09\n";
        let (s, m) = super::parse_identity(body).unwrap();
        assert!((s - 1_796_622_333.98).abs() < 1e-3, "{s}");
        assert_eq!(m, "4bd163d13bf70741");
        assert!(super::parse_identity("etcd_server_id 1\n").is_err());
    }
}
