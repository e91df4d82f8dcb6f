//! [`Scope`]: what the fault registry's support rules look at of a run
//! (system, client, workload, nemesis, placement, Toxiproxy), and the
//! choices it is made of. The full combination, with the storage and
//! fencing, and the one `applies` function live above this module, in
//! `crate::combination`.

use super::NemesisSpec;
use crate::service::{Facts, System};
use crate::workload::Kind;
use serde::{Deserialize, Serialize};

/// Which lock clients the workers run (`--client NAME|PATH`, with an
/// optional `@VERSION` or `@PATH` pin kept in the adapter string).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientChoice {
    /// lockjaw's own clients (`--client builtin`, the default).
    Builtin,
    /// A client adapter, by name or path, as given (`python-sherlock@0.4.0`).
    Adapter(String),
}

impl ClientChoice {
    /// `builtin` or an adapter's name or path.
    pub fn parse(s: &str) -> ClientChoice {
        if s == "builtin" {
            ClientChoice::Builtin
        } else {
            ClientChoice::Adapter(s.to_string())
        }
    }
}

impl std::fmt::Display for ClientChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientChoice::Builtin => f.write_str("builtin"),
            ClientChoice::Adapter(a) => f.write_str(a),
        }
    }
}

/// Where the servers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// lockjaw starts a local cluster.
    Local,
    /// A cluster lockjaw did not start (`--endpoints`).
    Endpoints,
    /// lockjaw starts the servers on remote hosts (`--hosts FILE`).
    Hosts,
}

impl Placement {
    /// From the flags: `--hosts` wins over `--endpoints`; neither = local.
    pub fn from_flags(hosts: bool, endpoints: bool) -> Placement {
        match (hosts, endpoints) {
            (true, _) => Placement::Hosts,
            (false, true) => Placement::Endpoints,
            (false, false) => Placement::Local,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Placement::Local => "local",
            Placement::Endpoints => "endpoints",
            Placement::Hosts => "hosts",
        }
    }

    /// How a message names it.
    pub fn phrase(self) -> &'static str {
        match self {
            Placement::Local => "(local cluster)",
            Placement::Endpoints => "--endpoints",
            Placement::Hosts => "--hosts",
        }
    }
}

/// Which Toxiproxy carries the workers' links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToxiproxyChoice {
    /// lockjaw's embedded server.
    Embedded,
    /// `--toxiproxy URL`.
    External,
}

/// What a fault's support rule is shown of a run.
#[derive(Clone, Debug)]
pub struct Scope {
    pub system: System,
    pub client: ClientChoice,
    pub workload: Kind,
    pub nemesis: NemesisSpec,
    pub placement: Placement,
    pub toxiproxy: ToxiproxyChoice,
}

#[cfg(test)]
impl Scope {
    /// A local cluster, lockjaw's own client, the embedded Toxiproxy
    /// (unit tests of support rules).
    pub fn local(system: System, workload: Kind, nemesis: super::spec::NemesisSpec) -> Scope {
        Scope {
            system,
            client: ClientChoice::Builtin,
            workload,
            nemesis,
            placement: Placement::Local,
            toxiproxy: ToxiproxyChoice::Embedded,
        }
    }
}

impl Scope {
    /// The same scope with another nemesis.
    pub fn with_nemesis(&self, nemesis: NemesisSpec) -> Scope {
        Scope {
            nemesis,
            ..self.clone()
        }
    }

    pub fn facts(&self) -> Facts {
        self.system.facts()
    }

    /// Whether lockjaw starts the servers (here or on `--hosts`), and so
    /// has their processes to fault.
    pub fn starts_servers(&self) -> bool {
        matches!(self.placement, Placement::Local | Placement::Hosts)
    }
}
