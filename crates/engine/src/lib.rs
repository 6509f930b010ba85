//! The engine: the operations the API calls, and each session's loop, run as a task that owns the
//! session through a lease while it has work and exits when the session goes idle. It combines the
//! layers below it (store, sandbox, models) and knows nothing of HTTP.
//!
//! Appending input wakes the session's runner here; a reaper resumes sessions whose owner died
//! (expired lease), and at start-up every session left active is resumed from its log.
//!
//! # The front door
//!
//! The operations the API calls are methods of `Engine` (`ops` for sessions, threads, events and
//! the work queue; `deployments`, `vaults`, `hooks`, `webhooks` and the others beside it), so a
//! rule is decided once, here. Each owns its whole effect: one store transaction that decides it,
//! publishing what it committed to the hub, waking or interrupting runners, queueing self-hosted
//! work; and it returns a typed result or an `OpError` the API maps to its error body. Creating a
//! session is a pipeline of stages (check, resolve the agent and environment, draft, commit, in
//! `ops/create.rs`); a deployment checks its definition with the same stages
//! (`Engine::check_session_create`) and each firing goes through `Engine::create_session_from`.
//!
//! # Runners, leases and fencing
//!
//! A runner (`runner/`: the task in `task.rs`, its threads in `supervisor.rs`) runs the primary
//! thread's loop and a loop per working delegate thread in one task, under the session's one lease: cancelling it cancels every thread. The lease is
//! granted in the transaction that accepts the input, renewed by a heartbeat and handed back when
//! the turn ends or the process stops. Every write a runner makes goes through a transaction that
//! locks the session row and checks the lease; a runner that holds the row from its last read or
//! commit decides on that copy and writes only if the row is still at that version
//! (`SessionTransactions::transact_from`), so any other write in between, a lease taken over included, sends it
//! back to decide on the locked row. Store calls never wait on a lease renewal, which would wait on
//! the same row lock. A client's input takes the same one-round-trip path from the row this
//! replica's runner left when it let the session go (`held_rows.rs`, only where the store's locking
//! read costs a round trip: Postgres). Self-hosted environments hand sessions to workers through
//! the work queue (`work.rs`: queued → starting → active → stopping → stopped), whose items carry
//! leases of their own, renewed by worker heartbeats and requeued by the reaper when they lapse.
//!
//! # The loop
//!
//! `runner/mod.rs` is one thread's loop and its state, private to the runner's modules and
//! grouped by purpose (scope, view, tally, kit, shortcuts); `pass.rs` is one pass, and every
//! write goes through `commit.rs`. Each pass re-derives the next step from the log and the row;
//! the order of precedence is the doc comment of `Loop::run`. It is driven by the model's `stop_reason`, and policy (permission policies, disabled tools, hooks,
//! budgets, thread limits) is decided in code before any side effect (`permissions` and the tool
//! step), never by asking the model.
//!
//! What keeps a turn deep into a long session about as cheap as an early one:
//!
//! - A thread's conversation is folded from its log event by event (`context.rs`, a `Transcript`);
//!   each pass reads only the events appended since the last, and a model request borrows the
//!   fold's messages rather than copying them. A loop that ends cleanly leaves its events and fold
//!   in a per-replica cache (`history.rs`, bounded by the heap its entries really take, counted
//!   by `heap_size.rs`, and by entries), so the next wake reads only the log's tail; the module
//!   says why that is safe under lease loss and replicas. Past a compaction boundary, a loop and
//!   its entry keep only what follows it and the few events a look-up still needs (`trim.rs`),
//!   so a long, compacting session's state stays bounded. The fold
//!   also knows the JSON size of its leading messages and hands it to the provider
//!   (`mast_models::SizedPrefix`), so sizing a request costs only its new messages.
//! - A session's body (title, metadata, agent and environment snapshots) is parsed once per replica
//!   and kept while its stored text is unchanged (`bodies.rs`, bounded by size, entries in use kept
//!   first: `mast_store::lru`), with the tool definitions its agent offers. Creating a session
//!   keeps the body it has just serialised; what reads only the body's head (streams, threads, the
//!   intake) parses only that (`SessionBodyHead`); the primary thread's loop, the intake and every
//!   request share the parse (`shared_agent.rs`, `ModelRequest::tools`) rather than copying a long
//!   prompt and many tool schemas.
//! - A runner woken by a client's transaction starts from what it committed (`Handoff`), unless an
//!   interrupt was signalled since the transaction began (the handoff carries the process's
//!   interrupt epoch) or the runner's loops have seen that position already.
//! - When a turn's first model request is certain as its input is accepted (no queued input,
//!   budget, outcome, delegates or MCP servers; a routable model; a context under the compaction
//!   threshold), the accepting transaction logs `span.model_request_start` and tells this process's
//!   runner the span is its own to issue (`fast_start.rs`): one commit less per request a client
//!   starts. Without that word (a crash, a lease taken over) the span is an ordinary dangling
//!   request, closed and issued again.
//! - The steps only some turns take (a built-in or MCP tool call, hooks, outcome grading) are
//!   awaited boxed (`Box::pin`), so a runner's future holds their state only while they run: inline
//!   they made it 66 KB, boxed it is under 8 KB. A new step of that kind is boxed the same way
//!   (what 10,000 running sessions cost is in BENCHMARKS.md).
//!
//! The copies kept beside the log — the history, the parsed bodies and the fast start that relies
//! on them, the held rows, the Postgres store's known bodies, the hook lists and the API's key
//! lookups — are all off with `MAST_CACHES=off` ([`EngineConfig::caches`]). The integration suite
//! runs both ways in CI, so none of them may change what a client or the log sees.
//!
//! # Cost, budgets and outcomes
//!
//! Each recorded response is priced at its model's list prices (`mast_domain::prices`: built-in
//! Claude prices under configured ones, in integer nanodollars) and added to the session's and the
//! thread's spend in the same transaction. The list cost shown (`usage.list_cost`) adds web
//! searches and runtime and is rounded to the cent only when shown. The budget gate (`budget.rs`)
//! runs in the transaction that would start a model request: at the cap, or for a model with no
//! price, it ends the thread's turn with `budget_reached` and marks it paused (a primary waiting on
//! a paused delegate idles too); a session update that raises or removes the budget resumes every
//! paused thread in its own transaction. A model error no input can fix (the provider no longer
//! knows the session's model) ends the session with `retry_status: terminal` and
//! `session.status_terminated`.
//!
//! An outcome's state (`running` → `evaluating` → a result) lives in the engine state on the
//! session row, so it changes under the row lock and a crash resumes it; the rubric stays on the
//! `user.define_outcome` event (a file rubric is read and recorded as text before the transaction),
//! which starts a turn and so is taken only by an idle session with nothing pending. When the
//! primary thread would end its turn while an outcome is running, the deciding transaction starts
//! the evaluation instead (`outcomes.rs`); the next pass grades (`outcome_grader.rs`: the budget
//! gate, one grader request, one transaction with its usage and verdict; `satisfied` and `failed`
//! idle the session). The fold reads the task and rubric, and a `needs_revision` or
//! `max_iterations_reached` end (the feedback, or the request to wrap up), as user input, so no
//! event is rewritten. Any other idle of the session (an interrupt, a failed or refused turn,
//! termination) ends the active outcome with `interrupted` or `failed`; waiting on tool calls or
//! the budget keeps it.
//!
//! # Compaction
//!
//! Before a request on a user tail the loop estimates the context's tokens (`compaction.rs`) and,
//! past the threshold of the model's window, keeps a recent tail (never separating a `tool_use`
//! from its result), has the thread's model summarise the rest (`mast_models::summarise`) and
//! commits an `agent.thread_context_compacted` event whose private part holds the summary. The fold
//! applies it, so a cached fold, a fresh process and another replica reach the same context from
//! the log. A context that cannot be made to fit ends the turn with
//! `compaction_limit_reached_error`.
//!
//! # What a session's tools reach
//!
//! - MCP (`mcp`): each runner owns one `McpSet`, shared by its threads and dropped with it, so an
//!   idle session holds no connection. Servers connect in parallel before a request, tools get
//!   collision-free names (`mcp/naming.rs`), failures become `session.error`. A call takes the same
//!   permission decision, crash marker and interrupt handling as a built-in one, and always runs on
//!   the server, also for self-hosted environments. Bearer tokens come from the session's vaults
//!   (`vaults/bearers.rs`) before every connection and call: a stale token's connection is
//!   replaced, and a 401 refreshes an OAuth credential and retries once.
//! - Packages: a session's first `bash` call asks the sandbox's package layers for its
//!   environment's; a failed build becomes one `session.error` per runner (`runner/tool_step.rs`).
//! - Repositories (`repos.rs`): cloned into the workspace when a loop first sets up the session's
//!   tools; failures are `repository_*_error` events. Tokens are sealed with the server's key in
//!   the session body, which no view copies out.
//! - Files: `mounts.rs` copies `file` resources into the session's mount directory for read-only
//!   binds; `outputs.rs` turns what tools leave in `/mnt/session/outputs` into Files after each
//!   built-in call; `file_sources.rs` inlines `file` sources of image and document blocks in each
//!   request, so providers never see Mast's file ids.
//! - Memory stores (`memory_mount.rs`) are synced with their directories around every sandbox tool
//!   call, each change written against the baseline's hash so a lost race is refused, never
//!   applied. Skills (`skills.rs`) are unpacked once per version and bound read-only.
//!
//! # Hooks
//!
//! Hooks are asked at the step they concern, with no transaction or lock open (signed POSTs,
//! `standard_webhooks::SignedPoster`), and what they decided is recorded in the transaction that
//! records that step, so the log alone says what happened and a crash re-asks at most the
//! unrecorded step. `pre_tool_use` and `subagent_start` (`runner/hook_step.rs`) sit between a model
//! response and its recording, folded into the permission decision with
//! `mast_domain::hook_answer::combine` (deny > defer > ask > allow; a hook never loosens the
//! policy); the result is an ordinary `evaluated_permission` on the tool-use event, so the rest of
//! the loop enforces it unchanged, and a defer is a pending client tool answered by
//! `user.tool_result`. `stop`, `subagent_stop` and `post_tool_use` are in `hook_after.rs`: a
//! blocked stop leaves its reason in the response's span end (`internal.stop_hook`), which the fold
//! reads as the next user input, so the model is asked again on any replica; a `post_tool_use`
//! verdict is recorded with the call's result (the tool's own content, the verdicts in `hooks`, the
//! model's view in `internal.model_result`). `user_prompt_submit`, and the hooks of a client's
//! `user.tool_result` for a built-in call, are asked before the intake transaction
//! (`ops/input_hooks.rs`); a blocked prompt writes nothing. Failing to read the hooks is a store
//! error, never a verdict. The lists are cached per workspace and event (`hooks`), invalidated by
//! this process's changes and, on Postgres, by the store's signal; nothing is cached while that
//! signal cannot be heard, and no list is trusted for more than 30 s.
//!
//! # Fork and deployments
//!
//! A fork (`ops/fork.rs`) copies a clean prefix of the log (`fork_point.rs`: no call without its
//! result, no request without its end, no stop-hook turn without the model's answer, no input
//! consumed later) under new ids, rewriting every id of the copied set a body or private `internal`
//! names; copies keep their sequence numbers, so recorded positions stay true. The fork starts idle
//! with nothing pending, zero usage and spend, and the same budget; its session, threads and events
//! are written in one store transaction (`ForkStore::insert_fork`). Its workspace is the earliest
//! checkpoint at or after its end (`fork_checkpoint.rs`, taken before the first built-in call after
//! each `user.message`), else the live workspace; a checkpoint retention removed refuses the fork.
//! The copy is made before the rows are written and removed if writing fails.
//!
//! Deployments (`deployments`) are saved definitions checked as a session creation would be. Every
//! replica runs the scheduler (`deployments/scheduler.rs`): once a second it reads the due
//! deployments and claims each firing with one conditional update of `next_fire_at`, so exactly one
//! replica wins a slot; a unique index allows one run per slot besides. A run is recorded in one
//! transaction with its effects on the deployment.
//!
//! # Webhooks
//!
//! Outbox rows are written by the store in the transaction of the change they report
//! (`mast_store::webhooks`). Each replica runs one sender (`webhooks/sender.rs`) that leases due
//! deliveries, only each enabled endpoint's oldest pending one (so an endpoint gets them in order),
//! sends concurrently across endpoints through the tools' egress guard with a timeout, and records
//! each attempt: delivered (2xx), retried after a jittered exponential delay, or `failed` once the
//! retry period is over. Lease and retry times are on the database's clock on Postgres. A sender
//! that dies leaves its lease to expire and another sends the delivery again under the same
//! `webhook-id`: at least once, never lost. Signing secrets are sealed with the server's key;
//! during a rotation both secrets sign.
//!
//! # Shared pieces the API also uses
//!
//! `hub` (fan-out of committed events to stream subscribers, signals to other replicas, wake-ups
//! for workers polling the work queue), `files` (Files API operations: bytes in the blob store,
//! metadata in the store, kept in step), `secrets` (the cipher that seals vault, hook and webhook
//! secrets and repository tokens before the store sees them), `standard_webhooks` (signing, for
//! hooks and webhook deliveries) and `telemetry` (metric names and the recorder `/metrics`
//! renders). They live here because each combines the store with something else and both the engine
//! and the API need them. `cluster.rs` carries signals between replicas over the store's
//! `LISTEN/NOTIFY`.

pub mod backoff;
pub mod bodies;
pub mod budget;
mod cluster;
pub mod compaction;
pub mod context;
pub mod credentials;
pub mod delegation;
pub mod deployments;
mod fast_start;
mod file_sources;
pub mod files;
#[cfg(test)]
mod fixtures;
pub mod fork_point;
pub mod heap_size;
pub mod held_rows;
pub mod history;
/// The hooks service.
pub mod hooks;
pub mod hub;
pub mod intake;
pub mod keys;
pub mod mcp;
pub mod memory;
mod memory_mount;
mod mounts;
pub mod ops;
mod outputs;
pub mod permissions;
mod repos;
mod runner;
pub mod secrets;
mod shared_agent;
pub mod skills;
pub mod standard_webhooks;
pub mod state;
pub mod telemetry;
mod trim;
mod turn_end;
mod usage_report;
pub mod vaults;
pub mod work;
pub mod workflow_runs;
// Outcomes: their decisions under the row lock (the grading step is the runner's).
pub mod outcomes;
// Webhooks: endpoint management and the delivery task.
pub mod webhooks;

/// Errors of the store, as operations carry them ([`ops::OpError::Store`]).
pub use mast_store::StoreError;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::hub::Hub;
use mast_domain::ids::new_id;
use mast_domain::time;
use mast_models::Models;
use mast_store::Store;

/// Tunables of the loop and its leases.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long a lease lasts without renewal; a dead owner's sessions resume after this.
    pub lease_ttl: Duration,
    /// How often the reaper looks for sessions without a live owner.
    pub reap_interval: Duration,
    /// How often a replica re-checks the logs of the sessions streamed from it, in case a
    /// signal from another replica was lost.
    pub resync_interval: Duration,
    /// The turn limit (`MAST_MAX_TURNS`): the most model requests a thread makes before it
    /// must hear from the user again; reaching it ends the turn with
    /// `tool_use_limit_reached_error`.
    pub max_requests_per_turn: u32,
    /// How often a running session reports its usage (`MAST_USAGE_INTERVAL_MS`) besides at
    /// the end of each turn.
    pub usage_interval: Duration,
    /// List prices, for `usage.list_cost` and budgets.
    pub prices: mast_domain::prices::Prices,
    /// Retries of transient model errors before giving up on the turn.
    pub max_retries: u32,
    /// First retry delay; doubles per attempt up to `retry_cap`.
    pub retry_base: Duration,
    /// Longest retry delay, a provider's `Retry-After` included.
    pub retry_cap: Duration,
    /// `max_tokens` of each model request.
    pub max_tokens: u32,
    /// How many times a response cut by `max_tokens` (or paused) is continued.
    pub max_continuations: u32,
    /// Only one replica uses the store (SQLite): leases left by a previous process are
    /// taken over at start-up instead of waiting for them to expire.
    pub single_replica: bool,
    /// How long connecting to an MCP server (`initialize` and `tools/list`) may take.
    pub mcp_connect_timeout: Duration,
    /// How long one MCP tool call may take before it is cut off as an error.
    pub mcp_call_timeout: Duration,
    /// Outcomes: the grader's model and prompt, the heartbeat while grading.
    pub outcomes: outcomes::OutcomeConfig,
    /// Context compaction: context windows and the threshold that triggers a summary.
    pub compaction: compaction::CompactionConfig,
    /// Whether the engine keeps its caches (`MAST_CACHES`; on by default): the history, the
    /// parsed bodies, the held rows and the fast start that relies on them. Off, every
    /// answer and every log is the same and only the cost changes; the test suite runs
    /// both ways to prove it.
    pub caches: bool,
    /// How fast deployment schedules' slots come: by the minute, except in tests that read
    /// the minute field as seconds (`MAST_TEST_CRON_SECONDS=1`).
    pub cron_pace: mast_domain::schedule::Pace,
    /// Workflow runs' limits (`MAST_WORKFLOW_*`).
    pub workflows: WorkflowsConfig,
}

/// Workflow runs' settings.
#[derive(Debug, Clone, Default)]
pub struct WorkflowsConfig {
    /// The limits on plans and runs.
    pub limits: mast_domain::workflow::Limits,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            lease_ttl: Duration::from_secs(30),
            reap_interval: Duration::from_secs(5),
            resync_interval: Duration::from_secs(2),
            max_requests_per_turn: 100,
            usage_interval: Duration::from_secs(60),
            prices: Default::default(),
            max_retries: 4,
            retry_base: Duration::from_secs(1),
            retry_cap: Duration::from_secs(30),
            max_tokens: 16_000,
            max_continuations: 3,
            single_replica: false,
            mcp_connect_timeout: Duration::from_secs(10),
            mcp_call_timeout: Duration::from_secs(120),
            outcomes: Default::default(),
            compaction: Default::default(),
            caches: true,
            cron_pace: Default::default(),
            workflows: Default::default(),
        }
    }
}

pub(crate) struct Inner {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub models: Arc<Models>,
    pub toolbox: Arc<mast_sandbox::Toolbox>,
    /// Bearer tokens for MCP servers, from the sessions' vaults.
    pub credentials: Arc<dyn credentials::BearerSource>,
    /// The Files API's storage, for mounting file resources (absent in engines without it).
    pub files: Option<Arc<crate::files::Files>>,
    /// Seals repository tokens; why there is no key when there is none.
    pub secrets: Result<crate::secrets::Cipher, String>,
    pub config: EngineConfig,
    /// This process's lease owner id.
    pub owner: String,
    runners: Mutex<HashMap<String, Arc<runner::RunnerHandle>>>,
    /// What each thread's last loop knew of its log, so the next one reads only the tail.
    pub history: history::History,
    /// Sessions' bodies as last parsed, so a runner start does not parse the agent again.
    pub bodies: bodies::Bodies,
    /// Session rows as this process's runners left them, for the next client write.
    pub held_rows: held_rows::HeldRows,
    pub shutdown: CancellationToken,
    tasks: TaskTracker,
    /// Hooks asked about tool calls; None in engines built without them.
    pub hooks: Option<Arc<hooks::Hooks>>,
    /// Bumped by every interrupt signalled in this process (of any session), before the
    /// runner's counts: see [`runner::Handoff`].
    pub interrupt_epoch: AtomicU64,
}

impl Inner {
    /// The current time, on the clock the store was opened with.
    pub fn now(&self) -> time::Micros {
        self.store.clock().now()
    }
}

/// Handle to the engine; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl Engine {
    /// The current time, on the clock the store was opened with (the process's one clock).
    pub fn now(&self) -> time::Micros {
        self.inner.now()
    }

    /// The process's clock, for callers above the engine that stamp or wait on time.
    pub fn clock(&self) -> &mast_domain::clock::Clock {
        self.inner.store.clock()
    }

    /// Creates the engine; call [`Engine::start`] to resume work and begin reaping.
    pub fn new(
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        models: Arc<Models>,
        toolbox: Arc<mast_sandbox::Toolbox>,
        config: EngineConfig,
    ) -> Self {
        // The MCP client's TLS uses ring, as the rest of the server does; installing it
        // twice (several engines in one test process) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // A cache with a budget of zero keeps nothing: every entry is over it.
        let budget = |b: usize| if config.caches { b } else { 0 };
        let history = history::History::new(budget(history::DEFAULT_BUDGET));
        let bodies = bodies::Bodies::new(budget(bodies::DEFAULT_BUDGET));
        let held_rows = held_rows::HeldRows::new(
            budget(held_rows::MAX_ROWS),
            budget(held_rows::DEFAULT_BUDGET),
        );
        Engine {
            inner: Arc::new(Inner {
                store,
                hub,
                models,
                toolbox,
                credentials: Arc::new(credentials::NoCredentials),
                files: None,
                secrets: Err("no secret key was given to the engine".into()),
                config,
                owner: new_id("runner"),
                runners: Mutex::new(HashMap::new()),
                history,
                bodies,
                held_rows,
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                hooks: None,
                interrupt_epoch: AtomicU64::new(0),
            }),
        }
    }

    /// Replaces where MCP bearer tokens come from; call before the engine is cloned or started.
    pub fn with_credentials(mut self, source: Arc<dyn credentials::BearerSource>) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("with_credentials is called before the engine is shared")
            .credentials = source;
        self
    }

    /// Gives the engine the Files API's storage (file resources are mounted from it); call
    /// before the engine is cloned or started.
    pub fn with_files(mut self, files: Arc<crate::files::Files>) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("with_files is called before the engine is shared")
            .files = Some(files);
        self
    }

    /// Gives the engine the server's secret key (repository tokens are sealed with it), or
    /// why there is none; call before the engine is cloned or started.
    pub fn with_secrets(mut self, cipher: Result<crate::secrets::Cipher, String>) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("with_secrets is called before the engine is shared")
            .secrets = cipher;
        self
    }

    /// Gives the engine the hooks service: tool calls are put to the workspace's
    /// hooks before they run; call before the engine is cloned or started.
    pub fn with_hooks(mut self, hooks: Arc<hooks::Hooks>) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("with_hooks is called before the engine is shared")
            .hooks = Some(hooks);
        self
    }

    /// Resumes sessions left active and starts the reaper.
    pub async fn start(&self) -> anyhow::Result<()> {
        if self.inner.config.single_replica {
            let n = self
                .inner
                .store
                .clear_foreign_leases(&self.inner.owner)
                .await?;
            if n > 0 {
                tracing::info!(sessions = n, "took over leases left by a previous process");
            }
        }
        let engine = self.clone();
        self.inner
            .tasks
            .spawn(async move { engine.reap_forever().await });
        // Deployments: every replica runs the scheduler; the store decides who fires.
        self.start_deployment_scheduler();
        Ok(())
    }

    async fn reap_forever(&self) {
        let mut tick = tokio::time::interval(self.inner.config.reap_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tokio::select! {
                _ = self.inner.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Folds recorded histogram samples into their buckets; without it they pile up
            // in memory until the next scrape.
            crate::telemetry::handle().run_upkeep();
            match self
                .inner
                .store
                .sessions_needing_runner(self.now(), 500)
                .await
            {
                Ok(ids) => {
                    // The first pass runs at start-up: what it finds was left active before.
                    if std::mem::take(&mut first) && !ids.is_empty() {
                        tracing::info!(sessions = ids.len(), "resuming sessions left active");
                    }
                    ids.iter().for_each(|id| self.wake(id))
                }
                Err(e) => tracing::warn!(error = %e, "reaper could not list sessions"),
            }
            // Workflow runs whose lifetime ended in sessions no runner watches.
            self.expire_idle_runs().await;
            // Self-hosted items whose worker stopped heartbeating go back to the queue.
            match self.inner.store.requeue_expired_work(self.now()).await {
                Ok(expired) => {
                    for env in &expired.requeued_in {
                        self.inner.hub.work_queued(env);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "reaper could not requeue work"),
            }
            // Stopped items whose follow-up did not happen yet: a worker that never confirmed
            // its stop, or a stop whose process died before it could requeue the session.
            match self.inner.store.work_needing_requeue_check(100).await {
                Ok(stopped) => {
                    for item in &stopped {
                        self.settle_stopped_work(item).await;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "reaper could not list stopped work"),
            }
        }
    }

    /// Finishes a stopped work item: when its self-hosted session still waits on a worker's
    /// tool result (the worker let go mid-turn), a fresh item is queued so another worker
    /// finishes the call; then the item's mark is cleared. Safe to repeat, and on any replica:
    /// a session never has two live items.
    pub(crate) async fn settle_stopped_work(&self, item: &mast_store::StoppedWork) {
        let clock = self.inner.store.clock().clone();
        let txn = Box::new(move |rec: &mut mast_store::SessionRecord| {
            work::requeue_if_awaiting(rec, clock.now())
        });
        let requeued = self
            .inner
            .store
            .transact(&item.session_id, &mast_store::Writer::Client, txn)
            .await;
        match requeued {
            Ok(Some((rec, _))) => self.inner.hub.work_queued(&rec.environment_id),
            Ok(None) => {}
            Err(e) => {
                // The mark stays: the reaper tries again.
                tracing::warn!(session_id = %item.session_id, error = %e, "could not requeue a self-hosted session");
                return;
            }
        }
        if let Err(e) = self.inner.store.clear_requeue_check(&item.work_id).await {
            tracing::warn!(work_id = %item.work_id, error = %e, "could not clear a stopped item's mark");
        }
    }

    /// Tells the session's runner there is new input, starting one if none runs here.
    pub fn wake(&self, session_id: &str) {
        self.wake_with(session_id, None)
    }

    /// [`Engine::wake`], handing the runner what the waking transaction committed.
    pub(crate) fn wake_with(&self, session_id: &str, handoff: Option<runner::Handoff>) {
        if self.inner.shutdown.is_cancelled() {
            return;
        }
        let mut runners = self.inner.runners.lock().expect("runners lock");
        if let Some(h) = runners.get(session_id) {
            if let Some(ho) = handoff {
                h.hand_off(ho);
            }
            h.signal_input();
            return;
        }
        let handle = Arc::new(runner::RunnerHandle::default());
        if let Some(ho) = handoff {
            handle.hand_off(ho);
        }
        runners.insert(session_id.to_string(), handle.clone());
        let inner = self.inner.clone();
        let sid = session_id.to_string();
        // Every log line of the runner names its session.
        let span = tracing::info_span!("runner", session_id = %sid);
        // Boxed, so the spawn moves a pointer: the runner's future is kilobytes, and each
        // wake of an idle session spawns one.
        self.inner.tasks.spawn(tracing::Instrument::instrument(
            Box::pin(runner::run(inner, sid, handle)),
            span,
        ));
    }

    /// Cuts short whatever the session's runner is waiting on (a model stream, a retry
    /// delay, a tool) in `thread` — every thread when None — so it handles the interrupt
    /// recorded in the log, on whichever replica it runs.
    pub fn interrupt(&self, session_id: &str, thread: Option<&str>) {
        self.inner.hub.tell(crate::hub::Signal::Interrupt {
            session_id: session_id.to_string(),
            thread_id: thread.map(str::to_string),
        });
        self.interrupt_here(session_id, thread);
    }

    /// [`Engine::interrupt`] for this replica's runner only.
    fn interrupt_here(&self, session_id: &str, thread: Option<&str>) {
        // First, so a runner that finds the epoch unchanged is sure to see the count change.
        self.inner.interrupt_epoch.fetch_add(1, Ordering::SeqCst);
        let runners = self.inner.runners.lock().expect("runners lock");
        if let Some(h) = runners.get(session_id) {
            h.signal_interrupt(thread);
        }
    }

    /// A lease for this process's runner, for requests that give a session work; none while
    /// shutting down, so a dying process is never handed new sessions.
    pub(crate) fn lease_grant(&self) -> Option<state::LeaseGrant> {
        (!self.inner.shutdown.is_cancelled()).then(|| state::LeaseGrant {
            owner: self.inner.owner.clone(),
            until: self.now() + self.inner.config.lease_ttl.as_micros() as i64,
        })
    }

    /// Whether this process keeps a copy of session `id`'s row for the next client write
    /// (`engine::held_rows`).
    pub fn holds_row(&self, id: &str) -> bool {
        self.inner.held_rows.holds(id)
    }

    /// The credential lookups and key minting (what authentication reads).
    pub fn keys(&self) -> keys::Keys {
        keys::Keys::new(self.inner.store.clone())
    }

    /// Number of runner tasks alive in this process.
    pub fn active_runners(&self) -> usize {
        self.inner.runners.lock().expect("runners lock").len()
    }

    /// Stops the reaper and runners; runners release their leases so another replica (or the
    /// next start) resumes their sessions. Waits at most `grace`.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("runners did not stop within {grace:?}; their leases will expire");
        }
    }
}
