//! Session fork: the new session, its threads and its copied events in one transaction.

use crate::ForkStore;
use async_trait::async_trait;
use sqlx::QueryBuilder;
use sqlx::postgres::Postgres;

use super::sessions::push_insert_thread;
use super::{PgStore, events};
use crate::{NewEvent, SessionFork, StoreResult};

#[async_trait]
impl ForkStore for PgStore {
    // Session fork (Mast's own).

    async fn insert_fork(&self, fork: &SessionFork) -> StoreResult<()> {
        let s = &fork.session;
        let mut tx = self.pool.begin().await?;
        // The session and its threads in one statement; a fork never holds a lease.
        let mut qb = QueryBuilder::<Postgres>::new(
            "WITH s AS (INSERT INTO sessions (id, workspace_id, agent_id, agent_version, \
             environment_id, status, body, usage, active_micros, running_since, last_seq, engine, \
             created_at, updated_at, archived_at, terminated_at) VALUES (",
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
            .push_bind(fork.events.len() as i64)
            .push_bind(s.engine.clone())
            .push_unseparated("::json")
            .push_bind(s.created_at)
            .push_bind(s.updated_at)
            .push_bind(s.archived_at)
            .push_bind(s.terminated_at);
        qb.push("))");
        for (i, t) in fork.threads.iter().enumerate() {
            qb.push(format!(", t{i} AS ("));
            push_insert_thread(&mut qb, t);
            qb.push(")");
        }
        qb.push(" SELECT 1");
        qb.build().execute(&mut *tx).await?;
        if !fork.events.is_empty() {
            let copies: Vec<NewEvent> = fork.events.iter().map(|e| e.event.clone()).collect();
            let mut qb = QueryBuilder::<Postgres>::new("");
            events::push_insert(&mut qb, &s.id, 1, &copies, s.created_at)?;
            qb.build().execute(&mut *tx).await?;
            let ids: Vec<String> = copies.into_iter().map(|e| e.id).collect();
            let from: Vec<String> = fork.events.iter().map(|e| e.forked_from.clone()).collect();
            sqlx::query(
                "UPDATE events e SET forked_from = u.f \
                 FROM UNNEST($1::text[], $2::text[]) AS u(id, f) \
                 WHERE e.session_id = $3 AND e.id = u.id",
            )
            .bind(ids)
            .bind(from)
            .bind(&s.id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn event_forked_from(&self, session_id: &str, id: &str) -> StoreResult<Option<String>> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT forked_from FROM events WHERE session_id = $1 AND id = $2")
                .bind(session_id)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.and_then(|r| r.0))
    }
}
