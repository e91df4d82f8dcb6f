//! ZooKeeper peers: `zoo.cfg` with a small tickTime (sessions of 2 to 20
//! ticks, so 1–2 s leases are possible) and every four-letter word enabled,
//! started with the Debian jars; health and leader discovery via `srvr`
//! (over TLS with `--auth`'s `[tls]`).

use super::node::{Node, NodeInfo, NodeRole, Ports};
use super::servers::LeaderPoll;
use super::{Cluster, ClusterError, Plan};
use crate::auth::Auth;
use crate::process::Spec;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `tickTime` in ms; the server clamps session timeouts to [2, 20] ticks.
pub const TICK_MS: u64 = 250;

/// The session timeouts the servers accept as configured.
pub fn session_bounds() -> (Duration, Duration) {
    (
        Duration::from_millis(2 * TICK_MS),
        Duration::from_millis(20 * TICK_MS),
    )
}

const CLASSPATH: &str = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";

pub(crate) fn plan(p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
    let (_, _, n, _, cg) = p.parts();
    let port = |i: usize, k: u16| p.port(i, 3, k);
    let servers: String = if n == 1 {
        String::new()
    } else {
        (0..n)
            .map(|i| {
                format!(
                    "server.{}={}:{}:{}\n",
                    i + 1,
                    p.ip(i),
                    port(i, 1),
                    port(i, 2)
                )
            })
            .collect()
    };
    (0..n)
        .map(|i| {
            let name = format!("zk{}", i + 1);
            let (ip, dir) = (p.ip(i), p.dir_of(i));
            let data = dir.join(&name);
            let client = port(i, 0);
            p.write(i, &data.join("myid"), &format!("{}\n", i + 1))?;
            let cfg = data.join("zoo.cfg");
            let (lo, hi) = session_bounds();
            p.write(
                i,
                &cfg,
                &format!(
                    "tickTime={TICK_MS}\ninitLimit=40\nsyncLimit=8\ndataDir={}\n\
                     clientPort={client}\nclientPortAddress={ip}\n\
                     minSessionTimeout={}\nmaxSessionTimeout={}\n\
                     4lw.commands.whitelist=*\nadmin.enableServer=false\n\
                     cnxTimeout=1000\n{servers}",
                    data.display(),
                    lo.as_millis(),
                    hi.as_millis(),
                ),
            )?;
            let mut launch = Spec::new("java").args([
                "-Xms32m",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Djava.net.preferIPv4Stack=true",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                CLASSPATH,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            ]);
            launch = launch.arg(cfg.display().to_string());
            launch.log = Some(dir.join("logs").join(format!("{name}.log")));
            Ok(Node::planned(NodeInfo {
                name: name.clone(),
                role: NodeRole::Server,
                addr: format!("{ip}:{client}"),
                ports: Ports {
                    client,
                    peer: (n > 1).then(|| port(i, 1)),
                    election: (n > 1).then(|| port(i, 2)),
                    bus: None,
                },
                log: launch.log.clone().unwrap_or_default(),
                data_dir: data,
                cgroup: cg(&name),
                faketime_file: None,
                launch: Some(launch),
                proc: None,
                remote: None,
            }))
        })
        .collect()
}

/// Send a four-letter word and read the whole answer.
pub async fn four_letter(addr: &str, word: &str, t: Duration) -> Result<String, String> {
    four_letter_as(addr, word, &Auth::default(), t).await
}

/// [`four_letter`] with `--auth`: over TLS (its CA, client certificate
/// and `server_name`) when the file has a `[tls]` table, as a server
/// whose only client port is its `secureClientPort` requires.
pub async fn four_letter_as(
    addr: &str,
    word: &str,
    auth: &Auth,
    t: Duration,
) -> Result<String, String> {
    async fn ask<S: AsyncReadExt + AsyncWriteExt + Unpin>(
        mut s: S,
        word: &str,
    ) -> Result<String, String> {
        s.write_all(word.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut out = String::new();
        match s.read_to_string(&mut out).await {
            Ok(_) => Ok(out),
            // A TLS server may close without close_notify after answering.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => Ok(out),
            Err(e) => Err(e.to_string()),
        }
    }
    let fut = async {
        match &auth.tls {
            Some(tls) => {
                let s = crate::client::tls::connect(addr, tls)
                    .await
                    .map_err(|e| e.to_string())?;
                ask(s, word).await
            }
            None => {
                let s = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| e.to_string())?;
                ask(s, word).await
            }
        }
    };
    tokio::time::timeout(t, fut)
        .await
        .map_err(|_| format!("no answer to {word} within {t:?}"))?
}

/// `srvr`: the server's mode (`leader`, `follower`, `standalone`) once it
/// serves requests.
pub async fn probe(addr: &str, t: Duration) -> Result<String, String> {
    probe_as(addr, &Auth::default(), t).await
}

/// [`probe`] with `--auth`.
pub async fn probe_as(addr: &str, auth: &Auth, t: Duration) -> Result<String, String> {
    let out = four_letter_as(addr, "srvr", auth, t).await?;
    out.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
        .ok_or_else(|| {
            out.lines()
                .next()
                .unwrap_or("empty answer to srvr")
                .to_string()
        })
}

/// Ask every peer's `srvr`: the peer that says leader (or standalone),
/// and each peer's mode (or why it gave none).
pub(crate) async fn poll_leader(c: &Cluster) -> LeaderPoll {
    let addrs: Vec<String> = c.servers().map(|n| n.addr.clone()).collect();
    let t = Duration::from_millis(800);
    let all = futures::future::join_all(addrs.iter().map(|a| probe_as(a, &c.auth, t))).await;
    let mut poll = LeaderPoll::default();
    for (a, r) in addrs.iter().zip(all) {
        let leads = matches!(r.as_deref(), Ok("leader" | "standalone"));
        if leads && poll.leader.is_none() {
            poll.leader = Some(a.clone());
        }
        poll.answers.push((a.clone(), r));
    }
    poll
}

/// The address of the peer whose `srvr` says leader (or standalone).
pub(crate) async fn leader_addr(c: &Cluster) -> Result<Option<String>, ClusterError> {
    poll_leader(c).await.leader_or_error()
}

/// The settings that decide session expiry (`tickTime`,
/// `minSessionTimeout`, `maxSessionTimeout`), from the `conf` four-letter
/// word. A server whose `4lw.commands.whitelist` leaves `conf` out
/// answers that it is not executed: an error, nothing is recorded.
pub async fn settings(
    addr: &str,
    auth: &Auth,
    t: Duration,
) -> Result<Vec<(String, String)>, String> {
    parse_conf(&four_letter_as(addr, "conf", auth, t).await?)
}

/// The session settings in an answer to `conf` (`key=value` lines).
fn parse_conf(out: &str) -> Result<Vec<(String, String)>, String> {
    const KEYS: [&str; 3] = ["tickTime", "minSessionTimeout", "maxSessionTimeout"];
    let found: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| KEYS.contains(&k.trim()))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if found.is_empty() {
        let first = out.lines().next().unwrap_or("an empty answer");
        return Err(format!("conf answered {first:?}"));
    }
    Ok(found)
}

/// `conf`'s `serverId` and `dataDir` (the proof of an attached node,
/// [`super::proof`]); a server whose whitelist leaves `conf` out says so.
pub async fn identity(addr: &str, t: Duration) -> Result<(u64, String), String> {
    identity_as(addr, &Auth::default(), t).await
}

/// [`identity`] with `--auth`.
pub async fn identity_as(addr: &str, auth: &Auth, t: Duration) -> Result<(u64, String), String> {
    parse_identity(&four_letter_as(addr, "conf", auth, t).await?)
}

fn parse_identity(out: &str) -> Result<(u64, String), String> {
    let get = |k: &str| {
        out.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(key, _)| key.trim() == k)
            .map(|(_, v)| v.trim().to_string())
    };
    match (get("serverId").and_then(|v| v.parse().ok()), get("dataDir")) {
        (Some(id), Some(dir)) => Ok((id, dir)),
        _ => Err(format!(
            "conf answered {:?}, without serverId and dataDir",
            out.lines().next().unwrap_or("nothing")
        )),
    }
}

/// The `zoo.cfg` a ZooKeeper command line names: the argument after its
/// main class, else the last argument ending in `.cfg`.
pub fn cfg_of(cmdline: &[String]) -> Option<String> {
    let after_main = cmdline
        .iter()
        .position(|a| a.ends_with("QuorumPeerMain") || a.ends_with("ZooKeeperServerMain"))
        .and_then(|i| cmdline.get(i + 1));
    after_main
        .or_else(|| cmdline.iter().rev().find(|a| a.ends_with(".cfg")))
        .filter(|c| c.starts_with('/'))
        .cloned()
}

/// What the `zoo.cfg` on a ZooKeeper process's command line configures:
/// its `dataDir` and the `myid` there, read on its host (one script).
pub async fn configured(
    host: &crate::remote::Host,
    cmdline: &[String],
) -> Option<Result<crate::cluster::proof::ZkConf, String>> {
    let cfg = cfg_of(cmdline)?;
    let q = crate::remote::host::quote(&cfg);
    let script = format!(
        r#"d=$(sed -n 's/^[[:space:]]*dataDir[[:space:]]*=[[:space:]]*//p' {q} | tail -n 1) || exit 1
echo "$d"
cat "$d/myid"
"#
    );
    let r = host
        .sh(&script)
        .await
        .map_err(|e| e.to_string())
        .and_then(|out| {
            let mut l = out.lines().map(str::trim);
            let dir = l.next().filter(|d| !d.is_empty()).ok_or("no dataDir")?;
            let myid = l
                .next()
                .and_then(|m| m.parse().ok())
                .ok_or(format!("no myid in {dir}"))?;
            Ok(crate::cluster::proof::ZkConf {
                cfg: cfg.clone(),
                data_dir: dir.trim_end_matches('/').to_string(),
                myid,
            })
        });
    Some(r.map_err(|e| format!("{cfg}: {e}")))
}

/// The first line of `srvr`, e.g. `Zookeeper version: 3.8.0-...`.
pub async fn version(addr: &str, auth: &Auth, t: Duration) -> Result<String, String> {
    let out = four_letter_as(addr, "srvr", auth, t).await?;
    out.lines()
        .find_map(|l| l.strip_prefix("Zookeeper version: "))
        .map(|v| {
            format!(
                "zookeeper {}",
                v.split([',', '-']).next().unwrap_or(v).trim()
            )
        })
        .ok_or_else(|| {
            out.lines()
                .next()
                .unwrap_or("empty answer to srvr")
                .to_string()
        })
}

#[cfg(test)]
mod tests {
    use super::parse_conf;

    #[test]
    fn conf_gives_the_id_and_the_data_dir_and_the_command_line_its_cfg() {
        let answer = "clientPort=2181\ndataDir=/d/version-2\nserverId=3\n";
        assert_eq!(
            super::parse_identity(answer).unwrap(),
            (3, "/d/version-2".into())
        );
        assert!(super::parse_identity(
            "conf is not executed because it is not in the whitelist.\n"
        )
        .is_err());
        let cmd = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let main = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
        assert_eq!(
            super::cfg_of(&cmd(&["java", "-cp", "x", main, "/z/zoo.cfg"])).as_deref(),
            Some("/z/zoo.cfg")
        );
        assert_eq!(
            super::cfg_of(&cmd(&["java", "-Dx=/a.cfg", "/e/zk.cfg"])).as_deref(),
            Some("/e/zk.cfg")
        );
        assert_eq!(super::cfg_of(&cmd(&["java", main])), None);
    }

    #[test]
    fn conf_gives_the_session_settings_or_an_error() {
        let answer = "clientPort=2181\nsecureClientPort=-1\ndataDir=/d/version-2\n\
                      tickTime=250\nmaxClientCnxns=60\nminSessionTimeout=500\n\
                      maxSessionTimeout=5000\nserverId=1\n";
        assert_eq!(
            parse_conf(answer).unwrap(),
            [
                ("tickTime", "250"),
                ("minSessionTimeout", "500"),
                ("maxSessionTimeout", "5000")
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        let e =
            parse_conf("conf is not executed because it is not in the whitelist.\n").unwrap_err();
        assert!(e.contains("not in the whitelist"), "{e}");
        assert!(parse_conf("").unwrap_err().contains("empty"));
    }
}
