//! Why a record read back from an undo log would be refused, checked
//! before anything is done (and alone by `lockjaw heal --dry-run`): a
//! process not provably the run's, a cluster directory not the run's, a
//! proxy whose name does not carry the run's id, a rule, a host's effect,
//! a namespace or link, a cgroup or a clock file that is not the run's.
//! The undo of each kind checks again where it acts (a file is opened
//! beneath the run directory only, a namespace's nonce is read at the
//! moment it is deleted, again).

use super::{cluster, local, netns};
use crate::process::{self, Proof};
use crate::undo::iptables::check_run_id;
use crate::undo::{Scope, Undo};

/// Why `u`, read from the undo file of `scope`'s run, would be refused;
/// Ok when heal would take it back (or find it already gone).
pub(super) fn refuse(u: &Undo, scope: &Scope) -> Result<(), String> {
    let run_id = scope.run_id.as_deref();
    let dir = scope.dir.path();
    match u {
        Undo::Process { proc, .. } | Undo::Paused { proc, .. } => {
            let o = process::Owner::of_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            match o.check(proc) {
                Proof::NotOurs(why) | Proof::Unprovable(why) => Err(why),
                Proof::Ours | Proof::Gone => Ok(()),
            }
        }
        Undo::Cluster { dir: d } => cluster::check_dir(d, dir),
        Undo::Toxic { proxy, .. }
        | Undo::ProxyDisabled { proxy, .. }
        | Undo::Proxy { proxy, .. } => check_proxy(proxy, run_id),
        Undo::Iptables(rule) => rule.check(run_id),
        Undo::Remote { effect, .. } => super::remote::check(effect, scope),
        Undo::Clock { file, previous } => {
            process::faketime::check_offset(previous)?;
            scope.dir.relative(file).map(drop)
        }
        Undo::Frozen { cgroup, .. } => local::check_leaf(cgroup, run_id).map(drop),
        Undo::PostgresTables { prefix, .. } => {
            let want = run_id.map(crate::client::postgres_conn::prefix);
            if want.as_deref() == Some(prefix.as_str()) {
                Ok(())
            } else {
                Err(format!("{prefix:?} is not this run's table prefix"))
            }
        }
        Undo::ServerObjects { keys, prefix, .. } => {
            crate::service::leftovers::check(keys, prefix.as_deref(), run_id)
        }
        Undo::Netns { name, nonce } => netns::check_netns(name, nonce.as_deref()),
        Undo::Link { name, nonce } => netns::check_link(name, nonce.as_deref()),
        Undo::Cgroup { .. } | Undo::RedisClientPause { .. } | Undo::SshMaster { .. } => Ok(()),
    }
}

/// A proxy (on any Toxiproxy: the `embedded` flag is data from the file
/// too) is this run's only if its name is `lockjaw-<run-id>-…`, as the
/// run names every proxy it creates; a toxic only on such a proxy.
fn check_proxy(proxy: &str, run_id: Option<&str>) -> Result<(), String> {
    let id = check_run_id(run_id)?;
    let want = format!("{}-", crate::runner::proxies::prefix(id));
    match proxy.strip_prefix(&want) {
        Some(rest) if !rest.is_empty() => Ok(()),
        _ => Err(format!(
            "proxy {proxy:?} is not this run's (its name does not start with {want}); left alone"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_proxy_named_after_the_run_is_its() {
        assert!(check_proxy("lockjaw-ab12-w0-redis1", Some("ab12")).is_ok());
        for bad in [
            "victim",
            "lockjaw-deadbeef-w0-x",
            "lockjaw-ab12-",
            "lockjaw-ab12",
        ] {
            let e = check_proxy(bad, Some("ab12")).unwrap_err();
            assert!(e.contains(bad) && e.contains("left alone"), "{e}");
        }
        assert!(check_proxy("lockjaw-ab12-w0-x", None).is_err());
    }
}
