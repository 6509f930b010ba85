//! The work queue of self-hosted environments. The single writer serialises claims, so a
//! claim is a plain `UPDATE … RETURNING`.

use super::SqliteStore;
use crate::WorkStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::rows::{self, Query, WORK_COLS};
use crate::{ExpiredWork, Scan, StoppedWork, StoreResult, WorkRecord, WorkStats, WorkTxn};
use mast_domain::time::Micros;

/// Drops a deleted environment's keys and worker records and stops its items.
pub(super) fn forget_environment(conn: &Connection, env: &str, now: Micros) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM environment_keys WHERE environment_id = ?1")?
        .execute([env])?;
    conn.prepare_cached("DELETE FROM worker_polls WHERE environment_id = ?1")?
        .execute([env])?;
    conn.prepare_cached(
        "UPDATE work_items SET state = 'stopped', stopped_at = ?1, stop_requested_at = COALESCE(stop_requested_at, ?1), \
         lease_expires_at = NULL, updated_at = ?1 WHERE environment_id = ?2 AND state <> 'stopped'",
    )?
    .execute(params![now, env])?;
    Ok(())
}

/// Inserts `w` unless its session already has a live item.
pub(super) fn ensure_work(conn: &Connection, w: &WorkRecord) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO work_items (id, workspace_id, environment_id, session_id, state, metadata, created_at, updated_at, ttl_seconds) \
         SELECT ?1, ?2, ?3, ?4, 'queued', '{}', ?5, ?5, ?6 \
         WHERE NOT EXISTS (SELECT 1 FROM work_items WHERE session_id = ?4 AND state <> 'stopped')",
    )?
    .execute(params![w.id, w.workspace_id, w.environment_id, w.session_id, w.created_at, w.ttl_seconds])?;
    Ok(())
}

pub(super) fn insert_environment_key(
    conn: &Connection,
    id: &str,
    ws: &str,
    env: &str,
    hash: &str,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO environment_keys (id, workspace_id, environment_id, key_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![id, ws, env, hash, super::clock::now(conn)?])?;
    Ok(())
}

pub(super) fn list_environment_keys(
    conn: &Connection,
    env: &str,
) -> StoreResult<Vec<(String, Micros)>> {
    Ok(conn
        .prepare_cached(
            "SELECT id, created_at FROM environment_keys WHERE environment_id = ?1 ORDER BY created_at, id",
        )?
        .query_map([env], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?)
}

pub(super) fn delete_environment_key(conn: &Connection, env: &str, id: &str) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM environment_keys WHERE environment_id = ?1 AND id = ?2")?
        .execute([env, id])?
        > 0)
}

pub(super) fn environment_for_key(
    conn: &Connection,
    hash: &str,
) -> StoreResult<Option<(String, String)>> {
    // Joined so a key outliving its environment (however that happened) authenticates nothing.
    Ok(conn
        .prepare_cached(
            "SELECT k.workspace_id, k.environment_id FROM environment_keys k \
             JOIN environments e ON e.id = k.environment_id AND e.workspace_id = k.workspace_id WHERE k.key_hash = ?1",
        )?
        .query_row([hash], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

pub(super) fn work_for_token(conn: &Connection, hash: &str) -> StoreResult<Option<WorkRecord>> {
    // Stopped items stay findable: their holder may still heartbeat (and hear `stopped`)
    // or stop them (409), though nothing else.
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE token_hash = ?1"
        ))?
        .query_row([hash], rows::work)
        .optional()?)
}

pub(super) fn poll_work(
    conn: &Connection,
    env: &str,
    worker: Option<&str>,
    now: Micros,
    reclaim_before: Micros,
    token_hash: &str,
) -> StoreResult<Option<WorkRecord>> {
    // Workers that give no `Anthropic-Worker-ID` count as one anonymous worker: a session
    // that waits on a worker must be able to tell whether any is polling at all.
    conn.prepare_cached(
        "INSERT INTO worker_polls (environment_id, worker_id, polled_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (environment_id, worker_id) DO UPDATE SET polled_at = excluded.polled_at",
    )?
    .execute(params![env, worker.unwrap_or(""), now])?;
    Ok(conn
        .prepare_cached(&format!(
            "UPDATE work_items SET polled_at = ?1, polled_by = ?2, token_hash = ?3, updated_at = ?1 WHERE id = (\
             SELECT id FROM work_items WHERE environment_id = ?4 AND state = 'queued' AND (polled_at IS NULL OR polled_at < ?5) \
             ORDER BY created_at, id LIMIT 1) RETURNING {WORK_COLS}"
        ))?
        .query_row(params![now, worker, token_hash, env, reclaim_before], rows::work)
        .optional()?)
}

pub(super) fn get_work(conn: &Connection, env: &str, id: &str) -> StoreResult<Option<WorkRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {WORK_COLS} FROM work_items WHERE environment_id = ?1 AND id = ?2"
        ))?
        .query_row([env, id], rows::work)
        .optional()?)
}

pub(super) fn transact_work(
    conn: &Connection,
    env: &str,
    id: &str,
    f: WorkTxn,
) -> StoreResult<Option<WorkRecord>> {
    let Some(mut w) = get_work(conn, env, id)? else {
        return Ok(None);
    };
    let was_stopped = w.stopped_at.is_some();
    f(&mut w)?;
    // An item that stops now is marked for the follow-up check in the same transaction.
    let check = i64::from(!was_stopped && w.stopped_at.is_some());
    conn.prepare_cached(
        "UPDATE work_items SET state = ?1, metadata = ?2, updated_at = ?3, polled_at = ?4, polled_by = ?5, \
         acknowledged_at = ?6, started_at = ?7, latest_heartbeat_at = ?8, lease_expires_at = ?9, ttl_seconds = ?10, \
         stop_requested_at = ?11, stopped_at = ?12, token_hash = ?13, \
         requeue_check = CASE WHEN ?15 = 1 THEN 1 ELSE requeue_check END WHERE id = ?14",
    )?
    .execute(params![
        w.state,
        w.metadata,
        w.updated_at,
        w.polled_at,
        w.polled_by,
        w.acknowledged_at,
        w.started_at,
        w.latest_heartbeat_at,
        w.lease_expires_at,
        w.ttl_seconds,
        w.stop_requested_at,
        w.stopped_at,
        w.token_hash,
        w.id,
        check,
    ])?;
    Ok(Some(w))
}

pub(super) fn list_work(
    conn: &Connection,
    env: &str,
    scan: &Scan<String>,
) -> StoreResult<Vec<WorkRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {WORK_COLS} FROM work_items WHERE environment_id = "
    ));
    q.bind(env.to_string());
    q.scan("id", scan);
    Ok(q.all(conn, rows::work)?)
}

pub(super) fn work_stats(conn: &Connection, env: &str, now: Micros) -> StoreResult<WorkStats> {
    Ok(conn
        .prepare_cached(
            "SELECT \
               (SELECT COUNT(*) FROM work_items WHERE environment_id = ?1 AND state = 'queued' AND polled_at IS NULL), \
               (SELECT COUNT(*) FROM work_items WHERE environment_id = ?1 AND state = 'queued' AND polled_at IS NOT NULL), \
               (SELECT MIN(created_at) FROM work_items WHERE environment_id = ?1 AND state = 'queued'), \
               (SELECT COUNT(*) FROM worker_polls WHERE environment_id = ?1 AND polled_at > ?2)",
        )?
        .query_row(params![env, now - 30_000_000], |r| {
            Ok(WorkStats {
                depth: r.get(0)?,
                pending: r.get(1)?,
                oldest_queued_at: r.get(2)?,
                workers_polling: r.get(3)?,
            })
        })?)
}

pub(super) fn requeue_expired_work(conn: &Connection, now: Micros) -> StoreResult<ExpiredWork> {
    let mut requeued_in: Vec<String> = conn
        .prepare_cached(
            "UPDATE work_items SET state = 'queued', polled_at = NULL, polled_by = NULL, acknowledged_at = NULL, \
             started_at = NULL, latest_heartbeat_at = NULL, lease_expires_at = NULL, updated_at = ?1 \
             WHERE state IN ('starting', 'active') AND lease_expires_at < ?1 RETURNING environment_id",
        )?
        .query_map([now], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    conn.prepare_cached(
        "UPDATE work_items SET state = 'stopped', stopped_at = ?1, lease_expires_at = NULL, updated_at = ?1, \
         requeue_check = 1 WHERE state = 'stopping' AND lease_expires_at < ?1",
    )?
    .execute([now])?;
    conn.prepare_cached("DELETE FROM worker_polls WHERE polled_at < ?1")?
        .execute([now - 3_600_000_000])?;
    requeued_in.sort();
    requeued_in.dedup();
    Ok(ExpiredWork { requeued_in })
}

pub(super) fn work_needing_requeue_check(
    conn: &Connection,
    limit: i64,
) -> StoreResult<Vec<StoppedWork>> {
    Ok(conn
        .prepare_cached(
            "SELECT id, session_id FROM work_items WHERE requeue_check = 1 ORDER BY id LIMIT ?1",
        )?
        .query_map([limit], |r| {
            Ok(StoppedWork {
                work_id: r.get(0)?,
                session_id: r.get(1)?,
            })
        })?
        .collect::<Result<_, _>>()?)
}

pub(super) fn clear_requeue_check(conn: &Connection, work_id: &str) -> StoreResult<()> {
    conn.prepare_cached("UPDATE work_items SET requeue_check = 0 WHERE id = ?1")?
        .execute([work_id])?;
    Ok(())
}

pub(super) fn stop_session_work(
    conn: &Connection,
    session_id: &str,
    now: Micros,
    graceful: bool,
) -> StoreResult<()> {
    if graceful {
        // The holder hears `stopping` on its next heartbeat; the reaper stops the item
        // when its lease runs out if the worker never confirms.
        conn.prepare_cached(
            "UPDATE work_items SET state = 'stopping', stop_requested_at = ?1, updated_at = ?1 \
             WHERE session_id = ?2 AND state IN ('starting', 'active')",
        )?
        .execute(params![now, session_id])?;
    }
    conn.prepare_cached(
        "UPDATE work_items SET state = 'stopped', stopped_at = ?1, stop_requested_at = COALESCE(stop_requested_at, ?1), \
         lease_expires_at = NULL, updated_at = ?1 WHERE session_id = ?2 AND state <> 'stopped' \
         AND (?3 = 0 OR state = 'queued')",
    )?
    .execute(params![now, session_id, i64::from(graceful)])?;
    Ok(())
}

#[async_trait]
impl WorkStore for SqliteStore {
    async fn work_for_token(&self, token_hash: &str) -> StoreResult<Option<WorkRecord>> {
        let hash = token_hash.to_string();
        self.db.read(move |c| work_for_token(c, &hash)).await
    }

    async fn poll_work(
        &self,
        environment_id: &str,
        worker_id: Option<&str>,
        now: Micros,
        reclaim_before: Micros,
        token_hash: &str,
    ) -> StoreResult<Option<WorkRecord>> {
        let (env, worker, hash) = (
            environment_id.to_string(),
            worker_id.map(str::to_string),
            token_hash.to_string(),
        );
        self.db
            .write(move |c| poll_work(c, &env, worker.as_deref(), now, reclaim_before, &hash))
            .await
    }

    async fn transact_work(
        &self,
        environment_id: &str,
        id: &str,
        f: WorkTxn,
    ) -> StoreResult<Option<WorkRecord>> {
        let (env, id) = (environment_id.to_string(), id.to_string());
        self.db.write(move |c| transact_work(c, &env, &id, f)).await
    }

    async fn get_work(&self, environment_id: &str, id: &str) -> StoreResult<Option<WorkRecord>> {
        let (env, id) = (environment_id.to_string(), id.to_string());
        self.db.read(move |c| get_work(c, &env, &id)).await
    }

    async fn list_work(
        &self,
        environment_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<WorkRecord>> {
        let (env, scan) = (environment_id.to_string(), scan.clone());
        self.db.read(move |c| list_work(c, &env, &scan)).await
    }

    async fn work_stats(&self, environment_id: &str, now: Micros) -> StoreResult<WorkStats> {
        let env = environment_id.to_string();
        self.db.read(move |c| work_stats(c, &env, now)).await
    }

    async fn requeue_expired_work(&self, now: Micros) -> StoreResult<ExpiredWork> {
        self.db.write(move |c| requeue_expired_work(c, now)).await
    }

    async fn work_needing_requeue_check(&self, limit: i64) -> StoreResult<Vec<StoppedWork>> {
        self.db
            .read(move |c| work_needing_requeue_check(c, limit))
            .await
    }

    async fn clear_requeue_check(&self, work_id: &str) -> StoreResult<()> {
        let id = work_id.to_string();
        self.db.write(move |c| clear_requeue_check(c, &id)).await
    }

    async fn stop_session_work(
        &self,
        session_id: &str,
        now: Micros,
        graceful: bool,
    ) -> StoreResult<()> {
        let sid = session_id.to_string();
        self.db
            .write(move |c| stop_session_work(c, &sid, now, graceful))
            .await
    }
}
