//! Files API metadata (`files` table, migration 0008).

use super::SqliteStore;
use crate::FileStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::rows::Query;
use crate::{FileFilter, FileRecord, Scan, StoreResult};
use mast_domain::time::Micros;

const COLS: &str = "id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_id, \
                    created_at, expires_at";

fn record(r: &Row<'_>) -> rusqlite::Result<FileRecord> {
    Ok(FileRecord {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        filename: r.get(2)?,
        mime_type: r.get(3)?,
        size_bytes: r.get(4)?,
        downloadable: r.get(5)?,
        scope_id: r.get(6)?,
        created_at: r.get(7)?,
        expires_at: r.get(8)?,
    })
}

pub(super) fn insert(conn: &Connection, f: &FileRecord) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO files (id, workspace_id, filename, mime_type, size_bytes, downloadable, \
         scope_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        f.id,
        f.workspace_id,
        f.filename,
        f.mime_type,
        f.size_bytes,
        f.downloadable,
        f.scope_id,
        f.created_at,
        f.expires_at
    ])?;
    Ok(())
}

pub(super) fn get(conn: &Connection, ws: &str, id: &str) -> StoreResult<Option<FileRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLS} FROM files WHERE workspace_id = ?1 AND id = ?2"
        ))?
        .query_row([ws, id], record)
        .optional()?)
}

pub(super) fn list(
    conn: &Connection,
    ws: &str,
    filter: &FileFilter,
    scan: &Scan<String>,
) -> StoreResult<Vec<FileRecord>> {
    let mut q = Query::new(&format!("SELECT {COLS} FROM files WHERE workspace_id = "));
    q.bind(ws.to_string());
    q.push(" AND (expires_at IS NULL OR expires_at > ")
        .bind(filter.live_at)
        .push(")");
    if let Some(scope) = &filter.scope_id {
        q.push(" AND scope_id = ").bind(scope.clone());
    }
    if !filter.ids.is_empty() {
        q.push(" AND id IN ").bind_list(&filter.ids);
    }
    q.scan("id", scan);
    Ok(q.all(conn, record)?)
}

pub(super) fn delete(conn: &Connection, ws: &str, id: &str) -> StoreResult<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM files WHERE workspace_id = ?1 AND id = ?2")?
        .execute([ws, id])?
        > 0)
}

pub(super) fn expired(conn: &Connection, now: Micros, limit: i64) -> StoreResult<Vec<FileRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLS} FROM files WHERE expires_at IS NOT NULL AND expires_at <= ?1 \
             ORDER BY expires_at, id LIMIT ?2"
        ))?
        .query_map(params![now, limit], record)?
        .collect::<Result<_, _>>()?)
}

pub(super) fn existing(conn: &Connection, ids: &[String]) -> StoreResult<Vec<String>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Query::new("SELECT id FROM files WHERE id IN ");
    q.bind_list(ids);
    Ok(q.all(conn, |r| r.get(0))?)
}

#[async_trait]
impl FileStore for SqliteStore {
    async fn insert_file(&self, file: &FileRecord) -> StoreResult<()> {
        let file = file.clone();
        self.db.write(move |c| insert(c, &file)).await
    }

    async fn get_file(&self, workspace_id: &str, id: &str) -> StoreResult<Option<FileRecord>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.read(move |c| get(c, &ws, &id)).await
    }

    async fn list_files(
        &self,
        workspace_id: &str,
        filter: &FileFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<FileRecord>> {
        let (ws, filter, scan) = (workspace_id.to_string(), filter.clone(), scan.clone());
        self.db.read(move |c| list(c, &ws, &filter, &scan)).await
    }

    async fn delete_file(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.write(move |c| delete(c, &ws, &id)).await
    }

    async fn expired_files(&self, now: Micros, limit: i64) -> StoreResult<Vec<FileRecord>> {
        self.db.read(move |c| expired(c, now, limit)).await
    }

    async fn existing_file_ids(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        let ids = ids.to_vec();
        self.db.read(move |c| existing(c, &ids)).await
    }
}
