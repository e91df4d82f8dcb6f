//! A run's PostgreSQL parts beside its lock service: `--storage postgres`
//! (the protected value in a table of the run's own server, or of the
//! database `--postgres-url` names) and `--postgres-url` itself (the
//! private URL file the workers read, and the undo entry that drops the
//! run's `lockjaw_<run-id>_*` objects, and what heal calls to drop them).
//! The runner asks these functions and knows no SQL.

use super::postgres::Server;
use super::System;
use crate::client::postgres_conn as pg;
use crate::cluster::postgres::{write_url_file, URL_FILE};
use crate::process::ports::{self, PortBlock};
use crate::storage::postgres::{self as store, Names, PgResource};
use crate::undo::{explain, Scope, Undo, UndoLog};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn undo_err(e: impl std::fmt::Display) -> String {
    format!("cannot write the undo log: {e}")
}

/// `--postgres-url`: write the URL to the run directory's private file for
/// the workers, after the undo entry that drops the run's objects (so it
/// is there before any worker could create one). Returns the file.
pub fn user_database(
    url: &str,
    auth: &crate::auth::Auth,
    dir: &Path,
    undo: &UndoLog,
    run_id: &str,
) -> Result<PathBuf, String> {
    let file = write_url_file(dir, url)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(URL_FILE).display()))?;
    undo.push(Undo::PostgresTables {
        file: file.clone(),
        prefix: pg::prefix(run_id),
        auth: auth.postgres.as_ref().and(auth.file.clone()),
    })
    .map_err(undo_err)?;
    Ok(file)
}

/// With `--endpoints` and `--postgres-url`: the database answers within
/// `t`, or the error says what to check.
/// Asked before anything of the run is created, so a wrong URL is the
/// first and only error, naming the host:port (never the password).
pub async fn user_database_answers(
    url: &str,
    auth: &crate::auth::Auth,
    t: Duration,
) -> Result<(), String> {
    let db = pg::parse_url(url).map_err(|e| format!("--postgres-url: {e}"))?;
    let tls = pg::tls_for_url(auth, url).map_err(|e| format!("--auth: {e}"))?;
    pg::version_at(url, tls.as_ref(), t.max(Duration::from_secs(2)))
        .await
        .map(drop)
        .map_err(|e| {
            format!(
                "--postgres-url {}: the database at {} does not answer: {e} (hint: check the address, user, password and database; the password comes from the URL, --postgres-password-file or PGPASSWORD; the database must accept connections when a run starts)",
                db.url_without_password, db.endpoint
            )
        })
}

/// `--postgres-url` with its password: the URL's own if it has one (as
/// libpq, it wins), else `password` (`--postgres-password-file` or
/// `PGPASSWORD`) written into it, percent-encoded.
pub fn with_password(url: &str, password: Option<&crate::auth::Secret>) -> Result<String, String> {
    let db = pg::parse_url(url)?;
    let (Some(p), None) = (password, db.password) else {
        return Ok(url.to_string());
    };
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let Some((user, host)) = rest.split_once('@') else {
        return Err("--postgres-url: no USER@ (hint: postgres://USER@HOST[:PORT]/DATABASE)".into());
    };
    let mut enc = String::new();
    for b in p.expose().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            enc.push(b as char);
        } else {
            enc.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(format!("{scheme}://{user}:{enc}@{host}"))
}

/// The endpoints of a run with `--postgres-url`: the URL's host for
/// `--system postgres` (which then takes no `--endpoints`), else
/// `endpoints` as given, with `--storage postgres` (`storage`). The error
/// names the flags that do not go together.
pub fn url_endpoints(
    url: &str,
    system: System,
    storage: bool,
    endpoints: Option<Vec<String>>,
) -> Result<Option<Vec<String>>, String> {
    let db = pg::parse_url(url)?;
    let lock = system.name() == super::postgres::NAME;
    if lock && endpoints.is_some() {
        return Err("--postgres-url and --endpoints both name the servers: give one (hint: the URL's host and port are the endpoint)".into());
    }
    if !lock && !storage {
        return Err(format!(
            "--postgres-url applies to --system postgres or --storage postgres, not --system {system} with lockjaw's storage (hint: drop it, or add --storage postgres)"
        ));
    }
    Ok(if lock {
        Some(vec![db.endpoint])
    } else {
        endpoints
    })
}

/// A worker's connection to the PostgreSQL storage of run `run_id`, through
/// its proxy at `addr`: as `--postgres-url`'s user when `user_url`, else as
/// lockjaw's own server's (`--auth`'s TLS to the user's database,
/// verifying the URL's host).
pub fn worker_resource(
    run_id: &str,
    user_url: Option<&str>,
    auth: &crate::auth::Auth,
    addr: &str,
    timeout: Duration,
) -> Result<PgResource, String> {
    let names = Names::new(run_id);
    let (url, tls) = match user_url {
        Some(u) => (
            pg::url_at(u, addr).map_err(|e| format!("--postgres-url: {e}"))?,
            pg::tls_for_url(auth, u)?,
        ),
        None => (pg::url_for(addr), None),
    };
    PgResource::new(&url, tls.as_ref(), &names, &names.app(), timeout)
}

/// `--storage postgres`: where the table lives (the run's own server, or
/// the database of `--postgres-url`) and its names.
pub struct PgStorage {
    /// The run's own server; `None` in the user's database.
    server: Option<Server>,
    /// Where the workers' proxies point (`HOST:PORT`).
    pub addr: String,
    /// lockjaw's own connections (setup, final read, teardown).
    url: String,
    /// `--auth`'s TLS to the user's database (none to the run's own).
    tls: Option<pg::PgTls>,
    names: Names,
    pub run_id: String,
    /// Held until the run ends: no other run takes the server's port.
    _port: Option<PortBlock>,
}

impl PgStorage {
    /// Start the run's PostgreSQL server (its undo entry first), or take
    /// the database of `user_url`, and create the table, sequence and
    /// function holding `initial`, fenced when `fencing`.
    pub async fn open(
        user_url: Option<&str>,
        auth: &crate::auth::Auth,
        dir: &Path,
        undo: &UndoLog,
        run_id: &str,
        fencing: bool,
        initial: BTreeMap<String, Value>,
    ) -> Result<PgStorage, String> {
        let mut tls = None;
        let (server, addr, url, port) = match user_url {
            Some(url) => {
                let db = pg::parse_url(url)?;
                tls = pg::tls_for_url(auth, url)?;
                (None, db.endpoint, url.to_string(), None)
            }
            None => {
                let port = ports::reserve(None, 1)?;
                undo.push(Undo::Cluster {
                    dir: Server::dir(dir),
                })
                .map_err(undo_err)?;
                let server = Server::start(dir, run_id, port.base)
                    .await
                    .map_err(|e| format!("cannot start the PostgreSQL storage: {e}"))?;
                let (addr, url) = (server.addr(), server.url());
                (Some(server), addr, url, Some(port))
            }
        };
        let names = Names::new(run_id);
        let t = Duration::from_secs(10);
        store::setup(&url, tls.as_ref(), &names, fencing, &initial, t)
            .await
            .map_err(|e| format!("cannot set up the PostgreSQL storage: {e}"))?;
        Ok(PgStorage {
            server,
            addr,
            url,
            tls,
            names,
            run_id: run_id.to_string(),
            _port: port,
        })
    }

    /// End the workers' sessions and wait until they are gone (their
    /// proxies are cut already), then a connection of lockjaw's own for
    /// the final read.
    pub async fn final_reader(&self) -> Result<PgResource, String> {
        let t = Duration::from_secs(10);
        store::end_worker_sessions(&self.url, self.tls.as_ref(), &self.names, t)
            .await
            .map_err(|e| format!("final read: {e}"))?;
        PgResource::new(
            &self.url,
            self.tls.as_ref(),
            &self.names,
            "lockjaw-final",
            t,
        )
    }

    /// Drop the run's objects, then stop the server.
    pub async fn close(self) {
        let prefix = pg::prefix(&self.run_id);
        let t = Duration::from_secs(5);
        if let Err(e) = pg::drop_prefixed(&self.url, self.tls.as_ref(), &prefix, t).await {
            crate::exit::say(&format!(
                "warning: dropping {prefix}* in the PostgreSQL storage: {e}"
            ));
        }
        if let Some(Err(e)) = self.server.as_ref().map(|s| s.close()) {
            crate::exit::say(&format!("warning: stopping the PostgreSQL storage: {e}"));
        }
    }
}

/// Drop a run's objects in the `--postgres-url` database: the URL from
/// the private file beneath the run directory, the prefix this run's.
/// With `auth` (the run's `--auth` file, read again), over its TLS.
pub async fn drop_run_objects(
    scope: &Scope,
    file: &Path,
    prefix: &str,
    auth: Option<&Path>,
) -> Result<(), String> {
    let pg = pg::prefix;
    if scope.run_id.as_deref().map(pg).as_deref() != Some(prefix) {
        return Err(format!(
            "{prefix:?} is not this run's table prefix: skipped"
        ));
    }
    let rel = scope
        .dir
        .relative(file)
        .map_err(|e| format!("{e}: skipped"))?;
    let url = match scope.dir.read(&rel) {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {}", file.display(), explain(&e))),
    };
    let auth = match auth {
        Some(f) => crate::auth::load(f).map_err(|e| format!("--auth: {e}"))?,
        None => Default::default(),
    };
    let tls = pg::tls_for_url(&auth, &url)?;
    pg::drop_prefixed(&url, tls.as_ref(), prefix, Duration::from_secs(5)).await?;
    // Dropped: the password has no more use here.
    scope
        .dir
        .remove_file(&rel)
        .map_err(|e| format!("{}: {}", file.display(), explain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_goes_into_a_url_that_has_none() {
        let s = crate::auth::Secret::new("p@ss w/rd:%");
        let u = with_password("postgres://locker@127.0.0.1:33501/db", Some(&s)).unwrap();
        assert_eq!(
            u,
            "postgres://locker:p%40ss%20w%2Frd%3A%25@127.0.0.1:33501/db"
        );
        assert_eq!(
            pg::parse_url(&u).unwrap().password.as_deref(),
            Some("p@ss w/rd:%")
        );
        let own = "postgres://locker:own@h/db";
        assert_eq!(
            with_password(own, Some(&s)).unwrap(),
            own,
            "the URL's own wins"
        );
        assert_eq!(
            with_password("postgres://u@h/db", None).unwrap(),
            "postgres://u@h/db"
        );
    }
}
