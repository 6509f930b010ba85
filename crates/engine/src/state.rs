//! The engine state a session row caches from its log, read and written under the row lock:
//! which blocking events await answers, and whether an interrupt is pending.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use mast_domain::prices::Spend;
use mast_domain::session::SessionStatus;
use mast_domain::time::Micros;
use mast_store::{
    NewEvent, SessionRecord, StoreError, ThreadChange, ThreadRecord, TxnOutput, WorkRecord,
};

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
    /// An `agent.mcp_tool_use` (closed with an `agent.mcp_tool_result`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mcp: bool,
}

/// Cached engine state of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Delegate and advisor threads of a multiagent session, by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub threads: BTreeMap<String, ThreadRun>,
    /// Threads a decision created, for their rows; not stored.
    #[serde(skip)]
    pub created_threads: Vec<ThreadRecord>,
    /// What the session's model requests cost, every thread's included.
    #[serde(default, skip_serializing_if = "is_default")]
    pub spend: Spend,
    /// The session's budget cap in cents (the body keeps the wire object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_cents: Option<i64>,
    /// The primary thread stopped at the budget: raising it resumes the thread.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_paused: bool,
    /// When the last `session.usage` was emitted (see `usage_report`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_reported_at: Option<Micros>,
    /// Outcomes defined on the session, oldest first (see `engine::outcomes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<mast_domain::outcome::Outcome>,
    /// The session's workflow runs, open and ended, by id (see `engine::workflow_runs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workflow_runs: BTreeMap<String, crate::workflow_runs::Run>,
    /// The primary thread ended its turn while a workflow run was running: the session
    /// stays running without it until a run's end (or new input) gives it another turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub primary_parked: bool,
    /// The primary's turn failed (retries exhausted) while a workflow run was running, when
    /// this many run notices were logged: the session stays running for the run, and the
    /// primary makes no request until new input or a later notice gives it a turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_failed: Option<u64>,
    /// Workflow run notices logged for the primary agent so far: a model request built before
    /// the latest was logged is not started (its context would miss it), see
    /// `engine::workflow_runs`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub run_notices: u64,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

pub use mast_domain::thread::ThreadStatus;

/// The runtime state of a child thread, kept on the session row so every decision about it
/// happens under the session's lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRun {
    pub status: ThreadStatus,
    pub agent_name: String,
    /// A consult-only advisor thread: one turn, then it terminates.
    #[serde(default)]
    pub advisor: bool,
    /// An interrupt reached this thread while it worked.
    #[serde(default)]
    pub interrupt: bool,
    /// A built-in call this thread started and has not recorded a result for.
    #[serde(default)]
    pub running_tool: Option<String>,
    /// The parent's delegation calls this thread's next reply answers.
    #[serde(default)]
    pub replies_to: Vec<String>,
    #[serde(default)]
    pub usage: mast_domain::session::SessionUsage,
    /// Time spent running, and since when it runs now.
    #[serde(default)]
    pub active_micros: i64,
    #[serde(default)]
    pub running_since: Option<Micros>,
    /// The first status change (stats are null before it).
    #[serde(default)]
    pub started_at: Option<Micros>,
    /// When a client archived it.
    #[serde(default)]
    pub archived_at: Option<Micros>,
    /// What this thread's model requests cost.
    #[serde(default, skip_serializing_if = "is_default")]
    pub spend: Spend,
    /// Stopped at the session's budget: raising it resumes the thread.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_paused: bool,
    /// The workflow run whose agent this thread runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_run: Option<String>,
}

impl ThreadRun {
    /// A new thread, running its first task.
    pub fn new(agent_name: &str, advisor: bool, now: Micros) -> Self {
        ThreadRun {
            status: ThreadStatus::Running,
            agent_name: agent_name.to_string(),
            advisor,
            interrupt: false,
            running_tool: None,
            replies_to: vec![],
            usage: Default::default(),
            active_micros: 0,
            running_since: Some(now),
            started_at: Some(now),
            archived_at: None,
            spend: Spend::default(),
            budget_paused: false,
            workflow_run: None,
        }
    }

    /// Moves the thread to `status`, keeping its active time.
    pub fn set_status(&mut self, status: ThreadStatus, now: Micros) {
        if self.status.is_active() && !status.is_active() {
            if let Some(since) = self.running_since.take() {
                self.active_micros += (now - since).max(0);
            }
        } else if !self.status.is_active() && status.is_active() {
            self.running_since = Some(now);
        }
        self.started_at.get_or_insert(now);
        self.status = status;
    }

    /// Active seconds so far, including the current run.
    pub fn active_seconds(&self, now: Micros) -> f64 {
        let running = self.running_since.map_or(0, |s| (now - s).max(0));
        (self.active_micros + running) as f64 / 1_000_000.0
    }
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
        mast_domain::ids::new_id("work"),
        &rec.workspace_id,
        &rec.environment_id,
        &rec.id,
        now,
    )
}

impl EngineState {
    /// Whether an interrupt waits for `thread` (the primary's flag is the row's own).
    pub fn interrupt_of(&self, thread: &str) -> bool {
        match self.threads.get(thread) {
            Some(t) => t.interrupt,
            None => self.interrupt,
        }
    }

    /// Sets or clears `thread`'s interrupt flag.
    pub fn set_interrupt(&mut self, thread: &str, on: bool) {
        match self.threads.get_mut(thread) {
            Some(t) => t.interrupt = on,
            None => self.interrupt = on,
        }
    }

    /// The built-in call `thread` started and has not recorded a result for.
    pub fn running_tool_of(&self, thread: &str) -> Option<String> {
        match self.threads.get(thread) {
            Some(t) => t.running_tool.clone(),
            None => self.running_tool.clone(),
        }
    }

    /// Marks (or clears) `thread`'s running built-in call.
    pub fn set_running_tool(&mut self, thread: &str, id: Option<String>) {
        match self.threads.get_mut(thread) {
            Some(t) => t.running_tool = id,
            None => self.running_tool = id,
        }
    }

    /// Ids of `thread`'s blocking events still awaiting an answer.
    pub fn pending_ids_of(&self, thread: &str) -> Vec<String> {
        self.pending_of(thread).map(|p| p.id.clone()).collect()
    }

    /// Delegate threads that count against the limit: not archived or terminated, and not
    /// advisors or a workflow run's.
    pub fn open_delegates(&self) -> usize {
        self.threads
            .values()
            .filter(|t| {
                !t.advisor && t.workflow_run.is_none() && t.status != ThreadStatus::Terminated
            })
            .count()
    }

    /// Pending entries of one thread.
    pub fn pending_of(&self, thread: &str) -> impl Iterator<Item = &Pending> {
        self.pending.iter().filter(move |p| p.thread_id == thread)
    }

    /// Whether any child thread is running or retrying.
    pub fn children_active(&self) -> bool {
        self.threads.values().any(|t| t.status.is_active())
    }

    /// The child thread whose reply answers delegation call `call_id`.
    pub fn delegate_of(&self, call_id: &str) -> Option<(&String, &ThreadRun)> {
        self.threads
            .iter()
            .find(|(_, t)| t.replies_to.iter().any(|c| c == call_id))
    }

    /// Whether a self-hosted worker owes a tool result.
    pub fn awaits_worker(&self) -> bool {
        self.pending
            .iter()
            .any(|p| p.kind == PendingKind::ClientTool)
    }
}

/// A decision's row changes: stores `st` on the row and turns the child threads it created or
/// moved into thread-row writes.
pub fn output(
    rec: &mut SessionRecord,
    before: &EngineState,
    mut st: EngineState,
    events: Vec<NewEvent>,
    mark_processed: Vec<String>,
    now: Micros,
) -> Result<TxnOutput, StoreError> {
    let flush_queued = std::mem::take(&mut st.discard_queued);
    // The reaper finds a session whose workflow run outlived its lifetime by this column.
    rec.workflow_deadline_at = crate::workflow_runs::next_deadline(&st);
    let new_threads = std::mem::take(&mut st.created_threads);
    let thread_changes = st
        .threads
        .iter()
        .filter(|(id, _)| !new_threads.iter().any(|t| &t.id == *id))
        .filter(|(id, t)| {
            before
                .threads
                .get(*id)
                .is_none_or(|b| b.status != t.status || b.archived_at != t.archived_at)
        })
        .map(|(id, t)| ThreadChange {
            id: id.clone(),
            status: t.status.as_str().to_string(),
            updated_at: now,
            archived_at: t.archived_at,
        })
        .collect();
    st.store(rec)?;
    Ok(TxnOutput {
        events,
        mark_processed,
        ensure_work: None,
        new_threads,
        thread_changes,
        flush_queued,
    })
}
