//! The service registry: one entry per lock service, saying everything the
//! system means to lockjaw. An entry (one file per system, a unit struct
//! implementing [`Service`]) holds the local cluster plan (node count,
//! ports, start arguments, readiness probe, version and leader queries,
//! which nodes clients dial), the lock, register and election client
//! constructors, and the system's [`Facts`], a plain struct every entry
//! builds in full, so a forgotten fact is a compile error, not a Redis
//! default.
//!
//! [`System::service`] is the one match over the systems; everything else
//! asks the entry. Whether a whole combination (system, client, storage,
//! workload, nemesis, fencing, placement) is supported is decided above
//! this module, by `crate::combination::applies`.
//!
//! The per-system implementations stay in `cluster/<system>.rs` and
//! `client/<system>.rs`; an entry calls them.

mod cas;
mod connect;
mod etcd;
pub mod leftovers;
mod mariadb;
pub mod mariadb_storage;
pub mod postgres;
pub mod postgres_storage;
mod redis;
pub mod redis_cluster;
mod redlock;
pub mod sentinel;
mod zookeeper;

pub use connect::{connect, connect_election, connect_register};

use crate::client::election::ElectionClient;
use crate::client::register::RegisterClient;
use crate::client::{ClientConfig, ClientError, LockClient};
pub use crate::cluster::Servers;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A supported lock service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum System {
    Redis,
    Redlock,
    Sentinel,
    /// Redis Cluster: primaries with a replica each; the lock on the primary of the key's slot.
    // Named `redis-cluster` (derive's lowercase would join the words).
    #[serde(rename = "redis-cluster")]
    #[value(name = "redis-cluster")]
    RedisCluster,
    Etcd,
    Zookeeper,
    Postgres,
    Mariadb,
    /// No lock: conditional writes on the storage (the lock-free alternative).
    Cas,
}

/// Every system, in the order the enum declares them (tables list them so).
pub fn systems() -> &'static [System] {
    <System as clap::ValueEnum>::value_variants()
}

impl System {
    /// The system's registry entry, as itself and as its servers: the one
    /// match over the systems.
    fn entry(self) -> (&'static dyn Service, &'static dyn Servers) {
        fn both<T: Service>(t: &'static T) -> (&'static dyn Service, &'static dyn Servers) {
            (t, t)
        }
        match self {
            System::Redis => both(&redis::Redis),
            System::Redlock => both(&redlock::Redlock),
            System::Sentinel => both(&sentinel::Sentinel),
            System::RedisCluster => both(&redis_cluster::RedisCluster),
            System::Etcd => both(&etcd::Etcd),
            System::Zookeeper => both(&zookeeper::Zookeeper),
            System::Postgres => both(&postgres::Postgres),
            System::Mariadb => both(&mariadb::Mariadb),
            System::Cas => both(&cas::Cas),
        }
    }

    /// The system's registry entry.
    pub fn service(self) -> &'static dyn Service {
        self.entry().0
    }

    pub fn name(self) -> &'static str {
        self.service().name()
    }

    /// The system's servers, as the cluster layer sees them.
    pub fn servers(self) -> &'static dyn Servers {
        self.entry().1
    }

    /// The system with this `--system` name (as `cluster.json` records it).
    pub fn named(name: &str) -> Option<System> {
        systems().iter().copied().find(|s| s.name() == name)
    }

    /// The servers of the system with this name: the cluster layer's
    /// [`crate::cluster::FindServers`].
    pub fn find_servers(name: &str) -> Option<&'static dyn Servers> {
        System::named(name).map(System::servers)
    }

    /// The system's facts.
    pub fn facts(self) -> Facts {
        self.service().facts()
    }

    /// Default number of data nodes (sentinel: servers; 3 sentinels come on top).
    pub fn default_nodes(self) -> usize {
        self.service().default_nodes()
    }

    /// Default first port; distinct per system so clusters of different
    /// systems run side by side (use `--base-port` for two of one system).
    pub fn default_base_port(self) -> u16 {
        self.service().default_base_port()
    }

    /// Consecutive ports `n` data nodes take from the base port.
    pub fn port_span(self, n: usize) -> usize {
        self.service().port_span(n)
    }

    /// Whether `--postgres-url` names this system's lock servers (the
    /// user's database is the lock service), not only the storage.
    pub fn locks_in_postgres_url(self) -> bool {
        self == System::Postgres
    }

    /// Whether its clients create tables in the user's database (the
    /// fence table `lockjaw_<run-id>_fence`), which the run drops.
    pub fn makes_sql_tables(self) -> bool {
        matches!(self, System::Mariadb | System::Postgres)
    }
}

impl std::fmt::Display for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An ability a system has, or the reason it lacks it (shown to users in
/// refusals and N/A cells, so it says why and what to use instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Can {
    Yes,
    No(&'static str),
}

impl Can {
    pub fn is_yes(self) -> bool {
        self == Can::Yes
    }

    /// `Err(reason)` when the system cannot.
    pub fn check(self) -> Result<(), String> {
        match self {
            Can::Yes => Ok(()),
            Can::No(why) => Err(why.to_string()),
        }
    }
}

/// What a system is, as far as lockjaw's decisions go. Every entry builds
/// this in full: no `Default`, no `..`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// A lock service: servers lockjaw can start and fault, and a lock
    /// client. No for `cas`, whose workers update the storage by
    /// conditional writes instead (no servers, no lock, no holder's lease).
    pub lock: Can,
    /// A grant carries a fencing token the storage can check (the default
    /// of `--fencing` is on exactly when it does).
    pub fencing_token: Can,
    /// The acquire itself starts the lease (Redis `SET .. PX`); false when
    /// a session or lease grant started it earlier (etcd, ZooKeeper).
    pub lease_starts_at_acquire: bool,
    /// The worker acquires once and retries after a random delay instead of
    /// waiting inside the client (a long wait would blur the lease start).
    pub acquire_once: bool,
    /// The servers talk to peers, so one can be cut off from them.
    pub partitionable_peers: Can,
    /// Clock faults can reach the servers.
    pub clock_faults: Can,
    /// The servers can be started under libfaketime (`--faketime`).
    pub libfaketime: bool,
    /// A replica can be made the primary in place of a primary that still
    /// holds a fresh grant (`failover`: Sentinel after killing the
    /// primary; Redis Cluster by `CLUSTER FAILOVER FORCE`).
    pub failover: Can,
    /// The replica of the key's primary takes over on command (`CLUSTER
    /// FAILOVER`, coordinated or `TAKEOVER`): Redis Cluster.
    pub cluster_failover: Can,
    /// Clients find the primary by asking monitors for a named master
    /// (`--sentinel-master`); with `--endpoints` they list the monitors.
    pub named_master: bool,
    /// One store to hold a register (the register workload).
    pub register: Can,
    /// Leader election (the leader workload).
    pub election: Can,
    /// A node can be restarted on an emptied data directory (`kill-node`
    /// with `restart = "empty"`): the lock lives in server memory that a
    /// restart without its data forgets.
    pub restart_empty: Can,
    /// lockjaw can start its servers on other hosts over SSH (`--hosts`).
    pub hosts: Can,
    /// `lockjaw compare` runs it when `--systems` is not given (the lock
    /// services the debates are about: single Redis, Redlock, etcd,
    /// ZooKeeper).
    pub compared_by_default: bool,
    /// What the embedded Toxiproxy reads on the workers' links.
    pub wire: Wire,
    /// How the servers keep a grant, for the fault registry's allows-rule
    /// (which fault explains which anomaly: `nemesis::allows`).
    pub keeps: Keeps,
    /// What lockjaw's own client promises (recorded in a run's meta as an
    /// adapter's `hello_ok` promises are; docs/adapters.md).
    pub promises: crate::client::adapter::Promises,
}

/// How the servers keep a grant: what a fault on them can take away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keeps {
    /// A key with a ttl in one server's memory, expired by its wall clock
    /// (single Redis).
    KeyOnOneNode,
    /// Keys on independent nodes, a majority of them deciding (Redlock).
    KeyOnMajority,
    /// A key on the primary that serves it, replicated asynchronously to
    /// a replica that may be promoted (Sentinel, Redis Cluster).
    KeyOnPrimary,
    /// A lease or session a quorum agreed on, kept alive by the client
    /// (etcd, ZooKeeper).
    QuorumLease,
    /// A lock bound to the client's session, no lease (PostgreSQL,
    /// MariaDB).
    Session,
    /// No lock at all (`cas`).
    Nothing,
}

/// The protocol of the workers' links as the embedded Toxiproxy frames it
/// (`docs/toxiproxy.md`, framed connections): what its one-shots can tell
/// apart, and whether `strike-command` can match a request there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// RESP: requests by command, `PING` passed over, matched by content.
    Resp,
    /// ZooKeeper's jute frames: requests by op, pings passed over.
    ZooKeeper,
    /// Not framed (HTTP/2, SQL wire protocols): chunks by time only.
    Opaque,
}

impl Wire {
    /// The struck request names a release can be (None: any).
    pub fn release_ops(self) -> Option<&'static [&'static str]> {
        match self {
            Wire::ZooKeeper => Some(&["delete", "multi"]),
            Wire::Resp | Wire::Opaque => None,
        }
    }
}

/// One lock service's registry entry: its servers (the [`Servers`] the
/// cluster layer asks), its facts, and its clients.
#[async_trait]
pub trait Service: Servers {
    fn facts(&self) -> Facts;

    async fn connect(&self, cfg: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError>;
    async fn connect_register(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError>;
    async fn connect_election(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError>;
}

/// For entries without a store or an election: a definite error with the
/// fact's reason and the systems that have it.
pub(crate) fn lacks(what: &str, system: System, fact: fn(&Facts) -> Can) -> ClientError {
    let why = match fact(&system.facts()) {
        Can::Yes => "unsupported",
        Can::No(why) => why,
    };
    ClientError::Definite(format!(
        "{what} is unsupported on {system}: {why} (hint: use {})",
        having(fact)
    ))
}

/// Whether lockjaw can start a cluster of `system` (with `--faketime`
/// when `faketime`); the error says why not and what to use instead.
pub fn can_start(system: System, faketime: bool) -> Result<(), String> {
    let facts = system.facts();
    if let Can::No(why) = facts.lock {
        return Err(format!(
            "--system {system}: {why} (hint: a cluster needs a lock service: {})",
            having(|f| f.lock)
        ));
    }
    if faketime && !facts.libfaketime {
        let why = match facts.clock_faults {
            Can::No(why) => why,
            Can::Yes => "its servers do not run under libfaketime",
        };
        return Err(format!(
            "--faketime with --system {system}: {why} (hint: drop --faketime; it applies to {})",
            having(|f| match f.libfaketime {
                true => Can::Yes,
                false => Can::No("no libfaketime"),
            })
        ));
    }
    Ok(())
}

/// The systems whose `fact` is yes, as "a, b or c".
pub fn having(fact: fn(&Facts) -> Can) -> String {
    let names: Vec<&str> = systems()
        .iter()
        .filter(|s| fact(&s.facts()).is_yes())
        .map(|s| s.name())
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => "no system".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_is_listed_once_with_its_own_name_and_ports() {
        let mut names: Vec<&str> = systems().iter().map(|s| s.name()).collect();
        let mut ports: Vec<u16> = systems().iter().map(|s| s.default_base_port()).collect();
        names.sort();
        names.dedup();
        ports.sort();
        ports.dedup();
        assert_eq!(names.len(), systems().len());
        assert_eq!(ports.len(), systems().len());
        for &s in systems() {
            let parsed = <System as clap::ValueEnum>::from_str(s.name(), false).unwrap();
            assert_eq!(parsed, s, "the --system name is the entry's name");
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
        }
    }

    #[test]
    fn the_fencing_default_follows_the_fencing_fact() {
        assert!(!System::Redlock.facts().fencing_token.is_yes());
        for s in [
            System::Redis,
            System::Sentinel,
            System::Etcd,
            System::Zookeeper,
            System::Postgres,
            System::Mariadb,
        ] {
            assert!(s.facts().fencing_token.is_yes(), "{s}");
        }
    }

    /// Every system-specific decision is in the registry: outside
    /// `src/service/` no code (tests aside) names a system's variant.
    #[test]
    fn no_code_outside_the_registry_names_a_system() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![];
        walk(&src, &mut files);
        let mut found = vec![];
        for f in files {
            if f.starts_with(src.join("service")) || f.file_name().is_some_and(|n| n == "tests.rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (i, line) in code.lines().enumerate() {
                if systems()
                    .iter()
                    .any(|s| line.contains(&format!("System::{s:?}")))
                {
                    found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "system-specific code outside src/service/ (hint: make it a fact or a method of the registry entry):\n{}",
            found.join("\n")
        );
    }
}
