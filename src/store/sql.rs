//! The SQL implementation of [`Store`], shared by Postgres and SQLite through sqlx's `Any`
//! driver. Statements use `$N` placeholders and only types both backends agree on
//! (BIGINT, TEXT); the few dialect differences are switched on [`Dialect`].

use async_trait::async_trait;
use sqlx::AnyPool;
use sqlx::any::AnyRow;
use sqlx::{Row, Transaction};

use super::query::{Arg, Sql, bound};
use super::{
    AgentFilter, Deleted, Direction, EnvironmentDeletion, EventFilter, EventRecord, ExpiredWork,
    KeyKind, KeyRecord, NewEvent, OpsCounts, Revocation, Scan, SessionFilter, SessionRecord,
    SessionTxn, StoppedWork, Store, StoreError, StoreResult, ThreadRecord, WorkRecord, WorkStats,
    WorkTxn, Writer,
};
use crate::domain::agent::Agent;
use crate::domain::environment::Environment;
use crate::domain::ids::new_id;
use crate::domain::time::{self, Micros};

/// Connection options for `url`: statements are logged at `trace` only (they are noise at
/// `debug`, and may carry user data); slow ones (over a second) at `warn`.
pub(crate) fn connect_options(url: &str) -> StoreResult<sqlx::any::AnyConnectOptions> {
    use sqlx::ConnectOptions as _;
    use std::str::FromStr as _;
    Ok(sqlx::any::AnyConnectOptions::from_str(url)?
        .log_statements(tracing::log::LevelFilter::Trace)
        .log_slow_statements(
            tracing::log::LevelFilter::Warn,
            std::time::Duration::from_secs(1),
        ))
}

/// Which SQL dialect the pools speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Sqlite,
}

/// A [`Store`] over SQL pools. SQLite gets a single-connection writer pool so write
/// transactions never contend, and a separate reader pool (WAL lets readers run alongside).
#[derive(Clone)]
pub struct SqlStore {
    write: AnyPool,
    read: AnyPool,
    dialect: Dialect,
}

/// The origin named in key signals the store sends: not a replica, since any process writing
/// the store (the CLI included) sends them.
pub const KEYS_SIGNAL_ORIGIN: &str = "store";

const SESSION_COLS: &str = "id, workspace_id, agent_id, agent_version, environment_id, status, body, usage, \
    active_micros, running_since, last_seq, engine, created_at, updated_at, archived_at, terminated_at, lease_owner, \
    lease_expires_at";
const THREAD_COLS: &str = "id, session_id, parent_thread_id, spawning_event_id, status, body, created_at, updated_at, archived_at";
const EVENT_COLS: &str =
    "session_id, seq, id, thread_id, type, body, internal, processed_at, created_at";

fn order_sql(d: Direction) -> &'static str {
    match d {
        Direction::Ascending => "ASC",
        Direction::Descending => "DESC",
    }
}

fn after_op(d: Direction) -> &'static str {
    match d {
        Direction::Ascending => " > ",
        Direction::Descending => " < ",
    }
}

pub(super) fn push_scan<K: Clone + Into<Arg>>(sql: &mut Sql, column: &str, scan: &Scan<K>) {
    if let Some(after) = &scan.after {
        sql.push(" AND ")
            .push(column)
            .push(after_op(scan.direction))
            .bind(after.clone());
    }
    sql.push(" ORDER BY ")
        .push(column)
        .push(" ")
        .push(order_sql(scan.direction));
    sql.push(" LIMIT ").bind(scan.limit);
}

fn agent_from_row(row: &AnyRow) -> StoreResult<Agent> {
    let snapshot: String = row.try_get("snapshot")?;
    let mut agent: Agent = serde_json::from_str(&snapshot)?;
    let archived: Option<i64> = row.try_get("archived_at")?;
    agent.archived_at = time::format_opt(archived);
    Ok(agent)
}

fn env_from_row(row: &AnyRow) -> StoreResult<Environment> {
    let body: String = row.try_get("body")?;
    Ok(serde_json::from_str(&body)?)
}

fn session_from_row(row: &AnyRow) -> StoreResult<SessionRecord> {
    Ok(SessionRecord {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        agent_id: row.try_get("agent_id")?,
        agent_version: row.try_get("agent_version")?,
        environment_id: row.try_get("environment_id")?,
        status: row.try_get("status")?,
        body: row.try_get("body")?,
        usage: row.try_get("usage")?,
        active_micros: row.try_get("active_micros")?,
        running_since: row.try_get("running_since")?,
        last_seq: row.try_get("last_seq")?,
        engine: row.try_get("engine")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        archived_at: row.try_get("archived_at")?,
        terminated_at: row.try_get("terminated_at")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
    })
}

fn thread_from_row(row: &AnyRow) -> StoreResult<ThreadRecord> {
    Ok(ThreadRecord {
        id: row.try_get("id")?,
        session_id: row.try_get("session_id")?,
        parent_thread_id: row.try_get("parent_thread_id")?,
        spawning_event_id: row.try_get("spawning_event_id")?,
        status: row.try_get("status")?,
        body: row.try_get("body")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        archived_at: row.try_get("archived_at")?,
    })
}

/// Inserts a thread (inside a session transaction).
async fn insert_thread(tx: &mut Transaction<'_, sqlx::Any>, t: &ThreadRecord) -> StoreResult<()> {
    bound(
        "INSERT INTO threads (id, session_id, parent_thread_id, spawning_event_id, status, body, created_at, updated_at, archived_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        vec![
            (&t.id).into(),
            (&t.session_id).into(),
            t.parent_thread_id.clone().into(),
            t.spawning_event_id.clone().into(),
            (&t.status).into(),
            (&t.body).into(),
            t.created_at.into(),
            t.updated_at.into(),
            t.archived_at.into(),
        ],
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn event_from_row(row: &AnyRow) -> StoreResult<EventRecord> {
    let body: String = row.try_get("body")?;
    let internal: Option<String> = row.try_get("internal")?;
    Ok(EventRecord {
        session_id: row.try_get("session_id")?,
        seq: row.try_get("seq")?,
        id: row.try_get("id")?,
        thread_id: row.try_get("thread_id")?,
        kind: row.try_get("type")?,
        body: serde_json::from_str(&body)?,
        internal: internal.map(|s| serde_json::from_str(&s)).transpose()?,
        processed_at: row.try_get("processed_at")?,
        created_at: row.try_get("created_at")?,
    })
}

impl SqlStore {
    /// Wraps pools that already have the schema migrated.
    pub fn new(write: AnyPool, read: AnyPool, dialect: Dialect) -> Self {
        SqlStore {
            write,
            read,
            dialect,
        }
    }

    /// The pool for writes (also the only pool on Postgres).
    pub fn write_pool(&self) -> &AnyPool {
        &self.write
    }

    /// The pool for reads (a separate one on SQLite).
    pub(super) fn read_pool(&self) -> &AnyPool {
        &self.read
    }

    /// Tells every replica on this database that API keys changed, when `tx` commits:
    /// Postgres delivers a notification only on commit (never for a rollback), after the
    /// change is visible, so a replica that hears it and looks again finds the new state.
    /// SQLite has a single server, which does not cache keys.
    async fn keys_changed(&self, tx: &mut Transaction<'_, sqlx::Any>) -> StoreResult<()> {
        if self.dialect == Dialect::Postgres {
            // `::text`: the Any driver cannot decode `void`, pg_notify's result.
            sqlx::query("SELECT pg_notify($1, $2)::text AS sent")
                .bind(super::notify::CHANNEL)
                .bind(crate::hub::Signal::KeysChanged.encode(KEYS_SIGNAL_ORIGIN))
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// The SQL dialect.
    pub(super) fn dialect(&self) -> Dialect {
        self.dialect
    }

    async fn insert_events(
        &self,
        tx: &mut Transaction<'_, sqlx::Any>,
        session_id: &str,
        first_seq: i64,
        events: &[NewEvent],
        now: Micros,
    ) -> StoreResult<Vec<EventRecord>> {
        if events.is_empty() {
            return Ok(vec![]);
        }
        let mut sql = Sql::new(
            "INSERT INTO events (session_id, seq, id, thread_id, type, body, internal, answers, answer_kind, processed_at, created_at, crosspost) VALUES ",
        );
        let mut out = Vec::with_capacity(events.len());
        for (i, e) in events.iter().enumerate() {
            let seq = first_seq + i as i64;
            if i > 0 {
                sql.push(", ");
            }
            sql.push("(")
                .bind(session_id)
                .push(", ")
                .bind(seq)
                .push(", ")
                .bind(&e.id)
                .push(", ")
                .bind(e.thread_id.clone())
                .push(", ")
                .bind(&e.kind)
                .push(", ")
                .bind(serde_json::to_string(&e.body)?)
                .push(", ")
                .bind(e.internal.as_ref().map(serde_json::to_string).transpose()?)
                .push(", ")
                .bind(e.answers.as_ref().map(|a| a.0.clone()))
                .push(", ")
                .bind(e.answers.as_ref().map(|a| a.1))
                .push(", ")
                .bind(e.processed_at)
                .push(", ")
                .bind(now)
                .push(", ")
                // A child thread's event naming its thread shows on the session's stream too.
                .bind(i64::from(e.body.get("session_thread_id").is_some()))
                .push(")");
            out.push(EventRecord {
                session_id: session_id.to_string(),
                seq,
                id: e.id.clone(),
                thread_id: e.thread_id.clone(),
                kind: e.kind.clone(),
                body: e.body.clone(),
                internal: e.internal.clone(),
                processed_at: e.processed_at,
                created_at: now,
            });
        }
        sql.query().execute(&mut **tx).await?;
        Ok(out)
    }
}

#[async_trait]
impl Store for SqlStore {
    fn backend(&self) -> &'static str {
        match self.dialect {
            Dialect::Postgres => "postgres",
            Dialect::Sqlite => "sqlite",
        }
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<String> {
        if let Some(row) = sqlx::query("SELECT id FROM workspaces WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.read)
            .await?
        {
            return Ok(row.try_get("id")?);
        }
        let id = new_id("wrkspc");
        sqlx::query("INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
            .bind(&id)
            .bind(name)
            .bind(time::now())
            .execute(&self.write)
            .await?;
        let row = sqlx::query("SELECT id FROM workspaces WHERE name = $1")
            .bind(name)
            .fetch_one(&self.write)
            .await?;
        Ok(row.try_get("id")?)
    }

    async fn insert_api_key(
        &self,
        id: &str,
        workspace_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        let mut tx = self.write.begin().await?;
        sqlx::query(
            "INSERT INTO api_keys (id, workspace_id, key_hash, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(workspace_id)
        .bind(key_hash)
        .bind(time::now())
        .execute(&mut *tx)
        .await?;
        // A first key ends open mode; replicas re-check rather than trust what they cached.
        self.keys_changed(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn workspace_for_key(&self, key_hash: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query(
            "SELECT workspace_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        )
        .bind(key_hash)
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(|r| r.try_get("workspace_id")).transpose()?)
    }

    async fn count_api_keys(&self) -> StoreResult<i64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM api_keys")
            .fetch_one(&self.read)
            .await?;
        Ok(row.try_get("n")?)
    }

    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>> {
        let rows = sqlx::query(
            "SELECT 'api' AS kind, k.id, k.workspace_id, w.name, k.created_at, k.revoked_at, \
             NULL AS environment_id, k.key_hash FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id \
             UNION ALL \
             SELECT 'environment', k.id, k.workspace_id, w.name, k.created_at, NULL, k.environment_id, \
             k.key_hash \
             FROM environment_keys k JOIN workspaces w ON w.id = k.workspace_id \
             ORDER BY 1, 5, 2",
        )
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                let environment: Option<String> = r.try_get(6)?;
                Ok(KeyRecord {
                    id: r.try_get(1)?,
                    key_hash: r.try_get(7)?,
                    kind: match environment {
                        None => KeyKind::Api,
                        Some(environment_id) => KeyKind::Environment { environment_id },
                    },
                    workspace_id: r.try_get(2)?,
                    workspace_name: r.try_get(3)?,
                    created_at: r.try_get(4)?,
                    revoked_at: r.try_get(5)?,
                })
            })
            .collect()
    }

    async fn revoke_api_key(&self, id: &str) -> StoreResult<Revocation> {
        let mut tx = self.write.begin().await?;
        let revoked =
            sqlx::query("UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
                .bind(id)
                .bind(time::now())
                .execute(&mut *tx)
                .await?
                .rows_affected()
                > 0;
        if revoked {
            self.keys_changed(&mut tx).await?;
            tx.commit().await?;
            return Ok(Revocation::Revoked);
        }
        let row = sqlx::query("SELECT revoked_at FROM api_keys WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        Ok(match row {
            Some(r) => Revocation::AlreadyRevoked(r.try_get::<Option<i64>, _>(0)?.unwrap_or(0)),
            None => Revocation::NotFound,
        })
    }

    async fn insert_agent(&self, workspace_id: &str, agent: &Agent) -> StoreResult<()> {
        let created = time::parse(&agent.created_at).unwrap_or_else(time::now);
        let mut tx = self.write.begin().await?;
        sqlx::query(
            "INSERT INTO agents (id, workspace_id, current_version, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
        )
        .bind(&agent.id)
        .bind(workspace_id)
        .bind(agent.version)
        .bind(created)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO agent_versions (agent_id, version, snapshot, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&agent.id)
            .bind(agent.version)
            .bind(serde_json::to_string(agent)?)
            .bind(created)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_agent(
        &self,
        workspace_id: &str,
        id: &str,
        version: Option<i64>,
    ) -> StoreResult<Option<Agent>> {
        let mut sql = Sql::new(
            "SELECT a.archived_at, v.snapshot FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = ",
        );
        match version {
            Some(v) => sql.bind(v),
            None => sql.push("a.current_version"),
        };
        sql.push(" WHERE a.workspace_id = ")
            .bind(workspace_id)
            .push(" AND a.id = ")
            .bind(id);
        let row = sql.query().fetch_optional(&self.read).await?;
        row.map(|r| agent_from_row(&r)).transpose()
    }

    async fn append_agent_version(
        &self,
        workspace_id: &str,
        agent: &Agent,
        expected: i64,
    ) -> StoreResult<()> {
        let at = time::parse(&agent.updated_at).unwrap_or_else(time::now);
        let mut tx = self.write.begin().await?;
        let updated = sqlx::query(
            "UPDATE agents SET current_version = $1, updated_at = $2 WHERE id = $3 AND workspace_id = $4 AND current_version = $5",
        )
        .bind(agent.version)
        .bind(at)
        .bind(&agent.id)
        .bind(workspace_id)
        .bind(expected)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Err(StoreError::Conflict(format!(
                "agent `{}` changed concurrently; its current version is no longer {expected}",
                agent.id
            )));
        }
        sqlx::query("INSERT INTO agent_versions (agent_id, version, snapshot, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&agent.id)
            .bind(agent.version)
            .bind(serde_json::to_string(agent)?)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_agents(
        &self,
        workspace_id: &str,
        filter: &AgentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Agent>> {
        let mut sql = Sql::new(
            "SELECT a.archived_at, v.snapshot FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.current_version WHERE a.workspace_id = ",
        );
        sql.bind(workspace_id);
        if !filter.include_archived {
            sql.push(" AND a.archived_at IS NULL");
        }
        if let Some(t) = filter.created_gte {
            sql.push(" AND a.created_at >= ").bind(t);
        }
        if let Some(t) = filter.created_lte {
            sql.push(" AND a.created_at <= ").bind(t);
        }
        push_scan(&mut sql, "a.id", scan);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn list_agent_versions(
        &self,
        workspace_id: &str,
        id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<Agent>> {
        let mut sql = Sql::new(
            "SELECT a.archived_at, v.snapshot FROM agents a JOIN agent_versions v ON v.agent_id = a.id WHERE a.workspace_id = ",
        );
        sql.bind(workspace_id).push(" AND a.id = ").bind(id);
        push_scan(&mut sql, "v.version", scan);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn archive_agent(
        &self,
        workspace_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<Option<Agent>> {
        sqlx::query(
            "UPDATE agents SET archived_at = $1, updated_at = $1 WHERE workspace_id = $2 AND id = $3 AND archived_at IS NULL",
        )
        .bind(at)
        .bind(workspace_id)
        .bind(id)
        .execute(&self.write)
        .await?;
        let mut sql = Sql::new(
            "SELECT a.archived_at, v.snapshot FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.current_version WHERE a.workspace_id = ",
        );
        sql.bind(workspace_id).push(" AND a.id = ").bind(id);
        let row = sql.query().fetch_optional(&self.write).await?;
        row.map(|r| agent_from_row(&r)).transpose()
    }

    async fn insert_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        created_at: Micros,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO environments (id, workspace_id, name, body, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)",
        )
        .bind(&env.id)
        .bind(workspace_id)
        .bind(&env.name)
        .bind(serde_json::to_string(env)?)
        .bind(created_at)
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn get_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<Environment>> {
        let row = sqlx::query("SELECT body FROM environments WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.read)
            .await?;
        row.map(|r| env_from_row(&r)).transpose()
    }

    async fn update_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let archived_at = if archived { Some(at) } else { None };
        sqlx::query(
            "UPDATE environments SET name = $1, body = $2, updated_at = $3, archived_at = COALESCE(archived_at, $4) WHERE workspace_id = $5 AND id = $6",
        )
        .bind(&env.name)
        .bind(serde_json::to_string(env)?)
        .bind(at)
        .bind(archived_at)
        .bind(workspace_id)
        .bind(&env.id)
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn list_environments(
        &self,
        workspace_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Environment>> {
        let mut sql = Sql::new("SELECT body FROM environments WHERE workspace_id = ");
        sql.bind(workspace_id);
        if !include_archived {
            sql.push(" AND archived_at IS NULL");
        }
        push_scan(&mut sql, "id", scan);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter().map(env_from_row).collect()
    }

    async fn delete_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<EnvironmentDeletion> {
        let mut tx = self.write.begin().await?;
        let users = sqlx::query(
            "SELECT id, COUNT(*) OVER () AS total FROM sessions \
             WHERE workspace_id = $1 AND environment_id = $2 AND archived_at IS NULL ORDER BY id LIMIT 3",
        )
        .bind(workspace_id)
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        if let Some(first) = users.first() {
            return Ok(EnvironmentDeletion::InUse {
                total: first.try_get("total")?,
                sessions: users
                    .iter()
                    .map(|r| r.try_get("id"))
                    .collect::<Result<_, _>>()?,
            });
        }
        let r = sqlx::query("DELETE FROM environments WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if r.rows_affected() > 0 {
            // Its workers lose their keys and their items with it.
            super::sql_work::forget_environment(&mut tx, id, time::now()).await?;
        }
        tx.commit().await?;
        Ok(if r.rows_affected() > 0 {
            EnvironmentDeletion::Deleted
        } else {
            EnvironmentDeletion::Missing
        })
    }

    async fn create_session(
        &self,
        s: &SessionRecord,
        t: &ThreadRecord,
        events: &[NewEvent],
        work: Option<&WorkRecord>,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut tx = self.write.begin().await?;
        bound(
            "INSERT INTO sessions (id, workspace_id, agent_id, agent_version, environment_id, status, body, usage, \
             active_micros, running_since, last_seq, engine, created_at, updated_at, archived_at, terminated_at, \
             lease_owner, lease_expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
            vec![
                (&s.id).into(),
                (&s.workspace_id).into(),
                (&s.agent_id).into(),
                s.agent_version.into(),
                (&s.environment_id).into(),
                (&s.status).into(),
                (&s.body).into(),
                (&s.usage).into(),
                s.active_micros.into(),
                s.running_since.into(),
                (events.len() as i64).into(),
                (&s.engine).into(),
                s.created_at.into(),
                s.updated_at.into(),
                s.archived_at.into(),
                s.terminated_at.into(),
                s.lease_owner.clone().into(),
                s.lease_expires_at.into(),
            ],
        )
        .execute(&mut *tx)
        .await?;
        bound(
            "INSERT INTO threads (id, session_id, parent_thread_id, spawning_event_id, status, body, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            vec![
                (&t.id).into(),
                (&t.session_id).into(),
                t.parent_thread_id.clone().into(),
                t.spawning_event_id.clone().into(),
                (&t.status).into(),
                (&t.body).into(),
                t.created_at.into(),
                t.updated_at.into(),
            ],
        )
        .execute(&mut *tx)
        .await?;
        let out = self
            .insert_events(&mut tx, &s.id, 1, events, s.created_at)
            .await?;
        if let Some(w) = work {
            super::sql_work::ensure_work(&mut *tx, w).await?;
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn get_session(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(workspace_id)
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.map(|r| session_from_row(&r)).transpose()
    }

    async fn get_session_by_id(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.map(|r| session_from_row(&r)).transpose()
    }

    async fn last_seqs(&self, ids: &[String]) -> StoreResult<Vec<(String, i64)>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let mut sql = Sql::new("SELECT id, last_seq FROM sessions WHERE id IN ");
        sql.bind_list(ids);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter()
            .map(|r| Ok((r.try_get("id")?, r.try_get("last_seq")?)))
            .collect()
    }

    async fn list_sessions(
        &self,
        workspace_id: &str,
        f: &SessionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SessionRecord>> {
        let mut sql = Sql::new(&format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE workspace_id = "
        ));
        sql.bind(workspace_id);
        if let Some(a) = &f.agent_id {
            sql.push(" AND agent_id = ").bind(a);
        }
        if let Some(v) = f.agent_version {
            sql.push(" AND agent_version = ").bind(v);
        }
        if !f.include_archived {
            sql.push(" AND archived_at IS NULL");
        }
        if !f.statuses.is_empty() {
            sql.push(" AND status IN ").bind_list(&f.statuses);
        }
        for (op, v) in [
            (" > ", f.created_gt),
            (" >= ", f.created_gte),
            (" < ", f.created_lt),
            (" <= ", f.created_lte),
        ] {
            if let Some(v) = v {
                sql.push(" AND created_at").push(op).bind(v);
            }
        }
        push_scan(&mut sql, "id", scan);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter().map(session_from_row).collect()
    }

    async fn delete_session(&self, workspace_id: &str, id: &str) -> StoreResult<Deleted> {
        let mut tx = self.write.begin().await?;
        let r = sqlx::query(
            "DELETE FROM sessions WHERE workspace_id = $1 AND id = $2 AND status NOT IN ('running', 'rescheduling')",
        )
        .bind(workspace_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 0 {
            let exists =
                sqlx::query("SELECT 1 AS one FROM sessions WHERE workspace_id = $1 AND id = $2")
                    .bind(workspace_id)
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_some();
            return Ok(if exists {
                Deleted::Busy
            } else {
                Deleted::Missing
            });
        }
        sqlx::query("DELETE FROM events WHERE session_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM threads WHERE session_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Deleted::Yes)
    }

    async fn list_threads(
        &self,
        session_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<ThreadRecord>> {
        let mut sql = Sql::new(&format!(
            "SELECT {THREAD_COLS} FROM threads WHERE session_id = "
        ));
        sql.bind(session_id);
        push_scan(&mut sql, "id", scan);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter().map(thread_from_row).collect()
    }

    async fn get_thread(&self, session_id: &str, id: &str) -> StoreResult<Option<ThreadRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {THREAD_COLS} FROM threads WHERE session_id = $1 AND id = $2"
        ))
        .bind(session_id)
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.map(|r| thread_from_row(&r)).transpose()
    }

    async fn transact(
        &self,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        let lock = match self.dialect {
            Dialect::Postgres => " FOR UPDATE",
            // The single writer connection already serialises every write transaction.
            Dialect::Sqlite => "",
        };
        let started = std::time::Instant::now();
        let mut tx = self.write.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT {SESSION_COLS} FROM sessions WHERE id = $1{lock}"
        ))
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        if let Writer::Runner { owner } = writer {
            let holder: Option<String> = row.try_get("lease_owner")?;
            if holder.as_deref() != Some(owner.as_str()) {
                // Fencing: a runner whose lease moved on writes nothing more.
                return Err(StoreError::Fenced(format!(
                    "runner {owner} no longer holds the lease of {session_id}"
                )));
            }
        }
        let before = session_from_row(&row)?;
        let mut rec = before.clone();
        let out = f(&mut rec)?;
        let now = time::now();
        let first_seq = before.last_seq + 1;
        rec.last_seq = before.last_seq + out.events.len() as i64;
        if rec != before {
            bound(
                "UPDATE sessions SET status = $1, body = $2, usage = $3, active_micros = $4, running_since = $5, \
                 last_seq = $6, engine = $7, updated_at = $8, archived_at = $9, terminated_at = $10, \
                 lease_owner = $11, lease_expires_at = $12 WHERE id = $13",
                vec![
                    (&rec.status).into(),
                    (&rec.body).into(),
                    (&rec.usage).into(),
                    rec.active_micros.into(),
                    rec.running_since.into(),
                    rec.last_seq.into(),
                    (&rec.engine).into(),
                    rec.updated_at.into(),
                    rec.archived_at.into(),
                    rec.terminated_at.into(),
                    rec.lease_owner.clone().into(),
                    rec.lease_expires_at.into(),
                    session_id.into(),
                ],
            )
            .execute(&mut *tx)
            .await?;
        }
        let events = self
            .insert_events(&mut tx, session_id, first_seq, &out.events, now)
            .await?;
        if !out.mark_processed.is_empty() {
            // Consumed input takes its place in the conversation after everything logged so
            // far, whatever its sequence number (see engine::context).
            let position = serde_json::json!({ "after_seq": rec.last_seq }).to_string();
            let mut sql = Sql::new("UPDATE events SET processed_at = ");
            sql.bind(now)
                .push(", internal = ")
                .bind(position)
                .push(" WHERE session_id = ")
                .bind(session_id)
                .push(" AND processed_at IS NULL AND id IN ")
                .bind_list(&out.mark_processed);
            sql.query().execute(&mut *tx).await?;
        }
        if let Some(w) = &out.ensure_work {
            super::sql_work::ensure_work(&mut *tx, w).await?;
        }
        for t in &out.new_threads {
            insert_thread(&mut tx, t).await?;
        }
        for c in &out.thread_changes {
            sqlx::query("UPDATE threads SET status = $1, updated_at = $2, archived_at = $3 WHERE id = $4 AND session_id = $5")
                .bind(&c.status)
                .bind(c.updated_at)
                .bind(c.archived_at)
                .bind(&c.id)
                .bind(session_id)
                .execute(&mut *tx)
                .await?;
        }
        if out.flush_queued {
            sqlx::query(
                "UPDATE events SET processed_at = $1, internal = $2 WHERE session_id = $3 AND processed_at IS NULL",
            )
            .bind(now)
            .bind(r#"{"discarded":true}"#)
            .bind(session_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        metrics::histogram!(crate::telemetry::EVENT_APPEND_DURATION)
            .record(started.elapsed().as_secs_f64());
        Ok(Some((rec, events)))
    }

    async fn list_events(
        &self,
        session_id: &str,
        f: &EventFilter,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut sql = Sql::new(&format!(
            "SELECT {EVENT_COLS} FROM events WHERE session_id = "
        ));
        sql.bind(session_id);
        if !f.types.is_empty() {
            sql.push(" AND type IN ").bind_list(&f.types);
        }
        if let Some(t) = &f.thread_id {
            if f.crossposts {
                sql.push(" AND (thread_id = ")
                    .bind(t)
                    .push(" OR crosspost = 1)");
            } else {
                sql.push(" AND thread_id = ").bind(t);
            }
        }
        for (op, v) in [
            (" > ", f.processed_gt),
            (" >= ", f.processed_gte),
            (" < ", f.processed_lt),
            (" <= ", f.processed_lte),
        ] {
            if let Some(v) = v {
                sql.push(" AND processed_at").push(op).bind(v);
            }
        }
        push_scan(&mut sql, "seq", scan);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter().map(event_from_row).collect()
    }

    async fn events_after(
        &self,
        session_id: &str,
        after_seq: i64,
        kinds: &[&str],
        limit: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut sql = Sql::new(&format!(
            "SELECT {EVENT_COLS} FROM events WHERE session_id = "
        ));
        sql.bind(session_id).push(" AND seq > ").bind(after_seq);
        if !kinds.is_empty() {
            sql.push(" AND type IN ").bind_list(kinds);
        }
        sql.push(" ORDER BY seq LIMIT ").bind(limit);
        let rows = sql.query().fetch_all(&self.read).await?;
        rows.iter().map(event_from_row).collect()
    }

    async fn get_event(&self, session_id: &str, id: &str) -> StoreResult<Option<EventRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {EVENT_COLS} FROM events WHERE session_id = $1 AND id = $2"
        ))
        .bind(session_id)
        .bind(id)
        .fetch_optional(&self.read)
        .await?;
        row.map(|r| event_from_row(&r)).transpose()
    }

    async fn has_answer(&self, session_id: &str, id: &str, kind: &str) -> StoreResult<bool> {
        let row = sqlx::query("SELECT 1 AS one FROM events WHERE session_id = $1 AND answers = $2 AND answer_kind = $3")
            .bind(session_id)
            .bind(id)
            .bind(kind)
            .fetch_optional(&self.read)
            .await?;
        Ok(row.is_some())
    }

    async fn claim_lease(
        &self,
        session_id: &str,
        owner: &str,
        now: Micros,
        until: Micros,
    ) -> StoreResult<bool> {
        let r = sqlx::query(
            "UPDATE sessions SET lease_owner = $1, lease_expires_at = $2 WHERE id = $3 \
             AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_at < $4)",
        )
        .bind(owner)
        .bind(until)
        .bind(session_id)
        .bind(now)
        .execute(&self.write)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn renew_lease(&self, session_id: &str, owner: &str, until: Micros) -> StoreResult<bool> {
        let r = sqlx::query(
            "UPDATE sessions SET lease_expires_at = $1 WHERE id = $2 AND lease_owner = $3",
        )
        .bind(until)
        .bind(session_id)
        .bind(owner)
        .execute(&self.write)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> StoreResult<()> {
        sqlx::query("UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_owner = $2")
            .bind(session_id)
            .bind(owner)
            .execute(&self.write)
            .await?;
        Ok(())
    }

    async fn insert_environment_key(
        &self,
        id: &str,
        workspace_id: &str,
        environment_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        self.insert_environment_key_sql(id, workspace_id, environment_id, key_hash)
            .await
    }

    async fn list_environment_keys(
        &self,
        environment_id: &str,
    ) -> StoreResult<Vec<(String, Micros)>> {
        self.list_environment_keys_sql(environment_id).await
    }

    async fn delete_environment_key(&self, environment_id: &str, id: &str) -> StoreResult<bool> {
        self.delete_environment_key_sql(environment_id, id).await
    }

    async fn environment_for_key(&self, key_hash: &str) -> StoreResult<Option<(String, String)>> {
        self.environment_for_key_sql(key_hash).await
    }

    async fn work_for_token(&self, token_hash: &str) -> StoreResult<Option<WorkRecord>> {
        self.work_for_token_sql(token_hash).await
    }

    async fn poll_work(
        &self,
        environment_id: &str,
        worker_id: Option<&str>,
        now: Micros,
        reclaim_before: Micros,
        token_hash: &str,
    ) -> StoreResult<Option<WorkRecord>> {
        self.poll_work_sql(environment_id, worker_id, now, reclaim_before, token_hash)
            .await
    }

    async fn transact_work(
        &self,
        environment_id: &str,
        id: &str,
        f: WorkTxn,
    ) -> StoreResult<Option<WorkRecord>> {
        self.transact_work_sql(environment_id, id, f).await
    }

    async fn get_work(&self, environment_id: &str, id: &str) -> StoreResult<Option<WorkRecord>> {
        self.get_work_sql(environment_id, id).await
    }

    async fn list_work(
        &self,
        environment_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<WorkRecord>> {
        self.list_work_sql(environment_id, scan).await
    }

    async fn work_stats(&self, environment_id: &str, now: Micros) -> StoreResult<WorkStats> {
        self.work_stats_sql(environment_id, now).await
    }

    async fn requeue_expired_work(&self, now: Micros) -> StoreResult<ExpiredWork> {
        self.requeue_expired_work_sql(now).await
    }

    async fn work_needing_requeue_check(&self, limit: i64) -> StoreResult<Vec<StoppedWork>> {
        self.work_needing_requeue_check_sql(limit).await
    }

    async fn clear_requeue_check(&self, work_id: &str) -> StoreResult<()> {
        self.clear_requeue_check_sql(work_id).await
    }

    async fn stop_session_work(
        &self,
        session_id: &str,
        now: Micros,
        graceful: bool,
    ) -> StoreResult<()> {
        self.stop_session_work_sql(session_id, now, graceful).await
    }

    async fn clear_foreign_leases(&self, owner: &str) -> StoreResult<u64> {
        let r = sqlx::query(
            "UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner IS NOT NULL AND lease_owner <> $1",
        )
        .bind(owner)
        .execute(&self.write)
        .await?;
        Ok(r.rows_affected())
    }

    async fn sessions_needing_runner(&self, now: Micros, limit: i64) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(
            "SELECT id FROM sessions WHERE status IN ('running', 'rescheduling') \
             AND (lease_owner IS NULL OR lease_expires_at < $1) ORDER BY updated_at LIMIT $2",
        )
        .bind(now)
        .bind(limit)
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    async fn readiness(&self) -> Option<String> {
        let latest = match self.dialect {
            Dialect::Postgres => super::postgres::latest_migration(),
            Dialect::Sqlite => super::sqlite::latest_migration(),
        };
        let row = sqlx::query(
            "SELECT COALESCE(MAX(version), 0) AS v FROM _sqlx_migrations WHERE success = TRUE",
        )
        .fetch_one(&self.read)
        .await;
        match row.and_then(|r| r.try_get::<i64, _>("v")) {
            Err(e) => Some(format!("the database is unreachable: {e}")),
            Ok(v) if v < latest => Some(format!(
                "the database schema is at migration {v}, this binary needs {latest}"
            )),
            Ok(_) => None,
        }
    }

    async fn ops_counts(&self) -> StoreResult<OpsCounts> {
        let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM sessions GROUP BY status")
            .fetch_all(&self.read)
            .await?;
        let sessions_by_status = rows
            .iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
            .collect::<StoreResult<_>>()?;
        let queued_work =
            sqlx::query("SELECT COUNT(*) AS n FROM work_items WHERE state = 'queued'")
                .fetch_one(&self.read)
                .await?
                .try_get("n")?;
        Ok(OpsCounts {
            sessions_by_status,
            queued_work,
        })
    }
}
