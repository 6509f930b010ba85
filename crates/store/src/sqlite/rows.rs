//! Typed rows: the column lists each record is read with, and the conversions.

use rusqlite::Row;
use rusqlite::types::Value;

use crate::{Direction, EventRecord, Scan, SessionRecord, StoreResult, ThreadRecord, WorkRecord};
use mast_domain::agent::Agent;
use mast_domain::time;

/// Session columns, the body joined from `session_bodies` (`s` and `b`).
pub(super) const SESSION_COLS: &str = "s.id, s.workspace_id, s.agent_id, s.agent_version, s.environment_id, \
    s.status, b.body, s.usage, s.active_micros, s.running_since, s.last_seq, s.engine, s.lease_owner, \
    s.lease_expires_at, s.created_at, s.updated_at, s.archived_at, s.terminated_at, \
    s.workflow_deadline_at";
/// The join [`SESSION_COLS`] reads from.
pub(super) const SESSION_FROM: &str = "sessions s JOIN session_bodies b ON b.session_id = s.id";
pub(super) const THREAD_COLS: &str = "id, session_id, parent_thread_id, spawning_event_id, status, body, \
    created_at, updated_at, archived_at";
pub(super) const EVENT_COLS: &str =
    "session_id, seq, id, thread_id, type, body, internal, processed_at, created_at";
pub(super) const WORK_COLS: &str = "id, workspace_id, environment_id, session_id, state, metadata, \
    created_at, updated_at, polled_at, polled_by, acknowledged_at, started_at, latest_heartbeat_at, \
    lease_expires_at, ttl_seconds, stop_requested_at, stopped_at, token_hash";
/// Agent columns (`a` agents, `v` agent_versions).
pub(super) const AGENT_COLS: &str = "a.archived_at, v.snapshot";

pub(super) fn session(r: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        agent_id: r.get(2)?,
        agent_version: r.get(3)?,
        environment_id: r.get(4)?,
        status: r.get(5)?,
        body: r.get_ref(6)?.as_str()?.into(),
        usage: r.get(7)?,
        active_micros: r.get(8)?,
        running_since: r.get(9)?,
        last_seq: r.get(10)?,
        engine: r.get(11)?,
        lease_owner: r.get(12)?,
        lease_expires_at: r.get(13)?,
        created_at: r.get(14)?,
        updated_at: r.get(15)?,
        archived_at: r.get(16)?,
        terminated_at: r.get(17)?,
        workflow_deadline_at: r.get(18)?,
        version: 0,
    })
}

pub(super) fn thread(r: &Row<'_>) -> rusqlite::Result<ThreadRecord> {
    Ok(ThreadRecord {
        id: r.get(0)?,
        session_id: r.get(1)?,
        parent_thread_id: r.get(2)?,
        spawning_event_id: r.get(3)?,
        status: r.get(4)?,
        body: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        archived_at: r.get(8)?,
    })
}

/// An event row as read; its JSON is parsed by [`RawEvent::parse`] outside rusqlite's
/// callback, where a parse error can be a store error.
pub(super) struct RawEvent {
    session_id: String,
    seq: i64,
    id: String,
    thread_id: Option<String>,
    kind: String,
    body: String,
    internal: Option<String>,
    processed_at: Option<i64>,
    created_at: i64,
}

pub(super) fn event(r: &Row<'_>) -> rusqlite::Result<RawEvent> {
    Ok(RawEvent {
        session_id: r.get(0)?,
        seq: r.get(1)?,
        id: r.get(2)?,
        thread_id: r.get(3)?,
        kind: r.get(4)?,
        body: r.get(5)?,
        internal: r.get(6)?,
        processed_at: r.get(7)?,
        created_at: r.get(8)?,
    })
}

impl RawEvent {
    pub(super) fn parse(self) -> StoreResult<EventRecord> {
        Ok(EventRecord {
            session_id: self.session_id,
            seq: self.seq,
            id: self.id,
            thread_id: self.thread_id,
            kind: self.kind,
            body: serde_json::from_str(&self.body)?,
            internal: self
                .internal
                .map(|s| serde_json::from_str(&s))
                .transpose()?,
            processed_at: self.processed_at,
            created_at: self.created_at,
        })
    }
}

pub(super) fn work(r: &Row<'_>) -> rusqlite::Result<WorkRecord> {
    Ok(WorkRecord {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        environment_id: r.get(2)?,
        session_id: r.get(3)?,
        state: r.get(4)?,
        metadata: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        polled_at: r.get(8)?,
        polled_by: r.get(9)?,
        acknowledged_at: r.get(10)?,
        started_at: r.get(11)?,
        latest_heartbeat_at: r.get(12)?,
        lease_expires_at: r.get(13)?,
        ttl_seconds: r.get(14)?,
        stop_requested_at: r.get(15)?,
        stopped_at: r.get(16)?,
        token_hash: r.get(17)?,
    })
}

/// `(archived_at, snapshot)` of an agent row.
pub(super) fn agent_raw(r: &Row<'_>) -> rusqlite::Result<(Option<i64>, String)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// The agent of an [`agent_raw`] row, with the agent-level archival applied.
pub(super) fn agent((archived, snapshot): (Option<i64>, String)) -> StoreResult<Agent> {
    let mut agent: Agent = serde_json::from_str(&snapshot)?;
    agent.archived_at = time::format_opt(archived);
    Ok(agent)
}

/// SQL text with `?` placeholders and their values, for statements with optional filters.
#[derive(Debug, Default)]
pub(super) struct Query {
    pub sql: String,
    pub args: Vec<Value>,
}

impl Query {
    /// Starts a statement.
    pub fn new(sql: &str) -> Self {
        Query {
            sql: sql.to_string(),
            args: Vec::new(),
        }
    }

    /// Appends literal SQL.
    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends a placeholder bound to `v`.
    pub fn bind(&mut self, v: impl Into<Value>) -> &mut Self {
        self.sql.push('?');
        self.args.push(v.into());
        self
    }

    /// Appends `(?, ?, …)` bound to the items.
    pub fn bind_list<T: Clone + Into<Value>>(&mut self, items: &[T]) -> &mut Self {
        self.push("(");
        for (i, v) in items.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(v.clone());
        }
        self.push(")")
    }

    /// Appends the keyset condition, order and limit of `scan` on `column`.
    pub fn scan<K: Clone + Into<Value>>(&mut self, column: &str, scan: &Scan<K>) -> &mut Self {
        let (op, order) = match scan.direction {
            Direction::Ascending => (" > ", " ASC"),
            Direction::Descending => (" < ", " DESC"),
        };
        if let Some(after) = &scan.after {
            self.push(" AND ").push(column).push(op).bind(after.clone());
        }
        self.push(" ORDER BY ").push(column).push(order);
        self.push(" LIMIT ").bind(scan.limit)
    }

    /// Runs the query, mapping each row with `f`.
    pub fn all<T>(
        &self,
        conn: &rusqlite::Connection,
        f: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<Vec<T>> {
        let mut stmt = conn.prepare_cached(&self.sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(self.args.iter()), f)?;
        rows.collect()
    }
}
