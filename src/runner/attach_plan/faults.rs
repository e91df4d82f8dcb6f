//! What `--plan` says of each fault of the nemesis on attached servers,
//! in words and with the run's own numbers: which node it strikes, how
//! often and for how long (the nemesis file's target, `interval_ms`,
//! `first_delay_ms`, duration and `max_injections`; a `mixed` nemesis's
//! schedule is its own, each drawn fault keeps its target and length),
//! what the strike does, what its undo does, and what `lockjaw heal`
//! does after a lockjaw killed with SIGKILL.

use super::super::controller::RunConfig;
use crate::nemesis::{NemesisSpec, Target};
use std::fmt::Write;
use std::time::Duration;

/// One fault of the nemesis as the plan tells it. Each field is a line
/// of its own; a `None` is not printed.
pub(super) struct FaultPlan {
    pub fault: String,
    /// Which node(s) it strikes, and how long each strike holds.
    pub whom: String,
    /// What it does on the host.
    pub strike: Option<String>,
    /// How lockjaw takes it back at the fault's end (or the run's).
    pub undo: Option<String>,
    /// What `lockjaw heal RUN_DIR` does for it after a SIGKILL.
    pub heal: Option<String>,
    /// What the host-side dead man's switch armed before it does, and
    /// when (`crate::nemesis::deadman::describe`).
    pub deadman: Option<String>,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The nemesis's schedule in words: "quiet 5.0 s, then ...".
pub(super) fn schedule(cfg: &RunConfig) -> String {
    let n = &cfg.nemesis;
    let mut s = format!(
        "nemesis {} ({}): quiet {} first, then one fault at a time with {} quiet after each, until the run's end (--time-limit {})",
        n.name,
        if n.fault == "mixed" { "mixed: one fault drawn per injection".to_string() } else { n.fault.clone() },
        secs(Duration::from_millis(n.first_delay_ms)),
        secs(Duration::from_millis(n.interval_ms)),
        secs(cfg.workload.time_limit())
    );
    if let Some(k) = n.max_injections {
        let _ = write!(s, " or once {k} injection(s) landed");
    }
    s
}

/// The faults of the nemesis (each of a `mixed` one's pool, both of a
/// `together` one's).
pub(super) fn specs(cfg: &RunConfig) -> Vec<NemesisSpec> {
    crate::nemesis::together::leaves(&cfg.nemesis)
}

/// Which of `n` attached servers `target` takes at each strike.
fn whom(target: Target, n: usize) -> String {
    match target {
        Target::Leader => {
            "the leader at strike time (asked of the cluster right before each strike)".into()
        }
        Target::Primary => {
            "the primary at strike time (asked of the sentinels right before each strike)".into()
        }
        Target::Random => format!("one of the {n} servers, drawn at each strike"),
        t => match crate::nemesis::node::how_many(t, n) {
            Some(k) => format!(
                "{k} of the {n} servers ({}), drawn at each strike",
                t.name()
            ),
            None => format!("the target {}", t.name()),
        },
    }
}

/// The plan of fault `f` on `n` attached servers.
pub(super) fn plan(cfg: &RunConfig, f: &NemesisSpec, n: usize) -> FaultPlan {
    let ttl = Duration::from_millis(cfg.workload.ttl_ms);
    let held = format!("{}, each held {}", whom(f.target, n), secs(f.duration(ttl)));
    let proof = "prove again that the found processes are the server (its own answer, else its listening socket; a failed proof fails the fault and signals nothing), then";
    let mut p = FaultPlan {
        fault: f.fault.clone(),
        whom: held,
        strike: None,
        undo: None,
        heal: None,
        deadman: None,
    };
    match f.fault.as_str() {
        "pause-node" => {
            p.strike = Some(format!("{proof} SIGSTOP to each found process that still has its pid, start time and cgroup"));
            p.undo = Some("discover the node again; SIGCONT to each process that still has its stamp (a server its manager restarted meanwhile is recorded as restarted)".into());
            p.heal = Some(
                "SIGCONT to each recorded process that still has its pid, start time and cgroup"
                    .into(),
            );
        }
        "kill-node" | "kill-service" => {
            if f.fault == "kill-service" {
                p.whom = format!(
                    "{} at once, each held {}",
                    if super::super::attach::quorum(cfg) {
                        "a majority of the servers"
                    } else {
                        "every server"
                    },
                    secs(f.duration(ttl))
                );
            }
            p.strike = Some(format!("{proof} SIGKILL (a unit: systemctl kill -s KILL UNIT), and a wait until the processes are gone"));
            p.undo = Some("the node's start command, a wait until it answers its health check; its new processes recorded".into());
            p.heal = Some("the start command from RUN_DIR/hosts.toml (or heal --hosts FILE), unless a process of the node's description runs".into());
        }
        "failover" => {
            p.strike = Some(format!(
                "{proof} SIGKILL to the primary, and a SENTINEL FAILOVER so a replica takes over"
            ));
            p.undo = Some("the old primary's start command; it rejoins as a replica".into());
            p.heal = Some("the start command from RUN_DIR/hosts.toml (or heal --hosts FILE), unless a process of the node's description runs".into());
        }
        "partition-node" => {
            p.strike = Some("iptables DROP rules on the cut node's host against every other node's address (INPUT -s PEER, OUTPUT -d PEER), with the comment lockjaw:RUN_ID partition-node NODE".into());
            p.undo = Some("iptables -D of the same rules".into());
            p.heal = Some("iptables -D of each rule that carries the run's id".into());
        }
        _ => {
            p.whom = "no command on the hosts: it acts between the clients and the servers".into();
        }
    }
    let len = match f.fault.as_str() {
        "failover" => crate::nemesis::failover::switch_hold(f.duration(ttl)),
        _ => f.duration(ttl),
    };
    p.deadman = crate::nemesis::deadman::describe(&f.fault, len, cfg.dead_man_margin).map(|s| {
        s.strip_prefix("dead man's switch: ")
            .map(str::to_string)
            .unwrap_or(s)
    });
    p
}

/// The fault's lines, indented under the faults heading.
pub(super) fn write(out: &mut String, p: &FaultPlan) {
    let _ = writeln!(out, "  {}: {}", p.fault, p.whom);
    for (k, v) in [
        ("strike", &p.strike),
        ("undo", &p.undo),
        ("heal", &p.heal),
        ("dead man's switch", &p.deadman),
    ] {
        if let Some(v) = v {
            let _ = writeln!(out, "    {k}: {v}");
        }
    }
}
