//! The engine: runs each session's loop as a task that owns the session through a lease
//! while it has work, and exits when the session goes idle.
//!
//! Appending input wakes the session's runner here; a reaper resumes sessions whose owner
//! died (expired lease), and at start-up every session left active is resumed from its log.

pub mod backoff;
pub mod bodies;
pub mod budget;
mod cluster;
mod commit;
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
mod fork_checkpoint;
pub mod fork_point;
pub mod held_rows;
pub mod history;
/// `post_tool_use`, `stop` and `subagent_stop` hooks in the loop.
mod hook_after;
/// `pre_tool_use` and `subagent_start` hooks in the loop.
mod hook_step;
/// The hooks service.
pub mod hooks;
pub mod hub;
pub mod intake;
pub mod mcp;
pub mod memory;
mod memory_mount;
mod model_step;
mod mounts;
pub mod ops;
mod outputs;
pub mod permissions;
mod repos;
pub mod secrets;
mod shared_agent;
pub mod skills;
pub mod standard_webhooks;
pub mod state;
mod supervisor;
pub mod telemetry;
mod tool_offer;
mod tool_step;
mod turn;
mod turn_end;
mod turn_stop;
mod usage_report;
pub mod vaults;
pub mod work;
// Outcomes: their decisions under the row lock, and the grading step.
mod outcome_grader;
pub mod outcomes;
// Webhooks: endpoint management and the delivery task.
pub mod webhooks;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
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
        }
    }
}

/// Signals to one session's runner.
#[derive(Default)]
pub(crate) struct RunnerHandle {
    /// New input arrived after the runner last looked.
    dirty: AtomicBool,
    /// Counts interrupts of every thread signalled to this runner; a wait compares its
    /// thread's count with the one it saw before reading the session, so a stale signal never
    /// cuts the next model request.
    all_interrupts: AtomicU64,
    /// Counts interrupts aimed at one thread.
    thread_interrupts: Mutex<HashMap<String, u64>>,
    interrupted: Notify,
    /// New input or answers arrived: a primary thread waiting on delegates looks again
    /// (a delegate may have become runnable).
    nudge: Notify,
    /// What the transaction that woke the runner committed, for its next start (see
    /// [`Handoff`]).
    handoff: Mutex<Option<Handoff>>,
    /// A model request the waking transaction started for the primary thread (see
    /// `engine::fast_start`), for the runner's next start; kept apart from the handoff, which
    /// may be dropped, since the loop checks it against the log itself.
    armed: Mutex<Option<String>>,
    /// The highest `last_seq` this runner's loops have read or committed: a handoff no newer
    /// than that is stale.
    seen_seq: std::sync::atomic::AtomicI64,
}

/// A committed client transaction handed to the runner it wakes, so the runner starts from
/// the row and events that transaction returned instead of reading them again.
///
/// The row stands for a read of the session at the transaction's commit. The loop's rule is
/// that interrupt counts are taken *before* the row is read (so an interrupt committed after
/// the read still cuts the next wait); here the read happened before the runner's snapshot,
/// so the handoff carries [`Inner::interrupt_epoch`] as it was before the transaction began,
/// and is used only while no interrupt was signalled in this process since then: an
/// interrupt committed after the transaction is signalled after it, so either it changed
/// the epoch before the runner's snapshot (the handoff is dropped and the row read as
/// usual) or it is counted on the runner's handle after that snapshot.
pub(crate) struct Handoff {
    /// The row as committed.
    pub rec: mast_store::SessionRecord,
    /// Every event the transaction appended.
    pub events: Vec<mast_store::EventRecord>,
    /// [`Inner::interrupt_epoch`] before the transaction began.
    pub epoch: u64,
    /// The `span.model_request_start` the transaction logged for the runner to issue
    /// (`engine::fast_start`).
    pub armed: Option<String>,
}

impl RunnerHandle {
    /// Interrupts that concern `thread` so far.
    pub(crate) fn interrupt_count(&self, thread: &str) -> u64 {
        let own = self
            .thread_interrupts
            .lock()
            .expect("interrupts lock")
            .get(thread)
            .copied()
            .unwrap_or(0);
        self.all_interrupts.load(Ordering::SeqCst) + own
    }

    /// Every thread's interrupt count now, for a loop that reads the session row next and
    /// does not know yet which thread it will drive.
    pub(crate) fn interrupts_seen(&self) -> InterruptsSeen {
        let threads = self
            .thread_interrupts
            .lock()
            .expect("interrupts lock")
            .clone();
        InterruptsSeen {
            all: self.all_interrupts.load(Ordering::SeqCst),
            threads,
        }
    }

    /// Notes that a loop of this runner read or committed the session at `last_seq`.
    pub(crate) fn saw_seq(&self, last_seq: i64) {
        self.seen_seq.fetch_max(last_seq, Ordering::SeqCst);
    }

    /// Leaves `h` for the runner's next start, unless a newer one is already there.
    fn hand_off(&self, mut h: Handoff) {
        if let Some(id) = h.armed.take() {
            *self.armed.lock().expect("armed lock") = Some(id);
        }
        let mut slot = self.handoff.lock().expect("handoff lock");
        if slot
            .as_ref()
            .is_none_or(|old| old.rec.last_seq < h.rec.last_seq)
        {
            *slot = Some(h);
        }
    }

    /// The handoff left for this start, if it is still current: no interrupt signalled since
    /// its transaction began (`epoch` is [`Inner::interrupt_epoch`] now, read after the
    /// runner's interrupt snapshot) and newer than anything this runner's loops saw.
    fn take_handoff(&self, epoch: u64) -> Option<Handoff> {
        let h = self.handoff.lock().expect("handoff lock").take()?;
        let newer = h.rec.last_seq > self.seen_seq.load(Ordering::SeqCst);
        (h.epoch == epoch && newer).then_some(h)
    }
}

/// The interrupt counts a runner saw before it read the session row: an interrupt signalled
/// after that read differs from them, so the loop's first wait still sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct InterruptsSeen {
    all: u64,
    threads: HashMap<String, u64>,
}

impl InterruptsSeen {
    /// The count [`RunnerHandle::interrupt_count`] gave for `thread` at the snapshot.
    pub(crate) fn count(&self, thread: &str) -> u64 {
        self.all + self.threads.get(thread).copied().unwrap_or(0)
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
    runners: Mutex<HashMap<String, Arc<RunnerHandle>>>,
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
    /// runner's counts: see [`Handoff`].
    pub interrupt_epoch: AtomicU64,
}

/// Handle to the engine; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl Engine {
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
                history: history::History::new(history::DEFAULT_BUDGET),
                bodies: bodies::Bodies::new(bodies::DEFAULT_BUDGET),
                held_rows: held_rows::HeldRows::new(held_rows::MAX_ROWS, held_rows::DEFAULT_BUDGET),
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
                .sessions_needing_runner(time::now(), 500)
                .await
            {
                Ok(ids) => ids.iter().for_each(|id| self.wake(id)),
                Err(e) => tracing::warn!(error = %e, "reaper could not list sessions"),
            }
            // Self-hosted items whose worker stopped heartbeating go back to the queue.
            match self.inner.store.requeue_expired_work(time::now()).await {
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
        let txn = Box::new(work::requeue_if_awaiting);
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
    pub(crate) fn wake_with(&self, session_id: &str, handoff: Option<Handoff>) {
        if self.inner.shutdown.is_cancelled() {
            return;
        }
        let mut runners = self.inner.runners.lock().expect("runners lock");
        if let Some(h) = runners.get(session_id) {
            if let Some(ho) = handoff {
                h.hand_off(ho);
            }
            h.dirty.store(true, Ordering::SeqCst);
            h.nudge.notify_one();
            return;
        }
        let handle = Arc::new(RunnerHandle::default());
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
            Box::pin(run(inner, sid, handle)),
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
            h.dirty.store(true, Ordering::SeqCst);
            match thread {
                None => {
                    h.all_interrupts.fetch_add(1, Ordering::SeqCst);
                }
                Some(t) => {
                    *h.thread_interrupts
                        .lock()
                        .expect("interrupts lock")
                        .entry(t.to_string())
                        .or_default() += 1;
                }
            }
            h.interrupted.notify_waiters();
        }
    }

    /// A lease for this process's runner, for requests that give a session work; none while
    /// shutting down, so a dying process is never handed new sessions.
    pub(crate) fn lease_grant(&self) -> Option<state::LeaseGrant> {
        (!self.inner.shutdown.is_cancelled()).then(|| state::LeaseGrant {
            owner: self.inner.owner.clone(),
            until: time::now() + self.inner.config.lease_ttl.as_micros() as i64,
        })
    }

    /// Whether this process keeps a copy of session `id`'s row for the next client write
    /// (`engine::held_rows`).
    pub fn holds_row(&self, id: &str) -> bool {
        self.inner.held_rows.holds(id)
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

/// A runner task: takes the lease (usually already granted by the request that woke it),
/// drives the loop until the session has no work, and exits without missing input that
/// arrives while it is exiting.
async fn run(inner: Arc<Inner>, sid: String, handle: Arc<RunnerHandle>) {
    let mut registration = Registration {
        inner: inner.clone(),
        sid: sid.clone(),
        removed: false,
    };
    loop {
        handle.dirty.store(false, Ordering::SeqCst);
        // Read before the row (the loop's rule): an interrupt recorded after `take_lease`
        // read the row must still cut the first model request.
        let seen = handle.interrupts_seen();
        // A handoff stands for a row read before the snapshot: see `Handoff` for why the
        // epoch, read after the snapshot, makes it as good as one read now.
        let handoff = handle.take_handoff(inner.interrupt_epoch.load(Ordering::SeqCst));
        let (taken, events) = match handoff.and_then(|h| Some((held(&inner, h.rec)?, h.events))) {
            Some((rec, events)) => (Ok(Some(rec)), Some(events)),
            None => (take_lease(&inner, &sid).await, None),
        };
        // Taken whatever this start finds: a later start no longer knows the span is new.
        let armed = handle.armed.lock().expect("armed lock").take();
        match taken {
            Ok(Some(rec)) => {
                handle.saw_seq(rec.last_seq);
                let released =
                    match supervisor::drive(&inner, &handle, rec, &seen, events, armed).await {
                        Ok(turn::Ended::Released) => true,
                        Ok(turn::Ended::NoWork) => false,
                        Err(e) => {
                            tracing::warn!(session_id = %sid, error = %e, "runner stopped");
                            if !matches!(e, turn::RunError::LeaseLost) {
                                tokio::select! {
                                    _ = inner.shutdown.cancelled() => {}
                                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                                }
                            }
                            false
                        }
                    };
                if !released && let Err(e) = inner.store.release_lease(&sid, &inner.owner).await {
                    tracing::warn!(session_id = %sid, error = %e, "could not release lease; it will expire");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(session_id = %sid, error = %e, "could not take lease"),
        }
        let mut runners = inner.runners.lock().expect("runners lock");
        if handle.dirty.load(Ordering::SeqCst) && !inner.shutdown.is_cancelled() {
            continue;
        }
        runners.remove(&sid);
        registration.removed = true;
        return;
    }
}

/// Removes a runner that died abnormally (a panic) from the map, so the next wake or the
/// reaper starts a fresh one instead of signalling a dead handle.
struct Registration {
    inner: Arc<Inner>,
    sid: String,
    removed: bool,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if !self.removed {
            tracing::error!(session_id = %self.sid, "session runner ended abnormally");
            if let Ok(mut runners) = self.inner.runners.lock() {
                runners.remove(&self.sid);
            }
        }
    }
}

/// `rec` if it shows the session active with this process's lease granted (as the
/// transaction that woke the runner leaves it).
fn held(inner: &Inner, rec: mast_store::SessionRecord) -> Option<mast_store::SessionRecord> {
    let now = time::now();
    let ttl = inner.config.lease_ttl.as_micros() as i64;
    let held = rec.lease_owner.as_deref() == Some(inner.owner.as_str())
        && rec.lease_expires_at.is_some_and(|t| t > now + ttl / 2);
    (held && state::status_of(&rec).is_active()).then_some(rec)
}

/// The session row if this process now holds its lease: granted with the work (no write
/// needed) or claimed here.
async fn take_lease(
    inner: &Inner,
    sid: &str,
) -> Result<Option<mast_store::SessionRecord>, mast_store::StoreError> {
    let Some(rec) = inner.store.get_session_by_id(sid).await? else {
        return Ok(None);
    };
    if !state::status_of(&rec).is_active() {
        return Ok(None);
    }
    let now = time::now();
    let ttl = inner.config.lease_ttl.as_micros() as i64;
    let held = rec.lease_owner.as_deref() == Some(inner.owner.as_str())
        && rec.lease_expires_at.is_some_and(|t| t > now + ttl / 2);
    if held {
        return Ok(Some(rec));
    }
    if inner
        .store
        .claim_lease(sid, &inner.owner, now, now + ttl)
        .await?
    {
        // The claim moved the row past any copy kept of it.
        inner.held_rows.forget(sid);
        if rec.lease_owner.as_deref().is_some_and(|o| o != inner.owner) {
            metrics::counter!(crate::telemetry::LEASE_TAKEOVERS).increment(1);
        }
        return Ok(Some(rec));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::{Handoff, RunnerHandle};

    fn handoff(last_seq: i64, epoch: u64) -> Handoff {
        let mut rec = crate::fixtures::session(
            mast_domain::session::SessionStatus::Running,
            &Default::default(),
            false,
        );
        rec.last_seq = last_seq;
        Handoff {
            rec,
            events: vec![],
            epoch,
            armed: None,
        }
    }

    #[test]
    fn a_handoff_is_taken_only_while_current() {
        // (handed at last_seq, epoch when handed, epoch at the runner's start, the runner's
        // loops saw up to) -> taken
        let cases = [
            (5, 0, 0, 0, true),
            (5, 3, 3, 4, true),
            // An interrupt was signalled since the handing transaction began.
            (5, 0, 1, 0, false),
            // The runner's own loops wrote (or read) as far or further: the row is stale.
            (5, 0, 0, 5, false),
            (5, 0, 0, 9, false),
        ];
        for (seq, handed, now, seen, taken) in cases {
            let h = RunnerHandle::default();
            h.saw_seq(seen);
            h.hand_off(handoff(seq, handed));
            assert_eq!(
                h.take_handoff(now).is_some(),
                taken,
                "{seq} {handed} {now} {seen}"
            );
            assert!(h.take_handoff(now).is_none(), "taken once");
        }
        // Of two handoffs the newer stays, whatever order they come in; the armed request
        // is kept apart from either.
        let h = RunnerHandle::default();
        let mut armed = handoff(7, 0);
        armed.armed = Some("sevt_start".into());
        h.hand_off(armed);
        h.hand_off(handoff(6, 0));
        assert_eq!(h.take_handoff(0).map(|h| h.rec.last_seq), Some(7));
        assert_eq!(h.armed.lock().unwrap().as_deref(), Some("sevt_start"));
    }

    #[test]
    fn a_snapshot_counts_as_the_handle_did_and_misses_later_interrupts() {
        let h = RunnerHandle::default();
        *h.thread_interrupts
            .lock()
            .unwrap()
            .entry("sthr_d".into())
            .or_default() += 1;
        let seen = h.interrupts_seen();
        for t in ["sthr_p", "sthr_d"] {
            assert_eq!(seen.count(t), h.interrupt_count(t), "{t}");
        }
        // An interrupt of every thread after the snapshot (the row read) shows in each
        // thread's count; one of a delegate, only in its own.
        h.all_interrupts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert_ne!(seen.count("sthr_p"), h.interrupt_count("sthr_p"));
        let seen = h.interrupts_seen();
        *h.thread_interrupts
            .lock()
            .unwrap()
            .entry("sthr_d".into())
            .or_default() += 1;
        assert_eq!(seen.count("sthr_p"), h.interrupt_count("sthr_p"));
        assert_ne!(seen.count("sthr_d"), h.interrupt_count("sthr_d"));
    }
}
