//! A session's runner and the agent loop of each of its threads, driven by the model's
//! `stop_reason`. The primary thread and every delegate thread run the same loop, each with
//! its own agent, transcript and permissions.
//!
//! Every pass re-derives the next step from the log (plus the row's cached state), so a
//! runner that replaces a dead one continues exactly where the log says work stopped.
//!
//! - `task.rs`: the runner task (take the lease, drive, hand it back); `handle.rs`: what the
//!   engine tells a runner (input, interrupts, the waking transaction); `supervisor.rs`: the
//!   primary's loop and a loop per working delegate, in one task, started as its loops ask
//!   (`spawn_requests.rs`).
//! - This file: the loop's state, private to this module tree and grouped by what it is for.
//!   `pass.rs` is one pass and its order of precedence; the steps are `model_step.rs` (with
//!   `mcp_step.rs` for its MCP connections, and `call_sort.rs`, where a response's tool calls
//!   meet their policies),
//!   `tool_step.rs` (with `hook_step.rs`, `hook_after.rs`), `turn_stop.rs`, `compact.rs` and
//!   `outcome_grader.rs`; every write goes through `commit.rs`.

mod call_sort;
mod commit;
mod compact;
mod fork_checkpoint;
mod handle;
mod hook_after;
mod hook_step;
mod mcp_step;
mod model_step;
mod outcome_grader;
mod pass;
mod run_wait;
mod skill_note;
mod spawn_requests;
mod supervisor;
mod task;
mod tool_offer;
mod tool_step;
mod turn_stop;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::sync::Notify;

use crate::Inner;
use crate::context::Transcript;
use crate::delegation::Roster;
use crate::shared_agent::SharedAgent;
use commit::Carried;
use mast_domain::environment::EnvironmentConfig;
use mast_domain::session::SessionBody;
use mast_sandbox::SessionTools;
use mast_sandbox::egress::EgressPolicy;
use mast_store::{EventRecord, SessionRecord, StoreError, Writer};

pub(crate) use handle::{Handoff, InterruptsSeen, RunnerHandle};
pub(crate) use task::run;

/// Why a runner stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("lease lost to another owner")]
    LeaseLost,
    #[error("session no longer exists")]
    Gone,
    #[error("shutting down")]
    Shutdown,
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn store_err(e: StoreError) -> RunError {
    match e {
        StoreError::Fenced(_) => RunError::LeaseLost,
        e => RunError::Store(e),
    }
}

/// How a drive ended without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The session went idle and the transaction that idled it released the lease.
    Released,
    /// There was no work (the session or thread was not active); the lease is still held.
    NoWork,
}

/// What ended a wait on the model or a retry delay.
enum Waited<T> {
    Done(T),
    Interrupted,
}

/// Which thread a loop drives.
#[derive(Debug, Clone, PartialEq)]
enum Role {
    /// The session's own thread: its turn is the session's.
    Primary,
    /// A delegate (or advisor) thread, answering its parent.
    Child { name: String },
}

/// Signals between the loops of one session's runner.
struct Crew {
    /// Delegate threads whose loops should run (the supervisor starts each once).
    pub spawn: spawn_requests::SpawnRequests,
    /// A delegate's loop ended: the primary re-evaluates what it waits for.
    pub changed: Notify,
    /// The session's MCP connections, shared by its threads, closed when the runner ends.
    pub mcp: super::mcp::McpSet,
    /// What the session's workflow run threads returned (see `engine::workflow_runs`).
    pub texts: Arc<crate::workflow_runs::ResultTexts>,
}

/// One thread's loop. Its state is private to the runner's modules, in groups that say what
/// each part is for: what the loop drives, what it has read, what the turn has tallied, what
/// its tool calls use, and the shortcuts that save reading or writing what the log says.
struct Loop<'a> {
    inner: &'a Inner,
    handle: &'a RunnerHandle,
    crew: &'a Crew,
    scope: Scope,
    view: View,
    tally: Tally,
    kit: Kit,
    fast: Shortcuts,
}

/// What a loop drives, fixed for its life.
struct Scope {
    sid: String,
    /// Who the loop's writes are from (this replica's runner, fenced by its lease).
    writer: Writer,
    thread: String,
    /// The session's primary thread.
    primary: String,
    role: Role,
    /// Whom the primary thread may delegate to.
    roster: Option<Roster>,
    /// The agent this thread runs.
    agent: SharedAgent,
    body: Arc<SessionBody>,
    /// The session's workspace and environment, for the hooks' scopes.
    workspace_id: String,
    environment_id: String,
    /// The environment's network policy (permission checks, web tools).
    egress: EgressPolicy,
    /// Sandbox tools are run by the user's workers, not here (`self_hosted` environments).
    self_hosted: bool,
    /// The thread runs an agent of a workflow run (no `subagent_*` hooks are asked of it).
    workflow_run: bool,
}

/// What the loop has read of its thread's log.
struct View {
    /// This thread's events, in sequence order, from its last compaction boundary on (and
    /// the few before it `engine::trim` keeps).
    events: Vec<EventRecord>,
    /// The highest sequence number read (of any thread of the session).
    last_seq: i64,
    /// `events` folded into the model context, extended as events arrive.
    transcript: Transcript,
    /// The handle's interrupt count for this thread before the row was last read.
    seen_interrupts: u64,
    /// The last commit handed the lease back (the session went idle).
    released: bool,
    /// The engine state's workflow run notice count when the row was last read.
    run_notices: u64,
}

/// What the current turn has tallied.
#[derive(Default)]
struct Tally {
    /// Model requests this loop made.
    requests: u32,
    /// The session's usage when the loop first found it running (for the budget).
    usage_at_start: Option<String>,
}

/// What the thread's tool calls use, set up when first needed.
#[derive(Default)]
struct Kit {
    /// The session's built-in tools, set up when a call first runs.
    tools: Option<Arc<SessionTools>>,
    /// The MCP tools offered in this thread's last model request.
    mcp_offer: crate::mcp::Offer,
    /// `session.error` bodies of repositories that could not be cloned, not reported yet.
    repo_errors: Vec<serde_json::Value>,
}

/// Each of these saves a read or a write the log and the row could answer; each is checked
/// against the log or the row before it is trusted, and `MAST_CACHES=off` turns off the
/// caches they come from.
struct Shortcuts {
    /// The heap of `View::events`' contents (`engine::heap_size`), for the history cache's
    /// bound.
    known_bytes: usize,
    /// This loop consumed queued input (so what it knows is not kept; see `engine::history`).
    consumed_here: bool,
    /// The row the last commit returned, when that commit's events were the only ones since
    /// this loop last read the log: the next pass starts from it instead of reading the row
    /// and the log again (see [`Carried`]).
    carried: Option<Carried>,
    /// Long waits begun so far; a carried row is stale once a wait follows its commit.
    waits: AtomicU64,
    /// The row as this loop last read or committed it: the next commit decides on it and
    /// writes in one round trip unless the row has moved on since
    /// (`SessionTransactions::transact_from`).
    expected: Option<SessionRecord>,
    /// A `span.model_request_start` the transaction that woke the runner logged for this
    /// (primary) loop to issue (`engine::fast_start`); looked at by the first pass only.
    armed: Option<String>,
    /// That span, once the pass found it open and about to call the model: the request
    /// issues it instead of starting one.
    prestarted: Option<String>,
}

impl<'a> Loop<'a> {
    /// A loop for `thread` running `agent`, from the row `rec` read after the handle's
    /// interrupt count for `thread` was `seen_interrupts`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        inner: &'a Inner,
        handle: &'a RunnerHandle,
        crew: &'a Crew,
        rec: &SessionRecord,
        seen_interrupts: u64,
        thread: String,
        agent: SharedAgent,
        role: Role,
    ) -> Result<Self, RunError> {
        let body = inner.bodies.get(&rec.id, &rec.body)?;
        // What an earlier loop of this thread left (see `engine::history`); a log shorter
        // than it (a store restored from a backup) means it is not this log's.
        let known = inner
            .history
            .take(&rec.id, &thread)
            .filter(|k| k.last_seq <= rec.last_seq)
            .unwrap_or_default();
        let roster = match role {
            Role::Primary => Roster::of(&agent).filter(|r| !r.is_empty()),
            Role::Child { .. } => None,
        };
        Ok(Loop {
            inner,
            handle,
            crew,
            scope: Scope {
                sid: rec.id.clone(),
                writer: Writer::Runner {
                    owner: inner.owner.clone(),
                },
                primary: body.primary_thread_id.clone(),
                egress: EgressPolicy::of(&body.environment),
                self_hosted: matches!(body.environment, EnvironmentConfig::SelfHosted),
                body,
                agent,
                thread,
                role,
                roster,
                workspace_id: rec.workspace_id.clone(),
                environment_id: rec.environment_id.clone(),
                workflow_run: false,
            },
            view: View {
                events: known.events,
                last_seq: known.last_seq,
                transcript: known.transcript,
                seen_interrupts,
                released: false,
                run_notices: 0,
            },
            tally: Tally::default(),
            kit: Kit::default(),
            fast: Shortcuts {
                known_bytes: known.bytes,
                consumed_here: false,
                carried: None,
                waits: AtomicU64::new(0),
                expected: None,
                armed: None,
                prestarted: None,
            },
        })
    }

    fn is_primary(&self) -> bool {
        self.scope.role == Role::Primary
    }
}
