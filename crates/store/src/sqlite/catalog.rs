//! Workspaces, keys, agents and environments: small rows, read and written whole.

use super::SqliteStore;
use super::{memory, work};
use crate::webhooks::WebhookEvent;
use crate::{AgentStore, EnvironmentStore, KeyStore};
use async_trait::async_trait;
use mast_domain::ids::new_id;
use rusqlite::{Connection, OptionalExtension, params};

use super::body_table::BodyTable;
use super::rows::{self, AGENT_COLS, Query};
use crate::{
    AgentFilter, EnvironmentDeletion, KeyKind, KeyRecord, Revocation, Scan, StoreError, StoreResult,
};
use mast_domain::agent::Agent;
use mast_domain::environment::Environment;
use mast_domain::time::{self, Micros};

pub(super) fn workspace_id(conn: &Connection, name: &str) -> StoreResult<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT id FROM workspaces WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?)
}

pub(super) fn ensure_workspace(conn: &Connection, name: &str, id: &str) -> StoreResult<String> {
    conn.prepare_cached(
        "INSERT INTO workspaces (id, name, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING",
    )?
    .execute(params![id, name, super::clock::now(conn)?])?;
    workspace_id(conn, name)?.ok_or(StoreError::NotFound)
}

pub(super) fn insert_api_key(conn: &Connection, id: &str, ws: &str, hash: &str) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO api_keys (id, workspace_id, key_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![id, ws, hash, super::clock::now(conn)?])?;
    Ok(())
}

pub(super) fn workspace_for_key(conn: &Connection, hash: &str) -> StoreResult<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT workspace_id FROM api_keys WHERE key_hash = ?1 AND revoked_at IS NULL",
        )?
        .query_row([hash], |r| r.get(0))
        .optional()?)
}

pub(super) fn count_api_keys(conn: &Connection) -> StoreResult<i64> {
    Ok(conn
        .prepare_cached("SELECT COUNT(*) FROM api_keys")?
        .query_row([], |r| r.get(0))?)
}

pub(super) fn list_keys(conn: &Connection) -> StoreResult<Vec<KeyRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT 'api' AS kind, k.id, k.workspace_id, w.name, k.created_at, k.revoked_at, \
         NULL AS environment_id, k.key_hash FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id \
         UNION ALL \
         SELECT 'environment', k.id, k.workspace_id, w.name, k.created_at, NULL, k.environment_id, \
         k.key_hash FROM environment_keys k JOIN workspaces w ON w.id = k.workspace_id \
         ORDER BY 1, 5, 2",
    )?;
    let rows = stmt.query_map([], |r| {
        let environment: Option<String> = r.get(6)?;
        Ok(KeyRecord {
            id: r.get(1)?,
            key_hash: r.get(7)?,
            kind: match environment {
                None => KeyKind::Api,
                Some(environment_id) => KeyKind::Environment { environment_id },
            },
            workspace_id: r.get(2)?,
            workspace_name: r.get(3)?,
            created_at: r.get(4)?,
            revoked_at: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn revoke_api_key(conn: &Connection, id: &str) -> StoreResult<Revocation> {
    let revoked = conn
        .prepare_cached("UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL")?
        .execute(params![id, super::clock::now(conn)?])?
        > 0;
    if revoked {
        return Ok(Revocation::Revoked);
    }
    let at: Option<Option<i64>> = conn
        .prepare_cached("SELECT revoked_at FROM api_keys WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    Ok(match at {
        Some(at) => Revocation::AlreadyRevoked(at.unwrap_or(0)),
        None => Revocation::NotFound,
    })
}

fn insert_version(conn: &Connection, agent: &Agent, at: Micros) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO agent_versions (agent_id, version, snapshot, created_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![agent.id, agent.version, serde_json::to_string(agent)?, at])?;
    Ok(())
}

pub(super) fn insert_agent(conn: &Connection, ws: &str, agent: &Agent) -> StoreResult<()> {
    let created = match time::parse(&agent.created_at) {
        Some(t) => t,
        None => super::clock::now(conn)?,
    };
    conn.prepare_cached(
        "INSERT INTO agents (id, workspace_id, current_version, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
    )?
    .execute(params![agent.id, ws, agent.version, created])?;
    insert_version(conn, agent, created)?;
    super::webhooks::emit(conn, &[WebhookEvent::new("agent.created", ws, &agent.id)])
}

pub(super) fn get_agent(
    conn: &Connection,
    ws: &str,
    id: &str,
    version: Option<i64>,
) -> StoreResult<Option<Agent>> {
    let sql = match version {
        Some(_) => {
            "SELECT a.archived_at, v.snapshot FROM agents a JOIN agent_versions v \
             ON v.agent_id = a.id AND v.version = ?3 WHERE a.workspace_id = ?1 AND a.id = ?2"
        }
        None => {
            "SELECT a.archived_at, v.snapshot FROM agents a JOIN agent_versions v \
             ON v.agent_id = a.id AND v.version = a.current_version \
             WHERE a.workspace_id = ?1 AND a.id = ?2 AND ?3 IS NULL"
        }
    };
    let raw = conn
        .prepare_cached(sql)?
        .query_row(params![ws, id, version], rows::agent_raw)
        .optional()?;
    raw.map(rows::agent).transpose()
}

pub(super) fn append_agent_version(
    conn: &Connection,
    ws: &str,
    agent: &Agent,
    expected: i64,
) -> StoreResult<()> {
    let at = match time::parse(&agent.updated_at) {
        Some(t) => t,
        None => super::clock::now(conn)?,
    };
    let updated = conn
        .prepare_cached(
            "UPDATE agents SET current_version = ?1, updated_at = ?2 \
             WHERE id = ?3 AND workspace_id = ?4 AND current_version = ?5",
        )?
        .execute(params![agent.version, at, agent.id, ws, expected])?;
    if updated != 1 {
        return Err(StoreError::Conflict(format!(
            "agent `{}` changed concurrently; its current version is no longer {expected}",
            agent.id
        )));
    }
    insert_version(conn, agent, at)?;
    super::webhooks::emit(conn, &[WebhookEvent::new("agent.updated", ws, &agent.id)])
}

pub(super) fn list_agents(
    conn: &Connection,
    ws: &str,
    filter: &AgentFilter,
    scan: &Scan<String>,
) -> StoreResult<Vec<Agent>> {
    let mut q = Query::new(&format!(
        "SELECT {AGENT_COLS} FROM agents a JOIN agent_versions v \
         ON v.agent_id = a.id AND v.version = a.current_version WHERE a.workspace_id = "
    ));
    q.bind(ws.to_string());
    if !filter.include_archived {
        q.push(" AND a.archived_at IS NULL");
    }
    if let Some(t) = filter.created_gte {
        q.push(" AND a.created_at >= ").bind(t);
    }
    if let Some(t) = filter.created_lte {
        q.push(" AND a.created_at <= ").bind(t);
    }
    q.scan("a.id", scan);
    q.all(conn, rows::agent_raw)?
        .into_iter()
        .map(rows::agent)
        .collect()
}

pub(super) fn list_agent_versions(
    conn: &Connection,
    ws: &str,
    id: &str,
    scan: &Scan<i64>,
) -> StoreResult<Vec<Agent>> {
    let mut q = Query::new(&format!(
        "SELECT {AGENT_COLS} FROM agents a JOIN agent_versions v ON v.agent_id = a.id \
         WHERE a.workspace_id = "
    ));
    q.bind(ws.to_string())
        .push(" AND a.id = ")
        .bind(id.to_string());
    q.scan("v.version", scan);
    q.all(conn, rows::agent_raw)?
        .into_iter()
        .map(rows::agent)
        .collect()
}

pub(super) fn archive_agent(
    conn: &Connection,
    ws: &str,
    id: &str,
    at: Micros,
) -> StoreResult<Option<Agent>> {
    let n = conn
        .prepare_cached(
            "UPDATE agents SET archived_at = ?1, updated_at = ?1 \
             WHERE workspace_id = ?2 AND id = ?3 AND archived_at IS NULL",
        )?
        .execute(params![at, ws, id])?;
    if n == 1 {
        super::webhooks::emit(conn, &[WebhookEvent::new("agent.archived", ws, id)])?;
    }
    get_agent(conn, ws, id, None)
}

/// The environments table: an environment's body, and its name beside it for the
/// workspace's unique index on names.
static ENVIRONMENTS: BodyTable = BodyTable::new("environments", &["name"]);

fn insert_environment(
    conn: &Connection,
    ws: &str,
    env: &Environment,
    created_at: Micros,
) -> StoreResult<()> {
    ENVIRONMENTS.insert(conn, ws, &env.id, env, created_at, &[&env.name])?;
    super::webhooks::emit(
        conn,
        &[WebhookEvent::new("environment.created", ws, &env.id)],
    )
}

fn update_environment(
    conn: &Connection,
    ws: &str,
    env: &Environment,
    at: Micros,
    archived: bool,
) -> StoreResult<()> {
    // Archived by this very update, or already before (then nothing is reported).
    let newly_archived = archived
        && conn
            .prepare_cached(
                "SELECT 1 FROM environments WHERE workspace_id = ?1 AND id = ?2 AND archived_at IS NULL",
            )?
            .exists([ws, &env.id])?;
    let found = ENVIRONMENTS.update(conn, ws, &env.id, env, at, archived, &[&env.name])?;
    let kind = match archived {
        true if newly_archived => Some("environment.archived"),
        true => None,
        false => Some("environment.updated"),
    };
    match kind {
        Some(kind) if found => super::webhooks::emit(conn, &[WebhookEvent::new(kind, ws, &env.id)]),
        _ => Ok(()),
    }
}

pub(super) fn delete_environment(
    conn: &Connection,
    ws: &str,
    id: &str,
) -> StoreResult<EnvironmentDeletion> {
    let users: Vec<(String, i64)> = conn
        .prepare_cached(
            "SELECT id, COUNT(*) OVER () FROM sessions \
             WHERE workspace_id = ?1 AND environment_id = ?2 AND archived_at IS NULL ORDER BY id LIMIT 3",
        )?
        .query_map([ws, id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    if let Some((_, total)) = users.first() {
        return Ok(EnvironmentDeletion::InUse {
            total: *total,
            sessions: users.into_iter().map(|(id, _)| id).collect(),
        });
    }
    if !ENVIRONMENTS.delete(conn, ws, id)? {
        return Ok(EnvironmentDeletion::Missing);
    }
    // Its workers lose their keys and their items with it.
    super::work::forget_environment(conn, id, super::clock::now(conn)?)?;
    super::webhooks::emit(conn, &[WebhookEvent::new("environment.deleted", ws, id)])?;
    Ok(EnvironmentDeletion::Deleted)
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn ensure_workspace(&self, name: &str) -> StoreResult<String> {
        let name = name.to_string();
        let n = name.clone();
        if let Some(id) = self.db.read(move |c| workspace_id(c, &n)).await? {
            return Ok(id);
        }
        let id = new_id("wrkspc");
        self.db
            .write(move |c| ensure_workspace(c, &name, &id))
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
            .write(move |c| insert_api_key(c, &id, &ws, &hash))
            .await
    }

    async fn workspace_for_key(&self, key_hash: &str) -> StoreResult<Option<String>> {
        let hash = key_hash.to_string();
        self.db.read(move |c| workspace_for_key(c, &hash)).await
    }

    async fn count_api_keys(&self) -> StoreResult<i64> {
        self.db.read(count_api_keys).await
    }

    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>> {
        self.db.read(list_keys).await
    }

    async fn revoke_api_key(&self, id: &str) -> StoreResult<Revocation> {
        let id = id.to_string();
        self.db.write(move |c| revoke_api_key(c, &id)).await
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

    async fn api_key_id_for_hash(&self, key_hash: &str) -> StoreResult<Option<String>> {
        let hash = key_hash.to_string();
        self.db
            .read(move |c| memory::api_key_id_for_hash(c, &hash))
            .await
    }
}

#[async_trait]
impl AgentStore for SqliteStore {
    async fn insert_agent(&self, workspace_id: &str, agent: &Agent) -> StoreResult<()> {
        let (ws, agent) = (workspace_id.to_string(), agent.clone());
        self.db.write(move |c| insert_agent(c, &ws, &agent)).await
    }

    async fn get_agent(
        &self,
        workspace_id: &str,
        id: &str,
        version: Option<i64>,
    ) -> StoreResult<Option<Agent>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.read(move |c| get_agent(c, &ws, &id, version)).await
    }

    async fn append_agent_version(
        &self,
        workspace_id: &str,
        agent: &Agent,
        expected: i64,
    ) -> StoreResult<()> {
        let (ws, agent) = (workspace_id.to_string(), agent.clone());
        self.db
            .write(move |c| append_agent_version(c, &ws, &agent, expected))
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
            .read(move |c| list_agents(c, &ws, &filter, &scan))
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
            .read(move |c| list_agent_versions(c, &ws, &id, &scan))
            .await
    }

    async fn archive_agent(
        &self,
        workspace_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<Option<Agent>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.write(move |c| archive_agent(c, &ws, &id, at)).await
    }
}

#[async_trait]
impl EnvironmentStore for SqliteStore {
    async fn insert_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        created_at: Micros,
    ) -> StoreResult<()> {
        let (ws, env) = (workspace_id.to_string(), env.clone());
        self.db
            .write(move |c| insert_environment(c, &ws, &env, created_at))
            .await
    }

    async fn get_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<Environment>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.read(move |c| ENVIRONMENTS.get(c, &ws, &id)).await
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
            .write(move |c| update_environment(c, &ws, &env, at, archived))
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
            .read(move |c| ENVIRONMENTS.list(c, &ws, include_archived, &scan, |_| ()))
            .await
    }

    async fn delete_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<EnvironmentDeletion> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db
            .write(move |c| delete_environment(c, &ws, &id))
            .await
    }
}
