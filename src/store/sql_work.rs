//! The work queue in SQL: claims with `FOR UPDATE SKIP LOCKED` on Postgres (replicas share
//! one queue) and the single writer on SQLite.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::query::{Sql, bound};
use super::sql::{Dialect, SqlStore};
use super::{ExpiredWork, Scan, StoppedWork, StoreResult, WorkRecord, WorkStats, WorkTxn};
use crate::domain::time::Micros;

pub(super) const WORK_COLS: &str = "id, workspace_id, environment_id, session_id, state, metadata, created_at, updated_at, \
    polled_at, polled_by, acknowledged_at, started_at, latest_heartbeat_at, lease_expires_at, ttl_seconds, \
    stop_requested_at, stopped_at, token_hash";

fn work_from_row(row: &AnyRow) -> StoreResult<WorkRecord> {
    Ok(WorkRecord {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        environment_id: row.try_get("environment_id")?,
        session_id: row.try_get("session_id")?,
        state: row.try_get("state")?,
        metadata: row.try_get("metadata")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        polled_at: row.try_get("polled_at")?,
        polled_by: row.try_get("polled_by")?,
        acknowledged_at: row.try_get("acknowledged_at")?,
        started_at: row.try_get("started_at")?,
        latest_heartbeat_at: row.try_get("latest_heartbeat_at")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        ttl_seconds: row.try_get("ttl_seconds")?,
        stop_requested_at: row.try_get("stop_requested_at")?,
        stopped_at: row.try_get("stopped_at")?,
        token_hash: row.try_get("token_hash")?,
    })
}

/// Drops a deleted environment's keys and worker records and stops its items (inside the
/// deleting transaction).
pub(super) async fn forget_environment(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    env: &str,
    now: Micros,
) -> StoreResult<()> {
    for sql in [
        "DELETE FROM environment_keys WHERE environment_id = $1",
        "DELETE FROM worker_polls WHERE environment_id = $1",
    ] {
        sqlx::query(sql).bind(env).execute(&mut **tx).await?;
    }
    sqlx::query(
        "UPDATE work_items SET state = 'stopped', stopped_at = $1, stop_requested_at = COALESCE(stop_requested_at, $1), \
         lease_expires_at = NULL, updated_at = $1 WHERE environment_id = $2 AND state <> 'stopped'",
    )
    .bind(now)
    .bind(env)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Inserts `w` unless its session already has a live item (inside a caller's transaction).
pub(super) async fn ensure_work<'c, E>(exec: E, w: &WorkRecord) -> StoreResult<()>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    bound(
        "INSERT INTO work_items (id, workspace_id, environment_id, session_id, state, metadata, created_at, updated_at, ttl_seconds) \
         SELECT $1, $2, $3, $4, 'queued', '{}', $5, $5, $6 \
         WHERE NOT EXISTS (SELECT 1 FROM work_items WHERE session_id = $4 AND state <> 'stopped')",
        vec![
            (&w.id).into(),
            (&w.workspace_id).into(),
            (&w.environment_id).into(),
            (&w.session_id).into(),
            w.created_at.into(),
            w.ttl_seconds.into(),
        ],
    )
    .execute(exec)
    .await?;
    Ok(())
}

impl SqlStore {
    pub(super) async fn insert_environment_key_sql(
        &self,
        id: &str,
        ws: &str,
        env: &str,
        hash: &str,
    ) -> StoreResult<()> {
        sqlx::query("INSERT INTO environment_keys (id, workspace_id, environment_id, key_hash, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(id)
            .bind(ws)
            .bind(env)
            .bind(hash)
            .bind(crate::domain::time::now())
            .execute(self.write_pool())
            .await?;
        Ok(())
    }

    pub(super) async fn list_environment_keys_sql(
        &self,
        env: &str,
    ) -> StoreResult<Vec<(String, Micros)>> {
        let rows = sqlx::query(
            "SELECT id, created_at FROM environment_keys WHERE environment_id = $1 ORDER BY id",
        )
        .bind(env)
        .fetch_all(self.read_pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("created_at")?)))
            .collect()
    }

    pub(super) async fn delete_environment_key_sql(
        &self,
        env: &str,
        id: &str,
    ) -> StoreResult<bool> {
        let r = sqlx::query("DELETE FROM environment_keys WHERE environment_id = $1 AND id = $2")
            .bind(env)
            .bind(id)
            .execute(self.write_pool())
            .await?;
        Ok(r.rows_affected() > 0)
    }

    pub(super) async fn environment_for_key_sql(
        &self,
        hash: &str,
    ) -> StoreResult<Option<(String, String)>> {
        // Joined so a key outliving its environment (however that happened) authenticates nothing.
        let row = sqlx::query(
            "SELECT k.workspace_id, k.environment_id FROM environment_keys k \
             JOIN environments e ON e.id = k.environment_id AND e.workspace_id = k.workspace_id WHERE k.key_hash = $1",
        )
        .bind(hash)
        .fetch_optional(self.read_pool())
        .await?;
        Ok(match row {
            Some(r) => Some((r.try_get("workspace_id")?, r.try_get("environment_id")?)),
            None => None,
        })
    }

    pub(super) async fn work_for_token_sql(&self, hash: &str) -> StoreResult<Option<WorkRecord>> {
        // Stopped items stay findable: their holder may still heartbeat (and hear `stopped`)
        // or stop them (409), though nothing else.
        let row = sqlx::query(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE token_hash = $1"
        ))
        .bind(hash)
        .fetch_optional(self.read_pool())
        .await?;
        row.map(|r| work_from_row(&r)).transpose()
    }

    pub(super) async fn poll_work_sql(
        &self,
        env: &str,
        worker: Option<&str>,
        now: Micros,
        reclaim_before: Micros,
        token_hash: &str,
    ) -> StoreResult<Option<WorkRecord>> {
        let skip_locked = match self.dialect() {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        };
        let mut tx = self.write_pool().begin().await?;
        // Workers that give no `Anthropic-Worker-ID` count as one anonymous worker: a session
        // that waits on a worker must be able to tell whether any is polling at all.
        sqlx::query(
            "INSERT INTO worker_polls (environment_id, worker_id, polled_at) VALUES ($1, $2, $3) \
             ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at = excluded.polled_at",
        )
        .bind(env)
        .bind(worker.unwrap_or(""))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(&format!(
            "UPDATE work_items SET polled_at = $1, polled_by = $2, token_hash = $3, updated_at = $1 WHERE id = (\
             SELECT id FROM work_items WHERE environment_id = $4 AND state = 'queued' AND (polled_at IS NULL OR polled_at < $5) \
             ORDER BY created_at, id LIMIT 1{skip_locked}) RETURNING {WORK_COLS}"
        ))
        .bind(now)
        .bind(worker)
        .bind(token_hash)
        .bind(env)
        .bind(reclaim_before)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        row.map(|r| work_from_row(&r)).transpose()
    }

    pub(super) async fn transact_work_sql(
        &self,
        env: &str,
        id: &str,
        f: WorkTxn,
    ) -> StoreResult<Option<WorkRecord>> {
        let lock = match self.dialect() {
            Dialect::Postgres => " FOR UPDATE",
            Dialect::Sqlite => "",
        };
        let mut tx = self.write_pool().begin().await?;
        let row = sqlx::query(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE environment_id = $1 AND id = $2{lock}"
        ))
        .bind(env)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut w = work_from_row(&row)?;
        let was_stopped = w.stopped_at.is_some();
        f(&mut w)?;
        if !was_stopped && w.stopped_at.is_some() {
            sqlx::query("UPDATE work_items SET requeue_check = 1 WHERE id = $1")
                .bind(&w.id)
                .execute(&mut *tx)
                .await?;
        }
        bound(
            "UPDATE work_items SET state = $1, metadata = $2, updated_at = $3, polled_at = $4, polled_by = $5, \
             acknowledged_at = $6, started_at = $7, latest_heartbeat_at = $8, lease_expires_at = $9, ttl_seconds = $10, \
             stop_requested_at = $11, stopped_at = $12, token_hash = $13 WHERE id = $14",
            vec![
                (&w.state).into(),
                (&w.metadata).into(),
                w.updated_at.into(),
                w.polled_at.into(),
                w.polled_by.clone().into(),
                w.acknowledged_at.into(),
                w.started_at.into(),
                w.latest_heartbeat_at.into(),
                w.lease_expires_at.into(),
                w.ttl_seconds.into(),
                w.stop_requested_at.into(),
                w.stopped_at.into(),
                w.token_hash.clone().into(),
                (&w.id).into(),
            ],
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(w))
    }

    pub(super) async fn get_work_sql(
        &self,
        env: &str,
        id: &str,
    ) -> StoreResult<Option<WorkRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE environment_id = $1 AND id = $2"
        ))
        .bind(env)
        .bind(id)
        .fetch_optional(self.read_pool())
        .await?;
        row.map(|r| work_from_row(&r)).transpose()
    }

    pub(super) async fn list_work_sql(
        &self,
        env: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<WorkRecord>> {
        let mut sql = Sql::new(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE environment_id = "
        ));
        sql.bind(env);
        super::sql::push_scan(&mut sql, "id", scan);
        let rows = sql.query().fetch_all(self.read_pool()).await?;
        rows.iter().map(work_from_row).collect()
    }

    pub(super) async fn work_stats_sql(&self, env: &str, now: Micros) -> StoreResult<WorkStats> {
        let row = sqlx::query(
            "SELECT \
               (SELECT COUNT(*) FROM work_items WHERE environment_id = $1 AND state = 'queued' AND polled_at IS NULL) AS depth, \
               (SELECT COUNT(*) FROM work_items WHERE environment_id = $1 AND state = 'queued' AND polled_at IS NOT NULL) AS pending, \
               (SELECT MIN(created_at) FROM work_items WHERE environment_id = $1 AND state = 'queued') AS oldest, \
               (SELECT COUNT(*) FROM worker_polls WHERE environment_id = $1 AND polled_at > $2) AS workers",
        )
        .bind(env)
        .bind(now - 30_000_000)
        .fetch_one(self.read_pool())
        .await?;
        Ok(WorkStats {
            depth: row.try_get("depth")?,
            pending: row.try_get("pending")?,
            oldest_queued_at: row.try_get("oldest")?,
            workers_polling: row.try_get("workers")?,
        })
    }

    pub(super) async fn requeue_expired_work_sql(&self, now: Micros) -> StoreResult<ExpiredWork> {
        let mut tx = self.write_pool().begin().await?;
        let requeued = sqlx::query(
            "UPDATE work_items SET state = 'queued', polled_at = NULL, polled_by = NULL, acknowledged_at = NULL, \
             started_at = NULL, latest_heartbeat_at = NULL, lease_expires_at = NULL, updated_at = $1 \
             WHERE state IN ('starting', 'active') AND lease_expires_at < $1 RETURNING environment_id",
        )
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE work_items SET state = 'stopped', stopped_at = $1, lease_expires_at = NULL, updated_at = $1, \
             requeue_check = 1 WHERE state = 'stopping' AND lease_expires_at < $1",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM worker_polls WHERE polled_at < $1")
            .bind(now - 3_600_000_000)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut out = ExpiredWork {
            requeued_in: requeued
                .iter()
                .map(|r| r.try_get("environment_id"))
                .collect::<Result<_, _>>()?,
        };
        out.requeued_in.sort();
        out.requeued_in.dedup();
        Ok(out)
    }

    pub(super) async fn work_needing_requeue_check_sql(
        &self,
        limit: i64,
    ) -> StoreResult<Vec<StoppedWork>> {
        let rows = sqlx::query(
            "SELECT id, session_id FROM work_items WHERE requeue_check = 1 ORDER BY id LIMIT $1",
        )
        .bind(limit)
        .fetch_all(self.read_pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(StoppedWork {
                    work_id: r.try_get("id")?,
                    session_id: r.try_get("session_id")?,
                })
            })
            .collect()
    }

    pub(super) async fn clear_requeue_check_sql(&self, work_id: &str) -> StoreResult<()> {
        sqlx::query("UPDATE work_items SET requeue_check = 0 WHERE id = $1")
            .bind(work_id)
            .execute(self.write_pool())
            .await?;
        Ok(())
    }

    pub(super) async fn stop_session_work_sql(
        &self,
        session_id: &str,
        now: Micros,
        graceful: bool,
    ) -> StoreResult<()> {
        let mut tx = self.write_pool().begin().await?;
        if graceful {
            // The holder hears `stopping` on its next heartbeat; the reaper stops the item
            // when its lease runs out if the worker never confirms.
            sqlx::query(
                "UPDATE work_items SET state = 'stopping', stop_requested_at = $1, updated_at = $1 \
                 WHERE session_id = $2 AND state IN ('starting', 'active')",
            )
            .bind(now)
            .bind(session_id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE work_items SET state = 'stopped', stopped_at = $1, stop_requested_at = COALESCE(stop_requested_at, $1), \
             lease_expires_at = NULL, updated_at = $1 WHERE session_id = $2 AND state <> 'stopped' \
             AND ($3 = 0 OR state = 'queued')",
        )
        .bind(now)
        .bind(session_id)
        .bind(graceful as i64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
