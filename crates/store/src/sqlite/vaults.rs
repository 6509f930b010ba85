//! Vaults and credentials (bodies are JSON text; sealed secrets are blobs).

use super::SqliteStore;
use crate::VaultStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::body_table::BodyTable;
use super::rows::Query;
use crate::webhooks::{WebhookEvent, credential_event};
use crate::{CredentialRecord, Scan, StoreResult};
use mast_domain::time::Micros;
use mast_domain::vault::Vault;

const CREDENTIAL_COLS: &str = "body, server_url, secret";

type RawCredential = (String, String, Vec<u8>);

fn raw_credential(r: &Row<'_>) -> rusqlite::Result<RawCredential> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

fn credential((body, server_url, sealed): RawCredential) -> StoreResult<CredentialRecord> {
    Ok(CredentialRecord {
        credential: serde_json::from_str(&body)?,
        server_url,
        sealed,
    })
}

/// The vaults table: a vault's body, nothing beside it.
static VAULTS: BodyTable = BodyTable::new("vaults", &[]);

fn insert_vault(conn: &Connection, ws: &str, v: &Vault, at: Micros) -> StoreResult<()> {
    VAULTS.insert(conn, ws, &v.id, v, at, &[])?;
    super::webhooks::emit(conn, &[WebhookEvent::new("vault.created", ws, &v.id)])
}

fn update_vault(
    conn: &Connection,
    ws: &str,
    v: &Vault,
    at: Micros,
    archived: bool,
) -> StoreResult<()> {
    let found = VAULTS.update(conn, ws, &v.id, v, at, archived, &[])?;
    // Only archiving has a webhook type (there is no `vault.updated`).
    if archived && found {
        super::webhooks::emit(conn, &[WebhookEvent::new("vault.archived", ws, &v.id)])?;
    }
    Ok(())
}

fn delete_vault(conn: &Connection, ws: &str, id: &str) -> StoreResult<bool> {
    conn.prepare_cached("DELETE FROM vault_credentials WHERE workspace_id = ?1 AND vault_id = ?2")?
        .execute([ws, id])?;
    let deleted = VAULTS.delete(conn, ws, id)?;
    if deleted {
        super::webhooks::emit(conn, &[WebhookEvent::new("vault.deleted", ws, id)])?;
    }
    Ok(deleted)
}

pub(super) fn insert_credential(
    conn: &Connection,
    ws: &str,
    rec: &CredentialRecord,
    at: Micros,
) -> StoreResult<()> {
    let c = &rec.credential;
    conn.prepare_cached(
        "INSERT INTO vault_credentials \
         (id, workspace_id, vault_id, server_url, body, secret, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
    )?
    .execute(params![
        c.id,
        ws,
        c.vault_id,
        rec.server_url,
        serde_json::to_string(c)?,
        rec.sealed,
        at
    ])?;
    let hook = credential_event("vault_credential.created", ws, &c.vault_id, &c.id);
    super::webhooks::emit(conn, &[hook])?;
    Ok(())
}

pub(super) fn get_credential(
    conn: &Connection,
    ws: &str,
    vault_id: &str,
    id: &str,
) -> StoreResult<Option<CredentialRecord>> {
    let raw = conn
        .prepare_cached(&format!(
            "SELECT {CREDENTIAL_COLS} FROM vault_credentials \
             WHERE workspace_id = ?1 AND vault_id = ?2 AND id = ?3"
        ))?
        .query_row([ws, vault_id, id], raw_credential)
        .optional()?;
    raw.map(credential).transpose()
}

pub(super) fn update_credential(
    conn: &Connection,
    ws: &str,
    rec: &CredentialRecord,
    at: Micros,
    archived: bool,
    expected: Option<&[u8]>,
) -> StoreResult<bool> {
    let c = &rec.credential;
    let n = conn
        .prepare_cached(
            "UPDATE vault_credentials SET body = ?1, secret = ?2, updated_at = ?3, \
             archived_at = COALESCE(archived_at, ?4) \
             WHERE workspace_id = ?5 AND vault_id = ?6 AND id = ?7 AND (?8 IS NULL OR secret = ?8)",
        )?
        .execute(params![
            serde_json::to_string(c)?,
            rec.sealed,
            at,
            archived.then_some(at),
            ws,
            c.vault_id,
            c.id,
            expected
        ])?;
    if archived && n > 0 {
        let hook = credential_event("vault_credential.archived", ws, &c.vault_id, &c.id);
        super::webhooks::emit(conn, &[hook])?;
    }
    Ok(n > 0)
}

pub(super) fn list_credentials(
    conn: &Connection,
    ws: &str,
    vault_id: &str,
    include_archived: bool,
    scan: &Scan<String>,
) -> StoreResult<Vec<CredentialRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {CREDENTIAL_COLS} FROM vault_credentials WHERE workspace_id = "
    ));
    q.bind(ws.to_string())
        .push(" AND vault_id = ")
        .bind(vault_id.to_string());
    if !include_archived {
        q.push(" AND archived_at IS NULL");
    }
    q.scan("id", scan);
    q.all(conn, raw_credential)?
        .into_iter()
        .map(credential)
        .collect()
}

pub(super) fn delete_credential(
    conn: &Connection,
    ws: &str,
    vault_id: &str,
    id: &str,
) -> StoreResult<bool> {
    let n = conn
        .prepare_cached(
            "DELETE FROM vault_credentials WHERE workspace_id = ?1 AND vault_id = ?2 AND id = ?3",
        )?
        .execute([ws, vault_id, id])?;
    if n > 0 {
        let hook = credential_event("vault_credential.deleted", ws, vault_id, id);
        super::webhooks::emit(conn, &[hook])?;
    }
    Ok(n > 0)
}

pub(super) fn credentials_for_server(
    conn: &Connection,
    ws: &str,
    vault_ids: &[String],
    server_url: &str,
) -> StoreResult<Vec<CredentialRecord>> {
    if vault_ids.is_empty() {
        return Ok(vec![]);
    }
    let mut q = Query::new(
        "SELECT c.body, c.server_url, c.secret FROM vault_credentials c \
         JOIN vaults v ON v.id = c.vault_id AND v.workspace_id = c.workspace_id \
         WHERE c.archived_at IS NULL AND v.archived_at IS NULL AND c.workspace_id = ",
    );
    q.bind(ws.to_string())
        .push(" AND c.server_url = ")
        .bind(server_url.to_string())
        .push(" AND c.vault_id IN ")
        .bind_list(vault_ids);
    q.all(conn, raw_credential)?
        .into_iter()
        .map(credential)
        .collect()
}

#[async_trait]
impl VaultStore for SqliteStore {
    async fn insert_vault(&self, ws: &str, vault: &Vault, at: Micros) -> StoreResult<()> {
        let (ws, v) = (ws.to_string(), vault.clone());
        self.db.write(move |c| insert_vault(c, &ws, &v, at)).await
    }

    async fn get_vault(&self, ws: &str, id: &str) -> StoreResult<Option<Vault>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| VAULTS.get(c, &ws, &id)).await
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
            .write(move |c| update_vault(c, &ws, &v, at, archived))
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
            .read(move |c| VAULTS.list(c, &ws, include_archived, &scan, |_| ()))
            .await
    }

    async fn delete_vault(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.write(move |c| delete_vault(c, &ws, &id)).await
    }

    async fn insert_credential(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        at: Micros,
    ) -> StoreResult<()> {
        let (ws, rec) = (ws.to_string(), rec.clone());
        self.db
            .write(move |c| insert_credential(c, &ws, &rec, at))
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
            .read(move |c| get_credential(c, &ws, &vault, &id))
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
            .write(move |c| update_credential(c, &ws, &rec, at, archived, expected.as_deref()))
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
            .read(move |c| list_credentials(c, &ws, &vault, include_archived, &scan))
            .await
    }

    async fn delete_credential(&self, ws: &str, vault_id: &str, id: &str) -> StoreResult<bool> {
        let (ws, vault, id) = (ws.to_string(), vault_id.to_string(), id.to_string());
        self.db
            .write(move |c| delete_credential(c, &ws, &vault, &id))
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
            .read(move |c| credentials_for_server(c, &ws, &ids, &url))
            .await
    }
}
