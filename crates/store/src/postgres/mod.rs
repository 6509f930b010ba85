//! The Postgres store: [`PgStore`], typed statements on a [`PgPool`], migrations from
//! `migrations/postgres`, lease times on the database's clock ([`clock`]). Why it is shaped
//! so: `docs/store.md`.

mod agents;
mod clock;
mod deployments;
mod environments;
mod events;
mod files;
mod fork;
mod hot;
mod keys;
mod known_bodies;
mod leases;
mod memory;
mod rows;
mod sessions;
mod sink;
mod skills;
mod transact;
mod vaults;
// Hooks.
mod hooks;
mod webhooks;
mod work;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, Postgres};
use sqlx::{Encode, QueryBuilder, Type};

use super::{
    AgentFilter, Deleted, Direction, EnvironmentDeletion, EventFilter, EventRecord, ExpiredWork,
    KeyRecord, NewEvent, OpsCounts, Revocation, Scan, SessionFilter, SessionRecord, SessionTxn,
    StoppedWork, Store, StoreResult, ThreadRecord, WorkRecord, WorkStats, WorkTxn, Writer,
};
use crate::Attempt;
use crate::CredentialRecord;
use crate::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    NextFire,
};
use crate::{FileFilter, FileRecord};
use crate::{
    MemoryStoreFilter, MemoryVersionFilter, MemoryWrite, MemoryWriteOutcome, RedactOutcome,
};
use crate::{NewSkillVersion, SkillRecord, SkillVersionDelete, SkillVersionRecord};
use clock::Clock;
use mast_domain::agent::Agent;
use mast_domain::environment::Environment;
use mast_domain::memory::{Actor, Memory, MemoryStore, MemoryVersion};
use mast_domain::time::Micros;
use mast_domain::vault::Vault;

/// Migrations embedded in the binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// The origin named in the change signals the store sends: not a replica, since any process
/// writing the store (the CLI included) sends them.
const STORE_SIGNAL_ORIGIN: &str = "store";

/// Tells every replica on this database of a change (API keys, hooks) when `tx` commits:
/// Postgres delivers a notification only on commit (never for a rollback), after the change
/// is visible, so a replica that hears it and looks again finds the new state.
async fn announce(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    signal: crate::signal::Signal,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(crate::notify::CHANNEL)
        .bind(signal.encode(STORE_SIGNAL_ORIGIN))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The [`Store`] on Postgres. Cheap to clone (a pool, a shared clock and shared caches).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The session transaction's and the runner's reads' own connections (see [`hot`]).
    hot: Arc<hot::HotConns>,
    clock: Arc<Clock>,
    /// The session bodies this process read, so hot reads leave out an unchanged one.
    bodies: Arc<known_bodies::KnownBodies>,
}

/// Connects to `url`, runs pending migrations, and returns the store.
pub async fn connect(url: &str, max_connections: u32) -> StoreResult<PgStore> {
    use sqlx::ConnectOptions as _;
    use std::str::FromStr as _;
    // Statements are logged at `trace` only (noise at `debug`, and they may carry user
    // data); slow ones (over a second) at `warn`.
    let options = PgConnectOptions::from_str(url)?
        .log_statements(tracing::log::LevelFilter::Trace)
        .log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_secs(1));
    // Three quarters of the connections serve the engine's hot path, the rest everything else.
    let hot_size = (max_connections * 3 / 4).max(1);
    let pool = PgPoolOptions::new()
        .max_connections(max_connections.saturating_sub(hot_size).max(2))
        // Fail fast while the database is down instead of hanging requests.
        .acquire_timeout(Duration::from_secs(5))
        // A connection used a moment ago is alive; sqlx's own check pings on every use.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > Duration::from_secs(1) {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .connect_with(options.clone())
        .await?;
    let hot = Arc::new(hot::HotConns::new(
        options,
        hot_size,
        transact::prepared_at_connect(),
    ));
    rewrite_history(&pool).await?;
    MIGRATOR
        .run(&pool)
        .await
        .map_err(|e| anyhow::anyhow!("postgres migrations failed: {e}"))?;
    let clock = Arc::new(Clock::default());
    clock.sync(&pool).await?;
    Ok(PgStore {
        pool,
        hot,
        clock,
        bodies: Arc::new(known_bodies::KnownBodies::new(known_bodies::DEFAULT_BUDGET)),
    })
}

/// Rewrites the rows an earlier release recorded for migrations since renumbered or
/// reworded (see `migration_history`), once, under a lock of its own so replicas starting
/// together do not interleave.
async fn rewrite_history(pool: &PgPool) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('mast: migration history'))")
        .execute(&mut *tx)
        .await?;
    let recorded: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *tx)
        .await?;
    if recorded {
        for r in crate::migration_history::rewrites(
            crate::migration_history::Backend::Postgres,
            &MIGRATOR,
        ) {
            sqlx::query(
                "UPDATE _sqlx_migrations SET version = $1, checksum = $2 \
                 WHERE version = $3 AND checksum = $4",
            )
            .bind(r.version)
            .bind(&r.checksum)
            .bind(r.old_version)
            .bind(&r.old_checksum)
            .execute(&mut *tx)
            .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// The newest of the `recorded` (version, checksum) migration rows, in this binary's
/// numbering (a database an earlier release migrated records older numbers).
pub fn newest_applied(recorded: &[(i64, Vec<u8>)]) -> i64 {
    crate::migration_history::newest_applied(
        crate::migration_history::Backend::Postgres,
        &MIGRATOR,
        recorded,
    )
}

/// The newest migration this binary carries.
pub fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Appends a keyset page to a list query: rows beyond `scan.after`, ordered, limited.
fn push_scan<'a, K>(qb: &mut QueryBuilder<'a, Postgres>, column: &str, scan: &Scan<K>)
where
    K: Clone + Send + Encode<'a, Postgres> + Type<Postgres> + 'a,
{
    let (op, order) = match scan.direction {
        Direction::Ascending => (" > ", " ASC"),
        Direction::Descending => (" < ", " DESC"),
    };
    if let Some(after) = &scan.after {
        qb.push(" AND ")
            .push(column)
            .push(op)
            .push_bind(after.clone());
    }
    qb.push(" ORDER BY ").push(column).push(order);
    qb.push(" LIMIT ").push_bind(scan.limit);
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<String> {
        self.ensure_workspace_pg(name).await
    }

    async fn insert_api_key(
        &self,
        id: &str,
        workspace_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        self.insert_api_key_pg(id, workspace_id, key_hash).await
    }

    async fn workspace_for_key(&self, key_hash: &str) -> StoreResult<Option<String>> {
        self.workspace_for_key_pg(key_hash).await
    }

    async fn count_api_keys(&self) -> StoreResult<i64> {
        self.count_api_keys_pg().await
    }

    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>> {
        self.list_keys_pg().await
    }

    async fn revoke_api_key(&self, id: &str) -> StoreResult<Revocation> {
        self.revoke_api_key_pg(id).await
    }

    async fn insert_agent(&self, workspace_id: &str, agent: &Agent) -> StoreResult<()> {
        self.insert_agent_pg(workspace_id, agent).await
    }

    async fn get_agent(
        &self,
        workspace_id: &str,
        id: &str,
        version: Option<i64>,
    ) -> StoreResult<Option<Agent>> {
        self.get_agent_pg(workspace_id, id, version).await
    }

    async fn append_agent_version(
        &self,
        workspace_id: &str,
        agent: &Agent,
        expected: i64,
    ) -> StoreResult<()> {
        self.append_agent_version_pg(workspace_id, agent, expected)
            .await
    }

    async fn list_agents(
        &self,
        workspace_id: &str,
        filter: &AgentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Agent>> {
        self.list_agents_pg(workspace_id, filter, scan).await
    }

    async fn list_agent_versions(
        &self,
        workspace_id: &str,
        id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<Agent>> {
        self.list_agent_versions_pg(workspace_id, id, scan).await
    }

    async fn archive_agent(
        &self,
        workspace_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<Option<Agent>> {
        self.archive_agent_pg(workspace_id, id, at).await
    }

    async fn insert_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        created_at: Micros,
    ) -> StoreResult<()> {
        self.insert_environment_pg(workspace_id, env, created_at)
            .await
    }

    async fn get_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<Environment>> {
        self.get_environment_pg(workspace_id, id).await
    }

    async fn update_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        self.update_environment_pg(workspace_id, env, at, archived)
            .await
    }

    async fn list_environments(
        &self,
        workspace_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Environment>> {
        self.list_environments_pg(workspace_id, include_archived, scan)
            .await
    }

    async fn delete_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<EnvironmentDeletion> {
        self.delete_environment_pg(workspace_id, id).await
    }

    async fn create_session(
        &self,
        session: &SessionRecord,
        thread: &ThreadRecord,
        events: &[NewEvent],
        work: Option<&WorkRecord>,
    ) -> StoreResult<Vec<EventRecord>> {
        self.create_session_pg(session, thread, events, work).await
    }

    async fn get_session(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        self.get_session_pg(Some(workspace_id), id).await
    }

    async fn get_session_by_id(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        self.get_session_pg(None, id).await
    }

    async fn last_seqs(&self, ids: &[String]) -> StoreResult<Vec<(String, i64)>> {
        self.last_seqs_pg(ids).await
    }

    async fn list_sessions(
        &self,
        workspace_id: &str,
        filter: &SessionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SessionRecord>> {
        self.list_sessions_pg(workspace_id, filter, scan).await
    }

    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<Deleted> {
        self.delete_session_pg(workspace_id, id).await
    }

    async fn list_threads(
        &self,
        session_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<ThreadRecord>> {
        self.list_threads_pg(session_id, scan).await
    }

    async fn get_thread(&self, session_id: &str, id: &str) -> StoreResult<Option<ThreadRecord>> {
        self.get_thread_pg(session_id, id).await
    }

    async fn transact(
        &self,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        self.transact_pg(session_id, writer, f).await
    }

    async fn transact_from(
        &self,
        session_id: &str,
        writer: &Writer,
        expected: &SessionRecord,
        f: SessionTxn,
    ) -> StoreResult<Attempt> {
        self.transact_from_pg(session_id, writer, expected, f).await
    }

    fn decides_on_held_rows(&self) -> bool {
        true
    }

    async fn list_events(
        &self,
        session_id: &str,
        filter: &EventFilter,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<EventRecord>> {
        self.list_events_pg(session_id, filter, scan).await
    }

    async fn events_after(
        &self,
        session_id: &str,
        after_seq: i64,
        kinds: &[&str],
        limit: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        self.events_after_pg(session_id, after_seq, kinds, limit)
            .await
    }

    async fn get_event(&self, session_id: &str, id: &str) -> StoreResult<Option<EventRecord>> {
        self.get_event_pg(session_id, id).await
    }

    async fn has_answer(&self, session_id: &str, id: &str, kind: &str) -> StoreResult<bool> {
        self.has_answer_pg(session_id, id, kind).await
    }

    async fn claim_lease(
        &self,
        session_id: &str,
        owner: &str,
        now: Micros,
        until: Micros,
    ) -> StoreResult<bool> {
        self.claim_lease_pg(session_id, owner, now, until).await
    }

    async fn renew_lease(&self, session_id: &str, owner: &str, until: Micros) -> StoreResult<bool> {
        self.renew_lease_pg(session_id, owner, until).await
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> StoreResult<()> {
        self.release_lease_pg(session_id, owner).await
    }

    async fn insert_environment_key(
        &self,
        id: &str,
        workspace_id: &str,
        environment_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        self.insert_environment_key_pg(id, workspace_id, environment_id, key_hash)
            .await
    }

    async fn list_environment_keys(
        &self,
        environment_id: &str,
    ) -> StoreResult<Vec<(String, Micros)>> {
        self.list_environment_keys_pg(environment_id).await
    }

    async fn delete_environment_key(&self, environment_id: &str, id: &str) -> StoreResult<bool> {
        self.delete_environment_key_pg(environment_id, id).await
    }

    async fn environment_for_key(&self, key_hash: &str) -> StoreResult<Option<(String, String)>> {
        self.environment_for_key_pg(key_hash).await
    }

    async fn work_for_token(&self, token_hash: &str) -> StoreResult<Option<WorkRecord>> {
        self.work_for_token_pg(token_hash).await
    }

    async fn poll_work(
        &self,
        environment_id: &str,
        worker_id: Option<&str>,
        now: Micros,
        reclaim_before: Micros,
        token_hash: &str,
    ) -> StoreResult<Option<WorkRecord>> {
        self.poll_work_pg(environment_id, worker_id, now, reclaim_before, token_hash)
            .await
    }

    async fn transact_work(
        &self,
        environment_id: &str,
        id: &str,
        f: WorkTxn,
    ) -> StoreResult<Option<WorkRecord>> {
        self.transact_work_pg(environment_id, id, f).await
    }

    async fn get_work(&self, environment_id: &str, id: &str) -> StoreResult<Option<WorkRecord>> {
        self.get_work_pg(environment_id, id).await
    }

    async fn list_work(
        &self,
        environment_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<WorkRecord>> {
        self.list_work_pg(environment_id, scan).await
    }

    async fn work_stats(&self, environment_id: &str, now: Micros) -> StoreResult<WorkStats> {
        self.work_stats_pg(environment_id, now).await
    }

    async fn requeue_expired_work(&self, now: Micros) -> StoreResult<ExpiredWork> {
        self.requeue_expired_work_pg(now).await
    }

    async fn work_needing_requeue_check(&self, limit: i64) -> StoreResult<Vec<StoppedWork>> {
        self.work_needing_requeue_check_pg(limit).await
    }

    async fn clear_requeue_check(&self, work_id: &str) -> StoreResult<()> {
        self.clear_requeue_check_pg(work_id).await
    }

    async fn stop_session_work(
        &self,
        session_id: &str,
        now: Micros,
        graceful: bool,
    ) -> StoreResult<()> {
        self.stop_session_work_pg(session_id, now, graceful).await
    }

    async fn clear_foreign_leases(&self, owner: &str) -> StoreResult<u64> {
        self.clear_foreign_leases_pg(owner).await
    }

    async fn sessions_needing_runner(&self, now: Micros, limit: i64) -> StoreResult<Vec<String>> {
        self.sessions_needing_runner_pg(now, limit).await
    }

    async fn readiness(&self) -> Option<String> {
        let latest = latest_migration();
        let v = sqlx::query_scalar::<_, i64>(
            "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success = TRUE",
        )
        .fetch_one(&self.pool)
        .await;
        match v {
            Err(e) => Some(format!("the database is unreachable: {e}")),
            Ok(v) if v < latest => Some(format!(
                "the database schema is at migration {v}, this binary needs {latest}"
            )),
            Ok(_) => None,
        }
    }

    async fn ops_counts(&self) -> StoreResult<OpsCounts> {
        let sessions_by_status = sqlx::query_as::<_, (String, i64)>(
            "SELECT status, COUNT(*) FROM sessions GROUP BY status",
        )
        .fetch_all(&self.pool)
        .await?;
        let queued_work =
            sqlx::query_scalar("SELECT COUNT(*) FROM work_items WHERE state = 'queued'")
                .fetch_one(&self.pool)
                .await?;
        Ok(OpsCounts {
            sessions_by_status,
            queued_work,
        })
    }

    async fn insert_vault(&self, ws: &str, vault: &Vault, at: Micros) -> StoreResult<()> {
        self.insert_vault_pg(ws, vault, at).await
    }

    async fn get_vault(&self, ws: &str, id: &str) -> StoreResult<Option<Vault>> {
        self.get_vault_pg(ws, id).await
    }

    async fn update_vault(
        &self,
        ws: &str,
        vault: &Vault,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        self.update_vault_pg(ws, vault, at, archived).await
    }

    async fn list_vaults(
        &self,
        ws: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Vault>> {
        self.list_vaults_pg(ws, include_archived, scan).await
    }

    async fn delete_vault(&self, ws: &str, id: &str) -> StoreResult<bool> {
        self.delete_vault_pg(ws, id).await
    }

    async fn insert_credential(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        at: Micros,
    ) -> StoreResult<()> {
        self.insert_credential_pg(ws, rec, at).await
    }

    async fn get_credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> StoreResult<Option<CredentialRecord>> {
        self.get_credential_pg(ws, vault_id, id).await
    }

    async fn update_credential(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        at: Micros,
        archived: bool,
        expected: Option<&[u8]>,
    ) -> StoreResult<bool> {
        self.update_credential_pg(ws, rec, at, archived, expected)
            .await
    }

    async fn list_credentials(
        &self,
        ws: &str,
        vault_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<CredentialRecord>> {
        self.list_credentials_pg(ws, vault_id, include_archived, scan)
            .await
    }

    async fn delete_credential(&self, ws: &str, vault_id: &str, id: &str) -> StoreResult<bool> {
        self.delete_credential_pg(ws, vault_id, id).await
    }

    async fn credentials_for_server(
        &self,
        ws: &str,
        vault_ids: &[String],
        server_url: &str,
    ) -> StoreResult<Vec<CredentialRecord>> {
        self.credentials_for_server_pg(ws, vault_ids, server_url)
            .await
    }

    async fn insert_file(&self, file: &FileRecord) -> StoreResult<()> {
        self.insert_file_pg(file).await
    }

    async fn get_file(&self, workspace_id: &str, id: &str) -> StoreResult<Option<FileRecord>> {
        self.get_file_pg(workspace_id, id).await
    }

    async fn list_files(
        &self,
        workspace_id: &str,
        filter: &FileFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<FileRecord>> {
        self.list_files_pg(workspace_id, filter, scan).await
    }

    async fn delete_file(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        self.delete_file_pg(workspace_id, id).await
    }

    async fn expired_files(&self, now: Micros, limit: i64) -> StoreResult<Vec<FileRecord>> {
        self.expired_files_pg(now, limit).await
    }

    async fn existing_file_ids(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        self.existing_file_ids_pg(ids).await
    }

    async fn insert_memory_store(
        &self,
        ws: &str,
        store: &MemoryStore,
        at: Micros,
    ) -> StoreResult<()> {
        self.insert_memory_store_pg(ws, store, at).await
    }

    async fn get_memory_store(&self, ws: &str, id: &str) -> StoreResult<Option<MemoryStore>> {
        self.get_memory_store_pg(ws, id).await
    }

    async fn update_memory_store(
        &self,
        ws: &str,
        store: &MemoryStore,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        self.update_memory_store_pg(ws, store, at, archived).await
    }

    async fn list_memory_stores(
        &self,
        ws: &str,
        filter: &MemoryStoreFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryStore>> {
        self.list_memory_stores_pg(ws, filter, scan).await
    }

    async fn delete_memory_store(&self, ws: &str, id: &str) -> StoreResult<bool> {
        self.delete_memory_store_pg(ws, id).await
    }

    async fn get_memory(&self, ws: &str, store_id: &str, id: &str) -> StoreResult<Option<Memory>> {
        self.get_memory_pg(ws, store_id, id).await
    }

    async fn list_memories(
        &self,
        ws: &str,
        store_id: &str,
        prefix: &str,
        from: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<Memory>> {
        self.list_memories_pg(ws, store_id, prefix, from, limit)
            .await
    }

    async fn write_memory(&self, ws: &str, write: &MemoryWrite) -> StoreResult<MemoryWriteOutcome> {
        self.write_memory_pg(ws, write).await
    }

    async fn get_memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
    ) -> StoreResult<Option<MemoryVersion>> {
        self.get_memory_version_pg(ws, store_id, id).await
    }

    async fn list_memory_versions(
        &self,
        ws: &str,
        store_id: &str,
        filter: &MemoryVersionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryVersion>> {
        self.list_memory_versions_pg(ws, store_id, filter, scan)
            .await
    }

    async fn redact_memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
        by: Option<&Actor>,
        at: Micros,
    ) -> StoreResult<RedactOutcome> {
        self.redact_memory_version_pg(ws, store_id, id, by, at)
            .await
    }

    async fn insert_skill(&self, skill: &SkillRecord, first: &NewSkillVersion) -> StoreResult<()> {
        self.insert_skill_pg(skill, first).await
    }

    async fn insert_skill_version(
        &self,
        ws: &str,
        new: &NewSkillVersion,
    ) -> StoreResult<SkillRecord> {
        self.insert_skill_version_pg(ws, new).await
    }

    async fn get_skill(&self, ws: &str, id: &str) -> StoreResult<Option<SkillRecord>> {
        self.get_skill_pg(ws, id).await
    }

    async fn list_skills(
        &self,
        ws: &str,
        source: Option<&str>,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillRecord>> {
        self.list_skills_pg(ws, source, scan).await
    }

    async fn delete_skill(&self, ws: &str, id: &str) -> StoreResult<bool> {
        self.delete_skill_pg(ws, id).await
    }

    async fn get_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
    ) -> StoreResult<Option<SkillVersionRecord>> {
        self.get_skill_version_pg(ws, skill_id, id).await
    }

    async fn list_skill_versions(
        &self,
        ws: &str,
        skill_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillVersionRecord>> {
        self.list_skill_versions_pg(ws, skill_id, scan).await
    }

    async fn delete_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<SkillVersionDelete> {
        self.delete_skill_version_pg(ws, skill_id, id, at).await
    }

    async fn skill_files(
        &self,
        version_id: &str,
    ) -> StoreResult<Vec<mast_domain::skill_bundle::BundleFile>> {
        self.skill_files_pg(version_id).await
    }

    async fn api_key_id_for_hash(&self, key_hash: &str) -> StoreResult<Option<String>> {
        self.api_key_id_for_hash_pg(key_hash).await
    }

    // Hooks.

    async fn insert_hook(&self, ws: &str, rec: &crate::HookRecord, at: Micros) -> StoreResult<()> {
        self.insert_hook_pg(ws, rec, at).await
    }

    async fn get_hook(&self, ws: &str, id: &str) -> StoreResult<Option<crate::HookRecord>> {
        self.get_hook_pg(ws, id).await
    }

    async fn list_hooks(
        &self,
        ws: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<mast_domain::hook::Hook>> {
        self.list_hooks_pg(ws, scan).await
    }

    async fn hooks_for_event(&self, ws: &str, event: &str) -> StoreResult<Vec<crate::HookRecord>> {
        self.hooks_for_event_pg(ws, event).await
    }

    async fn delete_hook(&self, ws: &str, id: &str) -> StoreResult<bool> {
        self.delete_hook_pg(ws, id).await
    }

    // Session fork (Mast's own).

    async fn insert_fork(&self, fork: &crate::SessionFork) -> StoreResult<()> {
        self.insert_fork_pg(fork).await
    }

    async fn event_forked_from(&self, session_id: &str, id: &str) -> StoreResult<Option<String>> {
        self.event_forked_from_pg(session_id, id).await
    }

    // Webhooks.
    async fn emit_webhook_events(&self, events: &[webhooks::WebhookEvent]) -> StoreResult<()> {
        self.emit_webhook_events_pg(events).await
    }

    async fn insert_webhook_endpoint(&self, e: &webhooks::EndpointRecord) -> StoreResult<()> {
        self.insert_webhook_endpoint_pg(e).await
    }

    async fn get_webhook_endpoint(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::EndpointRecord>> {
        self.get_webhook_endpoint_pg(workspace_id, id).await
    }

    async fn webhook_endpoint_by_id(
        &self,
        id: &str,
    ) -> StoreResult<Option<webhooks::EndpointRecord>> {
        self.endpoint_by_id_pg(id).await
    }

    async fn update_webhook_endpoint(&self, e: &webhooks::EndpointRecord) -> StoreResult<bool> {
        self.update_webhook_endpoint_pg(e).await
    }

    async fn list_webhook_endpoints(
        &self,
        workspace_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<webhooks::EndpointRecord>> {
        self.list_webhook_endpoints_pg(workspace_id, scan).await
    }

    async fn delete_webhook_endpoint(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        self.delete_webhook_endpoint_pg(workspace_id, id).await
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<webhooks::DeliveryRecord>> {
        self.list_webhook_deliveries_pg(endpoint_id, scan).await
    }

    async fn get_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::DeliveryRecord>> {
        self.get_webhook_delivery_pg(endpoint_id, id).await
    }

    async fn list_webhook_attempts(
        &self,
        delivery_id: &str,
    ) -> StoreResult<Vec<webhooks::AttemptRecord>> {
        self.list_webhook_attempts_pg(delivery_id).await
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::DeliveryRecord>> {
        self.replay_webhook_delivery_pg(endpoint_id, id).await
    }

    async fn claim_webhook_deliveries(
        &self,
        owner: &str,
        lease: Micros,
        limit: i64,
    ) -> StoreResult<Vec<webhooks::DeliveryRecord>> {
        self.claim_webhook_deliveries_pg(owner, lease, limit).await
    }

    async fn finish_webhook_attempt(
        &self,
        owner: &str,
        attempt: &webhooks::AttemptRecord,
        outcome: webhooks::AttemptOutcome,
    ) -> StoreResult<bool> {
        self.finish_webhook_attempt_pg(owner, attempt, outcome)
            .await
    }

    // ---- deployments ----

    async fn insert_deployment(&self, d: &DeploymentRecord) -> StoreResult<()> {
        self.insert_deployment_pg(d).await
    }

    async fn get_deployment(&self, ws: &str, id: &str) -> StoreResult<Option<DeploymentRecord>> {
        self.get_deployment_pg(ws, id).await
    }

    async fn update_deployment(
        &self,
        d: &DeploymentRecord,
        next: NextFire,
        change: DeploymentChange,
    ) -> StoreResult<()> {
        self.update_deployment_pg(d, next, change).await
    }

    async fn list_deployments(
        &self,
        ws: &str,
        filter: &DeploymentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRecord>> {
        self.list_deployments_pg(ws, filter, scan).await
    }

    async fn due_deployments(&self, now: Micros, limit: i64) -> StoreResult<Vec<DeploymentRecord>> {
        self.due_deployments_pg(now, limit).await
    }

    async fn claim_deployment_fire(
        &self,
        id: &str,
        expected: Micros,
        next: Option<Micros>,
    ) -> StoreResult<bool> {
        self.claim_deployment_fire_pg(id, expected, next).await
    }

    async fn record_deployment_run(
        &self,
        run: &DeploymentRunRecord,
        pause: Option<&serde_json::Value>,
    ) -> StoreResult<()> {
        self.record_deployment_run_pg(run, pause).await
    }

    async fn get_deployment_run(
        &self,
        ws: &str,
        id: &str,
    ) -> StoreResult<Option<DeploymentRunRecord>> {
        self.get_deployment_run_pg(ws, id).await
    }

    async fn list_deployment_runs(
        &self,
        ws: &str,
        filter: &DeploymentRunFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRunRecord>> {
        self.list_deployment_runs_pg(ws, filter, scan).await
    }
}
