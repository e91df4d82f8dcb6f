//! The three clusters of the fixture: the nodes of a 3-member etcd, a
//! 3-server ZooKeeper ensemble and Redis with 3 sentinels on a bed, their
//! command lines and configuration files (see the parent module).

use super::{bed_up, real, BedCluster, BedNode, Control, READY};
use std::time::{Duration, Instant};

impl BedCluster {
    /// 3 hosts of a new bed, one etcd member each (ports 2379/2380 on each
    /// host's address), started by plain SSH; returns once every member
    /// answers `/health`.
    pub async fn etcd(control: Control) -> BedCluster {
        BedCluster::etcd_with(control, "http", &[], Default::default()).await
    }

    /// [`BedCluster::etcd`] with client URLs of `scheme` (`https` for
    /// TLS), `extra` arguments for every member, probed with `auth`.
    pub async fn etcd_with(
        control: Control,
        scheme: &str,
        extra: &[String],
        auth: lockjaw::auth::Auth,
    ) -> BedCluster {
        let t = tempfile::tempdir().unwrap();
        let (bed, down) = bed_up(3, t.path());
        let addr = |i: usize| bed.hosts[i].address.to_string();
        let initial: Vec<String> = (0..3)
            .map(|i| format!("e{}=http://{}:2380", i + 1, addr(i)))
            .collect();
        let nodes = (0..3)
            .map(|i| {
                let name = format!("e{}", i + 1);
                let dir = bed.hosts[i].data_dir.join(&name);
                let a = addr(i);
                let mut argv = vec![
                    format!("--name={name}"),
                    format!("--data-dir={}", dir.join("data").display()),
                    format!("--listen-client-urls={scheme}://{a}:2379"),
                    format!("--advertise-client-urls={scheme}://{a}:2379"),
                    format!("--listen-peer-urls=http://{a}:2380"),
                    format!("--initial-advertise-peer-urls=http://{a}:2380"),
                    format!("--initial-cluster={}", initial.join(",")),
                    "--initial-cluster-state=new".into(),
                    format!("--initial-cluster-token=bed-{}", bed.nonce),
                    "--heartbeat-interval=100".into(),
                    "--election-timeout=1000".into(),
                    "--logger=zap".into(),
                    "--log-outputs=stderr".into(),
                ];
                argv.extend_from_slice(extra);
                BedNode {
                    arg: argv[0].clone(),
                    name,
                    host: i,
                    role: "server",
                    client: format!("{a}:2379"),
                    exe: "/usr/bin/etcd".into(),
                    real_exe: real("/usr/bin/etcd"),
                    argv,
                    dir,
                }
            })
            .collect();
        BedCluster::start("etcd", control, bed, down, t, nodes, vec![], auth).await
    }

    /// 3 hosts, one ZooKeeper server each (2181, 2888, 3888 on each host's
    /// address; tickTime 250 ms, sessions of 0.5 to 5 s; the four-letter
    /// words ruok, srvr, mntr and conf whitelisted), started with the
    /// Debian jars as lockjaw starts its own.
    pub async fn zookeeper(control: Control) -> BedCluster {
        let t = tempfile::tempdir().unwrap();
        let (bed, down) = bed_up(3, t.path());
        let addr = |i: usize| bed.hosts[i].address.to_string();
        let servers: String = (0..3)
            .map(|i| format!("server.{}={}:2888:3888\n", i + 1, addr(i)))
            .collect();
        let mut files = Vec::new();
        let nodes = (0..3)
            .map(|i| {
                let name = format!("zk{}", i + 1);
                let dir = bed.hosts[i].data_dir.join(&name);
                let data = dir.join("data");
                let cfg = dir.join("zoo.cfg");
                files.push((data.join("myid"), format!("{}\n", i + 1)));
                files.push((
                    cfg.clone(),
                    format!(
                        "tickTime=250\ninitLimit=40\nsyncLimit=8\ndataDir={}\n\
                         clientPort=2181\nclientPortAddress={}\n\
                         minSessionTimeout=500\nmaxSessionTimeout=5000\n\
                         4lw.commands.whitelist=ruok,srvr,mntr,conf\n\
                         admin.enableServer=false\ncnxTimeout=1000\n{servers}",
                        data.display(),
                        addr(i)
                    ),
                ));
                let cfg = cfg.display().to_string();
                let mut argv: Vec<String> = [
                    "-Xms32m",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-Djava.net.preferIPv4Stack=true",
                    "-Dzookeeper.admin.enableServer=false",
                    "-cp",
                    "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar",
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                ]
                .map(String::from)
                .to_vec();
                argv.push(cfg.clone());
                BedNode {
                    name,
                    host: i,
                    role: "server",
                    client: format!("{}:2181", addr(i)),
                    exe: "/usr/bin/java".into(),
                    real_exe: real("/usr/bin/java"),
                    argv,
                    arg: cfg,
                    dir,
                }
            })
            .collect();
        BedCluster::start(
            "zookeeper",
            control,
            bed,
            down,
            t,
            nodes,
            files,
            Default::default(),
        )
        .await
    }

    /// A Redis primary (r1 on h1) and a replica (r2 on h2), and 3 sentinels
    /// (s1 on h1, s2 on h2, s3 on h3; port 26379, quorum 2, master name
    /// `lockjaw`, down after 1 s); returns once the replica streams and
    /// every sentinel knows the replica and the other sentinels.
    pub async fn sentinel(control: Control) -> BedCluster {
        BedCluster::sentinel_with(control, None).await
    }

    /// [`BedCluster::sentinel`] whose servers want the ACL user `locker`
    /// with password `acl` for everything but PING, ROLE and INFO (the
    /// default user may only ask those); the replica and the sentinels
    /// authenticate to the servers as `locker`; the sentinels know the
    /// user too (their default user stays open to each other).
    pub async fn sentinel_with(control: Control, acl: Option<&str>) -> BedCluster {
        let t = tempfile::tempdir().unwrap();
        let (bed, down) = bed_up(3, t.path());
        let addr = |i: usize| bed.hosts[i].address.to_string();
        let exe = "/usr/bin/redis-server";
        let mut files = Vec::new();
        let mut nodes = Vec::new();
        for (name, i, role) in [
            ("r1", 0, "server"),
            ("r2", 1, "server"),
            ("s1", 0, "sentinel"),
            ("s2", 1, "sentinel"),
            ("s3", 2, "sentinel"),
        ] {
            let dir = bed.hosts[i].data_dir.join(name);
            let conf = dir.join(format!("{name}.conf"));
            let port = if role == "server" { 6379 } else { 26379 };
            let mut text = format!(
                "port {port}\nbind {}\nprotected-mode no\ndaemonize no\nlogfile \"\"\n\
                 dir {}\nset-proc-title no\n",
                addr(i),
                dir.join("data").display()
            );
            if role == "server" {
                text.push_str("save \"\"\nappendonly yes\nappendfsync everysec\n");
                text.push_str("repl-diskless-sync yes\nrepl-diskless-sync-delay 0\n");
                if name == "r2" {
                    text.push_str(&format!("replicaof {} 6379\n", addr(0)));
                }
                if let Some(pw) = acl {
                    text.push_str(&format!(
                        "user default on nopass -@all +ping +role +info\n\
                         user locker on >{pw} ~* &* +@all\nmasteruser locker\nmasterauth {pw}\n"
                    ));
                }
            } else {
                let m = lockjaw::client::SENTINEL_MASTER;
                text.push_str(&format!(
                    "sentinel resolve-hostnames no\nsentinel monitor {m} {} 6379 2\n\
                     sentinel down-after-milliseconds {m} 1000\n\
                     sentinel failover-timeout {m} 10000\nsentinel parallel-syncs {m} 1\n",
                    addr(0)
                ));
                if let Some(pw) = acl {
                    text.push_str(&format!(
                        "user locker on >{pw} ~* &* +@all\n\
                         sentinel auth-user {m} locker\nsentinel auth-pass {m} {pw}\n"
                    ));
                }
            }
            files.push((conf.clone(), text));
            let conf = conf.display().to_string();
            let (exe, argv) = if role == "server" {
                (exe, vec![conf.clone()])
            } else {
                ("/usr/bin/redis-sentinel", vec![conf.clone()])
            };
            nodes.push(BedNode {
                name: name.into(),
                host: i,
                role,
                client: format!("{}:{port}", addr(i)),
                exe: exe.into(),
                real_exe: real(exe),
                argv,
                arg: conf,
                dir,
            });
        }
        let no = Default::default();
        let c = BedCluster::start("sentinel", control, bed, down, t, nodes, files, no).await;
        c.wait_sentinels().await;
        c
    }

    /// 1 host, one Redis server (r1, port 6379 on the host's address, no
    /// persistence); returns once it answers PING.
    pub async fn redis(control: Control) -> BedCluster {
        let t = tempfile::tempdir().unwrap();
        let (bed, down) = bed_up(1, t.path());
        let a = bed.hosts[0].address.to_string();
        let dir = bed.hosts[0].data_dir.join("r1");
        let conf = dir.join("r1.conf");
        let text = format!(
            "port 6379\nbind {a}\nprotected-mode no\ndaemonize no\nlogfile \"\"\n\
             dir {}\nset-proc-title no\nsave \"\"\n",
            dir.join("data").display()
        );
        let exe = "/usr/bin/redis-server";
        let arg = conf.display().to_string();
        let node = BedNode {
            name: "r1".into(),
            host: 0,
            role: "server",
            client: format!("{a}:6379"),
            exe: exe.into(),
            real_exe: real(exe),
            argv: vec![arg.clone()],
            arg,
            dir,
        };
        let files = vec![(conf, text)];
        let no = Default::default();
        BedCluster::start("redis", control, bed, down, t, vec![node], files, no).await
    }

    /// Sentinel: wait until the primary streams to its replica and every
    /// sentinel knows the replica and the 2 other sentinels.
    async fn wait_sentinels(&self) {
        let t = Duration::from_secs(2);
        let deadline = Instant::now() + READY;
        loop {
            let mut why = match lockjaw::client::redis_query::role(&self.nodes[0].client, t).await {
                Ok((r, 1)) if r == "master" => None,
                Ok((r, k)) => Some(format!("r1: role {r} with {k} replicas")),
                Err(e) => Some(format!("r1: {e}")),
            };
            for s in self.nodes.iter().filter(|n| n.role == "sentinel") {
                if why.is_some() {
                    break;
                }
                why = sentinel_knows(&s.client, t)
                    .await
                    .err()
                    .map(|e| format!("{}: {e}", s.name));
            }
            let Some(why) = why else { return };
            assert!(
                Instant::now() < deadline,
                "sentinels not ready in {READY:?}: {why}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn sentinel_knows(addr: &str, t: Duration) -> Result<(), String> {
    let mut c = lockjaw::client::redis_query::connect(addr, t).await?;
    let m: std::collections::HashMap<String, String> = ::redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(lockjaw::client::SENTINEL_MASTER)
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let num = |k: &str| m.get(k).and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    match (num("num-slaves"), num("num-other-sentinels")) {
        (r, s) if r >= 1 && s >= 2 => Ok(()),
        (r, s) => Err(format!("knows {r} replicas and {s} other sentinels")),
    }
}
