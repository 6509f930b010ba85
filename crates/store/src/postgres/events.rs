//! The event log: appends as one multi-row `INSERT … SELECT FROM UNNEST(arrays)` (one
//! statement text whatever the count, so it stays prepared), reads by sequence number.

use crate::EventStore;
use async_trait::async_trait;
use sqlx::postgres::Postgres;
use sqlx::{QueryBuilder, Row};

use super::rows::{self, EVENT_COLS};
use super::sink::Sink;
use super::{PgStore, push_scan};
use crate::{EventFilter, EventRecord, NewEvent, Scan, StoreResult};
use mast_domain::time::Micros;

/// Pushes an `INSERT` of `events` (sequence numbers from `first_seq`) onto `qb`, to run
/// alone or as a `WITH` part of a larger statement ([`NewEvent::stored`] is what it stores).
pub(super) fn push_insert(
    qb: &mut impl Sink,
    session_id: &str,
    first_seq: i64,
    events: &[NewEvent],
    now: Micros,
) -> StoreResult<()> {
    let n = events.len();
    let mut seqs = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    let mut threads = Vec::with_capacity(n);
    let mut kinds = Vec::with_capacity(n);
    let mut bodies = Vec::with_capacity(n);
    let mut internals = Vec::with_capacity(n);
    let mut answers = Vec::with_capacity(n);
    let mut answer_kinds = Vec::with_capacity(n);
    let mut processed = Vec::with_capacity(n);
    let mut crossposts = Vec::with_capacity(n);
    for (i, e) in events.iter().enumerate() {
        seqs.push(first_seq + i as i64);
        ids.push(e.id.clone());
        threads.push(e.thread_id.clone());
        kinds.push(e.kind.clone());
        bodies.push(serde_json::to_string(&e.body)?);
        internals.push(e.internal.as_ref().map(serde_json::to_string).transpose()?);
        answers.push(e.answers.as_ref().map(|a| a.0.clone()));
        answer_kinds.push(e.answers.as_ref().map(|a| a.1.to_string()));
        processed.push(e.processed_at);
        crossposts.push(i64::from(e.crossposts()));
    }
    qb.sql(
        "INSERT INTO events (session_id, seq, id, thread_id, type, body, internal, answers, \
         answer_kind, processed_at, created_at, crosspost) \
         SELECT ",
    )
    .arg(session_id.to_string())
    .sql(
        ", u.seq, u.id, u.thread_id, u.type, u.body::json, u.internal::json, u.answers, \
         u.answer_kind, u.processed_at, ",
    )
    .arg(now)
    .sql(", u.crosspost FROM UNNEST(")
    .arg(seqs)
    .sql("::bigint[], ")
    .arg(ids)
    .sql("::text[], ")
    .arg(threads)
    .sql("::text[], ")
    .arg(kinds)
    .sql("::text[], ")
    .arg(bodies)
    .sql("::text[], ")
    .arg(internals)
    .sql("::text[], ")
    .arg(answers)
    .sql("::text[], ")
    .arg(answer_kinds)
    .sql("::text[], ")
    .arg(processed)
    .sql("::bigint[], ")
    .arg(crossposts)
    .sql(
        "::bigint[]) AS u (seq, id, thread_id, type, body, internal, answers, answer_kind, \
         processed_at, crosspost)",
    );
    Ok(())
}

#[async_trait]
impl EventStore for PgStore {
    async fn list_events(
        &self,
        session_id: &str,
        f: &EventFilter,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {EVENT_COLS} FROM events WHERE session_id = "
        ));
        qb.push_bind(session_id.to_string());
        if !f.types.is_empty() {
            qb.push(" AND type = ANY(")
                .push_bind(f.types.clone())
                .push(")");
        }
        if let Some(t) = &f.thread_id {
            qb.push(" AND (thread_id = ").push_bind(t.clone());
            if f.crossposts {
                qb.push(" OR crosspost = 1");
            }
            qb.push(")");
        }
        for (op, v) in [
            (" > ", f.processed_gt),
            (" >= ", f.processed_gte),
            (" < ", f.processed_lt),
            (" <= ", f.processed_lte),
        ] {
            if let Some(v) = v {
                qb.push(" AND processed_at").push(op).push_bind(v);
            }
        }
        push_scan(&mut qb, "seq", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(rows::event).collect()
    }

    async fn events_after(
        &self,
        session_id: &str,
        after_seq: i64,
        kinds: &[&str],
        limit: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut conn = self.hot.get().await?;
        // One statement text for every call (an empty `kinds` means all), so it stays prepared.
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLS} FROM events WHERE session_id = $1 AND seq > $2 \
             AND (cardinality($3::text[]) = 0 OR type = ANY($3)) ORDER BY seq LIMIT $4"
        ))
        .bind(session_id)
        .bind(after_seq)
        .bind(kinds)
        .bind(limit)
        .fetch_all(conn.conn())
        .await
        .map_err(crate::StoreError::from);
        let rows = conn.finish(rows)?;
        rows.iter().map(rows::event).collect()
    }

    async fn get_event(&self, session_id: &str, id: &str) -> StoreResult<Option<EventRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {EVENT_COLS} FROM events WHERE session_id = $1 AND id = $2"
        ))
        .bind(session_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| rows::event(&r)).transpose()
    }

    async fn has_answer(&self, session_id: &str, id: &str, kind: &str) -> StoreResult<bool> {
        let row = sqlx::query(
            "SELECT EXISTS (SELECT 1 FROM events WHERE session_id = $1 AND answers = $2 \
             AND answer_kind = $3)",
        )
        .bind(session_id)
        .bind(id)
        .bind(kind)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get(0)?)
    }
}
