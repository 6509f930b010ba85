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

mod areas;
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

pub use areas::{
    AgentStore, DeploymentStore, EnvironmentStore, EventStore, FileStore, ForkStore, HealthStore,
    HookStore, KeyStore, LeaseStore, MemoryStorage, SessionStore, SessionTransactions, SkillStore,
    Store, VaultStore, WebhookStore, WorkStore,
};
pub use deployments::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    NextFire,
};
pub use files::{FileFilter, FileRecord};
pub use fork::{ForkedEvent, SessionFork};
pub use hooks::HookRecord;
use mast_domain::time::Micros;
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
    /// When the earliest lifetime of the session's open workflow runs ends; the reaper
    /// looks for sessions past it.
    pub workflow_deadline_at: Option<Micros>,
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
