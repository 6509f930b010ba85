//! Environments (the body is one `json` value; the name is a column for its uniqueness).

use crate::EnvironmentStore;
use async_trait::async_trait;
use sqlx::postgres::Postgres;
use sqlx::{QueryBuilder, Row};

use super::{PgStore, push_scan, rows};
use crate::webhooks::WebhookEvent;
use crate::{EnvironmentDeletion, Scan, StoreResult};
use mast_domain::environment::Environment;
use mast_domain::time::Micros;

#[async_trait]
impl EnvironmentStore for PgStore {
    async fn insert_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        created_at: Micros,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO environments (id, workspace_id, name, body, created_at, updated_at) \
             VALUES ($1, $2, $3, $4::json, $5, $5)",
        )
        .bind(&env.id)
        .bind(workspace_id)
        .bind(&env.name)
        .bind(serde_json::to_string(env)?)
        .bind(created_at)
        .execute(&mut *tx)
        .await?;
        let hook = WebhookEvent::new("environment.created", workspace_id, &env.id);
        self.emit(&mut tx, &[hook]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<Environment>> {
        let row =
            sqlx::query("SELECT body::text FROM environments WHERE workspace_id = $1 AND id = $2")
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|r| rows::environment(&r)).transpose()
    }

    async fn update_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(
            "UPDATE environments SET name = $1, body = $2::json, updated_at = $3, \
             archived_at = COALESCE(archived_at, $4) WHERE workspace_id = $5 AND id = $6 \
             RETURNING archived_at",
        )
        .bind(&env.name)
        .bind(serde_json::to_string(env)?)
        .bind(at)
        .bind(archived.then_some(at))
        .bind(workspace_id)
        .bind(&env.id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = row {
            // Archived by this very update (an earlier archive kept its own time).
            let archived_at: Option<Micros> = row.try_get(0)?;
            let kind = match archived {
                true if archived_at == Some(at) => Some("environment.archived"),
                true => None,
                false => Some("environment.updated"),
            };
            if let Some(kind) = kind {
                self.emit(&mut tx, &[WebhookEvent::new(kind, workspace_id, &env.id)])
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_environments(
        &self,
        workspace_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Environment>> {
        let mut qb = QueryBuilder::<Postgres>::new(
            "SELECT body::text FROM environments WHERE workspace_id = ",
        );
        qb.push_bind(workspace_id.to_string());
        if !include_archived {
            qb.push(" AND archived_at IS NULL");
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(rows::environment).collect()
    }

    async fn delete_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<EnvironmentDeletion> {
        let mut tx = self.pool.begin().await?;
        let users = sqlx::query(
            "SELECT id, COUNT(*) OVER () FROM sessions \
             WHERE workspace_id = $1 AND environment_id = $2 AND archived_at IS NULL ORDER BY id LIMIT 3",
        )
        .bind(workspace_id)
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        if let Some(first) = users.first() {
            return Ok(EnvironmentDeletion::InUse {
                total: first.try_get(1)?,
                sessions: users
                    .iter()
                    .map(|r| r.try_get(0))
                    .collect::<Result<_, _>>()?,
            });
        }
        let deleted = sqlx::query("DELETE FROM environments WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        if deleted {
            // Its workers lose their keys and their items with it.
            sqlx::query(
                "WITH k AS (DELETE FROM environment_keys WHERE environment_id = $1), \
                 p AS (DELETE FROM worker_polls WHERE environment_id = $1) \
                 UPDATE work_items SET state = 'stopped', stopped_at = $2, \
                 stop_requested_at = COALESCE(stop_requested_at, $2), lease_expires_at = NULL, \
                 updated_at = $2 WHERE environment_id = $1 AND state <> 'stopped'",
            )
            .bind(id)
            .bind(self.clock.now())
            .execute(&mut *tx)
            .await?;
            let hook = WebhookEvent::new("environment.deleted", workspace_id, id);
            self.emit(&mut tx, &[hook]).await?;
        }
        tx.commit().await?;
        Ok(if deleted {
            EnvironmentDeletion::Deleted
        } else {
            EnvironmentDeletion::Missing
        })
    }
}
