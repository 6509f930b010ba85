//! Session fork: the new session, its threads and its copied events, written by one job of
//! the writer thread (one transaction).

use super::SqliteStore;
use crate::ForkStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::sessions::{insert_events, insert_thread};
use crate::{NewEvent, SessionFork, StoreResult};

pub(super) fn insert_fork(conn: &Connection, fork: &SessionFork) -> StoreResult<()> {
    let s = &fork.session;
    conn.prepare_cached(
        "INSERT INTO sessions (id, workspace_id, agent_id, agent_version, environment_id, status, usage, \
         active_micros, running_since, last_seq, engine, created_at, updated_at, archived_at, terminated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
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
        fork.events.len() as i64,
        s.engine,
        s.created_at,
        s.updated_at,
        s.archived_at,
        s.terminated_at,
    ])?;
    conn.prepare_cached("INSERT INTO session_bodies (session_id, body) VALUES (?1, ?2)")?
        .execute([&*s.id, &*s.body])?;
    for t in &fork.threads {
        insert_thread(conn, t)?;
    }
    let copies: Vec<NewEvent> = fork.events.iter().map(|e| e.event.clone()).collect();
    insert_events(conn, &s.id, 1, copies, s.created_at)?;
    let mut mark = conn
        .prepare_cached("UPDATE events SET forked_from = ?3 WHERE session_id = ?1 AND id = ?2")?;
    for e in &fork.events {
        mark.execute(params![s.id, e.event.id, e.forked_from])?;
    }
    Ok(())
}

pub(super) fn event_forked_from(
    conn: &Connection,
    session_id: &str,
    id: &str,
) -> StoreResult<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT forked_from FROM events WHERE session_id = ?1 AND id = ?2")?
        .query_row([session_id, id], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

#[async_trait]
impl ForkStore for SqliteStore {
    // Session fork (Mast's own).

    async fn insert_fork(&self, fork: &crate::SessionFork) -> StoreResult<()> {
        let fork = fork.clone();
        self.db.write(move |c| insert_fork(c, &fork)).await
    }

    async fn event_forked_from(&self, session_id: &str, id: &str) -> StoreResult<Option<String>> {
        let (sid, id) = (session_id.to_string(), id.to_string());
        self.db.read(move |c| event_forked_from(c, &sid, &id)).await
    }
}
