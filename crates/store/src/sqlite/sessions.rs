//! Sessions, threads, their event logs and leases.

use super::SqliteStore;
use crate::{EventStore, LeaseStore, SessionStore, SessionTransactions};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use crate::webhooks::{WebhookEvent, session_events};

use super::rows::{self, EVENT_COLS, Query, SESSION_COLS, SESSION_FROM, THREAD_COLS};
use crate::{
    Deleted, EventFilter, EventRecord, NewEvent, OpsCounts, Scan, SessionFilter, SessionRecord,
    SessionTxn, StoreError, StoreResult, ThreadRecord, WorkRecord, Writer,
};
use mast_domain::time::Micros;

pub(super) fn insert_thread(conn: &Connection, t: &ThreadRecord) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO threads (id, session_id, parent_thread_id, spawning_event_id, status, body, created_at, updated_at, archived_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        t.id,
        t.session_id,
        t.parent_thread_id,
        t.spawning_event_id,
        t.status,
        t.body,
        t.created_at,
        t.updated_at,
        t.archived_at
    ])?;
    Ok(())
}

/// Appends `events` from `first_seq` on, one cached statement per row.
pub(super) fn insert_events(
    conn: &Connection,
    session_id: &str,
    first_seq: i64,
    events: Vec<NewEvent>,
    now: Micros,
) -> StoreResult<Vec<EventRecord>> {
    if events.is_empty() {
        return Ok(vec![]);
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO events (session_id, seq, id, thread_id, type, body, internal, answers, answer_kind, \
         processed_at, created_at, crosspost) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    let mut out = Vec::with_capacity(events.len());
    for (seq, e) in (first_seq..).zip(events) {
        let crosspost = i64::from(e.crossposts());
        stmt.execute(params![
            session_id,
            seq,
            e.id,
            e.thread_id,
            e.kind,
            serde_json::to_string(&e.body)?,
            e.internal.as_ref().map(serde_json::to_string).transpose()?,
            e.answers.as_ref().map(|a| a.0.as_str()),
            e.answers.as_ref().map(|a| a.1),
            e.processed_at,
            now,
            crosspost,
        ])?;
        out.push(e.stored(session_id, seq, now));
    }
    Ok(out)
}

pub(super) fn create_session(
    conn: &Connection,
    s: &SessionRecord,
    t: &ThreadRecord,
    events: Vec<NewEvent>,
    work: Option<&WorkRecord>,
) -> StoreResult<Vec<EventRecord>> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, workspace_id, agent_id, agent_version, environment_id, status, usage, \
         active_micros, running_since, last_seq, engine, created_at, updated_at, archived_at, terminated_at, \
         lease_owner, lease_expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?
    .execute(params![
        s.id,
        s.workspace_id,
        s.agent_id,
        s.agent_version,
        s.environment_id,
        s.status,
        s.usage,
        s.active_micros,
        s.running_since,
        events.len() as i64,
        s.engine,
        s.created_at,
        s.updated_at,
        s.archived_at,
        s.terminated_at,
        s.lease_owner,
        s.lease_expires_at,
    ])?;
    conn.prepare_cached("INSERT INTO session_bodies (session_id, body) VALUES (?1, ?2)")?
        .execute([&*s.id, &*s.body])?;
    insert_thread(conn, t)?;
    // Webhooks: `session.created` (and what the first events imply), in this transaction.
    let mut hooks = vec![WebhookEvent::new("session.created", &s.workspace_id, &s.id)];
    hooks.extend(session_events(&s.workspace_id, &s.id, &events, false));
    super::webhooks::emit(conn, &hooks)?;
    let out = insert_events(conn, &s.id, 1, events, s.created_at)?;
    if let Some(w) = work {
        super::work::ensure_work(conn, w)?;
    }
    Ok(out)
}

pub(super) fn get_session(
    conn: &Connection,
    ws: Option<&str>,
    id: &str,
) -> StoreResult<Option<SessionRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLS} FROM {SESSION_FROM} WHERE s.id = ?1 AND (?2 IS NULL OR s.workspace_id = ?2)"
        ))?
        .query_row(params![id, ws], rows::session)
        .optional()?)
}

pub(super) fn last_seqs(conn: &Connection, ids: &[String]) -> StoreResult<Vec<(String, i64)>> {
    let mut stmt = conn.prepare_cached("SELECT last_seq FROM sessions WHERE id = ?1")?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(seq) = stmt.query_row([id], |r| r.get(0)).optional()? {
            out.push((id.clone(), seq));
        }
    }
    Ok(out)
}

pub(super) fn list_sessions(
    conn: &Connection,
    ws: &str,
    f: &SessionFilter,
    scan: &Scan<String>,
) -> StoreResult<Vec<SessionRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {SESSION_COLS} FROM {SESSION_FROM} WHERE s.workspace_id = "
    ));
    q.bind(ws.to_string());
    if let Some(a) = &f.agent_id {
        q.push(" AND s.agent_id = ").bind(a.clone());
    }
    if let Some(v) = f.agent_version {
        q.push(" AND s.agent_version = ").bind(v);
    }
    if !f.include_archived {
        q.push(" AND s.archived_at IS NULL");
    }
    if let Some(m) = &f.memory_store_id {
        q.push(
            " AND EXISTS (SELECT 1 FROM json_each(b.body, '$.resources') r \
             WHERE json_extract(r.value, '$.type') = 'memory_store' \
             AND json_extract(r.value, '$.memory_store_id') = ",
        )
        .bind(m.clone())
        .push(")");
    }
    if let Some(d) = &f.deployment_id {
        q.push(" AND json_extract(b.body, '$.deployment_id') = ")
            .bind(d.clone());
    }
    if !f.statuses.is_empty() {
        q.push(" AND s.status IN ").bind_list(&f.statuses);
    }
    for (op, v) in [
        (" > ", f.created_gt),
        (" >= ", f.created_gte),
        (" < ", f.created_lt),
        (" <= ", f.created_lte),
    ] {
        if let Some(v) = v {
            q.push(" AND s.created_at").push(op).bind(v);
        }
    }
    q.scan("s.id", scan);
    Ok(q.all(conn, rows::session)?)
}

pub(super) fn delete_session(conn: &Connection, ws: &str, id: &str) -> StoreResult<Deleted> {
    let deleted = conn
        .prepare_cached(
            "DELETE FROM sessions WHERE workspace_id = ?1 AND id = ?2 AND status NOT IN ('running', 'rescheduling')",
        )?
        .execute([ws, id])?;
    if deleted == 0 {
        let exists = conn
            .prepare_cached("SELECT 1 FROM sessions WHERE workspace_id = ?1 AND id = ?2")?
            .exists([ws, id])?;
        return Ok(if exists {
            Deleted::Busy
        } else {
            Deleted::Missing
        });
    }
    for sql in [
        "DELETE FROM session_bodies WHERE session_id = ?1",
        "DELETE FROM events WHERE session_id = ?1",
        "DELETE FROM threads WHERE session_id = ?1",
    ] {
        conn.prepare_cached(sql)?.execute([id])?;
    }
    // Its outputs stay Files, no longer associated with a session that is gone.
    conn.prepare_cached(
        "UPDATE files SET scope_id = NULL WHERE workspace_id = ?1 AND scope_id = ?2",
    )?
    .execute([ws, id])?;
    super::webhooks::emit(conn, &[WebhookEvent::new("session.deleted", ws, id)])?;
    Ok(Deleted::Yes)
}

pub(super) fn list_threads(
    conn: &Connection,
    session_id: &str,
    scan: &Scan<String>,
) -> StoreResult<Vec<ThreadRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {THREAD_COLS} FROM threads WHERE session_id = "
    ));
    q.bind(session_id.to_string());
    q.scan("id", scan);
    Ok(q.all(conn, rows::thread)?)
}

pub(super) fn get_thread(
    conn: &Connection,
    session_id: &str,
    id: &str,
) -> StoreResult<Option<ThreadRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {THREAD_COLS} FROM threads WHERE session_id = ?1 AND id = ?2"
        ))?
        .query_row([session_id, id], rows::thread)
        .optional()?)
}

/// Writes the columns of `after` that differ from `before`, and nothing else: an append that
/// changes only `last_seq` and `updated_at` writes those two; the body, in its own table, is
/// written only when it changed.
fn write_changes(
    conn: &Connection,
    before: &SessionRecord,
    after: &SessionRecord,
) -> StoreResult<()> {
    use rusqlite::types::Value;
    let mut q = Query::new("UPDATE sessions SET ");
    let set = |q: &mut Query, column: &str, v: Value| {
        if !q.args.is_empty() {
            q.push(", ");
        }
        q.push(column).push(" = ").bind(v);
    };
    macro_rules! changed {
        ($($field:ident),*) => {
            $(if before.$field != after.$field {
                set(&mut q, stringify!($field), after.$field.clone().into());
            })*
        };
    }
    changed!(
        status,
        usage,
        active_micros,
        running_since,
        last_seq,
        engine,
        updated_at,
        archived_at,
        terminated_at,
        workflow_deadline_at,
        lease_owner,
        lease_expires_at
    );
    if !q.args.is_empty() {
        q.push(" WHERE id = ").bind(after.id.clone());
        conn.prepare_cached(&q.sql)?
            .execute(rusqlite::params_from_iter(q.args.iter()))?;
    }
    if before.body != after.body {
        conn.prepare_cached("UPDATE session_bodies SET body = ?1 WHERE session_id = ?2")?
            .execute([&*after.body, &*after.id])?;
    }
    Ok(())
}

pub(super) fn transact(
    conn: &Connection,
    session_id: &str,
    writer: &Writer,
    f: SessionTxn,
) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
    let Some(before) = get_session(conn, None, session_id)? else {
        return Ok(None);
    };
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
    let now = super::clock::now(conn)?;
    let first_seq = before.last_seq + 1;
    rec.last_seq = before.last_seq + out.events.len() as i64;
    write_changes(conn, &before, &rec)?;
    // Webhooks: the outbox rows of what this transaction changed.
    let hooks = session_events(
        &rec.workspace_id,
        session_id,
        &out.events,
        before.archived_at.is_none() && rec.archived_at.is_some(),
    );
    super::webhooks::emit(conn, &hooks)?;
    let events = insert_events(conn, session_id, first_seq, out.events, now)?;
    if !out.mark_processed.is_empty() {
        // Consumed input takes its place in the conversation after everything logged so
        // far, whatever its sequence number (see engine::context).
        let position = serde_json::json!({ "after_seq": rec.last_seq }).to_string();
        let mut stmt = conn.prepare_cached(
            "UPDATE events SET processed_at = ?1, internal = ?2 \
             WHERE id = ?3 AND session_id = ?4 AND processed_at IS NULL",
        )?;
        for id in &out.mark_processed {
            stmt.execute(params![now, position, id, session_id])?;
        }
    }
    if let Some(w) = &out.ensure_work {
        super::work::ensure_work(conn, w)?;
    }
    for t in &out.new_threads {
        insert_thread(conn, t)?;
    }
    for c in &out.thread_changes {
        conn.prepare_cached(
            "UPDATE threads SET status = ?1, updated_at = ?2, archived_at = ?3 WHERE id = ?4 AND session_id = ?5",
        )?
        .execute(params![c.status, c.updated_at, c.archived_at, c.id, session_id])?;
    }
    if out.flush_queued {
        conn.prepare_cached(
            "UPDATE events SET processed_at = ?1, internal = ?2 WHERE session_id = ?3 AND processed_at IS NULL",
        )?
        .execute(params![now, r#"{"discarded":true}"#, session_id])?;
    }
    Ok(Some((rec, events)))
}

fn parse_events(raw: Vec<rows::RawEvent>) -> StoreResult<Vec<EventRecord>> {
    raw.into_iter().map(rows::RawEvent::parse).collect()
}

pub(super) fn list_events(
    conn: &Connection,
    session_id: &str,
    f: &EventFilter,
    scan: &Scan<i64>,
) -> StoreResult<Vec<EventRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {EVENT_COLS} FROM events WHERE session_id = "
    ));
    q.bind(session_id.to_string());
    if !f.types.is_empty() {
        q.push(" AND type IN ").bind_list(&f.types);
    }
    if let Some(t) = &f.thread_id {
        if f.crossposts {
            q.push(" AND (thread_id = ")
                .bind(t.clone())
                .push(" OR crosspost = 1)");
        } else {
            q.push(" AND thread_id = ").bind(t.clone());
        }
    }
    for (op, v) in [
        (" > ", f.processed_gt),
        (" >= ", f.processed_gte),
        (" < ", f.processed_lt),
        (" <= ", f.processed_lte),
    ] {
        if let Some(v) = v {
            q.push(" AND processed_at").push(op).bind(v);
        }
    }
    q.scan("seq", scan);
    parse_events(q.all(conn, rows::event)?)
}

pub(super) fn events_after(
    conn: &Connection,
    session_id: &str,
    after_seq: i64,
    kinds: &[String],
    limit: i64,
) -> StoreResult<Vec<EventRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {EVENT_COLS} FROM events WHERE session_id = "
    ));
    q.bind(session_id.to_string())
        .push(" AND seq > ")
        .bind(after_seq);
    if !kinds.is_empty() {
        q.push(" AND type IN ").bind_list(kinds);
    }
    q.push(" ORDER BY seq LIMIT ").bind(limit);
    parse_events(q.all(conn, rows::event)?)
}

pub(super) fn get_event(
    conn: &Connection,
    session_id: &str,
    id: &str,
) -> StoreResult<Option<EventRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {EVENT_COLS} FROM events WHERE id = ?2 AND session_id = ?1"
    ))?
    .query_row([session_id, id], rows::event)
    .optional()?
    .map(rows::RawEvent::parse)
    .transpose()
}

pub(super) fn has_answer(
    conn: &Connection,
    session_id: &str,
    id: &str,
    kind: &str,
) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM events WHERE session_id = ?1 AND answers = ?2 AND answer_kind = ?3",
        )?
        .exists([session_id, id, kind])?)
}

pub(super) fn claim_lease(
    conn: &Connection,
    session_id: &str,
    owner: &str,
    now: Micros,
    until: Micros,
) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE sessions SET lease_owner = ?1, lease_expires_at = ?2 WHERE id = ?3 \
             AND (lease_owner IS NULL OR lease_owner = ?1 OR lease_expires_at < ?4)",
        )?
        .execute(params![owner, until, session_id, now])?
        == 1)
}

pub(super) fn renew_lease(
    conn: &Connection,
    session_id: &str,
    owner: &str,
    until: Micros,
) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE sessions SET lease_expires_at = ?1 WHERE id = ?2 AND lease_owner = ?3",
        )?
        .execute(params![until, session_id, owner])?
        == 1)
}

pub(super) fn release_lease(conn: &Connection, session_id: &str, owner: &str) -> StoreResult<()> {
    conn.prepare_cached(
        "UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL WHERE id = ?1 AND lease_owner = ?2",
    )?
    .execute([session_id, owner])?;
    Ok(())
}

pub(super) fn clear_foreign_leases(conn: &Connection, owner: &str) -> StoreResult<u64> {
    Ok(conn
        .prepare_cached(
            "UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE lease_owner IS NOT NULL AND lease_owner <> ?1",
        )?
        .execute([owner])? as u64)
}

pub(super) fn sessions_needing_runner(
    conn: &Connection,
    now: Micros,
    limit: i64,
) -> StoreResult<Vec<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT id FROM sessions WHERE status IN ('running', 'rescheduling') \
             AND (lease_owner IS NULL OR lease_expires_at < ?1) ORDER BY updated_at LIMIT ?2",
        )?
        .query_map([now, limit], |r| r.get(0))?
        .collect::<Result<_, _>>()?)
}

pub(super) fn sessions_with_expired_runs(
    conn: &Connection,
    now: Micros,
    limit: i64,
) -> StoreResult<Vec<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT id FROM sessions WHERE workflow_deadline_at <= ?1 AND status = 'idle' \
             AND archived_at IS NULL ORDER BY workflow_deadline_at LIMIT ?2",
        )?
        .query_map([now, limit], |r| r.get(0))?
        .collect::<Result<_, _>>()?)
}

pub(super) fn ops_counts(conn: &Connection) -> StoreResult<OpsCounts> {
    let sessions_by_status = conn
        .prepare_cached("SELECT status, COUNT(*) FROM sessions GROUP BY status")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let queued_work = conn
        .prepare_cached("SELECT COUNT(*) FROM work_items WHERE state = 'queued'")?
        .query_row([], |r| r.get(0))?;
    Ok(OpsCounts {
        sessions_by_status,
        queued_work,
    })
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(
        &self,
        session: &SessionRecord,
        thread: &ThreadRecord,
        events: &[NewEvent],
        work: Option<&WorkRecord>,
    ) -> StoreResult<Vec<EventRecord>> {
        let (s, t, events, w) = (
            session.clone(),
            thread.clone(),
            events.to_vec(),
            work.cloned(),
        );
        self.db
            .write(move |c| create_session(c, &s, &t, events, w.as_ref()))
            .await
    }

    async fn get_session(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.read(move |c| get_session(c, Some(&ws), &id)).await
    }

    async fn get_session_by_id(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        let id = id.to_string();
        self.db.read(move |c| get_session(c, None, &id)).await
    }

    async fn last_seqs(&self, ids: &[String]) -> StoreResult<Vec<(String, i64)>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let ids = ids.to_vec();
        self.db.read(move |c| last_seqs(c, &ids)).await
    }

    async fn list_sessions(
        &self,
        workspace_id: &str,
        filter: &SessionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SessionRecord>> {
        let (ws, filter, scan) = (workspace_id.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| list_sessions(c, &ws, &filter, &scan))
            .await
    }

    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<Deleted> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.write(move |c| delete_session(c, &ws, &id)).await
    }

    async fn list_threads(
        &self,
        session_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<ThreadRecord>> {
        let (sid, scan) = (session_id.to_string(), scan.clone());
        self.db.read(move |c| list_threads(c, &sid, &scan)).await
    }

    async fn get_thread(&self, session_id: &str, id: &str) -> StoreResult<Option<ThreadRecord>> {
        let (sid, id) = (session_id.to_string(), id.to_string());
        self.db.read(move |c| get_thread(c, &sid, &id)).await
    }
}

#[async_trait]
impl SessionTransactions for SqliteStore {
    async fn transact(
        &self,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        let started = std::time::Instant::now();
        let (sid, writer) = (session_id.to_string(), writer.clone());
        let out = self
            .db
            .write(move |c| transact(c, &sid, &writer, f))
            .await?;
        metrics::histogram!(crate::EVENT_APPEND_DURATION).record(started.elapsed().as_secs_f64());
        Ok(out)
    }
}

#[async_trait]
impl EventStore for SqliteStore {
    async fn list_events(
        &self,
        session_id: &str,
        filter: &EventFilter,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<EventRecord>> {
        let (sid, filter, scan) = (session_id.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| list_events(c, &sid, &filter, &scan))
            .await
    }

    async fn events_after(
        &self,
        session_id: &str,
        after_seq: i64,
        kinds: &[&str],
        limit: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let sid = session_id.to_string();
        let kinds: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
        self.db
            .read(move |c| events_after(c, &sid, after_seq, &kinds, limit))
            .await
    }

    async fn get_event(&self, session_id: &str, id: &str) -> StoreResult<Option<EventRecord>> {
        let (sid, id) = (session_id.to_string(), id.to_string());
        self.db.read(move |c| get_event(c, &sid, &id)).await
    }

    async fn has_answer(&self, session_id: &str, id: &str, kind: &str) -> StoreResult<bool> {
        let (sid, id, kind) = (session_id.to_string(), id.to_string(), kind.to_string());
        self.db.read(move |c| has_answer(c, &sid, &id, &kind)).await
    }
}

#[async_trait]
impl LeaseStore for SqliteStore {
    async fn claim_lease(
        &self,
        session_id: &str,
        owner: &str,
        now: Micros,
        until: Micros,
    ) -> StoreResult<bool> {
        let (sid, owner) = (session_id.to_string(), owner.to_string());
        self.db
            .write(move |c| claim_lease(c, &sid, &owner, now, until))
            .await
    }

    async fn renew_lease(&self, session_id: &str, owner: &str, until: Micros) -> StoreResult<bool> {
        let (sid, owner) = (session_id.to_string(), owner.to_string());
        self.db
            .write(move |c| renew_lease(c, &sid, &owner, until))
            .await
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> StoreResult<()> {
        let (sid, owner) = (session_id.to_string(), owner.to_string());
        self.db.write(move |c| release_lease(c, &sid, &owner)).await
    }

    async fn clear_foreign_leases(&self, owner: &str) -> StoreResult<u64> {
        let owner = owner.to_string();
        self.db
            .write(move |c| clear_foreign_leases(c, &owner))
            .await
    }

    async fn sessions_with_expired_runs(
        &self,
        now: Micros,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        self.db
            .read(move |c| sessions_with_expired_runs(c, now, limit))
            .await
    }

    async fn sessions_needing_runner(&self, now: Micros, limit: i64) -> StoreResult<Vec<String>> {
        self.db
            .read(move |c| sessions_needing_runner(c, now, limit))
            .await
    }
}
