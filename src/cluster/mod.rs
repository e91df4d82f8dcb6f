//! Local clusters of real lock-service servers, one file per system, and the
//! node handle nemeses use (pause, resume, kill, restart, leader discovery).

pub mod cli;

use serde::{Deserialize, Serialize};

/// A supported lock service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum System {
    Redis,
    Redlock,
    Sentinel,
    Etcd,
    Zookeeper,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::Redis => "redis",
            System::Redlock => "redlock",
            System::Sentinel => "sentinel",
            System::Etcd => "etcd",
            System::Zookeeper => "zookeeper",
        }
    }
}

impl std::fmt::Display for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
