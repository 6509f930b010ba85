//! Agents and their versions (each version's snapshot is one `json` value).

use crate::AgentStore;
use async_trait::async_trait;
use sqlx::QueryBuilder;
use sqlx::postgres::Postgres;

use super::rows::{self, AGENT_COLS};
use super::{PgStore, push_scan};
use crate::webhooks::WebhookEvent;
use crate::{AgentFilter, Scan, StoreError, StoreResult};
use mast_domain::agent::Agent;
use mast_domain::time::{self, Micros};

#[async_trait]
impl AgentStore for PgStore {
    async fn insert_agent(&self, workspace_id: &str, agent: &Agent) -> StoreResult<()> {
        let created = time::parse(&agent.created_at).unwrap_or_else(|| self.clock.now());
        // One statement: the agent and its first version; then its webhook event.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "WITH a AS (INSERT INTO agents (id, workspace_id, current_version, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $4)) \
             INSERT INTO agent_versions (agent_id, version, snapshot, created_at) VALUES ($1, $3, $5::json, $4)",
        )
        .bind(&agent.id)
        .bind(workspace_id)
        .bind(agent.version)
        .bind(created)
        .bind(serde_json::to_string(agent)?)
        .execute(&mut *tx)
        .await?;
        self.emit(
            &mut tx,
            &[WebhookEvent::new("agent.created", workspace_id, &agent.id)],
        )
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
        let row = sqlx::query(&format!(
            "SELECT {AGENT_COLS} FROM agents a JOIN agent_versions v \
             ON v.agent_id = a.id AND v.version = COALESCE($3, a.current_version) \
             WHERE a.workspace_id = $1 AND a.id = $2"
        ))
        .bind(workspace_id)
        .bind(id)
        .bind(version)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| rows::agent(&r)).transpose()
    }

    async fn append_agent_version(
        &self,
        workspace_id: &str,
        agent: &Agent,
        expected: i64,
    ) -> StoreResult<()> {
        let at = time::parse(&agent.updated_at).unwrap_or_else(|| self.clock.now());
        // One statement: the version is inserted only if the compare-and-set moved the agent.
        let mut tx = self.pool.begin().await?;
        let r = sqlx::query(
            "WITH a AS (UPDATE agents SET current_version = $1, updated_at = $2 \
             WHERE id = $3 AND workspace_id = $4 AND current_version = $5 RETURNING id) \
             INSERT INTO agent_versions (agent_id, version, snapshot, created_at) \
             SELECT a.id, $1, $6::json, $2 FROM a",
        )
        .bind(agent.version)
        .bind(at)
        .bind(&agent.id)
        .bind(workspace_id)
        .bind(expected)
        .bind(serde_json::to_string(agent)?)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 1 {
            self.emit(
                &mut tx,
                &[WebhookEvent::new("agent.updated", workspace_id, &agent.id)],
            )
            .await?;
            tx.commit().await?;
        }
        if r.rows_affected() != 1 {
            return Err(StoreError::Conflict(format!(
                "agent `{}` changed concurrently; its current version is no longer {expected}",
                agent.id
            )));
        }
        Ok(())
    }

    async fn list_agents(
        &self,
        workspace_id: &str,
        filter: &AgentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Agent>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {AGENT_COLS} FROM agents a JOIN agent_versions v \
             ON v.agent_id = a.id AND v.version = a.current_version WHERE a.workspace_id = "
        ));
        qb.push_bind(workspace_id.to_string());
        if !filter.include_archived {
            qb.push(" AND a.archived_at IS NULL");
        }
        if let Some(t) = filter.created_gte {
            qb.push(" AND a.created_at >= ").push_bind(t);
        }
        if let Some(t) = filter.created_lte {
            qb.push(" AND a.created_at <= ").push_bind(t);
        }
        push_scan(&mut qb, "a.id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(rows::agent).collect()
    }

    async fn list_agent_versions(
        &self,
        workspace_id: &str,
        id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<Agent>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {AGENT_COLS} FROM agents a JOIN agent_versions v ON v.agent_id = a.id \
             WHERE a.workspace_id = "
        ));
        qb.push_bind(workspace_id.to_string())
            .push(" AND a.id = ")
            .push_bind(id.to_string());
        push_scan(&mut qb, "v.version", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(rows::agent).collect()
    }

    async fn archive_agent(
        &self,
        workspace_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<Option<Agent>> {
        let mut tx = self.pool.begin().await?;
        let r = sqlx::query(
            "UPDATE agents SET archived_at = $1, updated_at = $1 \
             WHERE workspace_id = $2 AND id = $3 AND archived_at IS NULL",
        )
        .bind(at)
        .bind(workspace_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 1 {
            self.emit(
                &mut tx,
                &[WebhookEvent::new("agent.archived", workspace_id, id)],
            )
            .await?;
        }
        tx.commit().await?;
        self.get_agent(workspace_id, id, None).await
    }
}
