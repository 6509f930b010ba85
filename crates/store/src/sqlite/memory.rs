//! Memory stores, memories and their versions. Writes run whole on the writer thread, so a
//! write's reads and its decision see no other write in between.

use super::SqliteStore;
use crate::MemoryStorage;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::body_table::BodyTable;
use super::rows::Query;
use crate::memory::{
    Decision, MemoryStoreFilter, MemoryVersionFilter, MemoryWrite, MemoryWriteOutcome,
    RedactOutcome, StoreState, actor_ids, decide, redacted,
};
use crate::webhooks::WebhookEvent;
use crate::{Scan, StoreError, StoreResult};
use mast_domain::memory::{Actor, Memory, MemoryStore, MemoryTag, MemoryVersion, Operation};
use mast_domain::time::{self, Micros};

const MEMORY_COLS: &str = "id, store_id, path, content, content_sha256, content_size, version_id, \
                           created_at, updated_at";
const VERSION_COLS: &str = "id, store_id, memory_id, operation, path, content, content_sha256, \
                            content_size, created_by, created_at, redacted_at, redacted_by";
/// The store of the row belongs to the workspace bound as `?1`.
const IN_WORKSPACE: &str =
    "EXISTS (SELECT 1 FROM memory_stores s WHERE s.id = store_id AND s.workspace_id = ?1)";

fn memory(r: &Row<'_>) -> rusqlite::Result<Memory> {
    Ok(Memory {
        tag: MemoryTag::Tag,
        id: r.get(0)?,
        memory_store_id: r.get(1)?,
        path: r.get(2)?,
        content: Some(r.get(3)?),
        content_sha256: r.get(4)?,
        content_size_bytes: r.get(5)?,
        memory_version_id: r.get(6)?,
        created_at: time::format(r.get(7)?),
        updated_at: time::format(r.get(8)?),
    })
}

type RawVersion = (MemoryVersion, Option<String>, Option<String>, String);

fn raw_version(r: &Row<'_>) -> rusqlite::Result<RawVersion> {
    let op: String = r.get(3)?;
    Ok((
        MemoryVersion {
            tag: Default::default(),
            id: r.get(0)?,
            memory_store_id: r.get(1)?,
            memory_id: r.get(2)?,
            operation: Operation::Created,
            path: r.get(4)?,
            content: r.get(5)?,
            content_sha256: r.get(6)?,
            content_size_bytes: r.get(7)?,
            created_by: None,
            created_at: time::format(r.get(9)?),
            redacted_at: time::format_opt(r.get(10)?),
            redacted_by: None,
        },
        r.get(8)?,
        r.get(11)?,
        op,
    ))
}

fn version((mut v, by, redactor, op): RawVersion) -> StoreResult<MemoryVersion> {
    v.operation = Operation::parse(&op)
        .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("unknown operation `{op}`")))?;
    v.created_by = by.map(|b| serde_json::from_str::<Actor>(&b)).transpose()?;
    v.redacted_by = redactor
        .map(|b| serde_json::from_str::<Actor>(&b))
        .transpose()?;
    Ok(v)
}

fn actor_json(a: Option<&Actor>) -> StoreResult<Option<String>> {
    Ok(a.map(serde_json::to_string).transpose()?)
}

/// The memory stores table: a store's body, nothing beside it (its memories are rows of
/// their own).
static STORES: BodyTable = BodyTable::new("memory_stores", &[]);

fn insert_store(conn: &Connection, ws: &str, s: &MemoryStore, at: Micros) -> StoreResult<()> {
    STORES.insert(conn, ws, &s.id, s, at, &[])?;
    super::webhooks::emit(
        conn,
        &[WebhookEvent::new("memory_store.created", ws, &s.id)],
    )
}

fn update_store(
    conn: &Connection,
    ws: &str,
    s: &MemoryStore,
    at: Micros,
    archived: bool,
) -> StoreResult<()> {
    let found = STORES.update(conn, ws, &s.id, s, at, archived, &[])?;
    // Only archiving has a webhook type (there is no `memory_store.updated`).
    if archived && found {
        super::webhooks::emit(
            conn,
            &[WebhookEvent::new("memory_store.archived", ws, &s.id)],
        )?;
    }
    Ok(())
}

fn list_stores(
    conn: &Connection,
    ws: &str,
    f: &MemoryStoreFilter,
    scan: &Scan<String>,
) -> StoreResult<Vec<MemoryStore>> {
    STORES.list(conn, ws, f.include_archived, scan, |q| {
        if let Some(t) = f.created_gte {
            q.push(" AND created_at >= ").bind(t);
        }
        if let Some(t) = f.created_lte {
            q.push(" AND created_at <= ").bind(t);
        }
    })
}

fn delete_store(conn: &Connection, ws: &str, id: &str) -> StoreResult<bool> {
    if STORES.get::<MemoryStore>(conn, ws, id)?.is_none() {
        return Ok(false);
    }
    conn.prepare_cached("DELETE FROM memory_versions WHERE store_id = ?1")?
        .execute([id])?;
    conn.prepare_cached("DELETE FROM memories WHERE store_id = ?1")?
        .execute([id])?;
    STORES.delete(conn, ws, id)?;
    super::webhooks::emit(conn, &[WebhookEvent::new("memory_store.deleted", ws, id)])?;
    Ok(true)
}

pub(super) fn get_memory(
    conn: &Connection,
    ws: &str,
    store_id: &str,
    id: &str,
) -> StoreResult<Option<Memory>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {MEMORY_COLS} FROM memories WHERE {IN_WORKSPACE} AND store_id = ?2 AND id = ?3"
        ))?
        .query_row([ws, store_id, id], memory)
        .optional()?)
}

pub(super) fn list_memories(
    conn: &Connection,
    ws: &str,
    store_id: &str,
    prefix: &str,
    from: Option<&str>,
    limit: i64,
) -> StoreResult<Vec<Memory>> {
    let end = mast_domain::memory::past_prefix(prefix);
    let from = from.filter(|f| *f > prefix).unwrap_or(prefix);
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {MEMORY_COLS} FROM memories WHERE {IN_WORKSPACE} AND store_id = ?2 \
             AND path >= ?3 AND path < ?4 ORDER BY path LIMIT ?5"
        ))?
        .query_map(params![ws, store_id, from, end, limit], memory)?
        .collect::<rusqlite::Result<Vec<_>>>()?)
}

fn store_state(conn: &Connection, ws: &str, id: &str) -> StoreResult<StoreState> {
    let archived: Option<Option<i64>> = conn
        .prepare_cached(
            "SELECT archived_at FROM memory_stores WHERE workspace_id = ?1 AND id = ?2",
        )?
        .query_row([ws, id], |r| r.get(0))
        .optional()?;
    Ok(match archived {
        None => StoreState::Missing,
        Some(None) => StoreState::Live,
        Some(Some(_)) => StoreState::Archived,
    })
}

fn insert_version(conn: &Connection, v: &MemoryVersion, at: Micros) -> StoreResult<()> {
    let (api_key_id, session_id) = actor_ids(v.created_by.as_ref());
    conn.prepare_cached(
        "INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, \
         content_sha256, content_size, created_by, api_key_id, session_id, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        v.id,
        v.memory_store_id,
        v.memory_id,
        v.operation.as_str(),
        v.path,
        v.content,
        v.content_sha256,
        v.content_size_bytes,
        actor_json(v.created_by.as_ref())?,
        api_key_id,
        session_id,
        at
    ])?;
    Ok(())
}

pub(super) fn write_memory(
    conn: &Connection,
    ws: &str,
    w: &MemoryWrite,
) -> StoreResult<MemoryWriteOutcome> {
    let state = store_state(conn, ws, &w.store_id)?;
    let current = get_memory(conn, ws, &w.store_id, w.change.memory_id())?;
    let holder: Option<String> = match w.change.target_path() {
        Some(p) => conn
            .prepare_cached("SELECT id FROM memories WHERE store_id = ?1 AND path = ?2")?
            .query_row(params![w.store_id, p], |r| r.get(0))
            .optional()?,
        None => None,
    };
    let current = match (&w.change, current) {
        // A create's fresh id addresses nothing yet.
        (crate::memory::MemoryChange::Create { .. }, _) => None,
        (_, c) => c,
    };
    let held: i64 = match &w.change {
        crate::memory::MemoryChange::Create { .. } => conn
            .prepare_cached("SELECT count(*) FROM memories WHERE store_id = ?1")?
            .query_row(params![w.store_id], |r| r.get(0))?,
        _ => 0,
    };
    match decide(w, state, current.as_ref(), holder.as_deref(), held as usize) {
        Decision::Answer(o) => Ok(o),
        Decision::Insert(m, v) => {
            conn.prepare_cached(&format!(
                "INSERT INTO memories ({MEMORY_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)"
            ))?
            .execute(params![
                m.id,
                m.memory_store_id,
                m.path,
                m.content,
                m.content_sha256,
                m.content_size_bytes,
                m.memory_version_id,
                w.at
            ])?;
            insert_version(conn, &v, w.at)?;
            Ok(MemoryWriteOutcome::Written {
                memory: Some(m),
                version: Box::new(v),
            })
        }
        Decision::Replace(m, v) => {
            conn.prepare_cached(
                "UPDATE memories SET path = ?1, content = ?2, content_sha256 = ?3, \
                 content_size = ?4, version_id = ?5, updated_at = ?6 WHERE id = ?7",
            )?
            .execute(params![
                m.path,
                m.content,
                m.content_sha256,
                m.content_size_bytes,
                m.memory_version_id,
                w.at,
                m.id
            ])?;
            insert_version(conn, &v, w.at)?;
            Ok(MemoryWriteOutcome::Written {
                memory: Some(m),
                version: Box::new(v),
            })
        }
        Decision::Remove(v) => {
            conn.prepare_cached("DELETE FROM memories WHERE id = ?1")?
                .execute([&v.memory_id])?;
            insert_version(conn, &v, w.at)?;
            Ok(MemoryWriteOutcome::Written {
                memory: None,
                version: Box::new(v),
            })
        }
    }
}

pub(super) fn get_version(
    conn: &Connection,
    ws: &str,
    store_id: &str,
    id: &str,
) -> StoreResult<Option<MemoryVersion>> {
    let raw = conn
        .prepare_cached(&format!(
            "SELECT {VERSION_COLS} FROM memory_versions \
             WHERE {IN_WORKSPACE} AND store_id = ?2 AND id = ?3"
        ))?
        .query_row([ws, store_id, id], raw_version)
        .optional()?;
    raw.map(version).transpose()
}

pub(super) fn list_versions(
    conn: &Connection,
    ws: &str,
    store_id: &str,
    f: &MemoryVersionFilter,
    scan: &Scan<String>,
) -> StoreResult<Vec<MemoryVersion>> {
    let mut q = Query::new(&format!(
        "SELECT {VERSION_COLS} FROM memory_versions WHERE EXISTS (SELECT 1 FROM memory_stores s \
         WHERE s.id = store_id AND s.workspace_id = "
    ));
    q.bind(ws.to_string())
        .push(") AND store_id = ")
        .bind(store_id.to_string());
    if let Some(m) = &f.memory_id {
        q.push(" AND memory_id = ").bind(m.clone());
    }
    if let Some(op) = f.operation {
        q.push(" AND operation = ").bind(op.as_str().to_string());
    }
    if let Some(s) = &f.session_id {
        q.push(" AND session_id = ").bind(s.clone());
    }
    if let Some(k) = &f.api_key_id {
        q.push(" AND api_key_id = ").bind(k.clone());
    }
    if let Some(t) = f.created_gte {
        q.push(" AND created_at >= ").bind(t);
    }
    if let Some(t) = f.created_lte {
        q.push(" AND created_at <= ").bind(t);
    }
    q.scan("id", scan);
    q.all(conn, raw_version)?.into_iter().map(version).collect()
}

pub(super) fn redact_version(
    conn: &Connection,
    ws: &str,
    store_id: &str,
    id: &str,
    by: Option<&Actor>,
    at: Micros,
) -> StoreResult<RedactOutcome> {
    let Some(v) = get_version(conn, ws, store_id, id)? else {
        return Ok(RedactOutcome::NotFound);
    };
    if v.redacted_at.is_some() {
        return Ok(RedactOutcome::Redacted(Box::new(v)));
    }
    let current: Option<i64> = conn
        .prepare_cached("SELECT 1 FROM memories WHERE id = ?1 AND version_id = ?2")?
        .query_row([&v.memory_id, &v.id], |r| r.get(0))
        .optional()?;
    if current.is_some() {
        return Ok(RedactOutcome::Current);
    }
    conn.prepare_cached(
        "UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, \
         content_size = NULL, redacted_at = ?1, redacted_by = ?2 WHERE id = ?3",
    )?
    .execute(params![at, actor_json(by)?, id])?;
    Ok(RedactOutcome::Redacted(Box::new(redacted(
        v,
        by.cloned(),
        at,
    ))))
}

pub(super) fn api_key_id_for_hash(conn: &Connection, hash: &str) -> StoreResult<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT id FROM api_keys WHERE key_hash = ?1")?
        .query_row([hash], |r| r.get(0))
        .optional()?)
}

#[async_trait]
impl MemoryStorage for SqliteStore {
    async fn insert_memory_store(
        &self,
        ws: &str,
        store: &MemoryStore,
        at: Micros,
    ) -> StoreResult<()> {
        let (ws, st) = (ws.to_string(), store.clone());
        self.db.write(move |c| insert_store(c, &ws, &st, at)).await
    }

    async fn get_memory_store(&self, ws: &str, id: &str) -> StoreResult<Option<MemoryStore>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| STORES.get(c, &ws, &id)).await
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
            .write(move |c| update_store(c, &ws, &st, at, archived))
            .await
    }

    async fn list_memory_stores(
        &self,
        ws: &str,
        filter: &MemoryStoreFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryStore>> {
        let (ws, f, scan) = (ws.to_string(), filter.clone(), scan.clone());
        self.db.read(move |c| list_stores(c, &ws, &f, &scan)).await
    }

    async fn delete_memory_store(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.write(move |c| delete_store(c, &ws, &id)).await
    }

    async fn get_memory(&self, ws: &str, store_id: &str, id: &str) -> StoreResult<Option<Memory>> {
        let (ws, st, id) = (ws.to_string(), store_id.to_string(), id.to_string());
        self.db.read(move |c| get_memory(c, &ws, &st, &id)).await
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
            .read(move |c| list_memories(c, &ws, &st, &prefix, from.as_deref(), limit))
            .await
    }

    async fn write_memory(&self, ws: &str, write: &MemoryWrite) -> StoreResult<MemoryWriteOutcome> {
        let (ws, w) = (ws.to_string(), write.clone());
        self.db.write(move |c| write_memory(c, &ws, &w)).await
    }

    async fn get_memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
    ) -> StoreResult<Option<MemoryVersion>> {
        let (ws, st, id) = (ws.to_string(), store_id.to_string(), id.to_string());
        self.db.read(move |c| get_version(c, &ws, &st, &id)).await
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
            .read(move |c| list_versions(c, &ws, &st, &f, &scan))
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
            .write(move |c| redact_version(c, &ws, &st, &id, by.as_ref(), at))
            .await
    }
}
