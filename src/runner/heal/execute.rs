//! The undo executor: which file takes back each kind of record. Handed
//! to the undo log as its [`Heal`]; every undo is idempotent (an effect
//! already gone counts as undone).
//!
//! An entry is data from a file, not an order: a path is acted on only
//! beneath the run directory ([`Scope::dir`]), an iptables rule only if it
//! is this run's ([`crate::undo::iptables::Rule::check`]). An entry that
//! fails these checks is refused ("skipped") and stays pending.

use super::{cluster, local, netns, remote};
use crate::auth::Auth;
use crate::toxiproxy::{ClientError, HttpClient, ToxiproxyApi};
use crate::undo::{Heal, RunDir, Scope, Trust, Undo};
use std::path::Path;
use std::time::Duration;

/// Takes back every kind of [`Undo`] record.
pub struct Executor;

#[async_trait::async_trait]
impl Heal for Executor {
    async fn heal(
        &self,
        u: &Undo,
        scope: &Scope,
        trust: Trust,
        grace: Duration,
    ) -> Result<(), String> {
        if trust == Trust::Prove {
            super::refuse::refuse(u, scope).map_err(|e| {
                if e.ends_with("skipped") {
                    e
                } else {
                    format!("{e}: skipped")
                }
            })?;
        }
        let run_id = scope.run_id.as_deref();
        match u {
            Undo::Process { proc, .. } => local::stop(proc, scope, trust, grace).await,
            Undo::Paused { proc, .. } => local::resume(proc, scope, trust),
            Undo::Cgroup { group } => local::cgroup(group, scope).await,
            Undo::Frozen { cgroup, .. } => local::thaw(cgroup, run_id, scope.dir.path(), trust),
            Undo::Clock { file, previous } => local::set_clock(&scope.dir, file, previous),
            Undo::Iptables(rule) => local::iptables(rule, scope).await,
            Undo::Cluster { dir } => cluster::cluster(dir, scope, trust).await,
            Undo::PostgresTables { file, prefix, auth } => {
                crate::service::postgres_storage::drop_run_objects(
                    scope,
                    file,
                    prefix,
                    auth.as_deref(),
                )
                .await
            }
            Undo::ServerObjects {
                system,
                servers,
                keys,
                prefix,
                auth_file,
            } => {
                let (p, f) = (prefix.as_deref(), auth_file.as_deref());
                crate::service::leftovers::remove(system, servers, keys, p, f, run_id).await
            }
            Undo::RedisClientPause { addr } => {
                crate::client::redis_query::unpause(addr, &run_auth(&scope.dir)?).await
            }
            Undo::Toxic {
                url,
                proxy,
                toxic,
                embedded,
            } => gone_ok(client(url)?.remove_toxic(proxy, toxic).await, *embedded),
            Undo::ProxyDisabled {
                url,
                proxy,
                embedded,
            } => {
                let enabled = client(url)?.set_enabled(proxy, true).await;
                gone_ok(enabled.map(drop), *embedded)
            }
            Undo::Proxy {
                url,
                proxy,
                embedded,
            } => gone_ok(client(url)?.delete_proxy(proxy).await, *embedded),
            Undo::Remote {
                host,
                target,
                effect,
            } => remote::undo(host, target, effect, scope, grace).await,
            Undo::SshMaster { socket } => remote::end_master(socket).await,
            Undo::Netns { name, nonce } => {
                let (n, nonce) = (name.clone(), nonce.clone());
                tokio::task::spawn_blocking(move || netns::delete_netns(&n, nonce.as_deref()))
                    .await
                    .map_err(|e| e.to_string())?
            }
            Undo::Link { name, nonce } => netns::delete_link(name, nonce.as_deref()).await,
        }
    }

    fn refuse(&self, u: &Undo, scope: &Scope, trust: Trust) -> Result<(), String> {
        match trust {
            Trust::Mine => Ok(()),
            Trust::Prove => super::refuse::refuse(u, scope),
        }
    }
}

/// The run's credentials (`--auth`), read again from the auth file its
/// `run.json` names, as its workers do: the undo log holds no secret.
/// None when the run had none (or left no `run.json`).
fn run_auth(run: &RunDir) -> Result<Auth, String> {
    let Ok(text) = run.read(Path::new(crate::runner::rundir::RUN)) else {
        return Ok(Auth::default());
    };
    let file = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["auth"]["file"].as_str().map(str::to_string));
    let Some(file) = file else {
        return Ok(Auth::default());
    };
    crate::auth::load(Path::new(&file)).map_err(|e| {
        format!("the run's credentials: {e} (hint: heal reads the run's --auth file again)")
    })
}

fn client(url: &str) -> Result<HttpClient, String> {
    HttpClient::new(url).map_err(|e| e.to_string())
}

/// A toxic or proxy that no longer exists is undone; so is anything on an
/// embedded server that is not reachable any more (it died with lockjaw).
fn gone_ok(r: Result<(), ClientError>, embedded: bool) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(ClientError::Unreachable { .. }) if embedded => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}
