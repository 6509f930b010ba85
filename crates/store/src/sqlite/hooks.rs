//! Hooks (migration 0016; bodies are JSON text, sealed secrets blobs).

use super::SqliteStore;
use crate::HookStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::rows::Query;
use crate::{HookRecord, Scan, StoreResult};
use mast_domain::hook::Hook;
use mast_domain::time::Micros;

fn record((body, sealed_secret): (String, Vec<u8>)) -> StoreResult<HookRecord> {
    Ok(HookRecord {
        hook: serde_json::from_str(&body)?,
        sealed_secret,
    })
}

pub(super) fn insert_hook(
    conn: &Connection,
    ws: &str,
    rec: &HookRecord,
    at: Micros,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO hooks (id, workspace_id, event, body, secret, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        rec.hook.id,
        ws,
        rec.hook.event.as_str(),
        serde_json::to_string(&rec.hook)?,
        rec.sealed_secret,
        at
    ])?;
    Ok(())
}

pub(super) fn get_hook(conn: &Connection, ws: &str, id: &str) -> StoreResult<Option<HookRecord>> {
    let raw = conn
        .prepare_cached("SELECT body, secret FROM hooks WHERE workspace_id = ?1 AND id = ?2")?
        .query_row([ws, id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    raw.map(record).transpose()
}

pub(super) fn list_hooks(
    conn: &Connection,
    ws: &str,
    scan: &Scan<String>,
) -> StoreResult<Vec<Hook>> {
    let mut q = Query::new("SELECT body FROM hooks WHERE workspace_id = ");
    q.bind(ws.to_string());
    q.scan("id", scan);
    q.all(conn, |r| r.get::<_, String>(0))?
        .into_iter()
        .map(|b| Ok(serde_json::from_str(&b)?))
        .collect()
}

pub(super) fn hooks_for_event(
    conn: &Connection,
    ws: &str,
    event: &str,
) -> StoreResult<Vec<HookRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT body, secret FROM hooks WHERE workspace_id = ?1 AND event = ?2 ORDER BY id",
    )?;
    let raws = stmt
        .query_map([ws, event], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<Vec<(String, Vec<u8>)>>>()?;
    raws.into_iter().map(record).collect()
}

pub(super) fn delete_hook(conn: &Connection, ws: &str, id: &str) -> StoreResult<bool> {
    let n = conn
        .prepare_cached("DELETE FROM hooks WHERE workspace_id = ?1 AND id = ?2")?
        .execute([ws, id])?;
    Ok(n > 0)
}

#[async_trait]
impl HookStore for SqliteStore {
    // Hooks.

    async fn insert_hook(&self, ws: &str, rec: &crate::HookRecord, at: Micros) -> StoreResult<()> {
        let (ws, rec) = (ws.to_string(), rec.clone());
        self.db.write(move |c| insert_hook(c, &ws, &rec, at)).await
    }

    async fn get_hook(&self, ws: &str, id: &str) -> StoreResult<Option<crate::HookRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| get_hook(c, &ws, &id)).await
    }

    async fn list_hooks(
        &self,
        ws: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<mast_domain::hook::Hook>> {
        let (ws, scan) = (ws.to_string(), scan.clone());
        self.db.read(move |c| list_hooks(c, &ws, &scan)).await
    }

    async fn hooks_for_event(&self, ws: &str, event: &str) -> StoreResult<Vec<crate::HookRecord>> {
        let (ws, event) = (ws.to_string(), event.to_string());
        self.db.read(move |c| hooks_for_event(c, &ws, &event)).await
    }

    async fn delete_hook(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.write(move |c| delete_hook(c, &ws, &id)).await
    }
}
