//! Persistence: the [`Store`] trait every backend implements, and the records it moves. The trait
//! is the only way anything reaches the database; the store runs the engine's decisions inside its
//! transactions and decides nothing about the loop itself.
//!
//! Each backend implements the trait on its own — [`postgres`] on a typed sqlx `PgPool`, [`sqlite`]
//! on rusqlite with a writer thread — where they differ is exactly where speed and correctness live
//! (locking, batching, clocks); `tests/it/store` holds both to one contract. `docs/store.md` says
//! why each is shaped as it is, and lists the tables.
//!
//! The central operation is `SessionTransactions::transact(session, writer, f)`: lock the session row, check
//! fencing (a runner writes only while it holds the lease), run the engine's pure decision `f` on
//! the row, then in the same transaction write back only the columns that changed, append the
//! returned events with consecutive sequence numbers, mark consumed input processed, and record
//! thread and work-queue changes. `SessionTransactions::transact_from` does the same from a row the writer
//! already holds, committing only if the row is still at that version. Everything a client is told
//! was stored is committed before the response, and before any stream sees it.
//!
//! Lists and stream replay read `WHERE seq > cursor ORDER BY seq`; ids sort by creation time byte
//! by byte (Postgres columns use the `C` collation), which keyset pagination relies on. Anything
//! filtered on is a real column; JSON bodies are only read whole. Where both backends must decide a
//! write the same way, the decision is written once and shared (memory writes: [`memory`]).
//!
//! Besides the trait this crate holds what sits right beside the database: the migrations
//! (`crates/store/migrations/{postgres,sqlite}`, embedded at compile time), the webhook outbox's
//! one entry point ([`webhooks`]: a change and its deliveries commit together), the Files API's
//! bytes ([`blobs`]: a directory of the data dir or an S3-compatible bucket), the data-directory
//! lock that keeps a second process off a SQLite store ([`lock`]), Postgres `LISTEN/NOTIFY`
//! ([`notify`]) and the vocabulary of what replicas tell each other ([`signal`]), and [`lru`], a
//! size-bounded map the Postgres store's known bodies and the engine's body cache share (it lives
//! here, the lowest crate both can see).

pub mod blobs;
pub mod deployments;
pub mod files;
pub mod fork;
pub mod hooks;
pub mod lock;
pub mod lru;
pub mod memory;
pub mod migration_history;
pub mod notify;
pub mod postgres;
pub mod signal;
pub mod skills;
pub mod sqlite;
pub mod vaults;
pub mod webhooks;
mod wire;

/// Time to commit one session transaction (events appended with their state change), a
/// Prometheus histogram the store records.
pub const EVENT_APPEND_DURATION: &str = "mast_event_append_duration_seconds";

use async_trait::async_trait;

pub use deployments::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    NextFire,
};
pub use files::{FileFilter, FileRecord};
pub use fork::{ForkedEvent, SessionFork};
pub use hooks::HookRecord;
use mast_domain::agent::Agent;
use mast_domain::environment::Environment;
use mast_domain::memory::{Actor, Memory, MemoryStore, MemoryVersion};
use mast_domain::time::Micros;
use mast_domain::vault::Vault;
pub use memory::{
    MemoryStoreFilter, MemoryVersionFilter, MemoryWrite, MemoryWriteOutcome, RedactOutcome,
};
pub use skills::{NewSkillVersion, SkillRecord, SkillVersionDelete, SkillVersionRecord};
pub use vaults::CredentialRecord;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness or precondition conflict (duplicate name, stale version, answered event).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A runner tried to write after its lease moved to another owner (fencing).
    #[error("lease lost: {0}")]
    Fenced(String),
    /// The database could not be reached in time.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The row a transaction needed is not there (or not visible to the caller).
    #[error("not found")]
    NotFound,
    /// A request the current state does not allow (answered tool use, wrong placement).
    #[error("{0}")]
    Invalid(#[from] mast_domain::invalid::Invalid),
    /// Anything else; logged, never shown to clients.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
                StoreError::Unavailable(e.to_string())
            }
            // The server is shutting down or restarting (57P01-57P03), or the connection
            // broke (class 08): the database is away, not the request wrong.
            sqlx::Error::Database(db)
                if db
                    .code()
                    .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")) =>
            {
                StoreError::Unavailable(e.to_string())
            }
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(db.message().to_string())
            }
            // Postgres text cannot hold NUL; SQLite can, so inputs are checked before they
            // get here and this only catches what slips through.
            sqlx::Error::Database(db)
                if matches!(db.code().as_deref(), Some("22021" | "22P05")) =>
            {
                StoreError::Invalid(mast_domain::invalid::Invalid::new(
                    "text must not contain NUL (\\u0000) characters",
                ))
            }
            _ => StoreError::Internal(e.into()),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Internal(e.into())
    }
}

/// Result of store calls.
pub type StoreResult<T> = Result<T, StoreError>;

pub use mast_domain::query::{AgentFilter, Direction, EventFilter, Scan, SessionFilter};

/// A session row: the stored wire body plus the columns the engine and lists work with.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub agent_version: i64,
    pub environment_id: String,
    pub status: String,
    /// JSON: title, metadata, agent snapshot, resources, vault ids, budget, environment snapshot.
    /// Shared, as it is large (an agent's prompt and tool schemas) and rarely changes, while
    /// the record is copied on every write of the session.
    pub body: std::sync::Arc<str>,
    /// JSON `SessionUsage`.
    pub usage: String,
    pub active_micros: i64,
    pub running_since: Option<Micros>,
    pub last_seq: i64,
    /// JSON engine state cached from the log (pending blocking events, and the like).
    pub engine: String,
    /// The runner owning the session while it has work, and until when.
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<Micros>,
    pub created_at: Micros,
    pub updated_at: Micros,
    pub archived_at: Option<Micros>,
    pub terminated_at: Option<Micros>,
    /// Which write of the row this is, as the store last read or wrote it: Postgres's `xmin`,
    /// which every update changes; 0 on SQLite, whose one writer never needs it. A writer
    /// holding the row at a version can decide on it without reading it again
    /// ([`SessionTransactions::transact_from`]).
    pub version: i64,
}

/// A thread row.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    pub id: String,
    pub session_id: String,
    pub parent_thread_id: Option<String>,
    pub spawning_event_id: Option<String>,
    pub status: String,
    /// JSON: agent snapshot, agent name, usage, stats.
    pub body: String,
    pub created_at: Micros,
    pub updated_at: Micros,
    pub archived_at: Option<Micros>,
}

/// An event about to be appended. `body` is the wire object without `id` and
/// `processed_at`, which live in columns and are added back when the event is read.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: String,
    pub thread_id: Option<String>,
    pub kind: String,
    pub body: serde_json::Value,
    /// Private data the loop needs to rebuild model context; never sent to clients.
    pub internal: Option<serde_json::Value>,
    /// The blocking event this one answers, and how (`result` or `confirmation`).
    pub answers: Option<(String, &'static str)>,
    pub processed_at: Option<Micros>,
}

impl NewEvent {
    /// Whether it is a child thread's event that names its thread, which the session's
    /// stream shows too (stored as the `crosspost` column).
    pub fn crossposts(&self) -> bool {
        crossposts(&self.body)
    }

    /// The event as stored in `session_id`'s log at `seq`, written at `now`.
    pub fn stored(self, session_id: &str, seq: i64, now: Micros) -> EventRecord {
        EventRecord {
            session_id: session_id.to_string(),
            seq,
            id: self.id,
            thread_id: self.thread_id,
            kind: self.kind,
            body: self.body,
            internal: self.internal,
            processed_at: self.processed_at,
            created_at: now,
        }
    }
}

/// The one rule for crossposting: a child thread's event naming its thread.
fn crossposts(body: &serde_json::Value) -> bool {
    body.get("session_thread_id").is_some()
}

/// A persisted event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub session_id: String,
    pub seq: i64,
    pub id: String,
    pub thread_id: Option<String>,
    pub kind: String,
    pub body: serde_json::Value,
    pub internal: Option<serde_json::Value>,
    pub processed_at: Option<Micros>,
    pub created_at: Micros,
}

impl EventRecord {
    /// Whether it is a child thread's event that names its thread, which the session's
    /// stream shows too.
    pub fn crossposts(&self) -> bool {
        crossposts(&self.body)
    }

    /// The event as clients see it: its body plus `type`, `id` and `processed_at`.
    pub fn wire(&self) -> serde_json::Value {
        let mut v = self.body.clone();
        if let Some(o) = v.as_object_mut() {
            o.insert("id".into(), self.id.clone().into());
            o.insert("type".into(), self.kind.clone().into());
            o.insert(
                "processed_at".into(),
                mast_domain::time::format_opt(self.processed_at).into(),
            );
        }
        v
    }
}

/// A stored credential as an operator sees it: never the key, which only exists as a hash.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRecord {
    /// `apikey_…` or `envkey_…`.
    pub id: String,
    /// Hex SHA-256 of the key (so a leaked key can be found and revoked); never shown.
    pub key_hash: String,
    pub kind: KeyKind,
    pub workspace_id: String,
    pub workspace_name: String,
    pub created_at: Micros,
    /// When an API key was revoked (it no longer authenticates).
    pub revoked_at: Option<Micros>,
}

/// What a credential opens.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyKind {
    /// An API key: its whole workspace.
    Api,
    /// A self-hosted environment's worker key (revoking deletes it, so it is never listed
    /// as revoked).
    Environment { environment_id: String },
}

/// The outcome of [`KeyStore::revoke_api_key`].
#[derive(Debug, Clone, PartialEq)]
pub enum Revocation {
    /// Revoked now.
    Revoked,
    /// It had been revoked already, at this time.
    AlreadyRevoked(Micros),
    /// No API key has this id.
    NotFound,
}

/// Who is writing to a session: a client request, or the runner that must still hold the
/// session's lease (fencing: a replaced runner cannot write).
#[derive(Debug, Clone, PartialEq)]
pub enum Writer {
    Client,
    Runner { owner: String },
}

/// A work-queue row (self-hosted environments).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkRecord {
    pub id: String,
    pub workspace_id: String,
    pub environment_id: String,
    pub session_id: String,
    pub state: String,
    /// JSON metadata map.
    pub metadata: String,
    pub created_at: Micros,
    pub updated_at: Micros,
    pub polled_at: Option<Micros>,
    pub polled_by: Option<String>,
    pub acknowledged_at: Option<Micros>,
    pub started_at: Option<Micros>,
    pub latest_heartbeat_at: Option<Micros>,
    pub lease_expires_at: Option<Micros>,
    pub ttl_seconds: i64,
    pub stop_requested_at: Option<Micros>,
    pub stopped_at: Option<Micros>,
    /// Hash of the sessions token of the item's latest poll; replaced by the next poll,
    /// cleared when the item stops.
    pub token_hash: Option<String>,
}

impl WorkRecord {
    /// A new queued item for a session.
    pub fn queued(
        id: String,
        workspace_id: &str,
        environment_id: &str,
        session_id: &str,
        now: Micros,
    ) -> Self {
        WorkRecord {
            id,
            workspace_id: workspace_id.to_string(),
            environment_id: environment_id.to_string(),
            session_id: session_id.to_string(),
            state: "queued".into(),
            metadata: "{}".into(),
            created_at: now,
            updated_at: now,
            polled_at: None,
            polled_by: None,
            acknowledged_at: None,
            started_at: None,
            latest_heartbeat_at: None,
            lease_expires_at: None,
            ttl_seconds: 0,
            stop_requested_at: None,
            stopped_at: None,
            token_hash: None,
        }
    }

    /// The stored state.
    pub fn state(&self) -> mast_domain::work::WorkState {
        mast_domain::work::WorkState::parse(&self.state)
            .unwrap_or(mast_domain::work::WorkState::Stopped)
    }
}

/// Counts of an environment's queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkStats {
    pub depth: i64,
    pub pending: i64,
    pub oldest_queued_at: Option<Micros>,
    pub workers_polling: i64,
}

/// A thread row's new status.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadChange {
    pub id: String,
    pub status: String,
    pub updated_at: Micros,
    pub archived_at: Option<Micros>,
}

/// What the reaper's pass over the work queue changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpiredWork {
    /// Environments whose queues gained items.
    pub requeued_in: Vec<String>,
}

/// A database URL without its password, for logs and banners.
pub fn redacted_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// A stopped work item whose session may still wait on a worker (see
/// [`WorkStore::work_needing_requeue_check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoppedWork {
    pub work_id: String,
    pub session_id: String,
}

/// A decision on a locked work item; an error aborts the transaction.
pub type WorkTxn = Box<dyn FnOnce(&mut WorkRecord) -> Result<(), StoreError> + Send>;

/// What a session transaction decided: events to append and queued events to mark processed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TxnOutput {
    pub events: Vec<NewEvent>,
    /// Queued events consumed by this transaction: their `processed_at` is set and their
    /// `internal` records `{"after_seq": N}`, the log position at which they were consumed.
    pub mark_processed: Vec<String>,
    /// A work item to queue for the session unless a live one exists (self-hosted sessions
    /// that receive input).
    pub ensure_work: Option<WorkRecord>,
    /// Threads to create.
    pub new_threads: Vec<ThreadRecord>,
    /// Threads whose status (or archival) changed.
    pub thread_changes: Vec<ThreadChange>,
    /// Discards every queued event of the session: marked processed with `internal`
    /// `{"discarded": true}`, so it never reaches the model (a turn whose retries ran out).
    pub flush_queued: bool,
}

/// A decision taken against the locked session row. It may change the row's cached columns
/// in place and returns what to append; an error aborts the transaction and is returned.
pub type SessionTxn = Box<dyn FnOnce(&mut SessionRecord) -> Result<TxnOutput, StoreError> + Send>;

/// What [`SessionTransactions::transact_from`] did.
// Returned once and matched at once: boxing the row would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Attempt {
    /// Decided and written as [`SessionTransactions::transact`] would (`None`: no such session).
    Done(Option<(SessionRecord, Vec<EventRecord>)>),
    /// The row had moved past the expected version, or the decision failed on the copy:
    /// nothing was written. Decide again on the current row with [`SessionTransactions::transact`].
    Stale,
}

/// Outcome of deleting something that may refuse while busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    Yes,
    Missing,
    Busy,
}

/// What [`EnvironmentStore::delete_environment`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvironmentDeletion {
    Deleted,
    Missing,
    /// Not deleted: these sessions (up to a few, and how many in all) still use it.
    InUse {
        sessions: Vec<String>,
        total: i64,
    },
}

/// State-describing counts for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpsCounts {
    /// Sessions per status.
    pub sessions_by_status: Vec<(String, i64)>,
    /// Self-hosted work items waiting for a worker.
    pub queued_work: i64,
}

/// The store's workspaces, API keys and environment keys: the credentials a request is authenticated with.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// The id of the workspace named `name`, creating it if needed.
    async fn ensure_workspace(&self, name: &str) -> StoreResult<String>;
    /// Stores a new API key (hash only) for a workspace.
    async fn insert_api_key(&self, id: &str, workspace_id: &str, key_hash: &str)
    -> StoreResult<()>;
    /// The workspace of the unrevoked key with this hash, if any.
    async fn workspace_for_key(&self, key_hash: &str) -> StoreResult<Option<String>>;
    /// How many API keys were ever created, revoked ones included (zero means the server may
    /// run open on loopback; revoking the last key must not open it again).
    async fn count_api_keys(&self) -> StoreResult<i64>;
    /// Every credential of every workspace, API keys then environment keys, oldest first.
    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>>;
    /// Revokes an API key by id. On Postgres the replicas are told in the same transaction,
    /// so none of them keeps accepting it from a cache.
    async fn revoke_api_key(&self, id: &str) -> StoreResult<Revocation>;
    /// Stores an environment key (hash only).
    async fn insert_environment_key(
        &self,
        id: &str,
        workspace_id: &str,
        environment_id: &str,
        key_hash: &str,
    ) -> StoreResult<()>;
    /// An environment's keys as `(id, created_at)`, oldest first.
    async fn list_environment_keys(
        &self,
        environment_id: &str,
    ) -> StoreResult<Vec<(String, Micros)>>;
    /// Revokes an environment key; false when it did not exist.
    async fn delete_environment_key(&self, environment_id: &str, id: &str) -> StoreResult<bool>;
    /// The `(workspace, environment)` of the environment key with this hash.
    async fn environment_for_key(&self, key_hash: &str) -> StoreResult<Option<(String, String)>>;
    /// The id of the API key with this hash (revoked or not).
    async fn api_key_id_for_hash(&self, key_hash: &str) -> StoreResult<Option<String>>;
}

/// The store's agents and their immutable versions.
#[async_trait]
pub trait AgentStore: Send + Sync {
    /// Inserts a new agent with its first version.
    async fn insert_agent(&self, workspace_id: &str, agent: &Agent) -> StoreResult<()>;
    /// An agent at `version` (latest when None), with the agent-level `archived_at` applied.
    async fn get_agent(
        &self,
        workspace_id: &str,
        id: &str,
        version: Option<i64>,
    ) -> StoreResult<Option<Agent>>;
    /// Appends `agent` as the next version if the current version is still `expected`;
    /// `Conflict` otherwise.
    async fn append_agent_version(
        &self,
        workspace_id: &str,
        agent: &Agent,
        expected: i64,
    ) -> StoreResult<()>;
    /// Lists latest versions of agents by id.
    async fn list_agents(
        &self,
        workspace_id: &str,
        filter: &AgentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Agent>>;
    /// Lists versions of one agent by version number.
    async fn list_agent_versions(
        &self,
        workspace_id: &str,
        id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<Agent>>;
    /// Marks an agent archived (idempotent); returns the latest version.
    async fn archive_agent(
        &self,
        workspace_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<Option<Agent>>;
}

/// The store's environments.
#[async_trait]
pub trait EnvironmentStore: Send + Sync {
    /// Inserts an environment; `Conflict` when the name is taken in the workspace.
    async fn insert_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        created_at: Micros,
    ) -> StoreResult<()>;
    /// One environment.
    async fn get_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<Environment>>;
    /// Replaces an environment's stored body; `Conflict` when the new name is taken.
    async fn update_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()>;
    /// Lists environments by id.
    async fn list_environments(
        &self,
        workspace_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Environment>>;
    /// Deletes an environment (with its worker keys and work items) unless sessions that are
    /// not archived still use it: those are returned (a few ids) and nothing changes.
    async fn delete_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<EnvironmentDeletion>;
}

/// The store's sessions and their threads.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Inserts a session, its primary thread, its first events and (self-hosted) its first
    /// work item in one transaction.
    async fn create_session(
        &self,
        session: &SessionRecord,
        thread: &ThreadRecord,
        events: &[NewEvent],
        work: Option<&WorkRecord>,
    ) -> StoreResult<Vec<EventRecord>>;
    /// One session in a workspace.
    async fn get_session(&self, workspace_id: &str, id: &str)
    -> StoreResult<Option<SessionRecord>>;
    /// One session by id alone (the engine's view).
    async fn get_session_by_id(&self, id: &str) -> StoreResult<Option<SessionRecord>>;
    /// The last sequence number of each of these sessions' logs: one pair per existing session,
    /// in no particular order (missing ids are left out).
    async fn last_seqs(&self, ids: &[String]) -> StoreResult<Vec<(String, i64)>>;
    /// Lists sessions by id.
    async fn list_sessions(
        &self,
        workspace_id: &str,
        filter: &SessionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SessionRecord>>;
    /// Deletes a session with its threads and events unless it is running.
    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<Deleted>;
    /// Threads of a session by id.
    async fn list_threads(
        &self,
        session_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<ThreadRecord>>;
    /// One thread of a session.
    async fn get_thread(&self, session_id: &str, id: &str) -> StoreResult<Option<ThreadRecord>>;
}

/// The store's the session transaction: appending events and changing a session as one atomic, fenced write.
#[async_trait]
pub trait SessionTransactions: Send + Sync {
    /// Locks the session row, runs `f` on it and, in the same transaction, writes the row's
    /// cached columns back, appends the returned events with consecutive sequence numbers and
    /// marks queued events processed. `Ok(None)` when the session does not exist.
    async fn transact(
        &self,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>>;
    /// [`SessionTransactions::transact`] for a writer that already holds the row as `expected` (what its
    /// last read or transaction returned): `f` decides on a copy of it, and the write applies
    /// only if the row is still at `expected.version`, in one round trip where the store has
    /// a network between it and its data. Otherwise nothing is written and the answer is
    /// [`Attempt::Stale`]. A store whose locking read costs no round trip simply runs
    /// `transact`.
    async fn transact_from(
        &self,
        session_id: &str,
        writer: &Writer,
        expected: &SessionRecord,
        f: SessionTxn,
    ) -> StoreResult<Attempt> {
        let _ = expected;
        self.transact(session_id, writer, f)
            .await
            .map(Attempt::Done)
    }
    /// Whether [`SessionTransactions::transact_from`] saves anything over [`SessionTransactions::transact`] here; where
    /// it does not, a writer need not keep (or copy) the row it last saw.
    fn decides_on_held_rows(&self) -> bool {
        false
    }
}

/// The store's reading a session's event log.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Events of a session by sequence number.
    async fn list_events(
        &self,
        session_id: &str,
        filter: &EventFilter,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<EventRecord>>;
    /// Events with sequence numbers greater than `after_seq`, in order (stream replay, runner);
    /// only those of the given types when `kinds` is non-empty.
    async fn events_after(
        &self,
        session_id: &str,
        after_seq: i64,
        kinds: &[&str],
        limit: i64,
    ) -> StoreResult<Vec<EventRecord>>;
    /// One event by id within a session.
    async fn get_event(&self, session_id: &str, id: &str) -> StoreResult<Option<EventRecord>>;
    /// Whether an answer of `kind` to blocking event `id` exists.
    async fn has_answer(&self, session_id: &str, id: &str, kind: &str) -> StoreResult<bool>;
}

/// The store's session leases: which process runs a session's loop.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Claims the session's lease for `owner` until `until` if it is free, expired or
    /// already `owner`'s. Returns whether `owner` now holds it.
    async fn claim_lease(
        &self,
        session_id: &str,
        owner: &str,
        now: Micros,
        until: Micros,
    ) -> StoreResult<bool>;
    /// Extends a held lease; false when `owner` no longer holds it.
    async fn renew_lease(&self, session_id: &str, owner: &str, until: Micros) -> StoreResult<bool>;
    /// Releases a held lease.
    async fn release_lease(&self, session_id: &str, owner: &str) -> StoreResult<()>;
    /// Drops leases held by any owner but `owner` (single-replica start-up); returns how many.
    async fn clear_foreign_leases(&self, owner: &str) -> StoreResult<u64>;
    /// Sessions that need a runner: `running` or `rescheduling` (accepted input sets one of
    /// them in its own transaction) with no live lease, least recently updated first.
    async fn sessions_needing_runner(&self, now: Micros, limit: i64) -> StoreResult<Vec<String>>;
}

/// The store's the work queue of self-hosted environments.
#[async_trait]
pub trait WorkStore: Send + Sync {
    /// The live work item whose sessions token has this hash.
    async fn work_for_token(&self, token_hash: &str) -> StoreResult<Option<WorkRecord>>;
    /// Claims the oldest queued item of an environment that nobody polled, or whose poll
    /// is older than `reclaim_before` and was never acknowledged; gives it `token_hash`.
    async fn poll_work(
        &self,
        environment_id: &str,
        worker_id: Option<&str>,
        now: Micros,
        reclaim_before: Micros,
        token_hash: &str,
    ) -> StoreResult<Option<WorkRecord>>;
    /// Locks a work item, applies `f`, writes it back.
    async fn transact_work(
        &self,
        environment_id: &str,
        id: &str,
        f: WorkTxn,
    ) -> StoreResult<Option<WorkRecord>>;
    /// One work item of an environment.
    async fn get_work(&self, environment_id: &str, id: &str) -> StoreResult<Option<WorkRecord>>;
    /// Work items of an environment by id.
    async fn list_work(
        &self,
        environment_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<WorkRecord>>;
    /// Queue counts of an environment.
    async fn work_stats(&self, environment_id: &str, now: Micros) -> StoreResult<WorkStats>;
    /// Re-queues items whose worker's lease expired and stops expired `stopping` ones; also
    /// forgets workers that have not polled for an hour.
    async fn requeue_expired_work(&self, now: Micros) -> StoreResult<ExpiredWork>;
    /// Items that stopped (by a stop request, or a wind-down whose lease ran out) and whose
    /// session has not yet been checked for a tool call still waiting on a worker. Marked in
    /// the transaction that stopped them, so the check survives a crash in between.
    async fn work_needing_requeue_check(&self, limit: i64) -> StoreResult<Vec<StoppedWork>>;
    /// Records that a stopped item's session was checked (and requeued if it needed to be).
    async fn clear_requeue_check(&self, work_id: &str) -> StoreResult<()>;
    /// Ends a session's live items: queued ones stop; held ones move to `stopping` so their
    /// worker winds down (`graceful`, the session was archived) or stop at once (deleted).
    async fn stop_session_work(
        &self,
        session_id: &str,
        now: Micros,
        graceful: bool,
    ) -> StoreResult<()>;
}

/// The store's what readiness and the operations endpoint ask of the database.
#[async_trait]
pub trait HealthStore: Send + Sync {
    /// Why the store cannot serve requests (unreachable, or its schema is behind this
    /// binary's migrations); None when it can.
    async fn readiness(&self) -> Option<String>;
    /// Counts for the metrics endpoint.
    async fn ops_counts(&self) -> StoreResult<OpsCounts>;
}

/// The store's session forks.
#[async_trait]
pub trait ForkStore: Send + Sync {
    /// Inserts a forked session with its threads and copied events (each recording the id of
    /// the event it copies) in one transaction: all of it or nothing.
    async fn insert_fork(&self, fork: &SessionFork) -> StoreResult<()>;
    /// The id of the original event a fork copied into event `id` of the session; None when
    /// the event was not copied by a fork (or does not exist).
    async fn event_forked_from(&self, session_id: &str, id: &str) -> StoreResult<Option<String>>;
}

/// The store's vaults and their credentials; secrets arrive and leave sealed.
#[async_trait]
pub trait VaultStore: Send + Sync {
    /// Stores a new vault of a workspace.
    async fn insert_vault(&self, workspace_id: &str, vault: &Vault, at: Micros) -> StoreResult<()>;
    /// A vault of the workspace, archived or not.
    async fn get_vault(&self, workspace_id: &str, id: &str) -> StoreResult<Option<Vault>>;
    /// Replaces a vault's body; with `archived`, also marks it archived (once).
    async fn update_vault(
        &self,
        workspace_id: &str,
        vault: &Vault,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()>;
    /// The workspace's vaults in id order (creation order), archived ones only when asked.
    async fn list_vaults(
        &self,
        workspace_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Vault>>;
    /// Deletes a vault with all its credentials; false when there was none.
    async fn delete_vault(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;
    /// Stores a new credential. `Conflict` when the vault already has a credential that is
    /// not archived for the same (normalised) server URL.
    async fn insert_credential(
        &self,
        workspace_id: &str,
        rec: &CredentialRecord,
        at: Micros,
    ) -> StoreResult<()>;
    /// A credential of a vault of the workspace, archived or not.
    async fn get_credential(
        &self,
        workspace_id: &str,
        vault_id: &str,
        id: &str,
    ) -> StoreResult<Option<CredentialRecord>>;
    /// Replaces a credential's body and sealed secrets; with `archived`, also marks it
    /// archived (once). With `expected`, only when the stored sealed secrets are exactly
    /// those (a compare-and-set for token refreshes across replicas). True when written.
    async fn update_credential(
        &self,
        workspace_id: &str,
        rec: &CredentialRecord,
        at: Micros,
        archived: bool,
        expected: Option<&[u8]>,
    ) -> StoreResult<bool>;
    /// A vault's credentials in id order, archived ones only when asked.
    async fn list_credentials(
        &self,
        workspace_id: &str,
        vault_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<CredentialRecord>>;
    /// Deletes a credential; false when there was none.
    async fn delete_credential(
        &self,
        workspace_id: &str,
        vault_id: &str,
        id: &str,
    ) -> StoreResult<bool>;
    /// The credentials for `server_url` (normalised) that are not archived, in vaults of
    /// `vault_ids` that are not archived, in no particular order.
    async fn credentials_for_server(
        &self,
        workspace_id: &str,
        vault_ids: &[String],
        server_url: &str,
    ) -> StoreResult<Vec<CredentialRecord>>;
}

/// The store's Files API metadata (the bytes are in the blob store).
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Inserts a file's metadata; called once its bytes are durable.
    async fn insert_file(&self, file: &FileRecord) -> StoreResult<()>;
    /// One file of a workspace, expired or not.
    async fn get_file(&self, workspace_id: &str, id: &str) -> StoreResult<Option<FileRecord>>;
    /// Lists a workspace's live files by id.
    async fn list_files(
        &self,
        workspace_id: &str,
        filter: &FileFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<FileRecord>>;
    /// Deletes a file's metadata; whether it was there.
    async fn delete_file(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;
    /// Files of any workspace whose `expires_at` is at or before `now`, oldest expiry first.
    async fn expired_files(&self, now: Micros, limit: i64) -> StoreResult<Vec<FileRecord>>;
    /// Which of `ids` have metadata (any workspace): the blob sweep keeps exactly those.
    async fn existing_file_ids(&self, ids: &[String]) -> StoreResult<Vec<String>>;
}

/// The store's memory stores, their memories and memory versions.
#[async_trait]
pub trait MemoryStorage: Send + Sync {
    /// Stores a new memory store.
    async fn insert_memory_store(
        &self,
        workspace_id: &str,
        store: &MemoryStore,
        at: Micros,
    ) -> StoreResult<()>;
    /// A memory store of the workspace, archived or not.
    async fn get_memory_store(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<MemoryStore>>;
    /// Replaces a store's body; with `archived`, also marks it archived (once).
    async fn update_memory_store(
        &self,
        workspace_id: &str,
        store: &MemoryStore,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()>;
    /// The workspace's memory stores in id (creation) order.
    async fn list_memory_stores(
        &self,
        workspace_id: &str,
        filter: &MemoryStoreFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryStore>>;
    /// Deletes a store with every memory and version in it; false when there was none.
    async fn delete_memory_store(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;
    /// One memory (with its content) of a store of the workspace.
    async fn get_memory(
        &self,
        workspace_id: &str,
        store_id: &str,
        id: &str,
    ) -> StoreResult<Option<Memory>>;
    /// Memories (with content) of a store of the workspace whose paths start with `prefix`
    /// and are at least `from` (bytewise), in path order, at most `limit`.
    async fn list_memories(
        &self,
        workspace_id: &str,
        store_id: &str,
        prefix: &str,
        from: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<Memory>>;
    /// Creates, changes or deletes a memory and records its version, atomically and
    /// serialised with every other write to the same store (see [`memory::decide`]).
    async fn write_memory(
        &self,
        workspace_id: &str,
        write: &MemoryWrite,
    ) -> StoreResult<MemoryWriteOutcome>;
    /// One version (with content) of a store of the workspace.
    async fn get_memory_version(
        &self,
        workspace_id: &str,
        store_id: &str,
        id: &str,
    ) -> StoreResult<Option<MemoryVersion>>;
    /// Versions (with content) of a store of the workspace by id.
    async fn list_memory_versions(
        &self,
        workspace_id: &str,
        store_id: &str,
        filter: &MemoryVersionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryVersion>>;
    /// Redacts a version unless it holds a live memory's current content.
    async fn redact_memory_version(
        &self,
        workspace_id: &str,
        store_id: &str,
        id: &str,
        by: Option<&Actor>,
        at: Micros,
    ) -> StoreResult<RedactOutcome>;
}

/// The store's skills, their versions and the versions' files.
#[async_trait]
pub trait SkillStore: Send + Sync {
    /// Stores a new skill with its first version, atomically.
    async fn insert_skill(&self, skill: &SkillRecord, first: &NewSkillVersion) -> StoreResult<()>;
    /// Adds a version to a skill of the workspace and makes it the latest, atomically;
    /// [`StoreError::NotFound`] without the skill, [`StoreError::Invalid`] when the version's
    /// name is not the skill's.
    async fn insert_skill_version(
        &self,
        workspace_id: &str,
        new: &NewSkillVersion,
    ) -> StoreResult<SkillRecord>;
    /// One skill of the workspace.
    async fn get_skill(&self, workspace_id: &str, id: &str) -> StoreResult<Option<SkillRecord>>;
    /// The workspace's skills by id, of one `source` when given.
    async fn list_skills(
        &self,
        workspace_id: &str,
        source: Option<&str>,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillRecord>>;
    /// Deletes a skill with all its versions; whether it was there.
    async fn delete_skill(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;
    /// One version of a skill of the workspace.
    async fn get_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        id: &str,
    ) -> StoreResult<Option<SkillVersionRecord>>;
    /// A skill's versions by id.
    async fn list_skill_versions(
        &self,
        workspace_id: &str,
        skill_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillVersionRecord>>;
    /// Deletes a version (never a skill's last); the skill's latest moves to the newest left.
    async fn delete_skill_version(
        &self,
        workspace_id: &str,
        skill_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<SkillVersionDelete>;
    /// A version's files, by path (empty when there is no such version).
    async fn skill_files(
        &self,
        version_id: &str,
    ) -> StoreResult<Vec<mast_domain::skill_bundle::BundleFile>>;
}

/// The store's hooks (Mast's own addition).
#[async_trait]
pub trait HookStore: Send + Sync {
    /// Stores a new hook of workspace `workspace_id` (its id is new).
    async fn insert_hook(
        &self,
        workspace_id: &str,
        rec: &HookRecord,
        at: Micros,
    ) -> StoreResult<()>;
    /// One hook of the workspace, with its sealed secret.
    async fn get_hook(&self, workspace_id: &str, id: &str) -> StoreResult<Option<HookRecord>>;
    /// A page of the workspace's hooks, by id in `scan`'s direction.
    async fn list_hooks(
        &self,
        workspace_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<mast_domain::hook::Hook>>;
    /// Every hook of the workspace for `event`, oldest first (the order they are asked in).
    async fn hooks_for_event(
        &self,
        workspace_id: &str,
        event: &str,
    ) -> StoreResult<Vec<HookRecord>>;
    /// Deletes a hook; false when the workspace has no such hook.
    async fn delete_hook(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;
}

/// The store's webhook endpoints and the outbox of their deliveries.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Writes webhook events to the outbox on their own, for a change made outside any store
    /// transaction (changes made inside one emit in that transaction instead).
    async fn emit_webhook_events(&self, events: &[webhooks::WebhookEvent]) -> StoreResult<()>;
    /// Stores a new webhook endpoint.
    async fn insert_webhook_endpoint(&self, e: &webhooks::EndpointRecord) -> StoreResult<()>;
    /// One webhook endpoint of the workspace.
    async fn get_webhook_endpoint(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::EndpointRecord>>;
    /// One webhook endpoint by id alone (the sender's view).
    async fn webhook_endpoint_by_id(
        &self,
        id: &str,
    ) -> StoreResult<Option<webhooks::EndpointRecord>>;
    /// Replaces an endpoint's fields; false when it is gone.
    async fn update_webhook_endpoint(&self, e: &webhooks::EndpointRecord) -> StoreResult<bool>;
    /// The workspace's webhook endpoints by id.
    async fn list_webhook_endpoints(
        &self,
        workspace_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<webhooks::EndpointRecord>>;
    /// Deletes an endpoint with its deliveries and their attempts; false when there was none.
    async fn delete_webhook_endpoint(&self, workspace_id: &str, id: &str) -> StoreResult<bool>;
    /// An endpoint's deliveries in outbox order.
    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<webhooks::DeliveryRecord>>;
    /// One delivery of an endpoint.
    async fn get_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::DeliveryRecord>>;
    /// A delivery's attempts, oldest first.
    async fn list_webhook_attempts(
        &self,
        delivery_id: &str,
    ) -> StoreResult<Vec<webhooks::AttemptRecord>>;
    /// Queues the same event (same payload and `webhook-id`) to the same endpoint again, as a
    /// new pending delivery at the end of its queue; None when there is no such delivery.
    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::DeliveryRecord>>;
    /// Leases up to `limit` deliveries that are due for `owner`, for `lease` microseconds: only
    /// the oldest pending delivery of each enabled endpoint, whose lease is free or expired,
    /// so an endpoint has one delivery in flight at a time and gets them in order.
    async fn claim_webhook_deliveries(
        &self,
        owner: &str,
        lease: Micros,
        limit: i64,
    ) -> StoreResult<Vec<webhooks::DeliveryRecord>>;
    /// Records an attempt and its outcome and releases the lease, if `owner` still holds it
    /// (false otherwise: the lease ran out and another sender may have it).
    async fn finish_webhook_attempt(
        &self,
        owner: &str,
        attempt: &webhooks::AttemptRecord,
        outcome: webhooks::AttemptOutcome,
    ) -> StoreResult<bool>;
}

/// The store's deployments and the record of their runs.
#[async_trait]
pub trait DeploymentStore: Send + Sync {
    /// Inserts a deployment (and its `deployment.created` webhook event).
    async fn insert_deployment(&self, d: &DeploymentRecord) -> StoreResult<()>;
    /// One deployment of the workspace, archived or not.
    async fn get_deployment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<DeploymentRecord>>;
    /// Replaces a deployment's spec and state, with the webhook event of `change` in the same
    /// transaction; `next` says whether `next_fire_at` moves.
    async fn update_deployment(
        &self,
        d: &DeploymentRecord,
        next: NextFire,
        change: DeploymentChange,
    ) -> StoreResult<()>;
    /// The workspace's deployments by id.
    async fn list_deployments(
        &self,
        workspace_id: &str,
        filter: &DeploymentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRecord>>;
    /// Deployments of any workspace, active and not archived, whose next firing is at or
    /// before `now`, earliest first.
    async fn due_deployments(&self, now: Micros, limit: i64) -> StoreResult<Vec<DeploymentRecord>>;
    /// Claims the firing at `expected` by moving `next_fire_at` to `next`, only if it is
    /// still `expected` and the deployment is active and not archived: true for exactly one
    /// caller across replicas.
    async fn claim_deployment_fire(
        &self,
        id: &str,
        expected: Micros,
        next: Option<Micros>,
    ) -> StoreResult<bool>;
    /// Records a run in one transaction with what it does to its deployment: a scheduled run
    /// that started a session sets `last_run_at`; `pause` (a definition that can no longer
    /// start) pauses an active deployment. `Conflict` when the slot already has a run.
    async fn record_deployment_run(
        &self,
        run: &DeploymentRunRecord,
        pause: Option<&serde_json::Value>,
    ) -> StoreResult<()>;
    /// One run of the workspace.
    async fn get_deployment_run(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<DeploymentRunRecord>>;
    /// The workspace's runs by id.
    async fn list_deployment_runs(
        &self,
        workspace_id: &str,
        filter: &DeploymentRunFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRunRecord>>;
}

/// Everything Mast persists, composed of one trait per area. Both backends implement every
/// area with the same semantics (proven by the shared store test suite); code that holds a
/// `dyn Store` calls any area's methods.
pub trait Store:
    KeyStore
    + AgentStore
    + EnvironmentStore
    + SessionStore
    + SessionTransactions
    + EventStore
    + LeaseStore
    + WorkStore
    + HealthStore
    + ForkStore
    + VaultStore
    + FileStore
    + MemoryStorage
    + SkillStore
    + HookStore
    + WebhookStore
    + DeploymentStore
    + Send
    + Sync
    + 'static
{
    /// Which backend this is (`postgres` or `sqlite`), for logs and readiness.
    fn backend(&self) -> &'static str;
}
