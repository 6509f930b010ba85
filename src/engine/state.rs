//! The engine state a session row caches from its log, read and written under the row lock:
//! which blocking events await answers, and whether an interrupt is pending.

use serde::{Deserialize, Serialize};

use crate::domain::session::SessionStatus;
use crate::domain::time::Micros;
use crate::store::{SessionRecord, StoreError, WorkRecord};

/// What a blocking event waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// `agent.custom_tool_use`, answered by `user.custom_tool_result`.
    Custom,
    /// `agent.tool_use` with `evaluated_permission: ask`, answered by `user.tool_confirmation`.
    Confirmation,
    /// A self-hosted sandbox `agent.tool_use`, answered by `user.tool_result`.
    ClientTool,
}

/// One blocking event awaiting its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub id: String,
    pub kind: PendingKind,
    pub thread_id: String,
}

/// Cached engine state of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineState {
    #[serde(default)]
    pub pending: Vec<Pending>,
    /// An interrupt arrived while the runner was working; it acts on it at the next check.
    #[serde(default)]
    pub interrupt: bool,
    /// Input events (`user.message`, `system.message`) queued and not consumed yet.
    #[serde(default)]
    pub queued: u32,
    /// A built-in tool call the runner started and has not recorded a result for: after a
    /// crash it is closed with an error result, never run again.
    #[serde(default)]
    pub running_tool: Option<String>,
    /// Set by a decision that discards queued input (turn failed); not stored.
    #[serde(skip)]
    pub discard_queued: bool,
}

impl EngineState {
    /// Reads the row's cached state.
    pub fn of(rec: &SessionRecord) -> Result<Self, StoreError> {
        if rec.engine.is_empty() {
            return Ok(Self::default());
        }
        Ok(serde_json::from_str(&rec.engine)?)
    }

    /// Writes the state back into the row.
    pub fn store(&self, rec: &mut SessionRecord) -> Result<(), StoreError> {
        rec.engine = serde_json::to_string(self)?;
        Ok(())
    }

    /// Ids of blocking events still awaiting an answer.
    pub fn pending_ids(&self) -> Vec<String> {
        self.pending.iter().map(|p| p.id.clone()).collect()
    }

    /// Removes and returns the pending entry `id` of `kind`.
    pub fn take(&mut self, id: &str, kind: PendingKind) -> Option<Pending> {
        let i = self
            .pending
            .iter()
            .position(|p| p.id == id && p.kind == kind)?;
        Some(self.pending.remove(i))
    }
}

/// A lease handed to the local runner by whoever gives it work (a client request or the
/// session's creation), so the runner starts without a write of its own.
#[derive(Debug, Clone)]
pub struct LeaseGrant {
    pub owner: String,
    pub until: Micros,
}

/// Hands the lease to `grant.owner` unless another owner holds a live one (no grant: the
/// process is shutting down and leaves the session to the reaper of another).
pub fn grant_lease(rec: &mut SessionRecord, grant: Option<&LeaseGrant>, now: Micros) {
    let Some(grant) = grant else { return };
    let free = match (&rec.lease_owner, rec.lease_expires_at) {
        (None, _) => true,
        (Some(o), _) if *o == grant.owner => true,
        (Some(_), Some(t)) => t < now,
        (Some(_), None) => true,
    };
    if free {
        rec.lease_owner = Some(grant.owner.clone());
        rec.lease_expires_at = Some(grant.until);
    }
}

/// The session's status as stored.
pub fn status_of(rec: &SessionRecord) -> SessionStatus {
    SessionStatus::parse(&rec.status).unwrap_or(SessionStatus::Idle)
}

/// Moves the row to `status`, keeping active time: running time accrues while the session is
/// `running` or `rescheduling`.
pub fn set_status(rec: &mut SessionRecord, status: SessionStatus, now: Micros) {
    let was_active = status_of(rec).is_active();
    let active = status.is_active();
    if was_active && !active {
        if let Some(since) = rec.running_since.take() {
            rec.active_micros += (now - since).max(0);
        }
    } else if !was_active && active {
        rec.running_since = Some(now);
    }
    if status == SessionStatus::Terminated {
        rec.terminated_at = Some(now);
    }
    rec.status = status.as_str().to_string();
    rec.updated_at = now;
}

/// A work item for a self-hosted session, queued unless one is live (the store decides).
pub fn work_item_for(rec: &SessionRecord, now: Micros) -> WorkRecord {
    WorkRecord::queued(
        crate::domain::ids::new_id("work"),
        &rec.workspace_id,
        &rec.environment_id,
        &rec.id,
        now,
    )
}

impl EngineState {
    /// Whether a self-hosted worker owes a tool result.
    pub fn awaits_worker(&self) -> bool {
        self.pending
            .iter()
            .any(|p| p.kind == PendingKind::ClientTool)
    }
}
