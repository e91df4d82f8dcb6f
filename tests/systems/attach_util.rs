//! Real clusters that lockjaw did not start, for `lockjaw run --attach`:
//! a test bed (`lockjaw::testbed`) whose hosts run etcd, ZooKeeper or
//! Redis with Sentinel, started by this fixture alone over plain `ssh`
//! (`Bed::ssh`). Per node, a start script `start-<node>.sh` in its
//! directory under the host's data dir stands in for a service manager: it
//! starts the server detached (setsid, stdin from /dev/null, a log file),
//! writes its pidfile and records the pid in the fixture's list; a second
//! start while the server runs does nothing. The fixture writes a hosts
//! file (contract C1 of issue 31) whose `attach` tables describe the
//! servers by pidfile, by executable and argument, or by (stub) systemd
//! unit. `down` kills only what the fixture (or a start script) started,
//! proven by its command line naming the bed's directory, then takes the
//! bed down; a dropped fixture does the same.

#![allow(dead_code)]

mod systems;

use crate::remote_hosts::Down;
use lockjaw::process::{ProcId, Signal};
use lockjaw::testbed::Bed;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// How the hosts file describes each node's running server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// `pidfile` (the start script's) and `exe`.
    Pidfile,
    /// `exe` and `arg`, an argument naming the node.
    Exe,
    /// `unit`, managed by the stub `systemctl` of `tests/fixtures/attach/`.
    Systemd,
}

/// A cluster on a bed, started by the fixture; see the module comment.
pub struct BedCluster {
    /// The hosts file (C1 format), one `[[node]]` per server.
    pub hosts_file: PathBuf,
    /// `etcd`, `zookeeper` or `sentinel`.
    pub system: &'static str,
    pub control: Control,
    pub bed: Bed,
    nodes: Vec<BedNode>,
    /// Where the fixture records every pid it (or a start script) started.
    started: PathBuf,
    /// What the fixture's health checks present (`--auth`'s credentials).
    pub auth: lockjaw::auth::Auth,
    /// The next loopback port a decoy may take (inside a host's namespace).
    decoy_port: AtomicU16,
    down: Option<Down>,
    _t: tempfile::TempDir,
}

/// One server of a bed cluster.
#[derive(Clone, Debug)]
pub struct BedNode {
    pub name: String,
    /// The index of its bed host.
    pub host: usize,
    /// `server` or `sentinel`.
    pub role: &'static str,
    /// `ADDRESS:PORT` clients dial.
    pub client: String,
    /// The executable as a user names it, and what /proc/PID/exe says.
    pub exe: String,
    pub real_exe: String,
    /// Its arguments after the executable.
    pub argv: Vec<String>,
    /// The argument that names this node among the host's processes.
    pub arg: String,
    /// Its directory on the host: start script, pidfile, log, data.
    pub dir: PathBuf,
}

impl BedNode {
    pub fn pidfile(&self) -> PathBuf {
        self.dir.join(format!("{}.pid", self.name))
    }
    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }
    pub fn script(&self) -> PathBuf {
        self.dir.join(format!("start-{}.sh", self.name))
    }
    /// The stub systemd unit's name.
    pub fn unit(&self) -> String {
        format!("lockjaw-bed-{}.service", self.name)
    }
}

/// The first loopback port of the decoys (issue 31's H4 range).
const DECOY_BASE: u16 = 45500;
/// How long a cluster may take to answer after its start.
const READY: Duration = Duration::from_secs(90);

fn q(s: &str) -> String {
    shlex::try_quote(s).expect("no NUL").into_owned()
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn real(exe: &str) -> String {
    std::fs::canonicalize(exe)
        .unwrap_or_else(|e| panic!("{exe}: {e}"))
        .display()
        .to_string()
}

fn bed_up(n: usize, t: &Path) -> (Bed, Down) {
    let (bed, _hosts, down) = crate::remote_hosts::up(n, t);
    (bed, down)
}

impl BedCluster {
    /// Write the files and start scripts, start every node over SSH, write
    /// the hosts file, wait until every node answers (asked with `auth`).
    #[allow(clippy::too_many_arguments)]
    async fn start(
        system: &'static str,
        control: Control,
        bed: Bed,
        down: Down,
        t: tempfile::TempDir,
        nodes: Vec<BedNode>,
        files: Vec<(PathBuf, String)>,
        auth: lockjaw::auth::Auth,
    ) -> BedCluster {
        let started = t.path().join("started.pids");
        let c = BedCluster {
            hosts_file: t.path().join(format!("{system}.toml")),
            system,
            control,
            bed,
            nodes,
            auth,
            started,
            decoy_port: AtomicU16::new(DECOY_BASE),
            down: Some(down),
            _t: t,
        };
        for n in &c.nodes {
            std::fs::create_dir_all(n.dir.join("data")).unwrap();
            std::fs::write(n.script(), c.start_script(n)).unwrap();
        }
        for (path, text) in files {
            std::fs::write(path, text).unwrap();
        }
        if control == Control::Systemd {
            c.stub_units();
        }
        std::fs::write(&c.hosts_file, c.hosts_text()).unwrap();
        for n in &c.nodes {
            c.ssh_ok(n.host, &c.start_line(n));
        }
        let deadline = Instant::now() + READY;
        loop {
            match c.all_answer().await {
                Ok(()) => break,
                Err(e) if Instant::now() >= deadline => {
                    panic!("{system} on the bed did not answer within {READY:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        c
    }

    /// The directory of the stub `systemctl` and `journalctl` (copies of
    /// tests/fixtures/attach/, whose header says how a unit maps onto a
    /// directory `units/UNIT/` beside them).
    pub fn stub_dir(&self) -> PathBuf {
        self.started.with_file_name("stub")
    }

    /// Copy the stubs and make each node a unit of them: `start` runs the
    /// node's start script, `pidfile` and `log` are the node's.
    fn stub_units(&self) {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let stub = self.stub_dir();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/attach");
        std::fs::create_dir_all(&stub).unwrap();
        for p in ["systemctl", "journalctl"] {
            std::fs::copy(fixtures.join(p), stub.join(p)).unwrap();
        }
        for n in &self.nodes {
            let unit = stub.join("units").join(n.unit());
            std::fs::create_dir_all(&unit).unwrap();
            let start = unit.join("start");
            let line = format!("sh {}", q(&n.script().display().to_string()));
            std::fs::write(&start, format!("#!/bin/sh\nexec {line}\n")).unwrap();
            std::fs::set_permissions(&start, std::fs::Permissions::from_mode(0o755)).unwrap();
            symlink(n.pidfile(), unit.join("pidfile")).unwrap();
            symlink(n.log(), unit.join("log")).unwrap();
        }
    }

    /// The command that starts `n` (what its `start` is): its start script,
    /// or the stub's `systemctl start UNIT`.
    pub fn start_line(&self, n: &BedNode) -> String {
        match self.control {
            Control::Systemd => format!(
                "{} start {}",
                q(&self.stub_dir().join("systemctl").display().to_string()),
                n.unit()
            ),
            _ => format!("sh {}", q(&n.script().display().to_string())),
        }
    }

    /// The start script of `n`: nothing if its pidfile names a live process
    /// (not a zombie) of its executable; else start it detached, record the pid, write
    /// the pidfile.
    fn start_script(&self, n: &BedNode) -> String {
        let cmd: Vec<String> = std::iter::once(n.exe.clone())
            .chain(n.argv.iter().cloned())
            .map(|a| q(&a))
            .collect();
        let pidfile = q(&n.pidfile().display().to_string());
        format!(
            "#!/bin/sh\n\
             # Starts {name} detached, standing in for a service manager\n\
             # (lockjaw's attach test fixture, tests/systems/attach_util.rs).\n\
             pidfile={pidfile}\n\
             p=$(cat \"$pidfile\" 2>/dev/null)\n\
             if [ -n \"$p\" ] && [ \"$(readlink /proc/$p/exe)\" = {real} ]; then\n\
             \x20 case $(sed 's/.*) //' /proc/$p/stat 2>/dev/null) in Z*|X*|'') ;; *) exit 0;; esac\n\
             fi\n\
             cd {dir} || exit 1\n\
             setsid {cmd} </dev/null >>{log} 2>&1 &\n\
             pid=$!\n\
             echo \"{name} $pid\" >>{started}\n\
             echo $pid >\"$pidfile.new\" && mv \"$pidfile.new\" \"$pidfile\"\n",
            name = n.name,
            real = q(&n.real_exe),
            dir = q(&n.dir.display().to_string()),
            cmd = cmd.join(" "),
            log = q(&n.log().display().to_string()),
            started = q(&self.started.display().to_string()),
        )
    }

    /// The hosts file: the bed's SSH settings, one `[[node]]` per server
    /// with its `attach` table for `self.control`.
    fn hosts_text(&self) -> String {
        let bed = &self.bed;
        let mut s = format!(
            "# {} on test bed {}, started by tests/systems/attach_util.rs ({:?}).\n\
             [defaults]\nuser = \"root\"\nidentity_file = {}\nknown_hosts = {}\nsystems = [{}]\n",
            self.system,
            bed.bridge,
            self.control,
            toml_str(&bed.identity_file.display().to_string()),
            toml_str(&bed.known_hosts.display().to_string()),
            toml_str(self.system),
        );
        if self.control == Control::Systemd {
            let stubs = self.stub_dir();
            s.push_str(&format!(
                "programs = {{ systemctl = {}, journalctl = {} }}\n",
                toml_str(&stubs.join("systemctl").display().to_string()),
                toml_str(&stubs.join("journalctl").display().to_string())
            ));
        }
        for n in &self.nodes {
            let h = &bed.hosts[n.host];
            s.push_str(&format!(
                "\n[[node]]\nname = {}\nhost = \"{}\"\naddress = \"{}\"\ndata_dir = {}\n[node.attach]\n",
                toml_str(&n.name),
                h.address,
                h.address,
                toml_str(&h.data_dir.display().to_string()),
            ));
            let start = format!("sh {}", q(&n.script().display().to_string()));
            match self.control {
                Control::Pidfile => s.push_str(&format!(
                    "pidfile = {}\nexe = {}\nstart = {}\n",
                    toml_str(&n.pidfile().display().to_string()),
                    toml_str(&n.exe),
                    toml_str(&start)
                )),
                Control::Exe => s.push_str(&format!(
                    "exe = {}\narg = {}\nstart = {}\n",
                    toml_str(&n.exe),
                    toml_str(&n.arg),
                    toml_str(&start)
                )),
                Control::Systemd => s.push_str(&format!("unit = {}\n", toml_str(&n.unit()))),
            }
            s.push_str(&format!(
                "client = {}\nrole = \"{}\"\n",
                toml_str(&n.client),
                n.role
            ));
            if self.control != Control::Systemd {
                s.push_str(&format!(
                    "log = {}\n",
                    toml_str(&n.log().display().to_string())
                ));
            }
        }
        s
    }

    /// The nodes (name, host index, client address, ...).
    pub fn nodes(&self) -> &[BedNode] {
        &self.nodes
    }

    pub fn node(&self, name: &str) -> &BedNode {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Run `cmd` on bed host `i` over plain ssh; its stdout (panics on a
    /// failure, with its stderr).
    pub fn ssh_ok(&self, i: usize, cmd: &str) -> String {
        let out = self.bed.ssh(&self.bed.hosts[i]).arg(cmd).output().unwrap();
        assert!(
            out.status.success(),
            "ssh {} {cmd}: {}",
            self.bed.hosts[i].name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The current main pid of each node's server (its pidfile).
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.nodes
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(n.pidfile()).unwrap_or_default();
                let pid = text
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{}: {text:?}", n.pidfile().display()));
                (n.name.clone(), pid)
            })
            .collect()
    }

    /// Whether every node answers its health check now (etcd `/health`,
    /// ZooKeeper `ruok`, Redis and Sentinel PING); the first that does not,
    /// with why.
    pub async fn all_answer(&self) -> Result<(), String> {
        let t = Duration::from_secs(2);
        for n in &self.nodes {
            let r = match self.system {
                "etcd" => lockjaw::cluster::etcd::probe(&n.client, &self.auth, t).await,
                "zookeeper" => lockjaw::cluster::zookeeper::four_letter(&n.client, "ruok", t)
                    .await
                    .and_then(|a| {
                        (a == "imok")
                            .then_some(())
                            .ok_or(format!("ruok answered {a:?}"))
                    }),
                _ => lockjaw::client::redis_query::ping(&n.client, t).await,
            };
            r.map_err(|e| format!("{} ({}): {e}", n.name, n.client))?;
        }
        Ok(())
    }

    /// A decoy on each host with the next node's arguments: their pids
    /// and process identities (to check they run on, never signalled).
    pub async fn decoys_with_the_next_nodes_args(&self) -> (Vec<u32>, Vec<ProcId>) {
        let mut decoys = Vec::new();
        for (i, h) in self.bed.hosts.iter().enumerate() {
            let other = &self.nodes()[(i + 1) % self.nodes().len()].name;
            decoys.push(self.decoy(&h.name, other).await);
        }
        let ids = decoys
            .iter()
            .map(|d| ProcId::of(*d as i32).unwrap())
            .collect();
        (decoys, ids)
    }

    /// Start on bed host `host` (a host name `hI`, or a node's name: its
    /// host) a process of the same executable as node `as_node`'s server,
    /// with that node's identifying argument, that binds none of the real
    /// ports: etcd with `--name=<node>` and its own data dir and loopback
    /// ports; ZooKeeper a Java source program that sleeps, given the node's
    /// zoo.cfg path; Redis a server on a loopback port with the node's
    /// config path as a harmless argument (`--masterauth`). Returns its pid
    /// once /proc/PID/exe is the server's executable and its command line
    /// carries that argument.
    pub async fn decoy(&self, host: &str, as_node: &str) -> u32 {
        let i = self
            .bed
            .hosts
            .iter()
            .position(|h| h.name == host)
            .unwrap_or_else(|| self.node(host).host);
        let n = self.node(as_node);
        let port = self.decoy_port.fetch_add(2, Ordering::SeqCst);
        let dir = self.bed.hosts[i]
            .data_dir
            .join(format!("decoy-{as_node}-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let lo = "127.0.0.1";
        let argv: Vec<String> = match self.system {
            "etcd" => vec![
                n.arg.clone(),
                format!("--data-dir={}", dir.join("data").display()),
                format!("--listen-client-urls=http://{lo}:{port}"),
                format!("--advertise-client-urls=http://{lo}:{port}"),
                format!("--listen-peer-urls=http://{lo}:{}", port + 1),
                format!("--initial-advertise-peer-urls=http://{lo}:{}", port + 1),
                format!("--initial-cluster={as_node}=http://{lo}:{}", port + 1),
            ],
            "zookeeper" => {
                let src = dir.join("Decoy.java");
                std::fs::write(
                    &src,
                    "public class Decoy { public static void main(String[] a) \
                     throws Exception { Thread.sleep(Long.MAX_VALUE); } }\n",
                )
                .unwrap();
                vec![
                    "-Xmx32m".into(),
                    "-XX:TieredStopAtLevel=1".into(),
                    src.display().to_string(),
                    n.arg.clone(),
                ]
            }
            _ => vec![
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                lo.into(),
                "--dir".into(),
                dir.display().to_string(),
                "--save".into(),
                String::new(),
                "--set-proc-title".into(),
                "no".into(),
                "--masterauth".into(),
                n.arg.clone(),
            ],
        };
        let cmd: Vec<String> = std::iter::once(n.exe.clone())
            .chain(argv)
            .map(|a| q(&a))
            .collect();
        let out = self.ssh_ok(
            i,
            &format!(
                "cd {d} || exit 1; setsid {} </dev/null >>{d}/decoy.log 2>&1 & \
                 pid=$!; echo \"decoy $pid\" >>{}; echo $pid",
                cmd.join(" "),
                q(&self.started.display().to_string()),
                d = q(&dir.display().to_string()),
            ),
        );
        let pid: u32 = out.trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        // The exe link changes early in execve, the command line only once
        // the new image's arguments are set up: wait for both (under load
        // the command line read in between was empty).
        let args_set = |pid: u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&n.arg))
        };
        while exe_of(pid).as_deref() != Some(n.real_exe.as_str()) || !args_set(pid) {
            assert!(Instant::now() < deadline, "decoy {pid} did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pid
    }

    /// The pids the fixture and the start scripts recorded that are still
    /// ours: alive, and their command line names the bed's directory.
    pub fn started_pids(&self) -> Vec<ProcId> {
        let text = std::fs::read_to_string(&self.started).unwrap_or_default();
        let bed_dir = self.bed.dir.display().to_string();
        text.lines()
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&bed_dir))
            })
            .filter_map(ProcId::of)
            .filter(|p| p.is_alive())
            .collect()
    }

    /// SIGKILL one process the fixture started (a decoy, or a server) and
    /// wait until it is gone.
    pub fn kill(&self, pid: u32) {
        let p = self
            .started_pids()
            .into_iter()
            .find(|p| p.pid == pid as i32)
            .unwrap_or_else(|| panic!("{pid} is not a live process of the fixture"));
        let _ = p.signal(Signal::Kill);
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.is_alive() {
            assert!(Instant::now() < deadline, "{pid} outlived SIGKILL");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL what the fixture started (stopped or not), then take the
    /// bed down.
    pub async fn down(mut self) {
        self.kill_ours();
        drop(self.down.take());
    }

    fn kill_ours(&self) {
        let ours = self.started_pids();
        for p in &ours {
            let _ = p.signal(Signal::Kill);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while ours.iter().any(|p| p.is_alive()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for BedCluster {
    fn drop(&mut self) {
        if self.down.is_some() {
            self.kill_ours();
            drop(self.down.take());
        }
    }
}

/// `/proc/PID/exe`, resolved.
pub fn exe_of(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.display().to_string())
}
