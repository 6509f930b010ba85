//! Workspaces, API keys and environment keys (hashes only).

use crate::KeyStore;
use async_trait::async_trait;
use sqlx::Row;

use super::{PgStore, announce};
use crate::signal::Signal;
use crate::{KeyKind, KeyRecord, Revocation, StoreResult};
use mast_domain::ids::new_id;
use mast_domain::time::Micros;

#[async_trait]
impl KeyStore for PgStore {
    async fn ensure_workspace(&self, name: &str) -> StoreResult<String> {
        let select = "SELECT id FROM workspaces WHERE name = $1";
        if let Some(id) = sqlx::query_scalar(select)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
        {
            return Ok(id);
        }
        sqlx::query(
            "INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(new_id("wrkspc"))
        .bind(name)
        .bind(self.clock.now())
        .execute(&self.pool)
        .await?;
        // Whoever won a concurrent insert, this is the one row now.
        Ok(sqlx::query_scalar(select)
            .bind(name)
            .fetch_one(&self.pool)
            .await?)
    }

    async fn insert_api_key(
        &self,
        id: &str,
        workspace_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO api_keys (id, workspace_id, key_hash, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(workspace_id)
        .bind(key_hash)
        .bind(self.clock.now())
        .execute(&mut *tx)
        .await?;
        // A first key ends open mode; replicas re-check rather than trust what they cached.
        announce(&mut tx, Signal::KeysChanged).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn workspace_for_key(&self, key_hash: &str) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT workspace_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        )
        .bind(key_hash)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn count_api_keys(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM api_keys")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn list_keys(&self) -> StoreResult<Vec<KeyRecord>> {
        let rows = sqlx::query(
            // Key ids have no "C" collation of their own (unlike the other tables' ids), so
            // ties are broken byte by byte explicitly, whatever the database's locale.
            "SELECT 'api' AS kind, k.id COLLATE \"C\" AS id, k.workspace_id, w.name, k.created_at, k.revoked_at, \
             NULL AS environment_id, k.key_hash FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id \
             UNION ALL \
             SELECT 'environment', k.id COLLATE \"C\", k.workspace_id, w.name, k.created_at, NULL, k.environment_id, \
             k.key_hash \
             FROM environment_keys k JOIN workspaces w ON w.id = k.workspace_id \
             ORDER BY 1, 5, 2",
        )
        .fetch_all(&self.pool)
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
        let mut tx = self.pool.begin().await?;
        let revoked =
            sqlx::query("UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
                .bind(id)
                .bind(self.clock.now())
                .execute(&mut *tx)
                .await?
                .rows_affected()
                > 0;
        if revoked {
            announce(&mut tx, Signal::KeysChanged).await?;
            tx.commit().await?;
            return Ok(Revocation::Revoked);
        }
        let at: Option<Option<i64>> =
            sqlx::query_scalar("SELECT revoked_at FROM api_keys WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        Ok(match at {
            Some(at) => Revocation::AlreadyRevoked(at.unwrap_or(0)),
            None => Revocation::NotFound,
        })
    }

    async fn insert_environment_key(
        &self,
        id: &str,
        workspace_id: &str,
        environment_id: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO environment_keys (id, workspace_id, environment_id, key_hash, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(workspace_id)
        .bind(environment_id)
        .bind(key_hash)
        .bind(self.clock.now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn list_environment_keys(
        &self,
        environment_id: &str,
    ) -> StoreResult<Vec<(String, Micros)>> {
        Ok(sqlx::query_as(
            "SELECT id, created_at FROM environment_keys WHERE environment_id = $1 \
             ORDER BY created_at, id COLLATE \"C\"",
        )
        .bind(environment_id)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn delete_environment_key(&self, environment_id: &str, id: &str) -> StoreResult<bool> {
        let r = sqlx::query("DELETE FROM environment_keys WHERE environment_id = $1 AND id = $2")
            .bind(environment_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn environment_for_key(&self, key_hash: &str) -> StoreResult<Option<(String, String)>> {
        // Joined so a key outliving its environment (however that happened) authenticates
        // nothing.
        Ok(sqlx::query_as(
            "SELECT k.workspace_id, k.environment_id FROM environment_keys k \
             JOIN environments e ON e.id = k.environment_id AND e.workspace_id = k.workspace_id \
             WHERE k.key_hash = $1",
        )
        .bind(key_hash)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn api_key_id_for_hash(&self, hash: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query("SELECT id FROM api_keys WHERE key_hash = $1")
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }
}
