//! The iptables rules a run inserts, as typed fields: the partition
//! nemesis builds its `iptables -I` arguments from a [`Rule`] and writes
//! the same `Rule` to the undo log, and the undo rebuilds the `iptables -D`
//! arguments from it. Before anything reaches iptables, [`Rule::check`]
//! proves the rule is this run's: its comment starts `lockjaw:<run-id> `,
//! its cgroup lies under `lockjaw/<run-id>/`, and every field is of the
//! shape the nemesis writes (no string from the file is passed on
//! unchecked).

use serde::{Deserialize, Serialize};

/// The chain (only OUTPUT: the sender's cgroup is known there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Chain {
    #[serde(rename = "OUTPUT")]
    Output,
}

/// The protocol matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    #[serde(rename = "tcp")]
    Tcp,
}

/// What the rule does with a matching packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Jump {
    #[serde(rename = "DROP")]
    Drop,
}

/// Most ports `-m multiport` takes.
const MAX_PORTS: usize = 15;

/// One rule: packets of `protocol` leaving processes of cgroup `cgroup`
/// for one of `dports` (from `sport`, if given).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub chain: Chain,
    pub protocol: Protocol,
    /// The sender's cgroup v2 path relative to the root
    /// (`lockjaw/<run-id>/<node>`), as `-m cgroup --path` takes it.
    pub cgroup: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    pub dports: Vec<u16>,
    /// `lockjaw:<run-id> <what>`.
    pub comment: String,
    pub jump: Jump,
}

impl Rule {
    /// Drop tcp from cgroup `cgroup` to `dports` (and from `sport`).
    pub fn drop_tcp(cgroup: &str, sport: Option<u16>, dports: &[u16], comment: &str) -> Rule {
        Rule {
            chain: Chain::Output,
            protocol: Protocol::Tcp,
            cgroup: cgroup.to_string(),
            sport,
            dports: dports.to_vec(),
            comment: comment.to_string(),
            jump: Jump::Drop,
        }
    }

    /// The arguments after `-I` or `-D`.
    pub fn args(&self) -> Vec<String> {
        let Chain::Output = self.chain;
        let Protocol::Tcp = self.protocol;
        let Jump::Drop = self.jump;
        let mut a: Vec<String> = ["OUTPUT", "-p", "tcp", "-m", "cgroup", "--path"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.push(self.cgroup.clone());
        if let Some(s) = self.sport {
            a.extend(["--sport".into(), s.to_string()]);
        }
        if let [one] = self.dports[..] {
            a.extend(["--dport".into(), one.to_string()]);
        } else {
            let csv: Vec<String> = self.dports.iter().map(u16::to_string).collect();
            a.extend([
                "-m".into(),
                "multiport".into(),
                "--dports".into(),
                csv.join(","),
            ]);
        }
        a.extend(["-m".into(), "comment".into(), "--comment".into()]);
        a.push(self.comment.clone());
        a.extend(["-j".into(), "DROP".into()]);
        a
    }

    /// Whether this is a rule run `run_id` can have written: its comment
    /// and cgroup carry the run id, every field has the nemesis' shape.
    pub fn check(&self, run_id: Option<&str>) -> Result<(), String> {
        let id = check_comment(&self.comment, run_id)?;
        let under = format!("lockjaw/{id}/");
        let node = self
            .cgroup
            .strip_prefix(&under)
            .ok_or_else(|| format!("its cgroup {:?} is not under {under}", self.cgroup))?;
        let part_ok = |p: &str| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        if !node.split('/').all(part_ok) {
            return Err(format!(
                "its cgroup {:?} is not a cgroup lockjaw makes",
                self.cgroup
            ));
        }
        if self.dports.is_empty() || self.dports.len() > MAX_PORTS {
            return Err(format!(
                "it names {} destination ports (1 to {MAX_PORTS})",
                self.dports.len()
            ));
        }
        if self.dports.contains(&0) || self.sport == Some(0) {
            return Err("it names port 0".into());
        }
        Ok(())
    }
}

/// The run's id, if it is one lockjaw makes; an error saying why no
/// record can be proven to be this run's otherwise.
pub fn check_run_id(run_id: Option<&str>) -> Result<&str, String> {
    let id = run_id.filter(|id| !id.is_empty()).ok_or(
        "the run directory names no run id (run.json), so no rule can be proven to be this run's",
    )?;
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("the run id {id:?} is not one lockjaw makes"));
    }
    Ok(id)
}

/// Whether `comment` is a rule comment run `run_id` writes:
/// `lockjaw:<run-id> <fault> <node>`, of plain characters, at most 255
/// bytes. Returns the run id.
pub fn check_comment<'a>(comment: &str, run_id: Option<&'a str>) -> Result<&'a str, String> {
    let id = check_run_id(run_id)?;
    let tag = format!("lockjaw:{id}");
    let rest = comment
        .strip_prefix(&tag)
        .filter(|r| r.is_empty() || r.starts_with(' '))
        .ok_or_else(|| format!("its comment {comment:?} is not this run's ({tag})"))?;
    if comment.len() > 255
        || !rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" ._:/-".contains(&b))
    {
        return Err(format!(
            "its comment {comment:?} is not of the form `{tag} <fault> <node>`"
        ));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Rule {
        Rule::drop_tcp(
            "lockjaw/ab12cd34/etcd1",
            None,
            &[45001, 45003],
            "lockjaw:ab12cd34 partition-node etcd1",
        )
    }

    #[test]
    fn a_rule_names_the_cgroup_the_ports_and_the_comment() {
        let s = ok().args().join(" ");
        assert!(s.starts_with("OUTPUT -p tcp -m cgroup --path lockjaw/ab12cd34/etcd1"));
        assert!(s.contains("-m multiport --dports 45001,45003"), "{s}");
        assert!(s.ends_with("--comment lockjaw:ab12cd34 partition-node etcd1 -j DROP"));
        let one = Rule::drop_tcp("p", Some(45001), &[50000], "t")
            .args()
            .join(" ");
        assert!(one.contains("--sport 45001 --dport 50000"), "{one}");
    }

    #[test]
    fn only_this_runs_well_formed_rules_pass() {
        ok().check(Some("ab12cd34")).unwrap();
        assert!(ok().check(None).is_err());
        assert!(ok()
            .check(Some("ffffffff"))
            .unwrap_err()
            .contains("not this run's"));
        let bad = |f: &dyn Fn(&mut Rule)| {
            let mut r = ok();
            f(&mut r);
            r.check(Some("ab12cd34")).unwrap_err()
        };
        bad(&|r| r.comment = "lockjaw:ab12cd345 x".into());
        bad(&|r| r.comment = "lockjaw:ab12cd34 x\n-F".into());
        bad(&|r| r.cgroup = "lockjaw/ab12cd34/../other/x".into());
        bad(&|r| r.cgroup = "lockjaw/ab12cd34/n1 -j ACCEPT".into());
        bad(&|r| r.cgroup = "system.slice/sshd.service".into());
        bad(&|r| r.dports.clear());
        bad(&|r| r.dports = (1..=16).collect());
        bad(&|r| r.sport = Some(0));
    }

    #[test]
    fn an_untyped_record_does_not_read_as_a_rule() {
        let old = r#"{"args":["OUTPUT","-j","ACCEPT"]}"#;
        assert!(serde_json::from_str::<Rule>(old).is_err());
    }
}
