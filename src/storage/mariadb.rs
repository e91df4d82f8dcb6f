//! `--storage mariadb`: the protected value in a MariaDB (InnoDB) table
//! instead of lockjaw's storage service, behind the same [`Resource`]
//! trait, with PostgreSQL's fencing rule ([`super::postgres`]).
//!
//! At setup the run creates, in the `lockjaw` database of its own server,
//! all named `lockjaw_<run-id>_*`: the table `…_storage (k, value,
//! version, highest)`, the sequence `…_seq`, and the procedure `…_apply(op,
//! k, value, fence, version)`. Each request is one statement, `CALL
//! …_apply(...)` (prepared once per connection), in which the procedure
//! runs one transaction:
//!
//! 1. locks the key's row (`SELECT … FOR UPDATE`, a locking read of the
//!    latest committed row whatever the isolation level);
//! 2. draws `seq` (`NEXTVAL`), only now, so requests on one key draw their
//!    numbers in the order they hold the row lock, which is the order they
//!    take effect;
//! 3. decides: with fencing on, a fence below the row's highest is
//!    refused (`stale-fence`, nothing changes); a fence raises the highest
//!    (reads too); a conditional write whose version is not the row's is
//!    refused (`version-conflict`);
//! 4. writes, commits, and only then returns its one-row answer.
//!
//! A server error rolls the transaction back (a definite failure); a
//! timeout or a lost connection is indeterminate, and the connection is
//! dropped (the next call opens a new one), as with the storage service.

use super::client::{CallError, Reply};
use super::protocol::Request;
use super::resource::Resource;
use super::sql_answer::Answer;
use crate::client::mariadb_conn::{connect, describe};
use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The objects of one run in the database: named as on PostgreSQL.
pub use super::postgres::Names;

/// The procedure that applies one request (see the module comment).
fn procedure(n: &Names, fencing: bool) -> String {
    let Names { table, seq, apply } = n;
    let fencing = if fencing { "TRUE" } else { "FALSE" };
    format!(
        "CREATE PROCEDURE {apply}(op VARCHAR(16), kk VARCHAR(255), v LONGTEXT, f BIGINT, ver BIGINT)
         BEGIN
           DECLARE rv LONGTEXT; DECLARE rver BIGINT; DECLARE rh BIGINT;
           DECLARE s BIGINT; DECLARE h BIGINT;
           DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
           START TRANSACTION;
           INSERT IGNORE INTO {table} (k) VALUES (kk);
           SELECT value, version, highest INTO rv, rver, rh FROM {table} WHERE k = kk FOR UPDATE;
           SET s = NEXTVAL({seq});
           IF {fencing} AND f IS NOT NULL AND rh IS NOT NULL AND f < rh THEN
             COMMIT;
             SELECT 'stale-fence', s, CAST(NULL AS CHAR), rver, rh;
           ELSE
             SET h = CASE WHEN f IS NULL THEN rh ELSE GREATEST(COALESCE(rh, f), f) END;
             IF op = 'write' AND (ver IS NULL OR ver = rver) THEN
               UPDATE {table} SET value = v, version = version + 1, highest = h WHERE k = kk;
               COMMIT;
               SELECT 'ok', s, CAST(NULL AS CHAR), rver + 1, h;
             ELSE
               UPDATE {table} SET highest = h WHERE k = kk;
               COMMIT;
               IF op = 'write' THEN
                 SELECT 'version-conflict', s, CAST(NULL AS CHAR), rver, h;
               ELSE
                 SELECT 'ok', s, rv, rver, h;
               END IF;
             END IF;
           END IF;
         END"
    )
}

/// Create the run's table, sequence and procedure, with the initial values.
pub async fn setup(
    opts: mysql_async::Opts,
    names: &Names,
    fencing: bool,
    initial: &BTreeMap<String, Value>,
    t: Duration,
) -> Result<(), String> {
    let mut c = connect(opts, t).await?;
    let Names { table, seq, .. } = names;
    let ddl = [
        format!(
            "CREATE TABLE {table} (k VARCHAR(255) PRIMARY KEY, value LONGTEXT NOT NULL DEFAULT 'null', \
             version BIGINT NOT NULL DEFAULT 0, highest BIGINT NULL) ENGINE=InnoDB"
        ),
        format!("CREATE SEQUENCE {seq}"),
        procedure(names, fencing),
    ];
    for sql in ddl {
        c.query_drop(sql)
            .await
            .map_err(|e| format!("creating {table}: {}", describe(&e)))?;
    }
    for (k, v) in initial {
        c.exec_drop(
            format!("INSERT INTO {table} (k, value) VALUES (?, ?)"),
            (k.as_str(), v.to_string()),
        )
        .await
        .map_err(|e| format!("initial value of {k} in {table}: {}", describe(&e)))?;
    }
    let _ = c.disconnect().await;
    Ok(())
}

/// End every other session of the `lockjaw` user on the run's own server
/// (the workers') and wait until none is left, so no request of theirs
/// can still take effect after the final read.
pub async fn end_worker_sessions(opts: mysql_async::Opts, t: Duration) -> Result<(), String> {
    let mut c = connect(opts, t).await?;
    let deadline = Instant::now() + t;
    loop {
        let ids: Vec<u64> = c
            .query(
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE ID <> CONNECTION_ID() AND USER = 'lockjaw'",
            )
            .await
            .map_err(|e| describe(&e))?;
        if ids.is_empty() {
            let _ = c.disconnect().await;
            return Ok(());
        }
        for id in &ids {
            // One that ended meanwhile is "unknown thread": fine.
            let _ = c.query_drop(format!("KILL CONNECTION {id}")).await;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} worker sessions still there after {t:?}",
                ids.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A connection to the run's table, as a [`Resource`].
pub struct MyResource {
    opts: mysql_async::Opts,
    call: String,
    timeout: Duration,
    conn: Option<mysql_async::Conn>,
}

impl MyResource {
    /// A resource through `opts` (a worker's go through its proxy);
    /// connects on the first call.
    pub fn new(opts: mysql_async::Opts, names: &Names, timeout: Duration) -> MyResource {
        MyResource {
            opts,
            call: format!("CALL {}(?, ?, ?, ?, ?)", names.apply),
            timeout,
            conn: None,
        }
    }
}

#[async_trait]
impl Resource for MyResource {
    async fn call(&mut self, req: Request) -> Result<Reply, CallError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        if self.conn.is_none() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let c = connect(self.opts.clone(), left)
                .await
                .map_err(super::sql_answer::connect_failed)?;
            self.conn = Some(c);
        }
        let conn = self.conn.as_mut().expect("opened above");
        let params = (
            req.op.as_str().to_string(),
            req.key.clone(),
            req.value.as_ref().map(Value::to_string),
            req.fence.map(|f| f as i64),
            req.version.map(|v| v as i64),
        );
        let fut = conn.exec_first::<Answer, _, _>(self.call.as_str(), params);
        let result = match tokio::time::timeout_at(deadline, fut).await {
            Err(_) => Err(CallError::Timeout(self.timeout)),
            Ok(Err(mysql_async::Error::Server(e))) => Err(CallError::Refused(format!(
                "{} ({}): {}",
                e.code, e.state, e.message
            ))),
            Ok(Err(e)) => Err(CallError::Io(std::io::Error::other(describe(&e)))),
            Ok(Ok(None)) => Err(CallError::Protocol("the procedure returned no row".into())),
            Ok(Ok(Some(a))) => super::sql_answer::reply(req.op, a),
        };
        if matches!(&result, Err(e) if e.is_indeterminate()) {
            self.conn = None;
        }
        result
    }
}
