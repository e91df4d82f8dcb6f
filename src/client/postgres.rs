//! The PostgreSQL lock client: session-level advisory locks.
//!
//! One connection (session) per client. The lock on a key is
//! `pg_try_advisory_lock(hashtextextended(key, 0))`, held until the
//! session unlocks it or ends; the owner is the session: backend PID and
//! backend start time (`4242@1717171717123456`, microseconds since the
//! epoch), so a new session after a lost connection is a new owner.
//!
//! The fence: right after the grant, on the holding session, the holder
//! increments its key's row in `lockjaw_<run-id>_fence` (autocommit, one
//! statement). A failed increment fails the acquire and unlocks. Why the
//! fences grow with the grants: the next holder's increment runs only
//! after it got the lock, so after this session unlocked or ended, which
//! is after this increment committed (the acquire returns only then);
//! the row lock serialises increments and each reads the latest committed
//! value.
//!
//! A session lock has no length, so grants say `lease: 0`, and every
//! successful statement on the holding session (the stepper's probes, and
//! renews) proves the session, and with it the lock, alive at that moment:
//! recorded as a `renew` with `lease_ms: 0`. A lost connection ends the
//! session; the next request opens a new one. A statement without an
//! answer in time is indeterminate, and the session stays open: closing
//! it would free the lock at once, which the network fault did not.

use super::fence_failed::fence_failed;
use super::postgres_conn::{self as pg, describe};
use super::{ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use std::time::{Duration, Instant};

/// A session: the connection and its owner id.
struct Session {
    client: tokio_postgres::Client,
    owner: String,
}

pub struct PostgresClient {
    /// User, password and database (from `--postgres-url`, else lockjaw's
    /// own server's); host and port are the dialled endpoint's.
    base: tokio_postgres::Config,
    addr: String,
    /// `--auth`'s TLS, verifying the announced endpoint's host.
    tls: Option<pg::PgTls>,
    op_timeout: Duration,
    table: String,
    table_ready: bool,
    session: Option<Session>,
}

/// How often a waiting acquire tries again.
const RETRY: Duration = Duration::from_millis(20);

impl PostgresClient {
    /// Connect to the first endpoint (through the dial map).
    pub async fn connect(cfg: &ClientConfig) -> Result<PostgresClient, ClientError> {
        let announced = cfg
            .endpoints
            .first()
            .ok_or_else(|| ClientError::Definite("no PostgreSQL endpoint".into()))?;
        let url = match &cfg.postgres_url {
            Some(u) => u.clone(),
            None => pg::url_for(announced),
        };
        let base: tokio_postgres::Config = url
            .parse()
            .map_err(|e| ClientError::Definite(format!("bad PostgreSQL URL: {e}")))?;
        let run = if cfg.run_id.is_empty() {
            "adhoc"
        } else {
            &cfg.run_id
        };
        let mut c = PostgresClient {
            base,
            addr: cfg.dial_addr(announced),
            tls: super::postgres_tls::for_host(&cfg.auth, announced)
                .map_err(ClientError::Definite)?,
            op_timeout: cfg.op_timeout,
            table: pg::table_name(run, "fence"),
            table_ready: false,
            session: None,
        };
        c.session().await?;
        Ok(c)
    }

    /// The open session, or a new one (a failed connect is definite: no
    /// statement was sent).
    async fn session(&mut self) -> Result<&Session, ClientError> {
        if self.session.as_ref().is_some_and(|s| s.client.is_closed()) {
            self.session = None;
        }
        if self.session.is_none() {
            let s = self
                .open()
                .await
                .map_err(|e| ClientError::Definite(format!("PostgreSQL at {}: {e}", self.addr)))?;
            self.session = Some(s);
        }
        Ok(self.session.as_ref().expect("just opened"))
    }

    async fn open(&mut self) -> Result<Session, String> {
        // A fresh configuration: `host`/`port` on the parsed URL's would
        // add a second address after the URL's own (the server itself,
        // not this worker's proxy), and the first that answers wins.
        let mut cfg = tokio_postgres::Config::new();
        if let Some(u) = self.base.get_user() {
            cfg.user(u);
        }
        if let Some(p) = self.base.get_password() {
            cfg.password(p);
        }
        if let Some(d) = self.base.get_dbname() {
            cfg.dbname(d);
        }
        cfg.application_name("lockjaw");
        let (host, port) = self
            .addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
            .ok_or_else(|| format!("{} is not host:port", self.addr))?;
        cfg.host(&host).port(port);
        let t = self.op_timeout;
        let client = pg::connect_config(&cfg, self.tls.as_ref(), t).await?;
        let row = tokio::time::timeout(
            t,
            client.query_one(
                "SELECT pg_backend_pid(), (extract(epoch FROM backend_start) * 1000000)::bigint \
                 FROM pg_stat_activity WHERE pid = pg_backend_pid()",
                &[],
            ),
        )
        .await
        .map_err(|_| format!("no answer within {t:?}"))?
        .map_err(|e| describe(&e))?;
        let (pid, start): (i32, i64) = (row.get(0), row.get(1));
        if !self.table_ready {
            let sql = format!(
                "CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, fence bigint NOT NULL)",
                self.table
            );
            match tokio::time::timeout(t, client.batch_execute(&sql)).await {
                Ok(Ok(())) => {}
                // Two workers creating it at once: the other one won.
                Ok(Err(e))
                    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
                        || e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_TABLE) => {}
                Ok(Err(e)) => return Err(format!("creating {}: {}", self.table, describe(&e))),
                Err(_) => return Err(format!("creating {}: no answer within {t:?}", self.table)),
            }
            self.table_ready = true;
        }
        Ok(Session {
            client,
            owner: format!("{pid}@{start}"),
        })
    }

    /// Run one statement on the session; a server error is definite (one
    /// autocommitted statement: no effect), anything else indeterminate
    /// and ends the session.
    async fn one(
        &mut self,
        what: &str,
        sql: &str,
        key: &str,
    ) -> Result<tokio_postgres::Row, ClientError> {
        let t = self.op_timeout;
        let s = self.session().await?;
        let r = tokio::time::timeout(t, s.client.query_one(sql, &[&key])).await;
        match r {
            Ok(Ok(row)) => Ok(row),
            Ok(Err(e)) if e.as_db_error().is_some() => {
                Err(ClientError::Definite(format!("{what}: {}", describe(&e))))
            }
            Ok(Err(e)) => {
                self.session = None;
                Err(ClientError::Indeterminate(format!("{what}: {e}")))
            }
            // The session stays: its answer is dropped when it comes, and
            // closing it would tell the server what the network did not
            // (a blackholed holder keeps its session, and so its lock).
            Err(_) => Err(ClientError::Indeterminate(format!(
                "{what}: no answer within {t:?}"
            ))),
        }
    }

    /// Whether the open session is the one that holds `grant`.
    fn holds(&self, grant: &Grant) -> bool {
        self.holds_owner(&grant.owner)
    }

    fn holds_owner(&self, owner: &str) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.owner == owner && !s.client.is_closed())
    }

    /// Unlock `key` until the server says this session holds it no more
    /// (advisory locks stack per session). `Ok(n)`: unlocked n times.
    async fn unlock_all(&mut self, key: &str) -> Result<u32, ClientError> {
        let mut n = 0;
        loop {
            let row = self
                .one(
                    "unlock",
                    "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                    key,
                )
                .await?;
            if !row.get::<_, bool>(0) || n >= 10_000 {
                return Ok(n);
            }
            n += 1;
        }
    }
}

#[async_trait]
impl LockClient for PostgresClient {
    async fn acquire(
        &mut self,
        key: &str,
        _ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        let deadline = Instant::now() + wait;
        loop {
            let row = self
                .one(
                    "acquire",
                    "SELECT pg_try_advisory_lock(hashtextextended($1, 0))",
                    key,
                )
                .await?;
            if row.get::<_, bool>(0) {
                break;
            }
            if !super::wait_to_retry(deadline, RETRY).await {
                return Ok(None);
            }
        }
        let owner = self.session().await?.owner.clone();
        let sql = format!(
            "INSERT INTO {t} AS f (key, fence) VALUES ($1, 1) \
             ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1 RETURNING fence",
            t = self.table
        );
        match self.one("fence increment", &sql, key).await {
            Ok(row) => Ok(Some(Grant::session(
                key,
                owner,
                row.get::<_, i64>(0) as u64,
            ))),
            Err(e) => {
                // No grant without its fence: give the lock back. If that
                // is in doubt too, end the session (which frees it).
                let unlocked = if self.holds_owner(&owner) {
                    self.unlock_all(key).await.map(drop)
                } else {
                    Err(ClientError::Indeterminate("the session ended".into()))
                };
                let (e, end_session) = fence_failed(e, unlocked);
                if end_session {
                    self.session = None;
                }
                Err(e)
            }
        }
    }

    async fn renew(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        Ok(self.probe(grant).await?.is_some())
    }

    async fn release(&mut self, grant: &Grant) -> Result<bool, ClientError> {
        if !self.holds(grant) {
            // The holding session is gone, and its locks with it.
            self.session = None;
            return Ok(false);
        }
        Ok(self.unlock_all(&grant.key).await? > 0)
    }

    fn can_probe(&self) -> bool {
        true
    }

    /// One statement on the holding session: `Some(0)`, the session (and
    /// so the lock) was alive at that moment, for no known length after.
    async fn probe(&mut self, grant: &Grant) -> Result<Option<Duration>, ClientError> {
        if !self.holds(grant) {
            return Ok(None);
        }
        self.one("probe", "SELECT length($1)", &grant.key).await?;
        Ok(Some(Duration::ZERO))
    }
}
