//! The plain data of an effect on another machine, as the undo log
//! records it: how to reach the host again ([`SshTarget`]) and a
//! whole-host iptables cut ([`RemoteRule`]) with the check that it is
//! this run's. The `remote` module acts on them and re-exports them.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

/// How to reach a host again (stored in undo entries, so heal can reconnect).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshTarget {
    /// The SSH destination (name or address).
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<PathBuf>,
    /// Checked strictly when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<PathBuf>,
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        f.write_str(&self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// One process of a server lockjaw attached to (`--attach`), as found on
/// its host: heal signals a pid only while it still has this start time
/// and cgroup, so a reused pid or a restarted server is never touched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcStamp {
    pub pid: u32,
    /// Field 22 of `/proc/PID/stat`: clock ticks since the host booted.
    pub start: u64,
    /// Its `0::` line of `/proc/PID/cgroup` (cgroup v2 path), or all
    /// lines joined by `;` on a host without cgroup v2.
    pub cgroup: String,
}

/// How an attached node's server is found on its host (the hosts file's
/// `attach` table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub enum Find {
    /// A systemd unit: its `MainPID` and the processes of its cgroup.
    Unit { unit: String },
    /// The pid in a file, whose executable is `exe` when given.
    Pidfile {
        pidfile: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exe: Option<String>,
    },
    /// The one process whose `/proc/PID/exe` is `exe` and whose command
    /// line carries `arg`, with its descendants.
    Exe { exe: String, arg: String },
}

/// The chain of a [`RemoteRule`]: packets from the peer, or to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemoteChain {
    #[serde(rename = "INPUT")]
    Input,
    #[serde(rename = "OUTPUT")]
    Output,
}

/// A whole-host cut between a host and one peer address:
/// `iptables -I INPUT -s PEER ... -j DROP` or `-I OUTPUT -d PEER ...`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRule {
    pub chain: RemoteChain,
    pub peer: IpAddr,
    /// `lockjaw:<run-id> partition-node <node>`.
    pub comment: String,
}

impl RemoteRule {
    /// Whether run `run_id` can have written this rule: its comment
    /// carries the run id and has the shape the nemesis writes, and its
    /// peer is one address (not a loopback one: that would cut the host
    /// from itself, lockjaw's SSH included).
    pub fn check(&self, run_id: Option<&str>) -> Result<(), String> {
        super::iptables::check_comment(&self.comment, run_id)?;
        let p = self.peer;
        if p.is_unspecified() || p.is_loopback() || p.is_multicast() {
            return Err(format!("its peer {p} is not one host's address"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::undo::{RemoteEffect, Undo};

    #[test]
    fn remote_entries_survive_the_log() {
        let target = SshTarget {
            host: "10.0.0.1".into(),
            port: Some(2222),
            user: Some("root".into()),
            identity_file: Some("/k/id".into()),
            known_hosts: None,
        };
        let effects = [
            RemoteEffect::Processes {
                tag: "lockjaw-ab12-h1".into(),
            },
            RemoteEffect::Paused {
                tag: "lockjaw-ab12-h1".into(),
            },
            RemoteEffect::Iptables(RemoteRule {
                chain: RemoteChain::Input,
                peer: "10.0.0.2".parse().unwrap(),
                comment: "lockjaw:ab12 partition-node h1".into(),
            }),
            RemoteEffect::Clock {
                file: "/d/lockjaw-ab12/h1/ft".into(),
                previous: "+0".into(),
            },
            RemoteEffect::DataDir {
                dir: "/d/lockjaw-ab12".into(),
            },
            RemoteEffect::DeadMan {
                node: "h1".into(),
                tag: "lockjaw-ab12-h1-dm1".into(),
                after_ms: 19_000,
            },
        ];
        for effect in effects {
            let faulty = !matches!(
                effect,
                RemoteEffect::Processes { .. } | RemoteEffect::DataDir { .. }
            );
            let u = Undo::Remote {
                host: "h1".into(),
                target: target.clone(),
                effect,
            };
            let text = serde_json::to_string(&u).unwrap();
            assert_eq!(serde_json::from_str::<Undo>(&text).unwrap(), u, "{text}");
            assert_eq!(u.is_fault(), faulty, "{text}");
        }
        let m = Undo::SshMaster {
            socket: "/tmp/lockjaw-ssh/x/master".into(),
        };
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Undo>(&text).unwrap(), m);
        assert!(!m.is_fault());
    }
}
