//! Taking back what a run did on another host ([`Undo::Remote`]) and
//! ending a ControlMaster a killed lockjaw left ([`Undo::SshMaster`]).
//!
//! The entries are data, not orders: before anything is sent, a process
//! tag must be `lockjaw-<run-id>-<node>` of this run, a rule's comment
//! must carry the run's id, a clock file and a data directory must lie
//! beneath a directory named `lockjaw-<run-id>`, an offset must have the
//! offset syntax, a socket must lie under `temp_dir()/lockjaw-ssh/`.
//!
//! [`Undo::Remote`]: crate::undo::Undo::Remote
//! [`Undo::SshMaster`]: crate::undo::Undo::SshMaster

use super::attached;
use crate::process::faketime::check_offset;
use crate::process::Signal;
use crate::remote::host::quote;
use crate::remote::{self, Host, SshTarget};
use crate::undo::iptables::check_run_id;
use crate::undo::{RemoteEffect, Scope};
use std::path::{Component, Path};
use std::time::Duration;

/// Why `effect` is not one this run can have had; Ok when it is. An
/// attached server's start command must come from the run directory's
/// copy of the hosts file ([`attached::spec`]).
pub(crate) fn check(effect: &RemoteEffect, scope: &Scope) -> Result<(), String> {
    let run_id = scope.run_id.as_deref();
    match effect {
        RemoteEffect::Processes { tag } | RemoteEffect::Paused { tag } => {
            let id = check_run_id(run_id)?;
            remote::procs::check_tag(tag)?;
            let node = tag
                .strip_prefix(&format!("lockjaw-{id}-"))
                .unwrap_or_default();
            if !remote::hosts::valid_name(node) {
                return Err(format!("the tag {tag:?} is not lockjaw-{id}-<node>"));
            }
            Ok(())
        }
        RemoteEffect::Iptables(rule) => rule.check(run_id),
        RemoteEffect::Clock { file, previous } => {
            check_offset(previous)?;
            beneath_run(file, run_id, false)
        }
        RemoteEffect::DataDir { dir } => beneath_run(dir, run_id, true),
        RemoteEffect::AttachedPaused { node, procs } => {
            check_run_id(run_id)?;
            attached::check_paused(node, procs)
        }
        RemoteEffect::AttachedDown { node, find } => {
            check_run_id(run_id)?;
            attached::spec(scope, node, find).map(drop)
        }
        RemoteEffect::AttachedFound { node, .. } => {
            check_run_id(run_id)?;
            attached::check_node(node)
        }
        RemoteEffect::DeadMan { node, tag, .. } => {
            let id = check_run_id(run_id)?;
            attached::check_node(node)?;
            remote::deadman::check_tag(tag, id, node)
        }
    }
}

/// `path` is absolute, plain, and lies beneath a directory named
/// `lockjaw-<run-id>` (or, if `itself`, may be that directory).
fn beneath_run(path: &str, run_id: Option<&str>, itself: bool) -> Result<(), String> {
    let id = check_run_id(run_id)?;
    let want = format!("lockjaw-{id}");
    let p = Path::new(path);
    let plain = p.is_absolute()
        && !path.chars().any(|c| c.is_whitespace() || c.is_control())
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    let names: Vec<&str> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    let at = names.iter().position(|n| *n == want);
    let ok = match at {
        Some(i) => itself || i + 1 < names.len(),
        None => false,
    };
    if plain && ok {
        Ok(())
    } else {
        Err(format!("{path:?} does not lie beneath a directory {want}"))
    }
}

/// Reconnect to `target` (a fresh master under `temp_dir()/lockjaw-ssh`),
/// check `effect` is this run's, take it back, close.
pub(super) async fn undo(
    host: &str,
    target: &SshTarget,
    effect: &RemoteEffect,
    scope: &Scope,
    grace: Duration,
) -> Result<(), String> {
    check(effect, scope).map_err(|e| format!("{e}: skipped"))?;
    // The start command, from the run's copy of the hosts file (checked
    // again where it is used).
    let spec = match effect {
        RemoteEffect::AttachedDown { node, find } => {
            Some(attached::spec(scope, node, find).map_err(|e| format!("{e}: skipped"))?)
        }
        _ => None,
    };
    if let RemoteEffect::AttachedFound { .. } = effect {
        return Ok(());
    }
    // The run's own connection while it lasts; a fresh one for heal.
    let (h, fresh) = match remote::live(target) {
        Some(h) => (h, false),
        None => {
            let h = Host::connect(host, target, &remote::control_root())
                .await
                .map_err(|e| e.to_string())?;
            (std::sync::Arc::new(h), true)
        }
    };
    let s = |r: Result<(), remote::RemoteError>| r.map_err(|e| e.to_string());
    let done = match effect {
        RemoteEffect::Processes { tag } => s(remote::stop(&h, tag, grace).await),
        RemoteEffect::Paused { tag } => s(remote::signal(&h, tag, Signal::Cont).await.map(drop)),
        RemoteEffect::Iptables(rule) => s(remote::delete_rule(&h, rule).await),
        RemoteEffect::Clock { file, previous } => s(h
            .sh(&remote::clock_back_script(file, previous))
            .await
            .map(drop)),
        RemoteEffect::DataDir { dir } => {
            s(h.sh(&format!("rm -rf -- {}", quote(dir))).await.map(drop))
        }
        RemoteEffect::AttachedPaused { node, procs } => attached::resume(&h, node, procs).await,
        RemoteEffect::AttachedDown { node, .. } => match &spec {
            Some(a) => attached::start(&h, node, a, scope).await,
            None => Ok(()),
        },
        RemoteEffect::AttachedFound { .. } => Ok(()),
        RemoteEffect::DeadMan { node, tag, .. } => match remote::deadman::disarm(&h, tag).await {
            Ok(remote::deadman::Disarmed::Disarmed) => Ok(()),
            Ok(remote::deadman::Disarmed::FiredOrGone) => {
                if fresh {
                    eprintln!(
                        "heal: host {}: node {node}: the dead man's switch {tag} had fired already (or was gone): nothing to disarm",
                        h.name()
                    );
                }
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        },
    };
    if fresh {
        if let Ok(h) = std::sync::Arc::try_unwrap(h) {
            h.close().await;
        }
    }
    done
}

/// `ssh -S SOCKET -O exit x`: a socket that is gone (or whose master is
/// gone) is undone.
pub(super) async fn end_master(socket: &Path) -> Result<(), String> {
    let root = remote::control_root();
    let plain = socket
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain || !socket.starts_with(&root) || socket == root {
        return Err(format!(
            "{} is not under {}: skipped",
            socket.display(),
            root.display()
        ));
    }
    if std::fs::symlink_metadata(socket).is_err() {
        return Ok(());
    }
    let out = tokio::process::Command::new("ssh")
        .arg("-S")
        .arg(socket)
        .args(["-O", "exit", "lockjaw-master"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run ssh: {e}"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || text.contains("No such file") || text.contains("Connection refused")
    {
        // A stale socket (its master died) is left for nobody: remove it.
        let _ = std::fs::remove_file(socket);
        if let Some(d) = socket.parent().filter(|d| *d != root) {
            let _ = std::fs::remove_dir_all(d);
        }
        return Ok(());
    }
    Err(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::{RemoteChain, RemoteRule};

    #[test]
    fn only_this_runs_effects_pass() {
        let t = tempfile::tempdir().unwrap();
        let scope = |id: Option<&str>| Scope {
            dir: std::sync::Arc::new(crate::undo::RunDir::open(t.path()).unwrap()),
            run_id: id.map(str::to_string),
        };
        let (s, none) = (scope(Some("ab12")), scope(None));
        let ok = |e: RemoteEffect| check(&e, &s).unwrap();
        let bad = |e: RemoteEffect| check(&e, &s).unwrap_err();
        let tag = |t: &str| RemoteEffect::Processes { tag: t.into() };
        ok(tag("lockjaw-ab12-h1"));
        bad(tag("lockjaw-ff12-h1"));
        bad(tag("lockjaw-ab12-"));
        bad(tag("lockjaw-ab12-h1;x"));
        assert!(check(&tag("lockjaw-ab12-h1"), &none).is_err());
        let dir = |d: &str| RemoteEffect::DataDir { dir: d.into() };
        ok(dir("/var/tmp/lockjaw/lockjaw-ab12"));
        ok(dir("/var/tmp/lockjaw/lockjaw-ab12/h1"));
        bad(dir("/var/tmp/lockjaw"));
        bad(dir("/var/tmp/lockjaw/lockjaw-ab12/../x"));
        bad(dir("var/lockjaw-ab12"));
        bad(dir("/"));
        let clock = |f: &str, p: &str| RemoteEffect::Clock {
            file: f.into(),
            previous: p.into(),
        };
        ok(clock("/var/tmp/lockjaw/lockjaw-ab12/h1/faketime", "+0"));
        bad(clock("/var/tmp/lockjaw/lockjaw-ab12", "+0"));
        bad(clock(
            "/var/tmp/lockjaw/lockjaw-ab12/h1/faketime",
            "+0; rm x",
        ));
        bad(clock("/etc/passwd", "+0"));
        let rule = |c: &str| {
            RemoteEffect::Iptables(RemoteRule {
                chain: RemoteChain::Output,
                peer: "10.0.0.2".parse().unwrap(),
                comment: c.into(),
            })
        };
        ok(rule("lockjaw:ab12 partition-node h1"));
        bad(rule("lockjaw:ff12 partition-node h1"));

        // A dead man's switch: its tag carries this run's id and its node.
        let switch = |node: &str, tag: &str| RemoteEffect::DeadMan {
            node: node.into(),
            tag: tag.into(),
            after_ms: 19_000,
        };
        ok(switch("e1", "lockjaw-ab12-e1-dm1"));
        bad(switch("e1", "lockjaw-ff12-e1-dm1"));
        bad(switch("e1", "lockjaw-ab12-e2-dm1"));
        bad(switch("e1", "lockjaw-ab12-e1"));
        bad(switch("e1", "lockjaw-ab12-e1-dm1 x"));
        bad(switch("e1;x", "lockjaw-ab12-e1;x-dm1"));
        assert!(check(&switch("e1", "lockjaw-ab12-e1-dm1"), &none).is_err());

        // Attached servers: stamps plain, the start command only from the
        // run directory's private copy of the hosts file.
        let stamp = |pid| crate::remote::ProcStamp {
            pid,
            start: 77,
            cgroup: "0::/x".into(),
        };
        let paused = |node: &str, procs| RemoteEffect::AttachedPaused {
            node: node.into(),
            procs,
        };
        ok(paused("e1", vec![stamp(100), stamp(101)]));
        bad(paused("e1", vec![]));
        bad(paused("e1;x", vec![stamp(100)]));
        assert!(check(&paused("e1", vec![stamp(100)]), &none).is_err());
        let found = |node: &str| RemoteEffect::AttachedFound {
            node: node.into(),
            procs: vec![stamp(100)],
        };
        ok(found("e1"));
        bad(found("E1"));
        let find = crate::remote::Find::Unit {
            unit: "etcd.service".into(),
        };
        let down = |node: &str| RemoteEffect::AttachedDown {
            node: node.into(),
            find: Box::new(find.clone()),
        };
        let e = bad(down("e1"));
        assert!(e.contains("hosts.toml"), "{e}");
        let copy = t.path().join("hosts.toml");
        std::fs::write(
            &copy,
            "[[node]]\nname = \"e1\"\nhost = \"10.0.0.1\"\nattach = { unit = \"etcd.service\" }\n",
        )
        .unwrap();
        ok(down("e1"));
        bad(down("e2"));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o646)).unwrap();
        let e = bad(down("e1"));
        assert!(e.contains("writable by every user"), "{e}");
    }

    #[tokio::test]
    async fn a_master_socket_elsewhere_is_refused_and_a_gone_one_is_undone() {
        let e = end_master(Path::new("/run/other.sock")).await.unwrap_err();
        assert!(e.contains("skipped"), "{e}");
        let e = end_master(&remote::control_root().join("../x"))
            .await
            .unwrap_err();
        assert!(e.contains("skipped"), "{e}");
        end_master(&remote::control_root().join("gone/master"))
            .await
            .unwrap();
    }
}
