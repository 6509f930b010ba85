//! The store's areas: one trait per kind of thing Mast persists, and [`Store`], which is all
//! of them. Each backend implements an area in that area's own file.

use async_trait::async_trait;

use crate::webhooks;
use crate::{
    AgentFilter, Attempt, CredentialRecord, Deleted, DeploymentChange, DeploymentFilter,
    DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord, EnvironmentDeletion, EventFilter,
    EventRecord, ExpiredWork, FileFilter, FileRecord, HookRecord, KeyRecord, MemoryStoreFilter,
    MemoryVersionFilter, MemoryWrite, MemoryWriteOutcome, NewEvent, NewSkillVersion, NextFire,
    OpsCounts, RedactOutcome, Revocation, Scan, SessionFilter, SessionFork, SessionRecord,
    SessionTxn, SkillRecord, SkillVersionDelete, SkillVersionRecord, StoppedWork, StoreResult,
    ThreadRecord, WorkRecord, WorkStats, WorkTxn, Writer,
};
use mast_domain::agent::Agent;
use mast_domain::environment::Environment;
use mast_domain::memory::{Actor, Memory, MemoryStore, MemoryVersion};
use mast_domain::time::Micros;
use mast_domain::vault::Vault;

/// Workspaces, API keys and environment keys: the credentials a request is authenticated
/// with.
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

/// Agents and their immutable versions.
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

/// Environments.
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

/// Sessions and their threads.
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

/// The session transaction: appending events and changing a session as one atomic, fenced
/// write.
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

/// Reading a session's event log.
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

/// Session leases: which process runs a session's loop.
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
    /// Idle, unarchived sessions with a workflow run whose lifetime ended by `now` (no runner
    /// watches them), earliest deadline first.
    async fn sessions_with_expired_runs(&self, now: Micros, limit: i64)
    -> StoreResult<Vec<String>>;
}

/// The work queue of self-hosted environments.
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

/// What readiness and the operations endpoint ask of the database.
#[async_trait]
pub trait HealthStore: Send + Sync {
    /// Why the store cannot serve requests (unreachable, or its schema is behind this
    /// binary's migrations); None when it can.
    async fn readiness(&self) -> Option<String>;
    /// Counts for the metrics endpoint.
    async fn ops_counts(&self) -> StoreResult<OpsCounts>;
}

/// Session forks.
#[async_trait]
pub trait ForkStore: Send + Sync {
    /// Inserts a forked session with its threads and copied events (each recording the id of
    /// the event it copies) in one transaction: all of it or nothing.
    async fn insert_fork(&self, fork: &SessionFork) -> StoreResult<()>;
    /// The id of the original event a fork copied into event `id` of the session; None when
    /// the event was not copied by a fork (or does not exist).
    async fn event_forked_from(&self, session_id: &str, id: &str) -> StoreResult<Option<String>>;
}

/// Vaults and their credentials; secrets arrive and leave sealed.
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

/// Files API metadata (the bytes are in the blob store).
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

/// Memory stores, their memories and memory versions.
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

/// Skills, their versions and the versions' files.
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

/// Hooks (Mast's own addition).
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

/// Webhook endpoints and the outbox of their deliveries.
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

/// Deployments and the record of their runs.
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

    /// The clock this store was opened with: the process's one source of the current time,
    /// which the store stamps rows with and everything holding the store reads.
    fn clock(&self) -> &mast_domain::clock::Clock;
}
