//! Sessions and threads: creation in one statement, reads, lists, deletion.

use crate::SessionStore;
use async_trait::async_trait;
use sqlx::postgres::Postgres;
use sqlx::{QueryBuilder, Row};

use super::rows::{self, SESSION_CLOCK, SESSION_COLS, SESSION_COLS_UNLESS_REV_2, THREAD_COLS};
use super::sink::Sink;
use super::{PgStore, events, push_scan, work};
use crate::{
    Deleted, EventRecord, NewEvent, Scan, SessionFilter, SessionRecord, StoreResult, ThreadRecord,
    WorkRecord,
};

/// Pushes an `INSERT` of one thread onto `qb`.
pub(super) fn push_insert_thread(qb: &mut impl Sink, t: &ThreadRecord) {
    qb.sql(
        "INSERT INTO threads (id, session_id, parent_thread_id, spawning_event_id, status, body, \
         created_at, updated_at, archived_at) VALUES (",
    )
    .arg(t.id.clone())
    .sql(", ")
    .arg(t.session_id.clone())
    .sql(", ")
    .arg(t.parent_thread_id.clone())
    .sql(", ")
    .arg(t.spawning_event_id.clone())
    .sql(", ")
    .arg(t.status.clone())
    .sql(", ")
    .arg(t.body.clone())
    .sql("::json, ")
    .arg(t.created_at)
    .sql(", ")
    .arg(t.updated_at)
    .sql(", ")
    .arg(t.archived_at)
    .sql(")");
}

impl PgStore {
    /// One session, by id within a workspace or (`None`) by id alone.
    pub(super) async fn get_session_pg(
        &self,
        workspace_id: Option<&str>,
        id: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        let before = self.clock.now();
        let (rev, known) = self.bodies.ask(id);
        let mut conn = self.hot.get().await?;
        let row = sqlx::query(&format!(
            "SELECT {SESSION_COLS_UNLESS_REV_2} FROM sessions \
             WHERE id = $1 AND ($3::text IS NULL OR workspace_id = $3)"
        ))
        .bind(id)
        .bind(rev)
        .bind(workspace_id)
        .fetch_optional(conn.conn())
        .await
        .map_err(crate::StoreError::from);
        let row = conn.finish(row)?;
        let Some(row) = row else { return Ok(None) };
        self.clock
            .observe(row.try_get(SESSION_CLOCK)?, before, self.clock.now());
        self.bodies
            .session(&row, &self.clock.stamp(), known)
            .map(Some)
    }
}

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(
        &self,
        s: &SessionRecord,
        t: &ThreadRecord,
        events: &[NewEvent],
        work: Option<&WorkRecord>,
    ) -> StoreResult<Vec<EventRecord>> {
        // One statement: the session, its primary thread, its first events (and its first
        // work item), so creating a session is one round trip.
        let stamp = self.clock.stamp();
        let mut qb = QueryBuilder::<Postgres>::new(
            "WITH s AS (INSERT INTO sessions (id, workspace_id, agent_id, agent_version, \
             environment_id, status, body, usage, active_micros, running_since, last_seq, engine, \
             created_at, updated_at, archived_at, terminated_at, lease_owner, lease_expires_at) VALUES (",
        );
        let mut v = qb.separated(", ");
        v.push_bind(s.id.clone())
            .push_bind(s.workspace_id.clone())
            .push_bind(s.agent_id.clone())
            .push_bind(s.agent_version)
            .push_bind(s.environment_id.clone())
            .push_bind(s.status.clone())
            .push_bind(s.body.to_string())
            .push_unseparated("::json")
            .push_bind(s.usage.clone())
            .push_unseparated("::json")
            .push_bind(s.active_micros)
            .push_bind(s.running_since)
            .push_bind(events.len() as i64)
            .push_bind(s.engine.clone())
            .push_unseparated("::json")
            .push_bind(s.created_at)
            .push_bind(s.updated_at)
            .push_bind(s.archived_at)
            .push_bind(s.terminated_at)
            .push_bind(s.lease_owner.clone());
        match s.lease_expires_at {
            Some(until) => {
                qb.push(", mast_time(")
                    .push_bind(stamp.at(until))
                    .push(", ")
                    .push_bind(stamp.expected)
                    .push(")");
            }
            None => {
                qb.push(", NULL");
            }
        }
        qb.push(")), t AS (");
        push_insert_thread(&mut qb, t);
        qb.push(")");
        if let Some(w) = work {
            qb.push(", w AS (");
            work::push_ensure(&mut qb, w);
            qb.push(")");
        }
        // Webhooks: `session.created` (and what the first events imply) in the same statement.
        let mut hooks = vec![crate::webhooks::WebhookEvent::new(
            "session.created",
            &s.workspace_id,
            &s.id,
        )];
        hooks.extend(crate::webhooks::session_events(
            &s.workspace_id,
            &s.id,
            events,
            false,
        ));
        qb.push(", wh AS (");
        super::webhooks::push_emit(&mut qb, &hooks, "", self.clock.now());
        qb.push(")");
        if events.is_empty() {
            qb.push(" SELECT 1");
        } else {
            qb.push(" ");
            events::push_insert(&mut qb, &s.id, 1, events, s.created_at)?;
        }
        qb.build().execute(&self.pool).await?;
        // A new row's body is at revision 0 (only an update bumps it): the first reads can
        // leave it out.
        self.bodies.keep(&s.id, 0, &s.body);
        Ok((1..)
            .zip(events.iter().cloned())
            .map(|(seq, e)| e.stored(&s.id, seq, s.created_at))
            .collect())
    }

    async fn get_session(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        self.get_session_pg(Some(workspace_id), id).await
    }

    async fn get_session_by_id(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        self.get_session_pg(None, id).await
    }

    async fn last_seqs(&self, ids: &[String]) -> StoreResult<Vec<(String, i64)>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        Ok(
            sqlx::query_as("SELECT id, last_seq FROM sessions WHERE id = ANY($1)")
                .bind(ids)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    async fn list_sessions(
        &self,
        workspace_id: &str,
        f: &SessionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SessionRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE workspace_id = "
        ));
        qb.push_bind(workspace_id.to_string());
        if let Some(a) = &f.agent_id {
            qb.push(" AND agent_id = ").push_bind(a.clone());
        }
        if let Some(v) = f.agent_version {
            qb.push(" AND agent_version = ").push_bind(v);
        }
        if !f.include_archived {
            qb.push(" AND archived_at IS NULL");
        }
        if let Some(m) = &f.memory_store_id {
            qb.push(
                " AND EXISTS (SELECT 1 FROM json_array_elements(body->'resources') r \
                 WHERE r->>'type' = 'memory_store' AND r->>'memory_store_id' = ",
            )
            .push_bind(m.clone())
            .push(")");
        }
        if let Some(d) = &f.deployment_id {
            qb.push(" AND body->>'deployment_id' = ")
                .push_bind(d.clone());
        }
        if !f.statuses.is_empty() {
            qb.push(" AND status = ANY(")
                .push_bind(f.statuses.clone())
                .push(")");
        }
        for (op, v) in [
            (" > ", f.created_gt),
            (" >= ", f.created_gte),
            (" < ", f.created_lt),
            (" <= ", f.created_lte),
        ] {
            if let Some(v) = v {
                qb.push(" AND created_at").push(op).push_bind(v);
            }
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        let stamp = self.clock.stamp();
        rows.iter()
            .map(|r| rows::session(r, &stamp, None))
            .collect()
    }

    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<Deleted> {
        // One statement: the session (unless running) with its threads and events, its
        // outputs' scope (they stay Files), and whether it existed at all; then its webhook
        // event, in the same transaction.
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(
            "WITH s AS (DELETE FROM sessions WHERE workspace_id = $1 AND id = $2 \
             AND status NOT IN ('running', 'rescheduling') RETURNING id), \
             e AS (DELETE FROM events WHERE session_id IN (SELECT id FROM s)), \
             t AS (DELETE FROM threads WHERE session_id IN (SELECT id FROM s)), \
             f AS (UPDATE files SET scope_id = NULL WHERE workspace_id = $1 AND scope_id IN (SELECT id FROM s)) \
             SELECT EXISTS (SELECT 1 FROM s), \
             EXISTS (SELECT 1 FROM sessions WHERE workspace_id = $1 AND id = $2)",
        )
        .bind(workspace_id)
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        let (deleted, exists): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
        if deleted {
            self.emit(
                &mut tx,
                &[crate::webhooks::WebhookEvent::new(
                    "session.deleted",
                    workspace_id,
                    id,
                )],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(match (deleted, exists) {
            (true, _) => Deleted::Yes,
            (false, true) => Deleted::Busy,
            (false, false) => Deleted::Missing,
        })
    }

    async fn list_threads(
        &self,
        session_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<ThreadRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {THREAD_COLS} FROM threads WHERE session_id = "
        ));
        qb.push_bind(session_id.to_string());
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(rows::thread).collect()
    }

    async fn get_thread(&self, session_id: &str, id: &str) -> StoreResult<Option<ThreadRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {THREAD_COLS} FROM threads WHERE session_id = $1 AND id = $2"
        ))
        .bind(session_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| rows::thread(&r)).transpose()
    }
}
