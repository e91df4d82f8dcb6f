//! The MariaDB lock client: named locks (`GET_LOCK` / `RELEASE_LOCK`).
//!
//! One connection (session) per client. The lock on a key is
//! `GET_LOCK(key, 0)`, tried again every few milliseconds while the
//! worker waits, and held until the session releases it or ends. The owner
//! is an id lockjaw draws for each session it opens (with the server's
//! connection id for reading logs): connection ids start again after a
//! server restart, and two sessions sharing an owner would hide an
//! overlap. `GET_LOCK` is re-entrant within one session, so the client
//! counts the grants per key and releases as many times (and then until
//! the server says the session holds it no more, for grants whose answer
//! was lost).
//!
//! The fence: right after the grant, on the holding session, the holder
//! increments its key's row in `lockjaw_<run-id>_fence` (one autocommitted
//! `INSERT .. ON DUPLICATE KEY UPDATE`, the new value returned through
//! `LAST_INSERT_ID(expr)` in the same reply). A failed increment fails the
//! acquire and releases the lock. Why the fences grow with the grants: the
//! next holder's increment runs only after its `GET_LOCK` returned, so
//! after this session released the lock or ended, which is after this
//! increment committed (the acquire returns only then); InnoDB's row lock
//! serialises increments and each reads the latest committed value.
//!
//! Session-lease semantics as PostgreSQL's: grants say `lease: 0`, and
//! every successful statement on the holding session proves the session,
//! and with it the lock, alive at that moment. A lost connection ends the
//! session; the next request opens a new one. A statement without an
//! answer in time is indeterminate and the session is set aside, still
//! open (closing it would free the lock, which the network fault did
//! not): no later statement goes on it, since the MySQL protocol cannot
//! tell its late answer from theirs (mysql_async marks such a connection
//! broken). A probe of its grant is indeterminate; a release, or the next
//! acquire, ends it from a new session (`KILL CONNECTION` by its id, while
//! the server has not restarted), which frees its locks; while the server
//! cannot be reached it stays open, and so does its lock.

use super::fence_failed::fence_failed;
use super::mariadb_conn::{self as my, describe};
use super::{ClientConfig, ClientError, Grant, LockClient};
use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::Params;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A session: the connection, its owner id, and how often it was granted
/// each key it holds.
struct Session {
    conn: mysql_async::Conn,
    owner: String,
    held: HashMap<String, u32>,
    /// When the server started (seconds since the epoch, from its
    /// uptime): a connection id names this session only while it is the
    /// same.
    server_start: i64,
}

pub struct MariadbClient {
    opts: mysql_async::Opts,
    addr: String,
    op_timeout: Duration,
    table: String,
    table_ready: bool,
    session: Option<Session>,
    /// A session with a statement that got no answer in time: kept open,
    /// never used again.
    stale: Option<Session>,
}

/// How often a waiting acquire tries again.
const RETRY: Duration = Duration::from_millis(20);
/// MariaDB's limit on a lock name.
const MAX_NAME: usize = 64;

impl MariadbClient {
    /// Connect to the first endpoint (through the dial map).
    pub async fn connect(cfg: &ClientConfig) -> Result<MariadbClient, ClientError> {
        let announced = cfg
            .endpoints
            .first()
            .ok_or_else(|| ClientError::Definite("no MariaDB endpoint".into()))?;
        let addr = cfg.dial_addr(announced);
        let login = my::login_for(announced).map_err(ClientError::Definite)?;
        let opts = my::opts(&addr, &login).map_err(ClientError::Definite)?;
        let run = if cfg.run_id.is_empty() {
            "adhoc"
        } else {
            &cfg.run_id
        };
        let mut c = MariadbClient {
            opts,
            addr,
            op_timeout: cfg.op_timeout,
            table: super::db_names::table_name(run, "fence"),
            table_ready: false,
            session: None,
            stale: None,
        };
        c.session().await?;
        Ok(c)
    }

    /// The open session, or a new one (a failed connect is definite: no
    /// statement was sent).
    async fn session(&mut self) -> Result<&mut Session, ClientError> {
        if self.session.is_none() {
            let s = self
                .open()
                .await
                .map_err(|e| ClientError::Definite(format!("MariaDB at {}: {e}", self.addr)))?;
            self.session = Some(s);
        }
        Ok(self.session.as_mut().expect("just opened"))
    }

    async fn open(&mut self) -> Result<Session, String> {
        let t = self.op_timeout;
        let mut conn = my::connect(self.opts.clone(), t).await?;
        if !self.table_ready {
            let sql = format!(
                "CREATE TABLE IF NOT EXISTS {} (k VARCHAR(255) PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB",
                self.table
            );
            tokio::time::timeout(t, conn.query_drop(sql))
                .await
                .map_err(|_| format!("creating {}: no answer within {t:?}", self.table))?
                .map_err(|e| format!("creating {}: {}", self.table, describe(&e)))?;
            self.table_ready = true;
        }
        let server_start = server_start(&mut conn, t).await?;
        Ok(Session {
            owner: format!("{}-{}", xid::new(), conn.id()),
            conn,
            held: HashMap::new(),
            server_start,
        })
    }

    /// Run one statement on the session and return its first column (`NULL`
    /// as `None`). A server error is definite (one autocommitted statement:
    /// no effect); a lost connection is indeterminate and ends the
    /// session; no answer in time is indeterminate and sets it aside.
    async fn one(
        &mut self,
        what: &str,
        sql: &str,
        params: Params,
    ) -> Result<Option<i64>, ClientError> {
        let t = self.op_timeout;
        let s = self.session().await?;
        let r = tokio::time::timeout(t, s.conn.exec_first::<Option<i64>, _, _>(sql, params)).await;
        match r {
            Ok(Ok(v)) => Ok(v.flatten()),
            Ok(Err(mysql_async::Error::Server(e))) => Err(ClientError::Definite(format!(
                "{what}: {} ({}): {}",
                e.code, e.state, e.message
            ))),
            Ok(Err(e)) => {
                self.session = None;
                Err(ClientError::Indeterminate(format!(
                    "{what}: {}",
                    describe(&e)
                )))
            }
            Err(_) => {
                self.stale = self.session.take();
                Err(ClientError::Indeterminate(format!(
                    "{what}: no answer within {t:?}"
                )))
            }
        }
    }

    /// End the set-aside session, if any, from a new one: `KILL
    /// CONNECTION` by its id while the server is the one that gave it
    /// (after a restart the session is gone already, and its id may be
    /// another's). `Ok` once it is ended; an error (it could not be
    /// reached) keeps it, still open, as the network fault does.
    async fn end_stale(&mut self) -> Result<(), ClientError> {
        let Some((id, started)) = self.stale.as_ref().map(|s| (s.conn.id(), s.server_start)) else {
            return Ok(());
        };
        let t = self.op_timeout;
        let s = self.session().await?;
        let now = server_start(&mut s.conn, t).await.map_err(|e| {
            ClientError::Indeterminate(format!("ending the set-aside session: {e}"))
        })?;
        if (now - started).abs() <= 2 {
            let r =
                tokio::time::timeout(t, s.conn.query_drop(format!("KILL CONNECTION {id}"))).await;
            match r {
                Ok(Ok(())) => {}
                // 1094: unknown thread, it ended already.
                Ok(Err(mysql_async::Error::Server(e))) if e.code == 1094 => {}
                Ok(Err(e)) => {
                    self.session = None;
                    return Err(ClientError::Indeterminate(format!(
                        "ending the set-aside session: {}",
                        describe(&e)
                    )));
                }
                Err(_) => {
                    // Two sessions without an answer: keep the older one.
                    self.session = None;
                    return Err(ClientError::Indeterminate(format!(
                        "ending the set-aside session: no answer within {t:?}"
                    )));
                }
            }
        }
        self.stale = None;
        Ok(())
    }

    fn holds(&self, grant: &Grant) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.owner == grant.owner)
    }

    fn is_stale(&self, grant: &Grant) -> bool {
        self.stale.as_ref().is_some_and(|s| s.owner == grant.owner)
    }

    /// Release `key` as often as this session was granted it, then until
    /// the server says the session holds it no more. `Ok(n)`: released n
    /// times.
    async fn release_all(&mut self, key: &str) -> Result<u32, ClientError> {
        let mut n = 0;
        loop {
            let r = self
                .one("release", "SELECT RELEASE_LOCK(?)", Params::from((key,)))
                .await?;
            if let Some(s) = self.session.as_mut() {
                if let Some(c) = s.held.get_mut(key) {
                    *c = c.saturating_sub(1);
                }
            }
            if r != Some(1) || n >= 10_000 {
                if let Some(s) = self.session.as_mut() {
                    s.held.remove(key);
                }
                return Ok(n);
            }
            n += 1;
        }
    }

    /// Try `GET_LOCK` until granted or `wait` passed.
    async fn get_lock(&mut self, key: &str, wait: Duration) -> Result<bool, ClientError> {
        let deadline = Instant::now() + wait;
        loop {
            let r = self
                .one("acquire", "SELECT GET_LOCK(?, 0)", Params::from((key,)))
                .await?;
            match r {
                Some(1) => return Ok(true),
                Some(_) => {}
                None => {
                    return Err(ClientError::Definite(
                        "acquire: GET_LOCK returned NULL (an error on the server)".into(),
                    ))
                }
            }
            if !super::wait_to_retry(deadline, RETRY).await {
                return Ok(false);
            }
        }
    }

    /// The fence increment on the holding session; `Ok(fence)`.
    async fn fence(&mut self, key: &str) -> Result<u64, ClientError> {
        let sql = format!(
            "INSERT INTO {} (k, fence) VALUES (?, LAST_INSERT_ID(1)) \
             ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)",
            self.table
        );
        self.one("fence increment", &sql, Params::from((key,)))
            .await?;
        let s = self.session.as_ref().ok_or_else(|| {
            ClientError::Indeterminate("fence increment: the session ended".into())
        })?;
        s.conn.last_insert_id().filter(|&f| f > 0).ok_or_else(|| {
            ClientError::Indeterminate("fence increment: the reply carried no value".into())
        })
    }
}

#[async_trait]
impl LockClient for MariadbClient {
    async fn acquire(
        &mut self,
        key: &str,
        _ttl: Duration,
        wait: Duration,
    ) -> Result<Option<Grant>, ClientError> {
        if key.len() > MAX_NAME {
            return Err(ClientError::Definite(format!(
                "lock key {key:?} is longer than MariaDB's {MAX_NAME} characters (hint: use a shorter key in the workload file)"
            )));
        }
        // A set-aside session is ended first: this acquire is a new op.
        self.end_stale().await?;
        if !self.get_lock(key, wait).await? {
            return Ok(None);
        }
        let s = self.session().await?;
        *s.held.entry(key.to_string()).or_default() += 1;
        let owner = s.owner.clone();
        match self.fence(key).await {
            Ok(fence) => Ok(Some(Grant::session(key, owner, fence))),
            Err(e) => {
                // No grant without its fence: give the lock back. If that
                // is in doubt too, end the session (which frees it).
                let released = if self.session.as_ref().is_some_and(|s| s.owner == owner) {
                    self.release_all(key).await.map(drop)
                } else {
                    Err(ClientError::Indeterminate("the session ended".into()))
                };
                let (e, end_session) = fence_failed(e, released);
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
        if self.is_stale(grant) {
            // Its own statements cannot be trusted: end it from another
            // session, which frees its locks.
            self.end_stale().await?;
            return Ok(true);
        }
        if !self.holds(grant) {
            // The holding session is gone, and its locks with it.
            return Ok(false);
        }
        Ok(self.release_all(&grant.key).await? > 0)
    }

    fn can_probe(&self) -> bool {
        true
    }

    /// One statement on the holding session: `Some(0)`, the session (and
    /// so the lock) was alive at that moment, for no known length after.
    async fn probe(&mut self, grant: &Grant) -> Result<Option<Duration>, ClientError> {
        if self.is_stale(grant) {
            return Err(ClientError::Indeterminate(
                "probe: the holding session has a statement without an answer".into(),
            ));
        }
        if !self.holds(grant) {
            return Ok(None);
        }
        self.one(
            "probe",
            "SELECT LENGTH(?)",
            Params::from((grant.key.as_str(),)),
        )
        .await?;
        Ok(Some(Duration::ZERO))
    }
}

/// When the server of `conn` started, in seconds since the epoch.
async fn server_start(conn: &mut mysql_async::Conn, t: Duration) -> Result<i64, String> {
    let r: Option<i64> = tokio::time::timeout(
        t,
        conn.query_first(
            "SELECT CAST(UNIX_TIMESTAMP() - VARIABLE_VALUE AS SIGNED) \
             FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'",
        ),
    )
    .await
    .map_err(|_| format!("no answer within {t:?}"))?
    .map_err(|e| describe(&e))?;
    r.ok_or_else(|| "no server start time".into())
}
