//! Environments (the body is one `json` value; the name is a column for its uniqueness).

use crate::EnvironmentStore;
use async_trait::async_trait;
use sqlx::Row;

use super::PgStore;
use super::body_table::BodyTable;
use crate::webhooks::WebhookEvent;
use crate::{EnvironmentDeletion, Scan, StoreResult};
use mast_domain::environment::Environment;
use mast_domain::time::Micros;

/// The environments table: an environment's body, and its name beside it for the
/// workspace's unique index on names.
static ENVIRONMENTS: BodyTable = BodyTable::new("environments", &["name"]);

#[async_trait]
impl EnvironmentStore for PgStore {
    async fn insert_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        created_at: Micros,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let (id, name) = (&env.id, &env.name);
        ENVIRONMENTS
            .insert(&mut tx, workspace_id, id, env, created_at, &[name])
            .await?;
        let hook = WebhookEvent::new("environment.created", workspace_id, id);
        self.emit(&mut tx, &[hook]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_environment(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<Environment>> {
        ENVIRONMENTS.get(&self.pool, workspace_id, id).await
    }

    async fn update_environment(
        &self,
        workspace_id: &str,
        env: &Environment,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let (id, name) = (&env.id, &env.name);
        let row = ENVIRONMENTS
            .update(&mut tx, workspace_id, id, env, at, archived, &[name])
            .await?;
        if let Some(archived_at) = row {
            // Archived by this very update (an earlier archive kept its own time).
            let kind = match archived {
                true if archived_at == Some(at) => Some("environment.archived"),
                true => None,
                false => Some("environment.updated"),
            };
            if let Some(kind) = kind {
                self.emit(&mut tx, &[WebhookEvent::new(kind, workspace_id, id)])
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
        ENVIRONMENTS
            .list(&self.pool, workspace_id, include_archived, scan, |_| ())
            .await
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
        let deleted = ENVIRONMENTS.delete(&mut tx, workspace_id, id).await?;
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
