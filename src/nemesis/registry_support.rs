//! Where each fault of the registry applies: the `support` rules of
//! [`super::FAULTS`], each a function of the fault registry's own
//! [`Scope`] that says what a fault needs (a holder, the storage, a local
//! cluster, peers, clock control, ...) and never a system's or a
//! workload's name.

use super::*;

pub(super) fn anywhere(_: &Scope) -> Result<(), String> {
    Ok(())
}

pub(super) fn needs_holder(c: &Scope) -> Result<(), String> {
    if c.workload.uses_lock() {
        Ok(())
    } else {
        Err("the workload takes no lock, so there is no holder".into())
    }
}

pub(super) const NO_PROCESS: &str = "it needs the servers' processes, which lockjaw has only for a cluster it started (drop --endpoints)";

pub(super) fn local_only(c: &Scope) -> Result<(), String> {
    c.facts().lock.check()?;
    if c.starts_servers() {
        Ok(())
    } else {
        Err(NO_PROCESS.into())
    }
}

/// `kill-node`: a local cluster; restarting without data needs a system
/// whose nodes keep the lock in memory, and `while_holding` a holder.
pub(super) fn kill_node_support(c: &Scope) -> Result<(), String> {
    local_only(c)?;
    let n = &c.nemesis;
    if let Some(f) = n.appendfsync {
        c.facts().restart_empty.check().map_err(|why| {
            format!(
                "appendfsync = \"{}\" (nemesis {}) sets the append-only file of Redis nodes, and {} has none: {why}",
                f.name(),
                n.name,
                c.system
            )
        })?;
    }
    if n.restart.is_empty() && c.placement == Placement::Hosts {
        return Err(format!(
            "restart = \"{}\" (nemesis {}) empties data directories here, not yet on --hosts",
            n.restart.name(),
            n.name
        ));
    }
    if n.restart.is_empty() {
        c.facts().restart_empty.check().map_err(|why| {
            format!(
                "restart = \"{}\" (nemesis {}) does not apply to {}: {why}",
                n.restart.name(),
                n.name,
                c.system
            )
        })?;
    }
    if n.while_holding {
        needs_holder(c)?;
    }
    Ok(())
}

/// Faults on the workers' links to the lock service need one.
pub(super) fn needs_lock(c: &Scope) -> Result<(), String> {
    c.facts().lock.check()
}

/// Cutting the holder off from the lock service needs both.
pub(super) fn needs_lock_links(c: &Scope) -> Result<(), String> {
    needs_lock(c)?;
    needs_holder(c)
}

/// The workload kinds that announce their lock requests, for a message:
/// "lock, fenced-counter, lock-set or jobs".
pub(super) fn announcing_kinds() -> String {
    let names: Vec<&str> = Kind::ALL
        .iter()
        .filter(|k| k.renews())
        .map(|k| k.name())
        .collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "none".into(),
    }
}

/// Faults timed by the protocol: the worker announces each request before
/// its client sends it (lockjaw's own clients, or the request it writes to
/// a client adapter), and the embedded Toxiproxy has the one-shot toxics.
pub(super) fn timed_by_protocol(c: &Scope) -> Result<(), String> {
    needs_lock_links(c)?;
    if !c.workload.renews() {
        return Err(format!(
            "the {} workload does not announce its lock requests (use {})",
            c.workload.name(),
            announcing_kinds()
        ));
    }
    if c.toxiproxy == ToxiproxyChoice::External {
        return Err("it needs the one-shot toxics (hold_next, reset_next) of lockjaw's embedded Toxiproxy; an external Toxiproxy has none (drop --toxiproxy)".into());
    }
    Ok(())
}

pub(super) fn has_peers(c: &Scope) -> Result<(), String> {
    c.facts().partitionable_peers.check()?;
    local_only(c)
}

pub(super) fn fakes_time(c: &Scope) -> Result<(), String> {
    c.facts().clock_faults.check()?;
    if !c.starts_servers() {
        return Err("the clock is moved through libfaketime, preloaded when lockjaw starts the Redis servers (drop --endpoints)".into());
    }
    Ok(())
}

/// The holder's clock: the workers run on this machine whatever the
/// placement (`--hosts` places only the servers), so any lock workload.
pub(super) fn fakes_client_time(c: &Scope) -> Result<(), String> {
    needs_holder(c)
}

pub(super) fn needs_failover(c: &Scope) -> Result<(), String> {
    c.facts().failover.check()?;
    local_only(c)?;
    needs_holder(c)
}

pub(super) fn needs_cluster_failover(c: &Scope) -> Result<(), String> {
    c.facts().cluster_failover.check()?;
    local_only(c)?;
    needs_holder(c)
}

pub(super) fn needs_storage(c: &Scope) -> Result<(), String> {
    if c.workload.uses_storage() {
        Ok(())
    } else {
        Err("the workload writes nothing to the storage (use fenced-counter or lock-set)".into())
    }
}
