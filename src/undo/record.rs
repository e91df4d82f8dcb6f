//! The records of the undo log: every kind of effect a run can have on
//! the world ([`Undo`], [`RemoteEffect`]), as plain data with its JSON
//! form in `undo.jsonl`, whether it is a fault or a part of the set-up,
//! and how it reads in a message. How each is taken back is not here:
//! the log hands it to a [`super::Heal`].

use super::iptables;
use super::remote::{Find, ProcStamp, RemoteRule, SshTarget};
use crate::process::ProcId;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One effect and how to take it back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Undo {
    /// A process (group) lockjaw started: SIGCONT, SIGTERM, grace, SIGKILL.
    Process { what: String, proc: ProcId },
    /// A process group lockjaw stopped with SIGSTOP: SIGCONT it.
    Paused { what: String, proc: ProcId },
    /// A local cluster: stop every process its state file (`DIR/cluster.json`)
    /// lists, empty and remove the nodes' cgroups, and remove the nodes'
    /// data directories. `dir` is the run directory or lies beneath it.
    Cluster { dir: PathBuf },
    /// The run's cgroup group (`lockjaw/<run-id>`), which every process
    /// the run starts joins: kill what is left in it and remove it, leaves
    /// first. Only if it carries the run directory's owner tag.
    Cgroup { group: String },
    /// A toxic on a proxy: remove it.
    Toxic {
        url: String,
        proxy: String,
        toxic: String,
        /// On lockjaw's embedded server, which dies with lockjaw.
        embedded: bool,
    },
    /// A disabled proxy: enable it again.
    ProxyDisabled {
        url: String,
        proxy: String,
        embedded: bool,
    },
    /// A proxy lockjaw created: delete it.
    Proxy {
        url: String,
        proxy: String,
        embedded: bool,
    },
    /// An iptables rule of this run: `iptables -D` with the arguments
    /// rebuilt from its fields.
    Iptables(iptables::Rule),
    /// A libfaketime control file beneath the run directory: write the
    /// previous offset back.
    Clock { file: PathBuf, previous: String },
    /// `CLIENT PAUSE` on a Redis server: `CLIENT UNPAUSE`.
    RedisClientPause { addr: String },
    /// A node's cgroup frozen (`cgroup.freeze`; PostgreSQL, whose backends
    /// leave the process group): thaw it. `cgroup` is the path under the
    /// cgroup v2 root, `lockjaw/<run-id>/<node>`; only a leaf of the
    /// run's own group is touched.
    Frozen { what: String, cgroup: String },
    /// Tables (sequences, functions) a run created in a user's PostgreSQL
    /// (`--postgres-url`): drop every object named `prefix*`, where
    /// `prefix` is `lockjaw_<run-id>_` of this run. `file` (beneath the
    /// run directory, mode 0600) holds the URL with its password.
    /// `auth`: the `--auth` file whose `[postgres]` TLS the drop uses
    /// (read again; it holds no secret itself).
    PostgresTables {
        file: PathBuf,
        prefix: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<PathBuf>,
    },
    /// What a run's clients create on servers lockjaw did not start
    /// (`--endpoints`, `--attach`): Redis keys, MariaDB or PostgreSQL
    /// tables `lockjaw_<run-id>_*`. Delete them; ones already gone count.
    ServerObjects {
        /// `redis`, `redlock`, `sentinel`, `mariadb` or `postgres`.
        system: String,
        /// The servers that may hold them (`HOST:PORT`): Redis deletes on
        /// each (a replica's refusal is none), SQL on the first.
        servers: Vec<String>,
        /// Redis: the keys, each ending in `-<run-id>` or `-<run-id>:fence`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
        /// SQL: this run's `lockjaw_<run-id>_` (every table starting so).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
        /// The run's `--auth` file, read again for the credentials (the
        /// entry holds no secret).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth_file: Option<PathBuf>,
    },
    /// An effect on another machine (`--hosts`): reconnect to `target`
    /// and take `effect` back. `host` is the node's name, for messages.
    Remote {
        host: String,
        target: SshTarget,
        effect: RemoteEffect,
    },
    /// An SSH ControlMaster lockjaw started: `ssh -O exit -S SOCKET`. Only
    /// a socket under `temp_dir()/lockjaw-ssh/`.
    SshMaster { socket: PathBuf },
    /// A network namespace of a test bed (`ljbed*`): SIGKILL every process
    /// whose network namespace it is, wait until they are gone, and
    /// delete it (`ip netns del`). Only if its `lo` carries the bed's
    /// `nonce` as its alias (a name, or a namespace's inode, may have been
    /// reused by another bed).
    Netns {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<String>,
    },
    /// A network link of a test bed (its bridge or a host's veth, `ljbed*`):
    /// delete it (`ip link del`). Only if it carries the bed's `nonce` as
    /// its alias (`ifalias`).
    Link {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<String>,
    },
}

/// What a run did on a host, and so what heal takes back there. Every
/// string is checked to be this run's before it is used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "kebab-case")]
pub enum RemoteEffect {
    /// Processes with `LOCKJAW_TAG=<tag>` (`lockjaw-<run-id>-<node>`):
    /// CONT, TERM, grace, KILL.
    Processes { tag: String },
    /// Processes of the tag stopped with SIGSTOP: SIGCONT them.
    Paused { tag: String },
    /// An iptables rule on the host: delete it.
    Iptables(RemoteRule),
    /// A libfaketime control file on the host (beneath a directory named
    /// `lockjaw-<run-id>`): write the previous offset back.
    Clock { file: String, previous: String },
    /// The run's data directory on the host (named `lockjaw-<run-id>` or
    /// beneath one): remove it.
    DataDir { dir: String },
    /// Processes of an attached server (`--attach`) stopped with SIGSTOP:
    /// SIGCONT each whose pid still has its recorded start time and cgroup.
    AttachedPaused { node: String, procs: Vec<ProcStamp> },
    /// An attached server killed: unless a process of `find` runs, run the
    /// node's start command (heal takes it from the run's copy of the
    /// hosts file, never from this entry) and wait until one does.
    AttachedDown { node: String, find: Box<Find> },
    /// The processes an attached node runs (found before the run, and again
    /// after each restart): nothing to undo; what heal proves the later
    /// entries of this node against.
    AttachedFound { node: String, procs: Vec<ProcStamp> },
    /// A dead man's switch armed on the host of node `node` (a detached
    /// timer whose processes carry `LOCKJAW_DEADMAN=<tag>`, tag
    /// `lockjaw-<run-id>-<node>-dm<n>`): it takes the fault back by itself
    /// `after_ms` after it was armed. Undo: disarm it (kill the tagged
    /// processes' group); one that fired already is gone.
    DeadMan {
        node: String,
        tag: String,
        after_ms: u64,
    },
}

impl Undo {
    /// Whether this is a fault a nemesis applied (healed when the faults
    /// end, before the workers stop), not a part of the run's set-up
    /// (processes, the cluster, the cgroup group, proxies: taken back at
    /// teardown). Exhaustive, so a new kind must choose.
    pub fn is_fault(&self) -> bool {
        match self {
            Undo::Process { .. }
            | Undo::Cluster { .. }
            | Undo::Cgroup { .. }
            | Undo::Proxy { .. }
            | Undo::PostgresTables { .. }
            | Undo::ServerObjects { .. }
            | Undo::SshMaster { .. }
            | Undo::Netns { .. }
            | Undo::Link { .. } => false,
            Undo::Remote { effect, .. } => matches!(
                effect,
                RemoteEffect::Paused { .. }
                    | RemoteEffect::Iptables(_)
                    | RemoteEffect::Clock { .. }
                    | RemoteEffect::AttachedPaused { .. }
                    | RemoteEffect::AttachedDown { .. }
                    | RemoteEffect::DeadMan { .. }
            ),
            Undo::Paused { .. }
            | Undo::Toxic { .. }
            | Undo::ProxyDisabled { .. }
            | Undo::Iptables(_)
            | Undo::Clock { .. }
            | Undo::RedisClientPause { .. }
            | Undo::Frozen { .. } => true,
        }
    }

    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self {
            Undo::Process { what, proc } => format!("stop {what} (pid {})", proc.pid),
            Undo::Paused { what, proc } => format!("continue {what} (pid {})", proc.pid),
            Undo::Cluster { dir } => format!("stop the cluster in {}", dir.display()),
            Undo::Cgroup { group } => format!("empty and remove cgroup {group}"),
            Undo::Toxic { proxy, toxic, .. } => format!("remove toxic {toxic} from {proxy}"),
            Undo::ProxyDisabled { proxy, .. } => format!("enable proxy {proxy}"),
            Undo::Proxy { proxy, .. } => format!("delete proxy {proxy}"),
            Undo::Iptables(r) => format!(
                "delete the iptables rule {:?} (cgroup {:?})",
                r.comment, r.cgroup
            ),
            Undo::Clock { file, previous } => {
                format!("set the clock in {} back to {previous:?}", file.display())
            }
            Undo::RedisClientPause { addr } => format!("CLIENT UNPAUSE on {addr}"),
            Undo::Frozen { what, cgroup } => format!("thaw {what} (cgroup {cgroup})"),
            Undo::PostgresTables { prefix, .. } => {
                format!("drop the tables {prefix}* in the --postgres-url database")
            }
            Undo::ServerObjects {
                system,
                keys,
                prefix,
                ..
            } => match prefix {
                Some(p) => format!("drop the tables {p}* in the {system} database"),
                None => format!("delete the {system} keys {}", keys.join(" ")),
            },
            Undo::Remote { host, effect, .. } => format!("{} on host {host}", effect.describe()),
            Undo::SshMaster { socket } => {
                format!("end the SSH ControlMaster {}", socket.display())
            }
            Undo::Netns { name, .. } => {
                format!("kill the processes of network namespace {name} and delete it")
            }
            Undo::Link { name, .. } => format!("delete network link {name}"),
        }
    }
}

impl RemoteEffect {
    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self {
            RemoteEffect::Processes { tag } => format!("stop the processes tagged {tag}"),
            RemoteEffect::Paused { tag } => format!("continue the processes tagged {tag}"),
            RemoteEffect::Iptables(r) => format!("delete the iptables rule {:?}", r.comment),
            RemoteEffect::Clock { file, previous } => {
                format!("set the clock in {file} back to {previous:?}")
            }
            RemoteEffect::DataDir { dir } => format!("remove {dir}"),
            RemoteEffect::AttachedPaused { node, procs } => {
                let pids: Vec<String> = procs.iter().map(|p| p.pid.to_string()).collect();
                format!("continue node {node}'s processes {}", pids.join(" "))
            }
            RemoteEffect::AttachedDown { node, .. } => {
                format!("start node {node} again (unless it runs)")
            }
            RemoteEffect::AttachedFound { node, .. } => {
                format!("nothing (node {node}'s processes, as found)")
            }
            RemoteEffect::DeadMan { node, tag, after_ms } => format!(
                "disarm node {node}'s dead man's switch {tag} (set to fire {} s after it was armed)",
                after_ms.div_ceil(1000)
            ),
        }
    }
}
