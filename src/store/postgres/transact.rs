//! The session transaction, the engine's hot path: lock the row, decide, then write
//! everything the decision produced in one statement (a `WITH` of the session's changed
//! columns, the new events, the consumed input, new threads and work) — three round trips in
//! all (`BEGIN` sent with the locking read, the write, `COMMIT`) whatever the decision holds.

use sqlx::postgres::{PgConnection, Postgres};
use sqlx::{Executor as _, QueryBuilder, Row};

use super::clock::Stamp;
use super::rows::{self, SESSION_CLOCK, SESSION_COLS};
use super::{PgStore, events, sessions, work};
use crate::domain::time;
use crate::store::{
    EventRecord, SessionRecord, SessionTxn, StoreError, StoreResult, TxnOutput, Writer,
};

/// Starts the next `WITH` part of the statement, named `name`.
fn part(qb: &mut QueryBuilder<'_, Postgres>, parts: &mut usize, name: &str) {
    qb.push(if *parts == 0 { "WITH " } else { ", " })
        .push(name)
        .push(" AS (");
    *parts += 1;
}

/// Pushes an `UPDATE` of the session's columns that `rec` changed from `before`; false
/// (nothing pushed) when none did. Unchanged columns are left out, so a large body (the
/// agent snapshot) is never rewritten: Postgres keeps it out of line (TOAST) and an update
/// that does not name it carries the stored value over without copying it.
fn push_session_update(
    qb: &mut QueryBuilder<'_, Postgres>,
    parts: &mut usize,
    before: &SessionRecord,
    rec: &SessionRecord,
    stamp: &Stamp,
) -> bool {
    let texts = [
        ("status", &before.status, &rec.status, ""),
        ("body", &before.body, &rec.body, "::json"),
        ("usage", &before.usage, &rec.usage, "::json"),
        ("engine", &before.engine, &rec.engine, "::json"),
    ];
    let ints = [
        ("active_micros", before.active_micros, rec.active_micros),
        ("last_seq", before.last_seq, rec.last_seq),
        ("updated_at", before.updated_at, rec.updated_at),
    ];
    let optional_ints = [
        ("running_since", before.running_since, rec.running_since),
        ("archived_at", before.archived_at, rec.archived_at),
        ("terminated_at", before.terminated_at, rec.terminated_at),
    ];
    let owner_changed = before.lease_owner != rec.lease_owner;
    let lease_changed = before.lease_expires_at != rec.lease_expires_at;
    let any = texts.iter().any(|(_, a, b, _)| a != b)
        || ints.iter().any(|(_, a, b)| a != b)
        || optional_ints.iter().any(|(_, a, b)| a != b)
        || owner_changed
        || lease_changed;
    if !any {
        return false;
    }
    part(qb, parts, "s");
    qb.push("UPDATE sessions SET ");
    let mut set = qb.separated(", ");
    for (column, old, new, cast) in texts {
        if old != new {
            set.push(column)
                .push_unseparated(" = ")
                .push_bind_unseparated(new.clone())
                .push_unseparated(cast);
        }
    }
    for (column, old, new) in ints {
        if old != new {
            set.push(column)
                .push_unseparated(" = ")
                .push_bind_unseparated(new);
        }
    }
    for (column, old, new) in optional_ints {
        if old != new {
            set.push(column)
                .push_unseparated(" = ")
                .push_bind_unseparated(new);
        }
    }
    if owner_changed {
        set.push("lease_owner = ")
            .push_bind_unseparated(rec.lease_owner.clone());
    }
    if lease_changed {
        // A deadline granted by the decision, carried onto the database's clock.
        match rec.lease_expires_at {
            Some(until) => {
                set.push("lease_expires_at = mast_time(")
                    .push_bind_unseparated(stamp.at(until))
                    .push_unseparated(", ")
                    .push_bind_unseparated(stamp.expected)
                    .push_unseparated(")");
            }
            None => {
                set.push("lease_expires_at = NULL");
            }
        }
    }
    qb.push(" WHERE id = ").push_bind(rec.id.clone()).push(")");
    true
}

impl PgStore {
    pub(super) async fn transact_pg(
        &self,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        // The id goes into the statement's text (see `lock_session`); no session has another.
        if !is_plain_id(session_id) {
            return Ok(None);
        }
        let started = std::time::Instant::now();
        let mut hot = self.hot.get().await?;
        let result = self.transact_on(hot.conn(), session_id, writer, f).await;
        if matches!(result, Ok(Some(_))) {
            hot.release();
        } else if hot.conn().execute("ROLLBACK").await.is_ok() {
            // Decided to write nothing, or refused: the connection is clean again.
            hot.release();
        }
        if result.as_ref().is_ok_and(Option::is_some) {
            metrics::histogram!(crate::telemetry::EVENT_APPEND_DURATION)
                .record(started.elapsed().as_secs_f64());
        }
        result
    }

    /// The transaction on `conn`; it commits only when it returns `Ok(Some(..))` and leaves
    /// the transaction open otherwise, for the caller to roll back. Three round trips:
    /// `BEGIN` with the locking read, the write, `COMMIT`.
    async fn transact_on(
        &self,
        conn: &mut PgConnection,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        let asked = time::now();
        // `BEGIN` and the locking read in one round trip: a simple-protocol query of two
        // statements (which cannot take parameters, hence the id in the text).
        let lock = format!(
            "BEGIN; SELECT {SESSION_COLS} FROM sessions WHERE id = '{session_id}' FOR UPDATE"
        );
        let row = conn.fetch_optional(sqlx::raw_sql(&lock)).await?;
        let Some(row) = row else { return Ok(None) };
        self.clock
            .observe(row.try_get(SESSION_CLOCK)?, asked, time::now());
        let stamp = self.clock.stamp();
        let before = rows::session(&row, &stamp)?;
        if let Writer::Runner { owner } = writer
            && before.lease_owner.as_deref() != Some(owner.as_str())
        {
            // Fencing: a runner whose lease moved on writes nothing more.
            return Err(StoreError::Fenced(format!(
                "runner {owner} no longer holds the lease of {session_id}"
            )));
        }
        let mut rec = before.clone();
        let out = f(&mut rec)?;
        let now = time::now();
        let first_seq = before.last_seq + 1;
        rec.last_seq = before.last_seq + out.events.len() as i64;

        let mut qb = QueryBuilder::<Postgres>::new("");
        let mut parts = 0;
        push_session_update(&mut qb, &mut parts, &before, &rec, &stamp);
        let events = if out.events.is_empty() {
            vec![]
        } else {
            part(&mut qb, &mut parts, "e");
            let stored = events::push_insert(&mut qb, session_id, first_seq, &out.events, now)?;
            qb.push(")");
            stored
        };
        // Parts of one statement do not see each other's rows: input consumed in the same
        // transaction that logs it, and a thread changed as it is created, are written after.
        let marks_new = out
            .mark_processed
            .iter()
            .any(|id| out.events.iter().any(|e| &e.id == id));
        // Nor can one statement change a row twice: repeated changes of a thread go in order.
        let changes_new = out.thread_changes.iter().enumerate().any(|(i, c)| {
            out.new_threads.iter().any(|t| t.id == c.id)
                || out.thread_changes[..i].iter().any(|d| d.id == c.id)
        });
        if !out.mark_processed.is_empty() && !marks_new {
            part(&mut qb, &mut parts, "m");
            push_mark_processed(&mut qb, session_id, &out, rec.last_seq, now);
            qb.push(")");
        }
        if let Some(w) = &out.ensure_work {
            part(&mut qb, &mut parts, "w");
            work::push_ensure(&mut qb, w);
            qb.push(")");
        }
        for (i, t) in out.new_threads.iter().enumerate() {
            part(&mut qb, &mut parts, &format!("t{i}"));
            sessions::push_insert_thread(&mut qb, t);
            qb.push(")");
        }
        if !changes_new {
            for (i, c) in out.thread_changes.iter().enumerate() {
                part(&mut qb, &mut parts, &format!("c{i}"));
                push_thread_change(&mut qb, session_id, c);
                qb.push(")");
            }
        }
        // Webhooks: the outbox rows of what this transaction changed, in its statement.
        let hooks = crate::store::webhooks::session_events(
            &rec.workspace_id,
            session_id,
            &out.events,
            before.archived_at.is_none() && rec.archived_at.is_some(),
        );
        if !hooks.is_empty() {
            part(&mut qb, &mut parts, "wh");
            super::webhooks::push_emit(&mut qb, &hooks, "");
            qb.push(")");
        }
        if parts > 0 {
            qb.push(" SELECT 1");
            qb.build().execute(&mut *conn).await?;
        }

        if marks_new {
            let mut qb = QueryBuilder::<Postgres>::new("");
            push_mark_processed(&mut qb, session_id, &out, rec.last_seq, now);
            qb.build().execute(&mut *conn).await?;
        }
        if changes_new {
            for c in &out.thread_changes {
                let mut qb = QueryBuilder::<Postgres>::new("");
                push_thread_change(&mut qb, session_id, c);
                qb.build().execute(&mut *conn).await?;
            }
        }
        if out.flush_queued {
            sqlx::query(
                "UPDATE events SET processed_at = $1, internal = '{\"discarded\":true}'::json \
                 WHERE session_id = $2 AND processed_at IS NULL",
            )
            .bind(now)
            .bind(session_id)
            .execute(&mut *conn)
            .await?;
        }
        conn.execute("COMMIT").await?;
        Ok(Some((rec, events)))
    }
}

/// Whether `id` is made only of the characters Mast's ids use, so it can stand in a
/// statement's text between single quotes.
fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Pushes the marking of consumed input: processed now, placed in the conversation after
/// everything logged so far (`after_seq`), whatever its sequence number (see
/// `engine::context`).
fn push_mark_processed(
    qb: &mut QueryBuilder<'_, Postgres>,
    session_id: &str,
    out: &TxnOutput,
    last_seq: i64,
    now: i64,
) {
    qb.push("UPDATE events SET processed_at = ")
        .push_bind(now)
        .push(", internal = ")
        .push_bind(serde_json::json!({ "after_seq": last_seq }).to_string())
        .push("::json WHERE session_id = ")
        .push_bind(session_id.to_string())
        .push(" AND processed_at IS NULL AND id = ANY(")
        .push_bind(out.mark_processed.clone())
        .push(")");
}

/// Pushes a thread's new status.
fn push_thread_change(
    qb: &mut QueryBuilder<'_, Postgres>,
    session_id: &str,
    c: &crate::store::ThreadChange,
) {
    qb.push("UPDATE threads SET status = ")
        .push_bind(c.status.clone())
        .push(", updated_at = ")
        .push_bind(c.updated_at)
        .push(", archived_at = ")
        .push_bind(c.archived_at)
        .push(" WHERE id = ")
        .push_bind(c.id.clone())
        .push(" AND session_id = ")
        .push_bind(session_id.to_string());
}
