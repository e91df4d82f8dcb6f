//! The PostgreSQL protocol outside the lock: `--postgres-url` parsing,
//! connection URLs, the one connect function (the lock client, the
//! storage, readiness probes and heal use it), error detail, the server's
//! version, and the names of what a run creates in a database (and
//! dropping them again).

pub use super::postgres_tls::PgTls;
use std::time::Duration;

/// The database user lockjaw's own servers serve (the `postgres` role).
pub const USER: &str = "postgres";
/// The database lockjaw's own servers serve.
pub const DATABASE: &str = "postgres";

/// A parsed `--postgres-url`: the one `host:port` it names, the URL
/// without its password (for files), and the password.
#[derive(Clone, Debug)]
pub struct UserDb {
    pub endpoint: String,
    pub url_without_password: String,
    pub password: Option<String>,
}

/// Parse `--postgres-url` (`postgres://user[:password]@host[:port]/db`):
/// one TCP host, a database; errors say what is wrong.
pub fn parse_url(url: &str) -> Result<UserDb, String> {
    let bad = |why: String| {
        format!("--postgres-url: {why} (hint: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)")
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(bad("not a postgres:// URL".into()));
    }
    let cfg: tokio_postgres::Config = url.parse().map_err(|e| bad(format!("{e}")))?;
    let host = match cfg.get_hosts() {
        [tokio_postgres::config::Host::Tcp(h)] => h.clone(),
        [] => return Err(bad("no host".into())),
        _ => return Err(bad("exactly one TCP host is supported".into())),
    };
    let port = match cfg.get_ports() {
        [] => 5432,
        [p] => *p,
        _ => return Err(bad("exactly one port is supported".into())),
    };
    if cfg.get_user().is_none() {
        return Err(bad("no user".into()));
    }
    let password = cfg
        .get_password()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    // The URL without the password: rebuilt from the parsed fields.
    let db = cfg
        .get_dbname()
        .unwrap_or(cfg.get_user().unwrap_or_default());
    let url_without_password = format!(
        "postgres://{}@{host}:{port}/{db}",
        cfg.get_user().unwrap_or_default()
    );
    let endpoint = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(UserDb {
        endpoint,
        url_without_password,
        password,
    })
}

/// A connection URL for the server at `addr` (lockjaw's own servers).
pub fn url_for(addr: &str) -> String {
    format!("postgres://{USER}@{addr}/{DATABASE}")
}

/// `--postgres-url`'s user, password and database, reached at `addr`
/// instead of the URL's host (a worker's proxy in front of it), as a
/// key=value connection string.
pub fn url_at(url: &str, addr: &str) -> Result<String, String> {
    let cfg: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("not HOST:PORT: {addr}"))?;
    let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
    let mut out = format!("host={} port={port}", quote(host.trim_matches(['[', ']'])));
    if let Some(u) = cfg.get_user() {
        out.push_str(&format!(" user={}", quote(u)));
    }
    if let Some(p) = cfg.get_password() {
        out.push_str(&format!(" password={}", quote(&String::from_utf8_lossy(p))));
    }
    if let Some(d) = cfg.get_dbname() {
        out.push_str(&format!(" dbname={}", quote(d)));
    }
    Ok(out)
}

/// Connect to `url` with a deadline, over `tls` when given; the
/// connection's task runs on the current runtime until the client is
/// dropped.
pub async fn connect(
    url: &str,
    tls: Option<&PgTls>,
    t: Duration,
) -> Result<tokio_postgres::Client, String> {
    let cfg: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
    connect_config(&cfg, tls, t).await
}

/// [`connect`] with a parsed configuration.
pub async fn connect_config(
    cfg: &tokio_postgres::Config,
    tls: Option<&PgTls>,
    t: Duration,
) -> Result<tokio_postgres::Client, String> {
    let mut cfg = cfg.clone();
    cfg.connect_timeout(t);
    tokio::time::timeout(t, super::postgres_tls::connect(&cfg, tls))
        .await
        .map_err(|_| format!("no connection within {t:?}"))?
        .map_err(|e| describe(&e))
}

/// The TLS of `--auth`'s `[postgres]` table for the database of `url`
/// (`--postgres-url`): the name verified is the URL's host.
pub fn tls_for_url(auth: &crate::auth::Auth, url: &str) -> Result<Option<PgTls>, String> {
    if auth.postgres.is_none() {
        return Ok(None);
    }
    super::postgres_tls::for_host(auth, &parse_url(url)?.endpoint)
}

/// An error with its server-side detail (tokio-postgres' Display alone
/// says only "db error").
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => super::with_causes(e),
    }
}

/// `SELECT 1` on the server at `addr` (over `--auth`'s TLS, the name
/// verified `addr`'s host).
pub async fn probe(addr: &str, auth: &crate::auth::Auth, t: Duration) -> Result<(), String> {
    let tls = super::postgres_tls::for_host(auth, addr)?;
    let c = connect(&url_for(addr), tls.as_ref(), t).await?;
    tokio::time::timeout(t, c.simple_query("SELECT 1"))
        .await
        .map_err(|_| format!("no answer within {t:?}"))?
        .map(drop)
        .map_err(|e| describe(&e))
}

/// The server's version, e.g. `PostgreSQL 15.8`.
pub async fn version(addr: &str, auth: &crate::auth::Auth, t: Duration) -> Result<String, String> {
    let tls = super::postgres_tls::for_host(auth, addr)?;
    version_at(&url_for(addr), tls.as_ref(), t).await
}

/// The version of the server at `url`.
pub async fn version_at(url: &str, tls: Option<&PgTls>, t: Duration) -> Result<String, String> {
    let c = connect(url, tls, t).await?;
    let row = tokio::time::timeout(t, c.query_one("SHOW server_version", &[]))
        .await
        .map_err(|_| format!("no answer within {t:?}"))?
        .map_err(|e| describe(&e))?;
    let v: String = row.get(0);
    Ok(format!(
        "PostgreSQL {}",
        v.split_whitespace().next().unwrap_or(&v)
    ))
}

/// The settings that decide what a commit survives: `synchronous_commit`
/// (`SHOW`).
pub async fn settings(
    addr: &str,
    auth: &crate::auth::Auth,
    t: Duration,
) -> Result<Vec<(String, String)>, String> {
    let tls = super::postgres_tls::for_host(auth, addr)?;
    let c = connect(&url_for(addr), tls.as_ref(), t).await?;
    let row = tokio::time::timeout(t, c.query_one("SHOW synchronous_commit", &[]))
        .await
        .map_err(|_| format!("no answer within {t:?}"))?
        .map_err(|e| describe(&e))?;
    Ok(vec![("synchronous_commit".into(), row.get(0))])
}

pub use super::db_names::{prefix, table_name};

/// Drop every table, sequence and function of the database at `url`
/// whose name starts with `prefix` (one run's objects; nothing else is
/// touched). Returns how many were dropped. A server that refuses the
/// connection is an error.
pub async fn drop_prefixed(
    url: &str,
    tls: Option<&PgTls>,
    prefix: &str,
    t: Duration,
) -> Result<usize, String> {
    if !prefix.starts_with("lockjaw_") || prefix.len() <= "lockjaw_".len() {
        return Err(format!(
            "{prefix:?} is not a run's prefix lockjaw_<run-id>_"
        ));
    }
    let c = connect(url, tls, t).await?;
    // `_` is a LIKE wildcard: match the prefix exactly with left().
    let rows = c
        .query(
            "SELECT 'TABLE', quote_ident(n.nspname) || '.' || quote_ident(c.relname) \
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
              WHERE c.relkind IN ('r', 'p') AND left(c.relname, length($1)) = $1 \
                AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
             UNION ALL \
             SELECT 'SEQUENCE', quote_ident(n.nspname) || '.' || quote_ident(c.relname) \
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
              WHERE c.relkind = 'S' AND left(c.relname, length($1)) = $1 \
                AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
             UNION ALL \
             SELECT 'FUNCTION', p.oid::regprocedure::text \
               FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
              WHERE left(p.proname, length($1)) = $1 \
                AND n.nspname NOT IN ('pg_catalog', 'information_schema')",
            &[&prefix],
        )
        .await
        .map_err(|e| describe(&e))?;
    let mut dropped = 0;
    for r in rows {
        let (kind, name): (String, String) = (r.get(0), r.get(1));
        c.batch_execute(&format!("DROP {kind} IF EXISTS {name} CASCADE"))
            .await
            .map_err(|e| format!("DROP {kind} {name}: {}", describe(&e)))?;
        dropped += 1;
    }
    Ok(dropped)
}
