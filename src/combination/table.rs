//! The tables `docs/faults.md` carries, generated from the registries:
//! where each fault applies (faults × systems × placement, asked of
//! [`super::applies`]) and what each system is (its [`super::Facts`]). A
//! test fails when the page is out of date.

use super::{applies, Combination, Placement};
use crate::nemesis::registry::FAULTS;
use crate::nemesis::spec;
use crate::service::{systems, Can, Facts, Keeps, System};
use crate::workload::Kind;

/// The placements a cell lists, in order.
const PLACEMENTS: [Placement; 3] = [Placement::Local, Placement::Endpoints, Placement::Hosts];

fn header(first: &str) -> String {
    let mut out = format!("| {first} |");
    for s in systems() {
        out.push_str(&format!(" {s} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(systems().len()));
    out.push('\n');
    out
}

/// One row per fault, one column per system; a cell lists the placements
/// where the fault applies to a lock workload with storage (fenced-counter),
/// or says `no`.
pub fn support_table() -> String {
    let mut out = header("nemesis");
    for e in FAULTS {
        let spec = spec::load(e.name).expect("every fault has a built-in nemesis file");
        out.push_str(&format!("| `{}` |", e.name));
        for &system in systems() {
            let places: Vec<&str> = PLACEMENTS
                .iter()
                .filter(|&&p| {
                    applies(&Combination::builtin(
                        system,
                        Kind::FencedCounter,
                        spec.clone(),
                        p,
                    ))
                    .is_ok()
                })
                .map(|p| p.name())
                .collect();
            let cell = if places.is_empty() {
                "no".to_string()
            } else {
                places.join(", ")
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

/// How a fact reads in its table cell.
type FactCell = fn(&Facts, System) -> String;

/// One row per fact, one column per system.
pub fn facts_table() -> String {
    let rows: [(&str, FactCell); 17] = [
        ("lock service (servers, lock client)", |f, _| can(f.lock)),
        ("fencing token", |f, _| can(f.fencing_token)),
        ("lease started by the acquire", |f, _| {
            yes(f.lease_starts_at_acquire)
        }),
        ("worker acquires once, then retries", |f, _| {
            yes(f.acquire_once)
        }),
        ("peers that can be partitioned", |f, _| {
            can(f.partitionable_peers)
        }),
        ("clock faults", |f, _| can(f.clock_faults)),
        ("libfaketime", |f, _| yes(f.libfaketime)),
        ("failover", |f, _| can(f.failover)),
        ("`CLUSTER FAILOVER` (coordinated, takeover)", |f, _| {
            can(f.cluster_failover)
        }),
        ("named master (`--sentinel-master`)", |f, _| {
            yes(f.named_master)
        }),
        ("register workload", |f, _| can(f.register)),
        ("leader workload", |f, _| can(f.election)),
        ("leading node", |_, s| {
            s.servers().leader_word().unwrap_or("—").to_string()
        }),
        (
            "restart without its data (`restart = \"empty\"`)",
            |f, _| can(f.restart_empty),
        ),
        ("servers on other hosts (`--hosts`)", |f, _| can(f.hosts)),
        ("in `compare` without `--systems`", |f, _| {
            yes(f.compared_by_default)
        }),
        ("a grant is kept as (what each fault allows)", |f, _| {
            keeps(f.keeps).to_string()
        }),
    ];
    let mut out = header("fact");
    for (name, get) in rows {
        out.push_str(&format!("| {name} |"));
        for s in systems() {
            out.push_str(&format!(" {} |", get(&s.facts(), *s)));
        }
        out.push('\n');
    }
    out
}

fn keeps(k: Keeps) -> &'static str {
    match k {
        Keeps::KeyOnOneNode => "a key on its node",
        Keeps::KeyOnMajority => "keys on a majority",
        Keeps::KeyOnPrimary => "a key on the primary, replicated",
        Keeps::QuorumLease => "a lease a quorum keeps",
        Keeps::Session => "the client's session",
        Keeps::Nothing => "—",
    }
}

fn can(c: Can) -> String {
    yes(c.is_yes())
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_faults_md_carries_the_current_tables() {
        let page = include_str!("../../docs/faults.md");
        for (name, table) in [("support", support_table()), ("facts", facts_table())] {
            assert!(
                page.contains(&table),
                "docs/faults.md's {name} table is out of date (hint: paste this):\n{table}"
            );
        }
    }
}
