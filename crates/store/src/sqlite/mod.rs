//! The embedded SQLite store: one file under the data directory, in WAL mode, served by
//! threads that own their connections (see [`db`]): one writer, which runs each operation
//! whole (read, decide, write, commit) in one hop from the async side, and a few readers.
//! Built on rusqlite: typed columns, cached prepared statements, no per-statement thread hop.

mod catalog;
mod db;
mod deployments;
mod error;
mod files;
mod fork;
mod memory;
mod migrate;
mod rows;
mod sessions;
mod skills;
mod vaults;
// Hooks.
mod hooks;
mod webhooks;
mod work;

use std::path::Path;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags};

use self::db::Db;
use super::CredentialRecord;
use super::{
    AgentFilter, Deleted, EnvironmentDeletion, EventFilter, EventRecord, ExpiredWork, KeyRecord,
    NewEvent, OpsCounts, Revocation, Scan, SessionFilter, SessionRecord, SessionTxn, StoppedWork,
    Store, StoreResult, ThreadRecord, WorkRecord, WorkStats, WorkTxn, Writer,
};
use crate::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    NextFire,
};
use crate::{
    FileFilter, FileRecord, MemoryStoreFilter, MemoryVersionFilter, MemoryWrite,
    MemoryWriteOutcome, RedactOutcome,
};
use crate::{NewSkillVersion, SkillRecord, SkillVersionDelete, SkillVersionRecord};
use mast_domain::agent::Agent;
use mast_domain::environment::Environment;
use mast_domain::ids::new_id;
use mast_domain::memory::{Actor, Memory, MemoryStore, MemoryVersion};
use mast_domain::time::Micros;
use mast_domain::vault::Vault;

/// Reader threads (and connections); WAL lets them read while the writer writes.
const READERS: usize = 4;
/// Prepared statements each connection keeps (every fixed statement fits, and the common
/// shapes of the filtered lists).
const STATEMENT_CACHE: usize = 128;

/// SQLite's `synchronous` setting, which decides what a power loss (or an OS crash) can take
/// back. A crash of Mast alone loses nothing acknowledged under either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit is synced to disk before it is acknowledged: nothing acknowledged is lost.
    #[default]
    Full,
    /// The WAL is synced only at checkpoints: faster commits, but a power loss can take back
    /// the last transactions, events clients were told are stored included.
    Normal,
}

impl std::str::FromStr for Synchronous {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "full" => Ok(Synchronous::Full),
            "normal" => Ok(Synchronous::Normal),
            _ => anyhow::bail!("must be `full` or `normal`"),
        }
    }
}

impl Synchronous {
    /// The value of `PRAGMA synchronous` for this setting.
    pub fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// The SQLite [`Store`].
#[derive(Clone)]
pub struct SqliteStore {
    db: Db,
}

/// The newest of the `recorded` (version, checksum) migration rows, in this binary's
/// numbering (a database an earlier release migrated records older numbers).
pub fn newest_applied(recorded: &[(i64, Vec<u8>)]) -> i64 {
    crate::migration_history::newest_applied(
        crate::migration_history::Backend::Sqlite,
        &migrate::MIGRATOR,
        recorded,
    )
}

/// The newest migration this binary carries.
pub fn latest_migration() -> i64 {
    migrate::latest()
}

fn connect(
    path: &Path,
    flags: OpenFlags,
    synchronous: Synchronous,
) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(path, flags)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
        synchronous.pragma()
    ))?;
    Ok(conn)
}

/// Opens (creating if needed) `<data_dir>/mast.db`, migrates it and returns the store.
pub async fn open(data_dir: &Path, synchronous: Synchronous) -> StoreResult<SqliteStore> {
    let data_dir = data_dir.to_path_buf();
    // Opening and migrating do blocking I/O (and a migration may take a while).
    tokio::task::spawn_blocking(move || open_blocking(&data_dir, synchronous))
        .await
        .map_err(|e| anyhow::anyhow!("opening the SQLite store panicked: {e}"))?
}

fn open_blocking(data_dir: &Path, synchronous: Synchronous) -> StoreResult<SqliteStore> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create data directory {}: {e}", data_dir.display()))?;
    let path = data_dir.join("mast.db");
    let mut writer = connect(
        &path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        synchronous,
    )?;
    let mode: String = writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(
            anyhow::anyhow!("{} cannot use WAL (journal mode {mode})", path.display()).into(),
        );
    }
    // The database is the server's alone (SQLite gives its WAL files the same mode).
    for name in ["mast.db", "mast.db-wal", "mast.db-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let file = data_dir.join(name);
        if file.exists() {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| anyhow::anyhow!("cannot restrict {}: {e}", file.display()))?;
        }
    }
    migrate::run(&mut writer).map_err(|e| anyhow::anyhow!("sqlite migrations failed: {e}"))?;
    let readers = (0..READERS)
        .map(|_| {
            connect(
                &path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                synchronous,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let db = Db::start(writer, readers)
        .map_err(|e| anyhow::anyhow!("cannot start the SQLite threads: {e}"))?;
    Ok(SqliteStore { db })
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<String> {
        let name = name.to_string();
        let n = name.clone();
        if let Some(id) = self.db.read(move |c| catalog::workspace_id(c, &n)).await? {
            return Ok(id);
        }
        let id = new_id("wrkspc");
        self.db
            .write(move |c| catalog::ensure_workspace(c, &name, &id))
            .await
    }

    async fn insert_api_key(
        &self,
        id: &str,
        workspace_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        let (id, ws, hash) = (
            id.to_string(),
            workspace_id.to_string(),
            key_hash.to_string(),
        );
        self.db
            .write(move |c| catalog::insert_api_key(c, &id, &ws, &hash))
            .await
    }

    async fn workspace_for_key(&self, key_hash: &str) -> StoreResult<Option<String>> {
        let hash = key_hash.to_string();
        self.db
            .read(move |c| catalog::workspace_for_key(c, &hash))
            .await
    }

    async fn count_api_keys(&self) -> StoreResult<i64> {
        self.db.read(catalog::count_api_keys).await
    }

    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>> {
        self.db.read(catalog::list_keys).await
    }

    async fn revoke_api_key(&self, id: &str) -> StoreResult<Revocation> {
        let id = id.to_string();
        self.db
            .write(move |c| catalog::revoke_api_key(c, &id))
            .await
    }

    async fn insert_agent(&self, workspace_id: &str, agent: &Agent) -> StoreResult<()> {
        let (ws, agent) = (workspace_id.to_string(), agent.clone());
        self.db
            .write(move |c| catalog::insert_agent(c, &ws, &agent))
            .await
    }

    async fn get_agent(
        &self,
        workspace_id: &str,
        id: &str,
        version: Option<i64>,
    ) -> StoreResult<Option<Agent>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .read(move |c| catalog::get_agent(c, &ws, &id, version))
            .await
    }

    async fn append_agent_version(
        &self,
        workspace_id: &str,
        agent: &Agent,
        expected: i64,
    ) -> StoreResult<()> {
        let (ws, agent) = (workspace_id.to_string(), agent.clone());
        self.db
            .write(move |c| catalog::append_agent_version(c, &ws, &agent, expected))
            .await
    }

    async fn list_agents(
        &self,
        workspace_id: &str,
        filter: &AgentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Agent>> {
        let (ws, filter, scan) = (workspace_id.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| catalog::list_agents(c, &ws, &filter, &scan))
            .await
    }

    async fn list_agent_versions(
        &self,
        workspace_id: &str,
        id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<Agent>> {
        let (ws, id, scan) = (workspace_id.to_string(), id.to_string(), scan.clone());
        self.db
            .read(move |c| catalog::list_agent_versions(c, &ws, &id, &scan))
            .await
    }

    async fn archive_agent(
        &self,
        workspace_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<Option<Agent>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .write(move |c| catalog::archive_agent(c, &ws, &id, at))
            .await
    }

    async fn insert_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        created_at: Micros,
    ) -> StoreResult<()> {
        let (ws, env) = (workspace_id.to_string(), env.clone());
        self.db
            .write(move |c| catalog::insert_environment(c, &ws, &env, created_at))
            .await
    }

    async fn get_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<Environment>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .read(move |c| catalog::get_environment(c, &ws, &id))
            .await
    }

    async fn update_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let (ws, env) = (workspace_id.to_string(), env.clone());
        self.db
            .write(move |c| catalog::update_environment(c, &ws, &env, at, archived))
            .await
    }

    async fn list_environments(
        &self,
        workspace_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Environment>> {
        let (ws, scan) = (workspace_id.to_string(), scan.clone());
        self.db
            .read(move |c| catalog::list_environments(c, &ws, include_archived, &scan))
            .await
    }

    async fn delete_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<EnvironmentDeletion> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .write(move |c| catalog::delete_environment(c, &ws, &id))
            .await
    }

    async fn create_session(
        &self,
        session: &SessionRecord,
        thread: &ThreadRecord,
        events: &[NewEvent],
        work: Option<&WorkRecord>,
    ) -> StoreResult<Vec<EventRecord>> {
        let (s, t, events, w) = (
            session.clone(),
            thread.clone(),
            events.to_vec(),
            work.cloned(),
        );
        self.db
            .write(move |c| sessions::create_session(c, &s, &t, events, w.as_ref()))
            .await
    }

    async fn get_session(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .read(move |c| sessions::get_session(c, Some(&ws), &id))
            .await
    }

    async fn get_session_by_id(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        let id = id.to_string();
        self.db
            .read(move |c| sessions::get_session(c, None, &id))
            .await
    }

    async fn last_seqs(&self, ids: &[String]) -> StoreResult<Vec<(String, i64)>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let ids = ids.to_vec();
        self.db.read(move |c| sessions::last_seqs(c, &ids)).await
    }

    async fn list_sessions(
        &self,
        workspace_id: &str,
        filter: &SessionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SessionRecord>> {
        let (ws, filter, scan) = (workspace_id.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| sessions::list_sessions(c, &ws, &filter, &scan))
            .await
    }

    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<Deleted> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .write(move |c| sessions::delete_session(c, &ws, &id))
            .await
    }

    async fn list_threads(
        &self,
        session_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<ThreadRecord>> {
        let (sid, scan) = (session_id.to_string(), scan.clone());
        self.db
            .read(move |c| sessions::list_threads(c, &sid, &scan))
            .await
    }

    async fn get_thread(&self, session_id: &str, id: &str) -> StoreResult<Option<ThreadRecord>> {
        let (sid, id) = (session_id.to_string(), id.to_string());
        self.db
            .read(move |c| sessions::get_thread(c, &sid, &id))
            .await
    }

    async fn transact(
        &self,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        let started = std::time::Instant::now();
        let (sid, writer) = (session_id.to_string(), writer.clone());
        let out = self
            .db
            .write(move |c| sessions::transact(c, &sid, &writer, f))
            .await?;
        metrics::histogram!(crate::EVENT_APPEND_DURATION).record(started.elapsed().as_secs_f64());
        Ok(out)
    }

    async fn list_events(
        &self,
        session_id: &str,
        filter: &EventFilter,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<EventRecord>> {
        let (sid, filter, scan) = (session_id.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| sessions::list_events(c, &sid, &filter, &scan))
            .await
    }

    async fn events_after(
        &self,
        session_id: &str,
        after_seq: i64,
        kinds: &[&str],
        limit: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let sid = session_id.to_string();
        let kinds: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
        self.db
            .read(move |c| sessions::events_after(c, &sid, after_seq, &kinds, limit))
            .await
    }

    async fn get_event(&self, session_id: &str, id: &str) -> StoreResult<Option<EventRecord>> {
        let (sid, id) = (session_id.to_string(), id.to_string());
        self.db
            .read(move |c| sessions::get_event(c, &sid, &id))
            .await
    }

    async fn has_answer(&self, session_id: &str, id: &str, kind: &str) -> StoreResult<bool> {
        let (sid, id, kind) = (session_id.to_string(), id.to_string(), kind.to_string());
        self.db
            .read(move |c| sessions::has_answer(c, &sid, &id, &kind))
            .await
    }

    async fn claim_lease(
        &self,
        session_id: &str,
        owner: &str,
        now: Micros,
        until: Micros,
    ) -> StoreResult<bool> {
        let (sid, owner) = (session_id.to_string(), owner.to_string());
        self.db
            .write(move |c| sessions::claim_lease(c, &sid, &owner, now, until))
            .await
    }

    async fn renew_lease(&self, session_id: &str, owner: &str, until: Micros) -> StoreResult<bool> {
        let (sid, owner) = (session_id.to_string(), owner.to_string());
        self.db
            .write(move |c| sessions::renew_lease(c, &sid, &owner, until))
            .await
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> StoreResult<()> {
        let (sid, owner) = (session_id.to_string(), owner.to_string());
        self.db
            .write(move |c| sessions::release_lease(c, &sid, &owner))
            .await
    }

    async fn insert_environment_key(
        &self,
        id: &str,
        workspace_id: &str,
        environment_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        let (id, ws, env, hash) = (
            id.to_string(),
            workspace_id.to_string(),
            environment_id.to_string(),
            key_hash.to_string(),
        );
        self.db
            .write(move |c| work::insert_environment_key(c, &id, &ws, &env, &hash))
            .await
    }

    async fn list_environment_keys(
        &self,
        environment_id: &str,
    ) -> StoreResult<Vec<(String, Micros)>> {
        let env = environment_id.to_string();
        self.db
            .read(move |c| work::list_environment_keys(c, &env))
            .await
    }

    async fn delete_environment_key(&self, environment_id: &str, id: &str) -> StoreResult<bool> {
        let (env, id) = (environment_id.to_string(), id.to_string());
        self.db
            .write(move |c| work::delete_environment_key(c, &env, &id))
            .await
    }

    async fn environment_for_key(&self, key_hash: &str) -> StoreResult<Option<(String, String)>> {
        let hash = key_hash.to_string();
        self.db
            .read(move |c| work::environment_for_key(c, &hash))
            .await
    }

    async fn work_for_token(&self, token_hash: &str) -> StoreResult<Option<WorkRecord>> {
        let hash = token_hash.to_string();
        self.db.read(move |c| work::work_for_token(c, &hash)).await
    }

    async fn poll_work(
        &self,
        environment_id: &str,
        worker_id: Option<&str>,
        now: Micros,
        reclaim_before: Micros,
        token_hash: &str,
    ) -> StoreResult<Option<WorkRecord>> {
        let (env, worker, hash) = (
            environment_id.to_string(),
            worker_id.map(str::to_string),
            token_hash.to_string(),
        );
        self.db
            .write(move |c| work::poll_work(c, &env, worker.as_deref(), now, reclaim_before, &hash))
            .await
    }

    async fn transact_work(
        &self,
        environment_id: &str,
        id: &str,
        f: WorkTxn,
    ) -> StoreResult<Option<WorkRecord>> {
        let (env, id) = (environment_id.to_string(), id.to_string());
        self.db
            .write(move |c| work::transact_work(c, &env, &id, f))
            .await
    }

    async fn get_work(&self, environment_id: &str, id: &str) -> StoreResult<Option<WorkRecord>> {
        let (env, id) = (environment_id.to_string(), id.to_string());
        self.db.read(move |c| work::get_work(c, &env, &id)).await
    }

    async fn list_work(
        &self,
        environment_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<WorkRecord>> {
        let (env, scan) = (environment_id.to_string(), scan.clone());
        self.db.read(move |c| work::list_work(c, &env, &scan)).await
    }

    async fn work_stats(&self, environment_id: &str, now: Micros) -> StoreResult<WorkStats> {
        let env = environment_id.to_string();
        self.db.read(move |c| work::work_stats(c, &env, now)).await
    }

    async fn requeue_expired_work(&self, now: Micros) -> StoreResult<ExpiredWork> {
        self.db
            .write(move |c| work::requeue_expired_work(c, now))
            .await
    }

    async fn work_needing_requeue_check(&self, limit: i64) -> StoreResult<Vec<StoppedWork>> {
        self.db
            .read(move |c| work::work_needing_requeue_check(c, limit))
            .await
    }

    async fn clear_requeue_check(&self, work_id: &str) -> StoreResult<()> {
        let id = work_id.to_string();
        self.db
            .write(move |c| work::clear_requeue_check(c, &id))
            .await
    }

    async fn stop_session_work(
        &self,
        session_id: &str,
        now: Micros,
        graceful: bool,
    ) -> StoreResult<()> {
        let sid = session_id.to_string();
        self.db
            .write(move |c| work::stop_session_work(c, &sid, now, graceful))
            .await
    }

    async fn clear_foreign_leases(&self, owner: &str) -> StoreResult<u64> {
        let owner = owner.to_string();
        self.db
            .write(move |c| sessions::clear_foreign_leases(c, &owner))
            .await
    }

    async fn sessions_needing_runner(&self, now: Micros, limit: i64) -> StoreResult<Vec<String>> {
        self.db
            .read(move |c| sessions::sessions_needing_runner(c, now, limit))
            .await
    }

    async fn readiness(&self) -> Option<String> {
        let latest = latest_migration();
        match self.db.read(|c| Ok(migrate::applied(c)?)).await {
            Err(e) => Some(format!("the database is unreachable: {e}")),
            Ok(v) if v < latest => Some(format!(
                "the database schema is at migration {v}, this binary needs {latest}"
            )),
            Ok(_) => None,
        }
    }

    async fn ops_counts(&self) -> StoreResult<OpsCounts> {
        self.db.read(sessions::ops_counts).await
    }

    async fn insert_vault(&self, ws: &str, vault: &Vault, at: Micros) -> StoreResult<()> {
        let (ws, v) = (ws.to_string(), vault.clone());
        self.db
            .write(move |c| vaults::insert_vault(c, &ws, &v, at))
            .await
    }

    async fn get_vault(&self, ws: &str, id: &str) -> StoreResult<Option<Vault>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| vaults::get_vault(c, &ws, &id)).await
    }

    async fn update_vault(
        &self,
        ws: &str,
        vault: &Vault,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let (ws, v) = (ws.to_string(), vault.clone());
        self.db
            .write(move |c| vaults::update_vault(c, &ws, &v, at, archived))
            .await
    }

    async fn list_vaults(
        &self,
        ws: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Vault>> {
        let (ws, scan) = (ws.to_string(), scan.clone());
        self.db
            .read(move |c| vaults::list_vaults(c, &ws, include_archived, &scan))
            .await
    }

    async fn delete_vault(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db
            .write(move |c| vaults::delete_vault(c, &ws, &id))
            .await
    }

    async fn insert_credential(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        at: Micros,
    ) -> StoreResult<()> {
        let (ws, rec) = (ws.to_string(), rec.clone());
        self.db
            .write(move |c| vaults::insert_credential(c, &ws, &rec, at))
            .await
    }

    async fn get_credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> StoreResult<Option<CredentialRecord>> {
        let (ws, vault, id) = (ws.to_string(), vault_id.to_string(), id.to_string());
        self.db
            .read(move |c| vaults::get_credential(c, &ws, &vault, &id))
            .await
    }

    async fn update_credential(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        at: Micros,
        archived: bool,
        expected: Option<&[u8]>,
    ) -> StoreResult<bool> {
        let (ws, rec, expected) = (ws.to_string(), rec.clone(), expected.map(<[u8]>::to_vec));
        self.db
            .write(move |c| {
                vaults::update_credential(c, &ws, &rec, at, archived, expected.as_deref())
            })
            .await
    }

    async fn list_credentials(
        &self,
        ws: &str,
        vault_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<CredentialRecord>> {
        let (ws, vault, scan) = (ws.to_string(), vault_id.to_string(), scan.clone());
        self.db
            .read(move |c| vaults::list_credentials(c, &ws, &vault, include_archived, &scan))
            .await
    }

    async fn delete_credential(&self, ws: &str, vault_id: &str, id: &str) -> StoreResult<bool> {
        let (ws, vault, id) = (ws.to_string(), vault_id.to_string(), id.to_string());
        self.db
            .write(move |c| vaults::delete_credential(c, &ws, &vault, &id))
            .await
    }

    async fn credentials_for_server(
        &self,
        ws: &str,
        vault_ids: &[String],
        server_url: &str,
    ) -> StoreResult<Vec<CredentialRecord>> {
        let (ws, ids, url) = (ws.to_string(), vault_ids.to_vec(), server_url.to_string());
        self.db
            .read(move |c| vaults::credentials_for_server(c, &ws, &ids, &url))
            .await
    }

    async fn insert_file(&self, file: &FileRecord) -> StoreResult<()> {
        let file = file.clone();
        self.db.write(move |c| files::insert(c, &file)).await
    }

    async fn get_file(&self, workspace_id: &str, id: &str) -> StoreResult<Option<FileRecord>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.read(move |c| files::get(c, &ws, &id)).await
    }

    async fn list_files(
        &self,
        workspace_id: &str,
        filter: &FileFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<FileRecord>> {
        let (ws, filter, scan) = (workspace_id.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| files::list(c, &ws, &filter, &scan))
            .await
    }

    async fn delete_file(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.write(move |c| files::delete(c, &ws, &id)).await
    }

    async fn expired_files(&self, now: Micros, limit: i64) -> StoreResult<Vec<FileRecord>> {
        self.db.read(move |c| files::expired(c, now, limit)).await
    }

    async fn existing_file_ids(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        let ids = ids.to_vec();
        self.db.read(move |c| files::existing(c, &ids)).await
    }

    async fn insert_memory_store(
        &self,
        ws: &str,
        store: &MemoryStore,
        at: Micros,
    ) -> StoreResult<()> {
        let (ws, st) = (ws.to_string(), store.clone());
        self.db
            .write(move |c| memory::insert_store(c, &ws, &st, at))
            .await
    }

    async fn get_memory_store(&self, ws: &str, id: &str) -> StoreResult<Option<MemoryStore>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| memory::get_store(c, &ws, &id)).await
    }

    async fn update_memory_store(
        &self,
        ws: &str,
        store: &MemoryStore,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let (ws, st) = (ws.to_string(), store.clone());
        self.db
            .write(move |c| memory::update_store(c, &ws, &st, at, archived))
            .await
    }

    async fn list_memory_stores(
        &self,
        ws: &str,
        filter: &MemoryStoreFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryStore>> {
        let (ws, f, scan) = (ws.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| memory::list_stores(c, &ws, &f, &scan))
            .await
    }

    async fn delete_memory_store(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db
            .write(move |c| memory::delete_store(c, &ws, &id))
            .await
    }

    async fn get_memory(&self, ws: &str, store_id: &str, id: &str) -> StoreResult<Option<Memory>> {
        let (ws, st, id) = (ws.to_string(), store_id.to_string(), id.to_string());
        self.db
            .read(move |c| memory::get_memory(c, &ws, &st, &id))
            .await
    }

    async fn list_memories(
        &self,
        ws: &str,
        store_id: &str,
        prefix: &str,
        from: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<Memory>> {
        let (ws, st, prefix, from) = (
            ws.to_string(),
            store_id.to_string(),
            prefix.to_string(),
            from.map(str::to_string),
        );
        self.db
            .read(move |c| memory::list_memories(c, &ws, &st, &prefix, from.as_deref(), limit))
            .await
    }

    async fn write_memory(&self, ws: &str, write: &MemoryWrite) -> StoreResult<MemoryWriteOutcome> {
        let (ws, w) = (ws.to_string(), write.clone());
        self.db
            .write(move |c| memory::write_memory(c, &ws, &w))
            .await
    }

    async fn get_memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
    ) -> StoreResult<Option<MemoryVersion>> {
        let (ws, st, id) = (ws.to_string(), store_id.to_string(), id.to_string());
        self.db
            .read(move |c| memory::get_version(c, &ws, &st, &id))
            .await
    }

    async fn list_memory_versions(
        &self,
        ws: &str,
        store_id: &str,
        filter: &MemoryVersionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryVersion>> {
        let (ws, st, f, scan) = (
            ws.to_string(),
            store_id.to_string(),
            filter.clone(),
            scan.clone(),
        );
        self.db
            .read(move |c| memory::list_versions(c, &ws, &st, &f, &scan))
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
        let (ws, st, id, by) = (
            ws.to_string(),
            store_id.to_string(),
            id.to_string(),
            by.cloned(),
        );
        self.db
            .write(move |c| memory::redact_version(c, &ws, &st, &id, by.as_ref(), at))
            .await
    }

    async fn insert_skill(&self, skill: &SkillRecord, first: &NewSkillVersion) -> StoreResult<()> {
        let (s, f) = (skill.clone(), first.clone());
        self.db.write(move |c| skills::insert(c, &s, &f)).await
    }

    async fn insert_skill_version(
        &self,
        ws: &str,
        new: &NewSkillVersion,
    ) -> StoreResult<SkillRecord> {
        let (ws, n) = (ws.to_string(), new.clone());
        self.db
            .write(move |c| skills::insert_version_of(c, &ws, &n))
            .await
    }

    async fn get_skill(&self, ws: &str, id: &str) -> StoreResult<Option<SkillRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| skills::get(c, &ws, &id)).await
    }

    async fn list_skills(
        &self,
        ws: &str,
        source: Option<&str>,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillRecord>> {
        let (ws, src, scan) = (ws.to_string(), source.map(str::to_string), scan.clone());
        self.db
            .read(move |c| skills::list(c, &ws, src.as_deref(), &scan))
            .await
    }

    async fn delete_skill(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.write(move |c| skills::delete(c, &ws, &id)).await
    }

    async fn get_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
    ) -> StoreResult<Option<SkillVersionRecord>> {
        let (ws, sid, id) = (ws.to_string(), skill_id.to_string(), id.to_string());
        self.db
            .read(move |c| skills::get_version(c, &ws, &sid, &id))
            .await
    }

    async fn list_skill_versions(
        &self,
        ws: &str,
        skill_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillVersionRecord>> {
        let (ws, sid, scan) = (ws.to_string(), skill_id.to_string(), scan.clone());
        self.db
            .read(move |c| skills::list_versions(c, &ws, &sid, &scan))
            .await
    }

    async fn delete_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<SkillVersionDelete> {
        let (ws, sid, id) = (ws.to_string(), skill_id.to_string(), id.to_string());
        self.db
            .write(move |c| skills::delete_version(c, &ws, &sid, &id, at))
            .await
    }

    async fn skill_files(
        &self,
        version_id: &str,
    ) -> StoreResult<Vec<mast_domain::skill_bundle::BundleFile>> {
        let id = version_id.to_string();
        self.db.read(move |c| skills::files(c, &id)).await
    }

    async fn api_key_id_for_hash(&self, key_hash: &str) -> StoreResult<Option<String>> {
        let hash = key_hash.to_string();
        self.db
            .read(move |c| memory::api_key_id_for_hash(c, &hash))
            .await
    }

    // Hooks.

    async fn insert_hook(&self, ws: &str, rec: &crate::HookRecord, at: Micros) -> StoreResult<()> {
        let (ws, rec) = (ws.to_string(), rec.clone());
        self.db
            .write(move |c| hooks::insert_hook(c, &ws, &rec, at))
            .await
    }

    async fn get_hook(&self, ws: &str, id: &str) -> StoreResult<Option<crate::HookRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| hooks::get_hook(c, &ws, &id)).await
    }

    async fn list_hooks(
        &self,
        ws: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<mast_domain::hook::Hook>> {
        let (ws, scan) = (ws.to_string(), scan.clone());
        self.db
            .read(move |c| hooks::list_hooks(c, &ws, &scan))
            .await
    }

    async fn hooks_for_event(&self, ws: &str, event: &str) -> StoreResult<Vec<crate::HookRecord>> {
        let (ws, event) = (ws.to_string(), event.to_string());
        self.db
            .read(move |c| hooks::hooks_for_event(c, &ws, &event))
            .await
    }

    async fn delete_hook(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db
            .write(move |c| hooks::delete_hook(c, &ws, &id))
            .await
    }

    // Session fork (Mast's own).

    async fn insert_fork(&self, fork: &crate::SessionFork) -> StoreResult<()> {
        let fork = fork.clone();
        self.db.write(move |c| fork::insert_fork(c, &fork)).await
    }

    async fn event_forked_from(&self, session_id: &str, id: &str) -> StoreResult<Option<String>> {
        let (sid, id) = (session_id.to_string(), id.to_string());
        self.db
            .read(move |c| fork::event_forked_from(c, &sid, &id))
            .await
    }

    // Webhooks.
    async fn emit_webhook_events(&self, events: &[webhooks::WebhookEvent]) -> StoreResult<()> {
        let events = events.to_vec();
        self.db.write(move |c| webhooks::emit(c, &events)).await
    }

    async fn insert_webhook_endpoint(&self, e: &webhooks::EndpointRecord) -> StoreResult<()> {
        let e = e.clone();
        self.db
            .write(move |c| webhooks::insert_endpoint(c, &e))
            .await
    }

    async fn get_webhook_endpoint(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::EndpointRecord>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .read(move |c| webhooks::get_endpoint(c, Some(&ws), &id))
            .await
    }

    async fn webhook_endpoint_by_id(
        &self,
        id: &str,
    ) -> StoreResult<Option<webhooks::EndpointRecord>> {
        let id = id.to_string();
        self.db
            .read(move |c| webhooks::get_endpoint(c, None, &id))
            .await
    }

    async fn update_webhook_endpoint(&self, e: &webhooks::EndpointRecord) -> StoreResult<bool> {
        let e = e.clone();
        self.db
            .write(move |c| webhooks::update_endpoint(c, &e))
            .await
    }

    async fn list_webhook_endpoints(
        &self,
        workspace_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<webhooks::EndpointRecord>> {
        let (ws, scan) = (workspace_id.to_string(), scan.clone());
        self.db
            .read(move |c| webhooks::list_endpoints(c, &ws, &scan))
            .await
    }

    async fn delete_webhook_endpoint(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .write(move |c| webhooks::delete_endpoint(c, &ws, &id))
            .await
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<webhooks::DeliveryRecord>> {
        let (id, scan) = (endpoint_id.to_string(), scan.clone());
        self.db
            .read(move |c| webhooks::list_deliveries(c, &id, &scan))
            .await
    }

    async fn get_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::DeliveryRecord>> {
        let (eid, id) = (endpoint_id.to_string(), id.to_string());
        self.db
            .read(move |c| webhooks::get_delivery(c, &eid, &id))
            .await
    }

    async fn list_webhook_attempts(
        &self,
        delivery_id: &str,
    ) -> StoreResult<Vec<webhooks::AttemptRecord>> {
        let id = delivery_id.to_string();
        self.db.read(move |c| webhooks::list_attempts(c, &id)).await
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<webhooks::DeliveryRecord>> {
        let (eid, id) = (endpoint_id.to_string(), id.to_string());
        self.db
            .write(move |c| webhooks::replay_delivery(c, &eid, &id))
            .await
    }

    async fn claim_webhook_deliveries(
        &self,
        owner: &str,
        lease: Micros,
        limit: i64,
    ) -> StoreResult<Vec<webhooks::DeliveryRecord>> {
        let owner = owner.to_string();
        self.db
            .write(move |c| webhooks::claim_deliveries(c, &owner, lease, limit))
            .await
    }

    async fn finish_webhook_attempt(
        &self,
        owner: &str,
        attempt: &webhooks::AttemptRecord,
        outcome: webhooks::AttemptOutcome,
    ) -> StoreResult<bool> {
        let (owner, a) = (owner.to_string(), attempt.clone());
        self.db
            .write(move |c| webhooks::finish_attempt(c, &owner, &a, outcome))
            .await
    }

    // ---- deployments ----

    async fn insert_deployment(&self, d: &DeploymentRecord) -> StoreResult<()> {
        let d = d.clone();
        self.db.write(move |c| deployments::insert(c, &d)).await
    }

    async fn get_deployment(&self, ws: &str, id: &str) -> StoreResult<Option<DeploymentRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| deployments::get(c, &ws, &id)).await
    }

    async fn update_deployment(
        &self,
        d: &DeploymentRecord,
        next: NextFire,
        change: DeploymentChange,
    ) -> StoreResult<()> {
        let d = d.clone();
        self.db
            .write(move |c| deployments::update(c, &d, next, change))
            .await
    }

    async fn list_deployments(
        &self,
        ws: &str,
        filter: &DeploymentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRecord>> {
        let (ws, f, scan) = (ws.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| deployments::list(c, &ws, &f, &scan))
            .await
    }

    async fn due_deployments(&self, now: Micros, limit: i64) -> StoreResult<Vec<DeploymentRecord>> {
        self.db.read(move |c| deployments::due(c, now, limit)).await
    }

    async fn claim_deployment_fire(
        &self,
        id: &str,
        expected: Micros,
        next: Option<Micros>,
    ) -> StoreResult<bool> {
        let id = id.to_string();
        self.db
            .write(move |c| deployments::claim(c, &id, expected, next))
            .await
    }

    async fn record_deployment_run(
        &self,
        run: &DeploymentRunRecord,
        pause: Option<&serde_json::Value>,
    ) -> StoreResult<()> {
        let (run, pause) = (run.clone(), pause.cloned());
        self.db
            .write(move |c| deployments::record_run(c, &run, pause.as_ref()))
            .await
    }

    async fn get_deployment_run(
        &self,
        ws: &str,
        id: &str,
    ) -> StoreResult<Option<DeploymentRunRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db
            .read(move |c| deployments::get_run(c, &ws, &id))
            .await
    }

    async fn list_deployment_runs(
        &self,
        ws: &str,
        filter: &DeploymentRunFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRunRecord>> {
        let (ws, f, scan) = (ws.to_string(), filter.clone(), scan.clone());
        self.db
            .read(move |c| deployments::list_runs(c, &ws, &f, &scan))
            .await
    }
}

#[cfg(test)]
mod tests;
