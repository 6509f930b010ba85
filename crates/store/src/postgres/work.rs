//! The work queue of self-hosted environments: claims with `FOR UPDATE SKIP LOCKED` (replicas
//! share one queue); poll claims, worker leases and worker polls on the database's clock.

use crate::WorkStore;
use async_trait::async_trait;
use sqlx::postgres::Postgres;
use sqlx::{QueryBuilder, Row};

use super::clock::db_time;
use super::rows::{self, WORK_COLS};
use super::sink::Sink;
use super::{PgStore, push_scan};
use crate::{ExpiredWork, Scan, StoppedWork, StoreResult, WorkRecord, WorkStats, WorkTxn};
use mast_domain::time::Micros;

const SECOND: Micros = 1_000_000;

/// Pushes an insert of `w` unless its session already has a live item.
pub(super) fn push_ensure(qb: &mut impl Sink, w: &WorkRecord) {
    qb.sql(
        "INSERT INTO work_items (id, workspace_id, environment_id, session_id, state, metadata, \
         created_at, updated_at, ttl_seconds) SELECT ",
    )
    .arg(w.id.clone())
    .sql(", ")
    .arg(w.workspace_id.clone())
    .sql(", ")
    .arg(w.environment_id.clone())
    .sql(", ")
    .arg(w.session_id.clone())
    .sql(", 'queued', '{}'::json, ")
    .arg(w.created_at)
    .sql(", ")
    .arg(w.created_at)
    .sql(", ")
    .arg(w.ttl_seconds)
    .sql(" WHERE NOT EXISTS (SELECT 1 FROM work_items WHERE session_id = ")
    .arg(w.session_id.clone())
    .sql(" AND state <> 'stopped')");
}

#[async_trait]
impl WorkStore for PgStore {
    async fn work_for_token(&self, token_hash: &str) -> StoreResult<Option<WorkRecord>> {
        // Stopped items stay findable: their holder may still heartbeat (and hear `stopped`)
        // or stop them (409), though nothing else.
        let row = sqlx::query(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE token_hash = $1"
        ))
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await?;
        let stamp = self.clock.stamp();
        row.map(|r| rows::work(&r, &stamp)).transpose()
    }

    async fn poll_work(
        &self,
        environment_id: &str,
        worker_id: Option<&str>,
        now: Micros,
        reclaim_before: Micros,
        token_hash: &str,
    ) -> StoreResult<Option<WorkRecord>> {
        let stamp = self.clock.stamp();
        // One statement: the worker's poll is recorded (workers that give no
        // `Anthropic-Worker-ID` count as one anonymous worker: a session that waits on a worker
        // must be able to tell whether any is polling at all), and the oldest queued item
        // nobody polled, or whose poll is older than `reclaim_before`, is claimed.
        let row = sqlx::query(&format!(
            "WITH p AS (INSERT INTO worker_polls (environment_id, worker_id, polled_at) \
             VALUES ($1, $2, {now}) \
             ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at = excluded.polled_at) \
             UPDATE work_items SET polled_at = {now}, polled_by = $5, token_hash = $6, updated_at = $7 \
             WHERE id = (SELECT id FROM work_items WHERE environment_id = $1 AND state = 'queued' \
             AND (polled_at IS NULL OR polled_at < {reclaim}) ORDER BY created_at, id LIMIT 1 \
             FOR UPDATE SKIP LOCKED) RETURNING {WORK_COLS}",
            now = db_time!("$3", "$4"),
            reclaim = db_time!("$8", "$4"),
        ))
        .bind(environment_id)
        .bind(worker_id.unwrap_or(""))
        .bind(stamp.at(now))
        .bind(stamp.expected)
        .bind(worker_id)
        .bind(token_hash)
        .bind(now)
        .bind(stamp.at(reclaim_before))
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| rows::work(&r, &stamp)).transpose()
    }

    async fn transact_work(
        &self,
        environment_id: &str,
        id: &str,
        f: WorkTxn,
    ) -> StoreResult<Option<WorkRecord>> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE environment_id = $1 AND id = $2 FOR UPDATE"
        ))
        .bind(environment_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let stamp = self.clock.stamp();
        let before = rows::work(&row, &stamp)?;
        let mut w = before.clone();
        f(&mut w)?;
        let mut qb = QueryBuilder::<Postgres>::new("UPDATE work_items SET ");
        let mut set = qb.separated(", ");
        set.push("state = ")
            .push_bind_unseparated(w.state.clone())
            .push("metadata = ")
            .push_bind_unseparated(w.metadata.clone())
            .push_unseparated("::json")
            .push("updated_at = ")
            .push_bind_unseparated(w.updated_at)
            .push("polled_by = ")
            .push_bind_unseparated(w.polled_by.clone())
            .push("acknowledged_at = ")
            .push_bind_unseparated(w.acknowledged_at)
            .push("started_at = ")
            .push_bind_unseparated(w.started_at)
            .push("latest_heartbeat_at = ")
            .push_bind_unseparated(w.latest_heartbeat_at)
            .push("ttl_seconds = ")
            .push_bind_unseparated(w.ttl_seconds)
            .push("stop_requested_at = ")
            .push_bind_unseparated(w.stop_requested_at)
            .push("stopped_at = ")
            .push_bind_unseparated(w.stopped_at)
            .push("token_hash = ")
            .push_bind_unseparated(w.token_hash.clone());
        // Clock-bound columns are written only when the decision moved them: carried over
        // and back unchanged they would pick up no error, but there is no need to risk it.
        for (column, old, new) in [
            ("polled_at", before.polled_at, w.polled_at),
            (
                "lease_expires_at",
                before.lease_expires_at,
                w.lease_expires_at,
            ),
        ] {
            if old != new {
                set.push(column).push_unseparated(" = ");
                match new {
                    Some(t) => {
                        set.push_unseparated("mast_time(")
                            .push_bind_unseparated(stamp.at(t))
                            .push_unseparated(", ")
                            .push_bind_unseparated(stamp.expected)
                            .push_unseparated(")");
                    }
                    None => {
                        set.push_unseparated("NULL");
                    }
                }
            }
        }
        // Stopped here: mark it in this transaction, so the follow-up (queue a fresh item when
        // the session still waits on a worker) survives a crash.
        if before.stopped_at.is_none() && w.stopped_at.is_some() {
            set.push("requeue_check = 1");
        }
        qb.push(" WHERE id = ").push_bind(w.id.clone());
        qb.build().execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(Some(w))
    }

    async fn get_work(&self, environment_id: &str, id: &str) -> StoreResult<Option<WorkRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE environment_id = $1 AND id = $2"
        ))
        .bind(environment_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let stamp = self.clock.stamp();
        row.map(|r| rows::work(&r, &stamp)).transpose()
    }

    async fn list_work(
        &self,
        environment_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<WorkRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {WORK_COLS} FROM work_items WHERE environment_id = "
        ));
        qb.push_bind(environment_id.to_string());
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        let stamp = self.clock.stamp();
        rows.iter().map(|r| rows::work(r, &stamp)).collect()
    }

    async fn work_stats(&self, environment_id: &str, now: Micros) -> StoreResult<WorkStats> {
        let stamp = self.clock.stamp();
        let row = sqlx::query(&format!(
            "SELECT \
               (SELECT COUNT(*) FROM work_items WHERE environment_id = $1 AND state = 'queued' AND polled_at IS NULL), \
               (SELECT COUNT(*) FROM work_items WHERE environment_id = $1 AND state = 'queued' AND polled_at IS NOT NULL), \
               (SELECT MIN(created_at) FROM work_items WHERE environment_id = $1 AND state = 'queued'), \
               (SELECT COUNT(*) FROM worker_polls WHERE environment_id = $1 AND polled_at > {since})",
            since = db_time!("$2", "$3"),
        ))
        .bind(environment_id)
        .bind(stamp.at(now - 30 * SECOND))
        .bind(stamp.expected)
        .fetch_one(&self.pool)
        .await?;
        Ok(WorkStats {
            depth: row.try_get(0)?,
            pending: row.try_get(1)?,
            oldest_queued_at: row.try_get(2)?,
            workers_polling: row.try_get(3)?,
        })
    }

    async fn requeue_expired_work(&self, now: Micros) -> StoreResult<ExpiredWork> {
        let stamp = self.clock.stamp();
        // One statement: expired leases go back to the queue, expired wind-downs stop (marked
        // for the requeue check), workers silent for an hour are forgotten.
        let requeued_in: Vec<String> = sqlx::query_scalar(&format!(
            "WITH r AS (UPDATE work_items SET state = 'queued', polled_at = NULL, polled_by = NULL, \
             acknowledged_at = NULL, started_at = NULL, latest_heartbeat_at = NULL, \
             lease_expires_at = NULL, updated_at = $1 \
             WHERE state IN ('starting', 'active') AND lease_expires_at < {now} RETURNING environment_id), \
             s AS (UPDATE work_items SET state = 'stopped', stopped_at = $1, lease_expires_at = NULL, \
             updated_at = $1, requeue_check = 1 WHERE state = 'stopping' AND lease_expires_at < {now}), \
             d AS (DELETE FROM worker_polls WHERE polled_at < {hour_ago}) \
             SELECT DISTINCT environment_id FROM r ORDER BY 1",
            now = db_time!("$2", "$3"),
            hour_ago = db_time!("$4", "$3"),
        ))
        .bind(now)
        .bind(stamp.at(now))
        .bind(stamp.expected)
        .bind(stamp.at(now - 3600 * SECOND))
        .fetch_all(&self.pool)
        .await?;
        Ok(ExpiredWork { requeued_in })
    }

    async fn work_needing_requeue_check(&self, limit: i64) -> StoreResult<Vec<StoppedWork>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, session_id FROM work_items WHERE requeue_check = 1 ORDER BY id LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(work_id, session_id)| StoppedWork {
                work_id,
                session_id,
            })
            .collect())
    }

    async fn clear_requeue_check(&self, work_id: &str) -> StoreResult<()> {
        sqlx::query("UPDATE work_items SET requeue_check = 0 WHERE id = $1")
            .bind(work_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn stop_session_work(
        &self,
        session_id: &str,
        now: Micros,
        graceful: bool,
    ) -> StoreResult<()> {
        let stop = "UPDATE work_items SET state = 'stopped', stopped_at = $1, \
             stop_requested_at = COALESCE(stop_requested_at, $1), lease_expires_at = NULL, \
             updated_at = $1 WHERE session_id = $2";
        let sql = if graceful {
            // Held items wind down: the holder hears `stopping` on its next heartbeat, and the
            // reaper stops the item when its lease runs out if the worker never confirms.
            // Queued ones stop at once.
            format!(
                "WITH g AS (UPDATE work_items SET state = 'stopping', stop_requested_at = $1, \
                 updated_at = $1 WHERE session_id = $2 AND state IN ('starting', 'active')) \
                 {stop} AND state = 'queued'"
            )
        } else {
            format!("{stop} AND state <> 'stopped'")
        };
        sqlx::query(&sql)
            .bind(now)
            .bind(session_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
