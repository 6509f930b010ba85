//! Memory stores, memories and their versions. A write locks its store's row (`FOR UPDATE`)
//! for its transaction, so writes to one store are serialised: a precondition or a path
//! check can never be passed by two writes at once (no lost update).

use crate::MemoryStorage;
use async_trait::async_trait;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{PgConnection, QueryBuilder, Row};

use super::body_table::BodyTable;
use super::{PgStore, push_scan};
use crate::memory::{
    Decision, MemoryChange, MemoryStoreFilter, MemoryVersionFilter, MemoryWrite,
    MemoryWriteOutcome, RedactOutcome, StoreState, actor_ids, decide, redacted,
};
use crate::webhooks::WebhookEvent;
use crate::{Scan, StoreError, StoreResult};
use mast_domain::memory::{
    Actor, Memory, MemoryStore, MemoryTag, MemoryVersion, Operation, past_prefix,
};
use mast_domain::time::{self, Micros};

const MEMORY_COLS: &str = "id, store_id, path, content, content_sha256, content_size, version_id, \
                           created_at, updated_at";
const VERSION_COLS: &str = "id, store_id, memory_id, operation, path, content, content_sha256, \
                            content_size, created_by::text, created_at, redacted_at, redacted_by::text";
/// The store of the row belongs to the workspace bound as `$1`.
const IN_WORKSPACE: &str =
    "EXISTS (SELECT 1 FROM memory_stores s WHERE s.id = store_id AND s.workspace_id = $1)";

/// The memory stores table: a store's body, nothing beside it (its memories are rows of
/// their own).
static STORES: BodyTable = BodyTable::new("memory_stores", &[]);

fn memory(r: &PgRow) -> StoreResult<Memory> {
    Ok(Memory {
        tag: MemoryTag::Tag,
        id: r.try_get(0)?,
        memory_store_id: r.try_get(1)?,
        path: r.try_get(2)?,
        content: Some(r.try_get(3)?),
        content_sha256: r.try_get(4)?,
        content_size_bytes: r.try_get(5)?,
        memory_version_id: r.try_get(6)?,
        created_at: time::format(r.try_get(7)?),
        updated_at: time::format(r.try_get(8)?),
    })
}

fn actor(raw: Option<&str>) -> StoreResult<Option<Actor>> {
    Ok(raw.map(serde_json::from_str::<Actor>).transpose()?)
}

fn version(r: &PgRow) -> StoreResult<MemoryVersion> {
    let op: &str = r.try_get(3)?;
    Ok(MemoryVersion {
        tag: Default::default(),
        id: r.try_get(0)?,
        memory_store_id: r.try_get(1)?,
        memory_id: r.try_get(2)?,
        operation: Operation::parse(op)
            .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("unknown operation `{op}`")))?,
        path: r.try_get(4)?,
        content: r.try_get(5)?,
        content_sha256: r.try_get(6)?,
        content_size_bytes: r.try_get(7)?,
        created_by: actor(r.try_get(8)?)?,
        created_at: time::format(r.try_get(9)?),
        redacted_at: time::format_opt(r.try_get(10)?),
        redacted_by: actor(r.try_get(11)?)?,
    })
}

fn actor_json(a: Option<&Actor>) -> StoreResult<Option<String>> {
    Ok(a.map(serde_json::to_string).transpose()?)
}

async fn insert_version(conn: &mut PgConnection, v: &MemoryVersion, at: Micros) -> StoreResult<()> {
    let (api_key_id, session_id) = actor_ids(v.created_by.as_ref());
    sqlx::query(
        "INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, \
         content_sha256, content_size, created_by, api_key_id, session_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::json, $10, $11, $12)",
    )
    .bind(&v.id)
    .bind(&v.memory_store_id)
    .bind(&v.memory_id)
    .bind(v.operation.as_str())
    .bind(&v.path)
    .bind(&v.content)
    .bind(&v.content_sha256)
    .bind(v.content_size_bytes)
    .bind(actor_json(v.created_by.as_ref())?)
    .bind(api_key_id)
    .bind(session_id)
    .bind(at)
    .execute(conn)
    .await?;
    Ok(())
}

#[async_trait]
impl MemoryStorage for PgStore {
    async fn insert_memory_store(&self, ws: &str, s: &MemoryStore, at: Micros) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        STORES.insert(&mut tx, ws, &s.id, s, at, &[]).await?;
        let created = WebhookEvent::new("memory_store.created", ws, &s.id);
        self.emit(&mut tx, &[created]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_memory_store(&self, ws: &str, id: &str) -> StoreResult<Option<MemoryStore>> {
        STORES.get(&self.pool, ws, id).await
    }

    async fn update_memory_store(
        &self,
        ws: &str,
        s: &MemoryStore,
        at: Micros,
        archived: bool,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let found = STORES
            .update(&mut tx, ws, &s.id, s, at, archived, &[])
            .await?
            .is_some();
        // Only archiving has a webhook type (there is no `memory_store.updated`).
        if archived && found {
            let archived = WebhookEvent::new("memory_store.archived", ws, &s.id);
            self.emit(&mut tx, &[archived]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_memory_stores(
        &self,
        ws: &str,
        f: &MemoryStoreFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryStore>> {
        let filter = |qb: &mut QueryBuilder<'_, Postgres>| {
            if let Some(t) = f.created_gte {
                qb.push(" AND created_at >= ").push_bind(t);
            }
            if let Some(t) = f.created_lte {
                qb.push(" AND created_at <= ").push_bind(t);
            }
        };
        STORES
            .list(&self.pool, ws, f.include_archived, scan, filter)
            .await
    }

    async fn delete_memory_store(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let deleted = STORES.delete(&mut tx, ws, id).await?;
        if deleted {
            sqlx::query("DELETE FROM memory_versions WHERE store_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM memories WHERE store_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            let event = WebhookEvent::new("memory_store.deleted", ws, id);
            self.emit(&mut tx, &[event]).await?;
        }
        tx.commit().await?;
        Ok(deleted)
    }

    async fn get_memory(&self, ws: &str, store_id: &str, id: &str) -> StoreResult<Option<Memory>> {
        let row = sqlx::query(&format!(
            "SELECT {MEMORY_COLS} FROM memories WHERE {IN_WORKSPACE} AND store_id = $2 AND id = $3"
        ))
        .bind(ws)
        .bind(store_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| memory(&r)).transpose()
    }

    async fn list_memories(
        &self,
        ws: &str,
        store_id: &str,
        prefix: &str,
        from: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<Memory>> {
        let end = past_prefix(prefix);
        let from = from.filter(|f| *f > prefix).unwrap_or(prefix);
        let rows = sqlx::query(&format!(
            "SELECT {MEMORY_COLS} FROM memories WHERE {IN_WORKSPACE} AND store_id = $2 \
             AND path >= $3 AND path < $4 ORDER BY path LIMIT $5"
        ))
        .bind(ws)
        .bind(store_id)
        .bind(from)
        .bind(end)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(memory).collect()
    }

    async fn write_memory(&self, ws: &str, w: &MemoryWrite) -> StoreResult<MemoryWriteOutcome> {
        let mut tx = self.pool.begin().await?;
        let archived: Option<Option<i64>> = sqlx::query(
            "SELECT archived_at FROM memory_stores WHERE workspace_id = $1 AND id = $2 FOR UPDATE",
        )
        .bind(ws)
        .bind(&w.store_id)
        .fetch_optional(&mut *tx)
        .await?
        .map(|r| r.try_get(0))
        .transpose()?;
        let state = match archived {
            None => StoreState::Missing,
            Some(None) => StoreState::Live,
            Some(Some(_)) => StoreState::Archived,
        };
        let current = match &w.change {
            MemoryChange::Create { .. } => None,
            c => sqlx::query(&format!(
                "SELECT {MEMORY_COLS} FROM memories WHERE store_id = $1 AND id = $2"
            ))
            .bind(&w.store_id)
            .bind(c.memory_id())
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| memory(&r))
            .transpose()?,
        };
        let holder: Option<String> = match w.change.target_path() {
            Some(p) => sqlx::query("SELECT id FROM memories WHERE store_id = $1 AND path = $2")
                .bind(&w.store_id)
                .bind(p)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.try_get(0))
                .transpose()?,
            None => None,
        };
        // The store's row is locked above, so no concurrent create can slip past the count.
        let held: i64 = match &w.change {
            MemoryChange::Create { .. } => {
                sqlx::query_scalar("SELECT count(*) FROM memories WHERE store_id = $1")
                    .bind(&w.store_id)
                    .fetch_one(&mut *tx)
                    .await?
            }
            _ => 0,
        };
        let outcome = match decide(w, state, current.as_ref(), holder.as_deref(), held as usize) {
            Decision::Answer(o) => {
                tx.rollback().await?;
                return Ok(o);
            }
            Decision::Insert(m, v) => {
                sqlx::query(&format!(
                    "INSERT INTO memories ({MEMORY_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)"
                ))
                .bind(&m.id)
                .bind(&m.memory_store_id)
                .bind(&m.path)
                .bind(&m.content)
                .bind(&m.content_sha256)
                .bind(m.content_size_bytes)
                .bind(&m.memory_version_id)
                .bind(w.at)
                .execute(&mut *tx)
                .await?;
                insert_version(&mut tx, &v, w.at).await?;
                MemoryWriteOutcome::Written {
                    memory: Some(m),
                    version: Box::new(v),
                }
            }
            Decision::Replace(m, v) => {
                sqlx::query(
                    "UPDATE memories SET path = $1, content = $2, content_sha256 = $3, \
                     content_size = $4, version_id = $5, updated_at = $6 WHERE id = $7",
                )
                .bind(&m.path)
                .bind(&m.content)
                .bind(&m.content_sha256)
                .bind(m.content_size_bytes)
                .bind(&m.memory_version_id)
                .bind(w.at)
                .bind(&m.id)
                .execute(&mut *tx)
                .await?;
                insert_version(&mut tx, &v, w.at).await?;
                MemoryWriteOutcome::Written {
                    memory: Some(m),
                    version: Box::new(v),
                }
            }
            Decision::Remove(v) => {
                sqlx::query("DELETE FROM memories WHERE id = $1")
                    .bind(&v.memory_id)
                    .execute(&mut *tx)
                    .await?;
                insert_version(&mut tx, &v, w.at).await?;
                MemoryWriteOutcome::Written {
                    memory: None,
                    version: Box::new(v),
                }
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    async fn get_memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
    ) -> StoreResult<Option<MemoryVersion>> {
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLS} FROM memory_versions \
             WHERE {IN_WORKSPACE} AND store_id = $2 AND id = $3"
        ))
        .bind(ws)
        .bind(store_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| version(&r)).transpose()
    }

    async fn list_memory_versions(
        &self,
        ws: &str,
        store_id: &str,
        f: &MemoryVersionFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<MemoryVersion>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {VERSION_COLS} FROM memory_versions WHERE EXISTS (SELECT 1 FROM \
             memory_stores s WHERE s.id = store_id AND s.workspace_id = "
        ));
        qb.push_bind(ws.to_string())
            .push(") AND store_id = ")
            .push_bind(store_id.to_string());
        if let Some(m) = &f.memory_id {
            qb.push(" AND memory_id = ").push_bind(m.clone());
        }
        if let Some(op) = f.operation {
            qb.push(" AND operation = ").push_bind(op.as_str());
        }
        if let Some(s) = &f.session_id {
            qb.push(" AND session_id = ").push_bind(s.clone());
        }
        if let Some(k) = &f.api_key_id {
            qb.push(" AND api_key_id = ").push_bind(k.clone());
        }
        if let Some(t) = f.created_gte {
            qb.push(" AND created_at >= ").push_bind(t);
        }
        if let Some(t) = f.created_lte {
            qb.push(" AND created_at <= ").push_bind(t);
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(version).collect()
    }

    async fn redact_memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
        by: Option<&Actor>,
        at: Micros,
    ) -> StoreResult<RedactOutcome> {
        let mut tx = self.pool.begin().await?;
        // The store's lock keeps a write from making this version current meanwhile.
        let locked = sqlx::query(
            "SELECT 1 FROM memory_stores WHERE workspace_id = $1 AND id = $2 FOR UPDATE",
        )
        .bind(ws)
        .bind(store_id)
        .fetch_optional(&mut *tx)
        .await?;
        if locked.is_none() {
            return Ok(RedactOutcome::NotFound);
        }
        let Some(v) = sqlx::query(&format!(
            "SELECT {VERSION_COLS} FROM memory_versions WHERE store_id = $1 AND id = $2"
        ))
        .bind(store_id)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .map(|r| version(&r))
        .transpose()?
        else {
            return Ok(RedactOutcome::NotFound);
        };
        if v.redacted_at.is_some() {
            return Ok(RedactOutcome::Redacted(Box::new(v)));
        }
        let current = sqlx::query("SELECT 1 FROM memories WHERE id = $1 AND version_id = $2")
            .bind(&v.memory_id)
            .bind(&v.id)
            .fetch_optional(&mut *tx)
            .await?;
        if current.is_some() {
            return Ok(RedactOutcome::Current);
        }
        sqlx::query(
            "UPDATE memory_versions SET path = NULL, content = NULL, content_sha256 = NULL, \
             content_size = NULL, redacted_at = $1, redacted_by = $2::json WHERE id = $3",
        )
        .bind(at)
        .bind(actor_json(by)?)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(RedactOutcome::Redacted(Box::new(redacted(
            v,
            by.cloned(),
            at,
        ))))
    }
}
