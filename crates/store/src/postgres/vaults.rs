//! Vaults and credentials (bodies are `json`; sealed secrets are `bytea`).

use crate::VaultStore;
use async_trait::async_trait;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{QueryBuilder, Row};

use super::body_table::BodyTable;
use super::{PgStore, push_scan};
use crate::webhooks::{WebhookEvent, credential_event};
use crate::{CredentialRecord, Scan, StoreResult};
use mast_domain::time::Micros;
use mast_domain::vault::Vault;

const CREDENTIAL_COLS: &str = "body::text, server_url, secret";

/// The vaults table: a vault's body, nothing beside it. Deleting one is its own statement
/// (below), which takes the vault's credentials with it.
static VAULTS: BodyTable = BodyTable::new("vaults", &[]);

fn credential(row: &PgRow) -> StoreResult<CredentialRecord> {
    let body: &str = row.try_get(0)?;
    Ok(CredentialRecord {
        credential: serde_json::from_str(body)?,
        server_url: row.try_get(1)?,
        sealed: row.try_get(2)?,
    })
}

#[async_trait]
impl VaultStore for PgStore {
    async fn insert_vault(&self, ws: &str, v: &Vault, at: Micros) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        VAULTS.insert(&mut tx, ws, &v.id, v, at, &[]).await?;
        self.emit(&mut tx, &[WebhookEvent::new("vault.created", ws, &v.id)])
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_vault(&self, ws: &str, id: &str) -> StoreResult<Option<Vault>> {
        VAULTS.get(&self.pool, ws, id).await
    }

    async fn update_vault(
        &self,
        ws: &str,
        v: &Vault,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let found = VAULTS
            .update(&mut tx, ws, &v.id, v, at, archived, &[])
            .await?
            .is_some();
        // Only archiving has a webhook type (there is no `vault.updated`).
        if archived && found {
            self.emit(&mut tx, &[WebhookEvent::new("vault.archived", ws, &v.id)])
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_vaults(
        &self,
        ws: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<Vault>> {
        VAULTS
            .list(&self.pool, ws, include_archived, scan, |_| ())
            .await
    }

    async fn delete_vault(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query(
            "WITH c AS (DELETE FROM vault_credentials WHERE workspace_id = $1 AND vault_id = $2) \
             DELETE FROM vaults WHERE workspace_id = $1 AND id = $2",
        )
        .bind(ws)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n > 0 {
            self.emit(&mut tx, &[WebhookEvent::new("vault.deleted", ws, id)])
                .await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn insert_credential(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        at: Micros,
    ) -> StoreResult<()> {
        let c = &rec.credential;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO vault_credentials \
             (id, workspace_id, vault_id, server_url, body, secret, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5::json, $6, $7, $7)",
        )
        .bind(&c.id)
        .bind(ws)
        .bind(&c.vault_id)
        .bind(&rec.server_url)
        .bind(serde_json::to_string(c)?)
        .bind(&rec.sealed)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        let hook = credential_event("vault_credential.created", ws, &c.vault_id, &c.id);
        self.emit(&mut tx, &[hook]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> StoreResult<Option<CredentialRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {CREDENTIAL_COLS} FROM vault_credentials \
             WHERE workspace_id = $1 AND vault_id = $2 AND id = $3"
        ))
        .bind(ws)
        .bind(vault_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| credential(&r)).transpose()
    }

    async fn update_credential(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        at: Micros,
        archived: bool,
        expected: Option<&[u8]>,
    ) -> StoreResult<bool> {
        let c = &rec.credential;
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query(
            "UPDATE vault_credentials SET body = $1::json, secret = $2, updated_at = $3, \
             archived_at = COALESCE(archived_at, $4) \
             WHERE workspace_id = $5 AND vault_id = $6 AND id = $7 \
             AND ($8::bytea IS NULL OR secret = $8)",
        )
        .bind(serde_json::to_string(c)?)
        .bind(&rec.sealed)
        .bind(at)
        .bind(archived.then_some(at))
        .bind(ws)
        .bind(&c.vault_id)
        .bind(&c.id)
        .bind(expected)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if archived && n > 0 {
            let hook = credential_event("vault_credential.archived", ws, &c.vault_id, &c.id);
            self.emit(&mut tx, &[hook]).await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn list_credentials(
        &self,
        ws: &str,
        vault_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<CredentialRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {CREDENTIAL_COLS} FROM vault_credentials WHERE workspace_id = "
        ));
        qb.push_bind(ws.to_string())
            .push(" AND vault_id = ")
            .push_bind(vault_id.to_string());
        if !include_archived {
            qb.push(" AND archived_at IS NULL");
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(credential).collect()
    }

    async fn delete_credential(&self, ws: &str, vault_id: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query(
            "DELETE FROM vault_credentials WHERE workspace_id = $1 AND vault_id = $2 AND id = $3",
        )
        .bind(ws)
        .bind(vault_id)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n > 0 {
            let hook = credential_event("vault_credential.deleted", ws, vault_id, id);
            self.emit(&mut tx, &[hook]).await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn credentials_for_server(
        &self,
        ws: &str,
        vault_ids: &[String],
        server_url: &str,
    ) -> StoreResult<Vec<CredentialRecord>> {
        let rows = sqlx::query(
            "SELECT c.body::text, c.server_url, c.secret FROM vault_credentials c \
             JOIN vaults v ON v.id = c.vault_id AND v.workspace_id = c.workspace_id \
             WHERE c.workspace_id = $1 AND c.vault_id = ANY($2) AND c.server_url = $3 \
             AND c.archived_at IS NULL AND v.archived_at IS NULL",
        )
        .bind(ws)
        .bind(vault_ids)
        .bind(server_url)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(credential).collect()
    }
}
