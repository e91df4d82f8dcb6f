//! `--storage postgres`: the protected value in a PostgreSQL table instead
//! of lockjaw's storage service, behind the same [`Resource`] trait.
//!
//! At setup the run creates, in one database, all named
//! `lockjaw_<run-id>_*`: the table `…_storage (key, value, version,
//! highest)`, the sequence `…_seq`, and the function `…_apply(op, key,
//! value, fence, version)`. Each request is one statement, `SELECT * FROM
//! …_apply(...)` (prepared once per connection, so one round trip), and so
//! one transaction at READ COMMITTED in which the function:
//!
//! 1. locks the key's row (`SELECT … FOR UPDATE`);
//! 2. draws `seq` (`nextval`), only now: requests on one key draw their
//!    numbers in the order they hold the row lock, which is the order they
//!    take effect. Drawn before the lock, two accepted requests could get
//!    their numbers in one order and take effect in the other, and the
//!    stale-write check would find a "stale write" that never happened;
//! 3. decides: with fencing on, a fence below the row's highest is
//!    refused (`stale-fence`, nothing changes); a fence raises the
//!    highest (reads too); a conditional write whose version is not the
//!    row's is refused (`version-conflict`);
//! 4. writes: `UPDATE … SET value, version = version + 1 … WHERE key = k
//!    AND version = v` for a conditional write;
//!
//! and the statement's COMMIT ends it. A database error means the
//! transaction rolled back (a definite failure); a timeout or a lost
//! connection is indeterminate, and the connection is dropped (the next
//! call opens a new one), as with the storage service.

use super::client::{CallError, Reply};
use super::protocol::{OpKind, Request};
use super::resource::Resource;
use crate::client::postgres_conn::{connect, describe, table_name, PgTls};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, Statement};

/// The objects of one run in the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub table: String,
    pub seq: String,
    pub apply: String,
}

impl Names {
    pub fn new(run_id: &str) -> Names {
        Names {
            table: table_name(run_id, "storage"),
            seq: table_name(run_id, "seq"),
            apply: table_name(run_id, "apply"),
        }
    }

    /// The `application_name` of the workers' sessions (so the run can
    /// find and end them before its final read).
    pub fn app(&self) -> String {
        format!("{}worker", self.table.trim_end_matches("storage"))
    }
}

/// Create the run's table, sequence and function, with the initial values.
pub async fn setup(
    url: &str,
    tls: Option<&PgTls>,
    names: &Names,
    fencing: bool,
    initial: &BTreeMap<String, Value>,
    t: Duration,
) -> Result<(), String> {
    let c = connect(url, tls, t).await?;
    let Names { table, seq, apply } = names;
    let ddl = format!(
        "CREATE TABLE {table} (key text PRIMARY KEY, value jsonb NOT NULL DEFAULT 'null', \
           version bigint NOT NULL DEFAULT 0, highest bigint);
         CREATE SEQUENCE {seq};
         CREATE FUNCTION {apply}(op text, k text, v text, f bigint, ver bigint)
           RETURNS TABLE (status text, seq bigint, val text, version bigint, highest bigint)
           LANGUAGE plpgsql AS $fn$
         DECLARE r {table}%ROWTYPE; s bigint; h bigint;
         BEGIN
           INSERT INTO {table} (key) VALUES (k) ON CONFLICT (key) DO NOTHING;
           SELECT * INTO r FROM {table} AS t WHERE t.key = k FOR UPDATE;
           s := nextval('{seq}');
           IF {fencing} AND f IS NOT NULL AND r.highest IS NOT NULL AND f < r.highest THEN
             RETURN QUERY SELECT 'stale-fence'::text, s, NULL::text, r.version, r.highest;
             RETURN;
           END IF;
           h := CASE WHEN f IS NULL THEN r.highest ELSE greatest(coalesce(r.highest, f), f) END;
           IF op = 'write' AND (ver IS NULL OR ver = r.version) THEN
             UPDATE {table} AS t SET value = v::jsonb, version = t.version + 1, highest = h
               WHERE t.key = k AND (ver IS NULL OR t.version = ver);
             RETURN QUERY SELECT 'ok'::text, s, NULL::text, r.version + 1, h;
             RETURN;
           END IF;
           UPDATE {table} AS t SET highest = h WHERE t.key = k;
           IF op = 'write' THEN
             RETURN QUERY SELECT 'version-conflict'::text, s, NULL::text, r.version, h;
           ELSE
             RETURN QUERY SELECT 'ok'::text, s, r.value::text, r.version, h;
           END IF;
         END $fn$;"
    );
    c.batch_execute(&ddl)
        .await
        .map_err(|e| format!("creating {table}: {}", describe(&e)))?;
    for (k, v) in initial {
        c.execute(
            &format!("INSERT INTO {table} (key, value) VALUES ($1, $2::text::jsonb)"),
            &[k, &v.to_string()],
        )
        .await
        .map_err(|e| format!("initial value of {k} in {table}: {}", describe(&e)))?;
    }
    Ok(())
}

/// End every worker session of the run (`pg_terminate_backend`) and wait
/// until none is left, so no request of theirs can still take effect
/// after the final read.
pub async fn end_worker_sessions(
    url: &str,
    tls: Option<&PgTls>,
    names: &Names,
    t: Duration,
) -> Result<(), String> {
    let c = connect(url, tls, t).await?;
    let app = names.app();
    let deadline = Instant::now() + t;
    loop {
        let row = c
            .query_one(
                "SELECT count(*), count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1",
                &[&app],
            )
            .await
            .map_err(|e| describe(&e))?;
        let left: i64 = row.get(0);
        if left == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{left} worker sessions ({app}) still there after {t:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A connection to the run's table, as a [`Resource`].
pub struct PgResource {
    config: tokio_postgres::Config,
    /// `--auth`'s TLS to the user's database (`--postgres-url`).
    tls: Option<PgTls>,
    apply: String,
    timeout: Duration,
    conn: Option<(Client, Statement)>,
}

impl PgResource {
    /// A resource on `url` (a worker's goes through its proxy); connects
    /// on the first call. `app` names the session (`application_name`).
    pub fn new(
        url: &str,
        tls: Option<&PgTls>,
        names: &Names,
        app: &str,
        timeout: Duration,
    ) -> Result<Self, String> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| format!("bad PostgreSQL URL {url}: {e}"))?;
        config.application_name(app);
        Ok(PgResource {
            config,
            tls: tls.cloned(),
            apply: names.apply.clone(),
            timeout,
            conn: None,
        })
    }

    async fn open(&mut self, deadline: tokio::time::Instant) -> Result<(), CallError> {
        if self.conn.is_some() {
            return Ok(());
        }
        let refused = super::sql_answer::connect_failed;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let client =
            crate::client::postgres_conn::connect_config(&self.config, self.tls.as_ref(), left)
                .await
                .map_err(refused)?;
        let sql = format!("SELECT * FROM {}($1, $2, $3, $4, $5)", self.apply);
        let stmt = tokio::time::timeout_at(deadline, client.prepare(&sql))
            .await
            .map_err(|_| refused("no answer preparing the request".into()))?
            .map_err(|e| refused(describe(&e)))?;
        self.conn = Some((client, stmt));
        Ok(())
    }
}

#[async_trait]
impl Resource for PgResource {
    async fn call(&mut self, req: Request) -> Result<Reply, CallError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        self.open(deadline).await?;
        let (client, stmt) = self.conn.as_ref().expect("opened above");
        let op = req.op.as_str();
        let value = req.value.as_ref().map(Value::to_string);
        let fence = req.fence.map(|f| f as i64);
        let version = req.version.map(|v| v as i64);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&op, &req.key, &value, &fence, &version];
        let fut = client.query_one(stmt, &params);
        let result = match tokio::time::timeout_at(deadline, fut).await {
            Err(_) => Err(CallError::Timeout(self.timeout)),
            Ok(Err(e)) if e.as_db_error().is_some() => Err(CallError::Refused(describe(&e))),
            Ok(Err(e)) => Err(CallError::Io(std::io::Error::other(describe(&e)))),
            Ok(Ok(row)) => to_reply(req.op, &row),
        };
        if matches!(&result, Err(e) if e.is_indeterminate()) {
            self.conn = None;
        }
        result
    }
}

fn to_reply(op: OpKind, row: &tokio_postgres::Row) -> Result<Reply, CallError> {
    let get = |e: tokio_postgres::Error| CallError::Protocol(describe(&e));
    let status: String = row.try_get(0).map_err(get)?;
    let seq = row.try_get::<_, i64>(1).map_err(get)?;
    let val: Option<String> = row.try_get(2).map_err(get)?;
    let version = row.try_get::<_, i64>(3).map_err(get)?;
    let highest: Option<i64> = row.try_get(4).map_err(get)?;
    super::sql_answer::reply(op, (status, seq, val, version, highest))
}
