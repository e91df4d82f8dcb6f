//! What a run combines (system, client, storage, workload, nemesis,
//! fencing, placement, Toxiproxy) and [`applies`], the one function that
//! decides whether lockjaw supports a combination. `run` refuses with its
//! answer, `compare` shows it in N/A cells, and the support table in
//! `docs/faults.md` is generated from it. New dimensions become fields of
//! [`Combination`], not new functions.
//!
//! What the host must have (iptables, cgroups, libfaketime) is a separate
//! runtime check: [`crate::nemesis::registry::host_ready`], on [`Combination::scope`].

pub mod table;

pub use crate::nemesis::scope::{ClientChoice, Placement, Scope, ToxiproxyChoice};
use crate::nemesis::{registry, NemesisSpec};
use crate::service::{having, Can, Facts, System};
use crate::workload::Kind;
use serde::{Deserialize, Serialize};

/// The protected resource the workers write to (`--storage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum StorageChoice {
    /// lockjaw's own fenced storage service.
    Builtin,
    Postgres,
    Mariadb,
}

impl StorageChoice {
    /// The `--storage` name.
    pub fn name(self) -> &'static str {
        match self {
            StorageChoice::Builtin => "builtin",
            StorageChoice::Postgres => "postgres",
            StorageChoice::Mariadb => "mariadb",
        }
    }
}

/// One combination a run (or a compare cell, or a support-table cell) would use.
#[derive(Clone, Debug)]
pub struct Combination {
    pub system: System,
    pub client: ClientChoice,
    pub storage: StorageChoice,
    pub workload: Kind,
    pub nemesis: NemesisSpec,
    /// `Some(true)`: the storage checks fences; `None`: the system's default.
    pub fencing: Option<bool>,
    pub placement: Placement,
    pub toxiproxy: ToxiproxyChoice,
    /// `--hosts FILE --attach`: the servers on the hosts run already, so
    /// whether lockjaw can start the system on hosts does not matter.
    pub attach: bool,
}

impl Combination {
    /// lockjaw's own clients and storage, the embedded Toxiproxy, the
    /// system's fencing default.
    pub fn builtin(
        system: System,
        workload: Kind,
        nemesis: NemesisSpec,
        placement: Placement,
    ) -> Combination {
        Combination {
            system,
            client: ClientChoice::Builtin,
            storage: StorageChoice::Builtin,
            workload,
            nemesis,
            fencing: None,
            placement,
            toxiproxy: ToxiproxyChoice::Embedded,
            attach: false,
        }
    }

    /// The same combination with another nemesis.
    pub fn with_nemesis(&self, nemesis: NemesisSpec) -> Combination {
        Combination {
            nemesis,
            ..self.clone()
        }
    }

    pub fn facts(&self) -> Facts {
        self.system.facts()
    }

    /// What the fault registry's support rules look at.
    pub fn scope(&self) -> Scope {
        Scope {
            system: self.system,
            client: self.client.clone(),
            workload: self.workload,
            nemesis: self.nemesis.clone(),
            placement: self.placement,
            toxiproxy: self.toxiproxy,
        }
    }

    pub fn is_local(&self) -> bool {
        self.placement == Placement::Local
    }

    /// Whether lockjaw starts the servers (here or on `--hosts`), and so
    /// has their processes to fault.
    pub fn starts_servers(&self) -> bool {
        matches!(self.placement, Placement::Local | Placement::Hosts)
    }
}

/// Which part of a combination is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dimension {
    /// `--client`, `--storage`, `--hosts`: no system supports it today.
    Choice,
    Fencing,
    Workload,
    Nemesis,
}

/// Why a combination does not apply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {why} (hint: {hint})")]
pub struct NotApplicable {
    pub dimension: Dimension,
    /// What is refused, naming the flags.
    pub what: String,
    /// Why, in a sentence (compare's N/A cells show this).
    pub why: String,
    pub hint: String,
}

impl NotApplicable {
    fn new(
        dimension: Dimension,
        what: impl Into<String>,
        why: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        NotApplicable {
            dimension,
            what: what.into(),
            why: why.into(),
            hint: hint.into(),
        }
    }

    /// The nemesis of `c` does not apply, because `why`.
    pub fn nemesis(c: &Combination, why: String) -> NotApplicable {
        NotApplicable::new(
            Dimension::Nemesis,
            format!(
                "nemesis {} ({}) is not supported with --system {} {} and workload {}",
                c.nemesis.name,
                c.nemesis.fault,
                c.system,
                c.placement.phrase(),
                c.workload.name()
            ),
            why,
            "see the support table in docs/faults.md",
        )
    }
}

/// Whether lockjaw supports `c`; the error says why not and what to do.
pub fn applies(c: &Combination) -> Result<(), NotApplicable> {
    if let ClientChoice::Adapter(a) = &c.client {
        if matches!(c.workload, Kind::Register | Kind::Leader) {
            return Err(NotApplicable::new(
                Dimension::Workload,
                format!("--client {a} with the {} workload", c.workload.name()),
                "client adapters speak the lock protocol (acquire, renew, release, probe): \
                 the register and leader workloads use lockjaw's own clients",
                "use a lock workload (lock, fenced-counter, lock-set), or drop --client",
            ));
        }
    }
    if c.storage != StorageChoice::Builtin && c.workload == Kind::Jobs {
        let s = c.storage.name();
        return Err(NotApplicable::new(
            Dimension::Workload,
            format!("the jobs workload with --storage {s}"),
            "the SQL storages (postgres, mariadb) have no apply request (a job id, with or without an idempotency key) yet",
            format!("run the jobs workload on lockjaw's own storage (drop --storage {s})"),
        ));
    }
    if c.placement == Placement::Hosts && !c.attach {
        if let Can::No(why) = c.facts().hosts {
            return Err(NotApplicable::new(
                Dimension::Choice,
                format!("--system {} --hosts", c.system),
                why,
                format!(
                    "drop --hosts, or use a system lockjaw starts on hosts: {}",
                    having(|f| f.hosts)
                ),
            ));
        }
    }
    let facts = c.facts();
    let lacking = |dimension, what: String, can: Can, hint: String| match can {
        Can::Yes => Ok(()),
        Can::No(why) => Err(NotApplicable::new(dimension, what, why, hint)),
    };
    lock_free(c, facts)?;
    if c.fencing == Some(true) {
        lacking(
            Dimension::Fencing,
            format!("--fencing on with --system {}", c.system),
            facts.fencing_token,
            format!(
                "use --fencing off, or a system with fences: {}",
                having(|f| f.fencing_token)
            ),
        )?;
    }
    if c.workload == Kind::Register {
        lacking(
            Dimension::Workload,
            format!("the register workload on --system {}", c.system),
            facts.register,
            format!("use --system {}", having(|f| f.register)),
        )?;
    }
    if c.workload == Kind::Leader {
        lacking(
            Dimension::Workload,
            format!("the leader workload on --system {}", c.system),
            facts.election,
            format!("use --system {}", having(|f| f.election)),
        )?;
    }
    registry::supports(&c.scope()).map_err(|why| NotApplicable::nemesis(c, why))
}

/// A system without a lock (`cas`) runs only lockjaw's own workers on a
/// workload that writes the storage, with nothing to connect to.
fn lock_free(c: &Combination, facts: Facts) -> Result<(), NotApplicable> {
    let Can::No(why) = facts.lock else {
        return Ok(());
    };
    let lock_systems = having(|f| f.lock);
    if c.placement != Placement::Local {
        return Err(NotApplicable::new(
            Dimension::Choice,
            format!("--system {} {}", c.system, c.placement.phrase()),
            why,
            format!("drop {}", c.placement.phrase()),
        ));
    }
    if let ClientChoice::Adapter(a) = &c.client {
        return Err(NotApplicable::new(
            Dimension::Choice,
            format!("--client {a} with --system {}", c.system),
            why,
            format!("drop --client, or use a lock service: {lock_systems}"),
        ));
    }
    if !c.workload.uses_storage() || matches!(c.workload, Kind::Register | Kind::Leader) {
        return Err(NotApplicable::new(
            Dimension::Workload,
            format!(
                "the {} workload on --system {}",
                c.workload.name(),
                c.system
            ),
            format!(
                "{why}; only a read-modify-write of the storage has something to make conditional"
            ),
            "use fenced-counter or lock-set",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn combo(system: System, workload: Kind, nemesis: &str, fencing: Option<bool>) -> Combination {
        Combination {
            fencing,
            ..Combination::builtin(
                system,
                workload,
                crate::nemesis::spec::load(nemesis).unwrap(),
                Placement::Local,
            )
        }
    }

    fn why(c: &Combination) -> Option<String> {
        applies(c).err().map(|e| e.why)
    }

    /// The rules `compare` used to keep as string matches, now asked of
    /// the one function.
    #[test]
    fn na_rules_follow_the_issue() {
        use Kind::{FencedCounter, Leader, Lock, Register};
        use System::*;
        assert!(why(&combo(Redlock, FencedCounter, "pause-holder", Some(true))).is_some());
        assert!(why(&combo(Redlock, FencedCounter, "pause-holder", Some(false))).is_none());
        assert!(why(&combo(Etcd, FencedCounter, "clock-jump", None))
            .unwrap()
            .contains("libfaketime"));
        assert!(why(&combo(Zookeeper, Lock, "clock-strobe", None)).is_some());
        assert!(why(&combo(Redis, Lock, "clock-jump", None)).is_none());
        assert!(why(&combo(Redis, Lock, "failover", None)).is_some());
        assert!(why(&combo(Redlock, Leader, "none", Some(false))).is_some());
        assert!(why(&combo(Sentinel, Leader, "none", None)).is_some());
        assert!(why(&combo(Redis, Leader, "clock-jump", None)).is_none());
        assert!(why(&combo(Redlock, Register, "none", None)).is_some());
    }

    #[test]
    fn jobs_are_refused_on_the_postgres_storage() {
        let mut c = combo(System::Redis, Kind::Jobs, "pause-holder", None);
        assert!(why(&c).is_none());
        c.storage = StorageChoice::Postgres;
        let e = applies(&c).unwrap_err().to_string();
        assert!(
            e.starts_with("the jobs workload with --storage postgres: "),
            "{e}"
        );
    }

    #[test]
    fn refusals_name_the_flag_and_end_with_a_hint() {
        let e = applies(&combo(
            System::Redlock,
            Kind::FencedCounter,
            "none",
            Some(true),
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--fencing on with --system redlock: Redlock has no fencing token"),
            "{e}"
        );
        assert!(
            e.contains("(hint: use --fencing off, or a system with fences: redis, "),
            "{e}"
        );
        assert!(!e.contains("redlock,") && e.ends_with(')'), "{e}");
        let mut c = combo(System::Redis, Kind::Register, "none", None);
        c.client = ClientChoice::parse("python-redis-py");
        let e = applies(&c).unwrap_err().to_string();
        assert!(
            e.starts_with("--client python-redis-py with the register workload: "),
            "{e}"
        );
        assert!(e.contains("(hint: "), "{e}");
        c.workload = Kind::Lock;
        assert_eq!(applies(&c), Ok(()));
        c.client = ClientChoice::parse("builtin");
        c.storage = StorageChoice::Postgres;
        assert_eq!(applies(&c), Ok(()), "--storage postgres runs");
        c.storage = StorageChoice::Builtin;
        c.placement = Placement::Hosts;
        assert!(applies(&c).is_ok());
        c.system = System::Sentinel;
        assert!(applies(&c).unwrap_err().what.contains("--hosts"));
        c.placement = Placement::Local;
        assert_eq!(applies(&c), Ok(()));
    }

    #[test]
    fn holder_faults_are_refused_on_the_register_workload() {
        let c = combo(System::Etcd, Kind::Register, "pause-holder", None);
        let e = applies(&c).unwrap_err().to_string();
        assert!(
            e.contains("not supported") && e.contains("no holder") && e.contains("hint"),
            "{e}"
        );
    }
}
