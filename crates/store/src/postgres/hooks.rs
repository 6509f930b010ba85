//! Hooks (migration 0016; bodies are `json`, sealed secrets `bytea`).

use crate::HookStore;
use async_trait::async_trait;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{QueryBuilder, Row};

use super::{PgStore, announce, push_scan};
use crate::signal::Signal;
use crate::{HookRecord, Scan, StoreResult};
use mast_domain::hook::Hook;
use mast_domain::time::Micros;

fn record(row: &PgRow) -> StoreResult<HookRecord> {
    let body: &str = row.try_get(0)?;
    Ok(HookRecord {
        hook: serde_json::from_str(body)?,
        sealed_secret: row.try_get(1)?,
    })
}

#[async_trait]
impl HookStore for PgStore {
    async fn insert_hook(&self, ws: &str, rec: &HookRecord, at: Micros) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO hooks (id, workspace_id, event, body, secret, created_at) \
             VALUES ($1, $2, $3, $4::json, $5, $6)",
        )
        .bind(&rec.hook.id)
        .bind(ws)
        .bind(rec.hook.event.as_str())
        .bind(serde_json::to_string(&rec.hook)?)
        .bind(&rec.sealed_secret)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        announce(&mut tx, Signal::HooksChanged).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_hook(&self, ws: &str, id: &str) -> StoreResult<Option<HookRecord>> {
        let row =
            sqlx::query("SELECT body::text, secret FROM hooks WHERE workspace_id = $1 AND id = $2")
                .bind(ws)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|r| record(&r)).transpose()
    }

    async fn list_hooks(&self, ws: &str, scan: &Scan<String>) -> StoreResult<Vec<Hook>> {
        let mut qb = QueryBuilder::<Postgres>::new(
            "SELECT body::text, secret FROM hooks WHERE workspace_id = ",
        );
        qb.push_bind(ws.to_string());
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(|r| record(r).map(|h| h.hook)).collect()
    }

    async fn hooks_for_event(&self, ws: &str, event: &str) -> StoreResult<Vec<HookRecord>> {
        let rows = sqlx::query(
            "SELECT body::text, secret FROM hooks WHERE workspace_id = $1 AND event = $2 ORDER BY id",
        )
        .bind(ws)
        .bind(event)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }

    async fn delete_hook(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("DELETE FROM hooks WHERE workspace_id = $1 AND id = $2")
            .bind(ws)
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n > 0 {
            announce(&mut tx, Signal::HooksChanged).await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }
}
