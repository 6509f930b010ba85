//! Files API metadata (`files` table, migration 0008).

use crate::FileStore;
use async_trait::async_trait;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{QueryBuilder, Row};

use super::{PgStore, push_scan};
use crate::{FileFilter, FileRecord, Scan, StoreResult};
use mast_domain::time::Micros;

const COLS: &str = "id, workspace_id, filename, mime_type, size_bytes, downloadable, scope_id, \
                    created_at, expires_at";

fn record(r: &PgRow) -> Result<FileRecord, sqlx::Error> {
    Ok(FileRecord {
        id: r.try_get(0)?,
        workspace_id: r.try_get(1)?,
        filename: r.try_get(2)?,
        mime_type: r.try_get(3)?,
        size_bytes: r.try_get(4)?,
        downloadable: r.try_get(5)?,
        scope_id: r.try_get(6)?,
        created_at: r.try_get(7)?,
        expires_at: r.try_get(8)?,
    })
}

#[async_trait]
impl FileStore for PgStore {
    async fn insert_file(&self, f: &FileRecord) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO files (id, workspace_id, filename, mime_type, size_bytes, downloadable, \
             scope_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&f.id)
        .bind(&f.workspace_id)
        .bind(&f.filename)
        .bind(&f.mime_type)
        .bind(f.size_bytes)
        .bind(f.downloadable)
        .bind(&f.scope_id)
        .bind(f.created_at)
        .bind(f.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_file(&self, ws: &str, id: &str) -> StoreResult<Option<FileRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {COLS} FROM files WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(ws)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(record).transpose()?)
    }

    async fn list_files(
        &self,
        ws: &str,
        filter: &FileFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<FileRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {COLS} FROM files WHERE workspace_id = "
        ));
        qb.push_bind(ws.to_string());
        qb.push(" AND (expires_at IS NULL OR expires_at > ")
            .push_bind(filter.live_at)
            .push(")");
        if let Some(scope) = &filter.scope_id {
            qb.push(" AND scope_id = ").push_bind(scope.clone());
        }
        if !filter.ids.is_empty() {
            qb.push(" AND id = ANY(")
                .push_bind(filter.ids.clone())
                .push(")");
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        Ok(rows.iter().map(record).collect::<Result<_, _>>()?)
    }

    async fn delete_file(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM files WHERE workspace_id = $1 AND id = $2")
            .bind(ws)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn expired_files(&self, now: Micros, limit: i64) -> StoreResult<Vec<FileRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM files WHERE expires_at IS NOT NULL AND expires_at <= $1 \
             ORDER BY expires_at, id LIMIT $2"
        ))
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(record).collect::<Result<_, _>>()?)
    }

    async fn existing_file_ids(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        let rows = sqlx::query("SELECT id FROM files WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?)
    }
}
