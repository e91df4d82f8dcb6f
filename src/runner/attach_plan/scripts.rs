//! `--plan --verbose`: every command a run would send to an attached
//! node's host (discovery, each fault of the chosen nemesis and its undo,
//! the start command, the partition rules, the log read), as the
//! functions of `crate::remote::attach::script` make them, with the real
//! pids, start times and cgroups discovery found.

use super::super::controller::RunConfig;
use crate::cluster::{attach_plan as script, AttachedNode};
use crate::process::Signal;
use crate::remote::attach::Listen;
use crate::remote::{rule_script, HostSpec, RemoteChain, RemoteRule};
use std::fmt::Write;

fn block(out: &mut String, title: &str, script: &str) {
    let _ = writeln!(out, "    {title}:");
    for l in script.lines() {
        let _ = writeln!(out, "      {l}");
    }
}

/// Every command the run would send to node `h`'s host: discovery, each
/// fault of the nemesis and its undo, the start command, the log reads.
pub(super) fn commands(
    cfg: &RunConfig,
    h: &HostSpec,
    all: &[HostSpec],
    node: &AttachedNode,
    out: &mut String,
) {
    let a = &node.attach;
    let f = node.found();
    let _ = writeln!(out, "  commands:");
    block(
        out,
        "discovery",
        &script::discover_at(a, Listen::of(&node.client).as_ref()),
    );
    for spec in super::faults::specs(cfg) {
        match spec.fault.as_str() {
            "pause-node" => {
                block(out, "pause-node", &script::signal(&f.procs, Signal::Stop));
                block(
                    out,
                    "pause-node undo",
                    &script::signal(&f.procs, Signal::Cont),
                );
            }
            "kill-node" | "kill-service" | "failover" => {
                block(out, &spec.fault, &script::kill(a, &f.procs));
                block(
                    out,
                    &format!("{} undo (start)", spec.fault),
                    &script::start(a),
                );
            }
            "partition-node" => {
                let (cut, heal) = partition_rules(h, all);
                block(out, "partition-node", &cut);
                block(out, "partition-node undo", &heal);
            }
            other => {
                let _ = writeln!(out, "    {other}: no command on the hosts");
            }
        }
    }
    if let Some(s) = script::log_mark(a) {
        block(out, "log: where it stands when the run starts", &s);
    }
    if let Some(s) = script::log_since(a, &script::LogMark::default()) {
        block(
            out,
            "log: the run's window, at its end (from that mark)",
            &s,
        );
    }
}

/// partition-node's rules on `h`'s host when it is the one cut off:
/// (insert, delete), the comment's run id left as `RUN_ID`.
fn partition_rules(h: &HostSpec, all: &[HostSpec]) -> (String, String) {
    let (mut cut, mut heal) = (String::new(), String::new());
    for p in all.iter().filter(|p| p.name != h.name) {
        for chain in [RemoteChain::Input, RemoteChain::Output] {
            let r = RemoteRule {
                chain,
                peer: p.address,
                comment: format!("lockjaw:RUN_ID partition-node {}", h.name),
            };
            let _ = writeln!(cut, "{}", rule_script(&r, true));
            let _ = writeln!(heal, "{}", rule_script(&r, false));
        }
    }
    (cut, heal)
}
