//! Typed row decoding. Columns are read by position, in the order of the `*_COLS` lists
//! next to each decoder (a name lookup per column per row is measurable on the hot path);
//! JSON columns are selected as `::text` and parsed by serde where the record wants a value.

use std::sync::Arc;

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::clock::Stamp;
use crate::{EventRecord, SessionRecord, StoreError, StoreResult, ThreadRecord, WorkRecord};
use mast_domain::agent::Agent;
use mast_domain::time;

/// The session columns [`session`] decodes, with `$body` as the body's expression; the
/// column after the version is the body's revision (`body_rev`, see [`super::known_bodies`]).
/// `mast_clock()` reads the database's clock, so a single session read also checks this
/// process's clock offset.
macro_rules! session_cols {
    ($body:literal) => {
        concat!(
            "id, workspace_id, agent_id, agent_version, environment_id, status, ",
            $body,
            ", usage::text, active_micros, running_since, last_seq, engine::text, \
             lease_owner, lease_expires_at, created_at, updated_at, archived_at, terminated_at, \
             mast_clock(), xmin::text::bigint, body_rev, workflow_deadline_at"
        )
    };
}

/// Session columns for [`session`], the body always included.
pub(super) const SESSION_COLS: &str = session_cols!("body::text");

/// Session columns for [`session`], the body left out (`NULL`) when its revision is `$2`:
/// the reader holds that revision's body already.
pub(super) const SESSION_COLS_UNLESS_REV_2: &str =
    session_cols!("CASE WHEN body_rev = $2 THEN NULL ELSE body::text END");

/// Index of `mast_clock()` in the session columns.
pub(super) const SESSION_CLOCK: usize = 18;

/// Index of `body_rev` in the session columns.
const SESSION_BODY_REV: usize = 20;

/// A session row; the lease deadline comes back on the caller's clock. `known` is the body
/// the reader holds, which a row that left the body out stands for.
pub(super) fn session(
    row: &PgRow,
    stamp: &Stamp,
    known: Option<&Arc<str>>,
) -> StoreResult<SessionRecord> {
    let body = match row.try_get::<Option<&str>, _>(6)? {
        Some(text) => text.into(),
        None => known.cloned().ok_or_else(|| {
            StoreError::Internal(anyhow::anyhow!(
                "a session read left out a body its reader does not hold"
            ))
        })?,
    };
    Ok(SessionRecord {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        agent_id: row.try_get(2)?,
        agent_version: row.try_get(3)?,
        environment_id: row.try_get(4)?,
        status: row.try_get(5)?,
        body,
        usage: row.try_get(7)?,
        active_micros: row.try_get(8)?,
        running_since: row.try_get(9)?,
        last_seq: row.try_get(10)?,
        engine: row.try_get(11)?,
        lease_owner: row.try_get(12)?,
        lease_expires_at: row.try_get::<Option<i64>, _>(13)?.map(|t| stamp.back(t)),
        created_at: row.try_get(14)?,
        updated_at: row.try_get(15)?,
        archived_at: row.try_get(16)?,
        terminated_at: row.try_get(17)?,
        workflow_deadline_at: row.try_get(21)?,
        version: row.try_get(19)?,
    })
}

/// The body's revision in a session row, and whether the row carried the body itself.
pub(super) fn session_body_rev(row: &PgRow) -> StoreResult<(i64, bool)> {
    Ok((
        row.try_get(SESSION_BODY_REV)?,
        row.try_get::<Option<&str>, _>(6)?.is_some(),
    ))
}

/// Thread columns for [`thread`].
pub(super) const THREAD_COLS: &str = "id, session_id, parent_thread_id, spawning_event_id, status, \
    body::text, created_at, updated_at, archived_at";

/// A thread row.
pub(super) fn thread(row: &PgRow) -> StoreResult<ThreadRecord> {
    Ok(ThreadRecord {
        id: row.try_get(0)?,
        session_id: row.try_get(1)?,
        parent_thread_id: row.try_get(2)?,
        spawning_event_id: row.try_get(3)?,
        status: row.try_get(4)?,
        body: row.try_get(5)?,
        created_at: row.try_get(6)?,
        updated_at: row.try_get(7)?,
        archived_at: row.try_get(8)?,
    })
}

/// Event columns for [`event`].
pub(super) const EVENT_COLS: &str =
    "session_id, seq, id, thread_id, type, body::text, internal::text, processed_at, created_at";

/// An event row; its JSON parsed straight from the row's buffer.
pub(super) fn event(row: &PgRow) -> StoreResult<EventRecord> {
    let body: &str = row.try_get(5)?;
    let internal: Option<&str> = row.try_get(6)?;
    Ok(EventRecord {
        session_id: row.try_get(0)?,
        seq: row.try_get(1)?,
        id: row.try_get(2)?,
        thread_id: row.try_get(3)?,
        kind: row.try_get(4)?,
        body: serde_json::from_str(body)?,
        internal: internal.map(serde_json::from_str).transpose()?,
        processed_at: row.try_get(7)?,
        created_at: row.try_get(8)?,
    })
}

/// Agent columns for [`agent`] (`a` the agent, `v` the version).
pub(super) const AGENT_COLS: &str = "a.archived_at, v.snapshot::text";

/// An agent version, with the agent-level archival applied.
pub(super) fn agent(row: &PgRow) -> StoreResult<Agent> {
    let snapshot: &str = row.try_get(1)?;
    let mut agent: Agent = serde_json::from_str(snapshot)?;
    agent.archived_at = time::format_opt(row.try_get(0)?);
    Ok(agent)
}

/// Work item columns for [`work`].
pub(super) const WORK_COLS: &str = "id, workspace_id, environment_id, session_id, state, \
    metadata::text, created_at, updated_at, polled_at, polled_by, acknowledged_at, started_at, \
    latest_heartbeat_at, lease_expires_at, ttl_seconds, stop_requested_at, stopped_at, token_hash";

/// A work item; its poll time and lease deadline come back on the caller's clock.
pub(super) fn work(row: &PgRow, stamp: &Stamp) -> StoreResult<WorkRecord> {
    Ok(WorkRecord {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        environment_id: row.try_get(2)?,
        session_id: row.try_get(3)?,
        state: row.try_get(4)?,
        metadata: row.try_get(5)?,
        created_at: row.try_get(6)?,
        updated_at: row.try_get(7)?,
        polled_at: row.try_get::<Option<i64>, _>(8)?.map(|t| stamp.back(t)),
        polled_by: row.try_get(9)?,
        acknowledged_at: row.try_get(10)?,
        started_at: row.try_get(11)?,
        latest_heartbeat_at: row.try_get(12)?,
        lease_expires_at: row.try_get::<Option<i64>, _>(13)?.map(|t| stamp.back(t)),
        ttl_seconds: row.try_get(14)?,
        stop_requested_at: row.try_get(15)?,
        stopped_at: row.try_get(16)?,
        token_hash: row.try_get(17)?,
    })
}
