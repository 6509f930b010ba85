//! The statements of a table of JSON bodies owned by workspaces: rows of `id`,
//! `workspace_id`, `body` (the record, `json`), `created_at`, `updated_at` and `archived_at`,
//! perhaps with a few text columns copied out of the body (an environment's `name`, for its
//! uniqueness). Vaults, memory stores and environments are such tables; what each adds
//! (webhooks, cascades, checks) stays in its area's file, around these calls, in the same
//! transaction.

use std::sync::OnceLock;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::postgres::{PgPool, PgRow, Postgres};
use sqlx::{PgConnection, QueryBuilder, Row};

use super::push_scan;
use crate::{Scan, StoreResult};
use mast_domain::time::Micros;

/// One body table: its name and the columns written beside the body. Its statements are
/// built on first use and kept, so each has one text and sqlx prepares it once per
/// connection.
pub(super) struct BodyTable {
    table: &'static str,
    extra: &'static [&'static str],
    sql: OnceLock<Statements>,
}

/// The fixed statements of a [`BodyTable`]; lists start with [`Statements::list`].
struct Statements {
    insert: String,
    get: String,
    update: String,
    list: String,
    delete: String,
}

impl Statements {
    fn new(table: &str, extra: &[&str]) -> Self {
        // Extra columns are bound after the fixed ones, in order, in both statements.
        let (mut extra_cols, mut extra_values, mut extra_sets) =
            (String::new(), String::new(), String::new());
        for (i, col) in extra.iter().enumerate() {
            extra_cols.push_str(&format!(", {col}"));
            extra_values.push_str(&format!(", ${}", i + 5));
            extra_sets.push_str(&format!(", {col} = ${}", i + 6));
        }
        Statements {
            insert: format!(
                "INSERT INTO {table} (id, workspace_id, body, created_at, updated_at{extra_cols}) \
                 VALUES ($1, $2, $3::json, $4, $4{extra_values})"
            ),
            get: format!("SELECT body::text FROM {table} WHERE workspace_id = $1 AND id = $2"),
            update: format!(
                "UPDATE {table} SET body = $1::json, updated_at = $2, \
                 archived_at = COALESCE(archived_at, $3){extra_sets} \
                 WHERE workspace_id = $4 AND id = $5 RETURNING archived_at"
            ),
            list: format!("SELECT body::text FROM {table} WHERE workspace_id = "),
            delete: format!("DELETE FROM {table} WHERE workspace_id = $1 AND id = $2"),
        }
    }
}

/// A body read from a row's first column (`body::text`).
fn body<T: DeserializeOwned>(row: &PgRow) -> StoreResult<T> {
    let text: &str = row.try_get(0)?;
    Ok(serde_json::from_str(text)?)
}

impl BodyTable {
    /// The table `table`, whose rows also carry the text columns `extra` (bound, in this
    /// order, from the `extra` values of [`insert`](Self::insert) and
    /// [`update`](Self::update)).
    pub(super) const fn new(table: &'static str, extra: &'static [&'static str]) -> Self {
        BodyTable {
            table,
            extra,
            sql: OnceLock::new(),
        }
    }

    fn sql(&self) -> &Statements {
        self.sql
            .get_or_init(|| Statements::new(self.table, self.extra))
    }

    /// Inserts `body` as the row `id` of workspace `ws`, created and updated `at`.
    pub(super) async fn insert<T: Serialize>(
        &self,
        conn: &mut PgConnection,
        ws: &str,
        id: &str,
        body: &T,
        at: Micros,
        extra: &[&str],
    ) -> StoreResult<()> {
        debug_assert_eq!(extra.len(), self.extra.len());
        let mut q = sqlx::query(&self.sql().insert)
            .bind(id)
            .bind(ws)
            .bind(serde_json::to_string(body)?)
            .bind(at);
        for v in extra {
            q = q.bind(*v);
        }
        q.execute(conn).await?;
        Ok(())
    }

    /// The body of row `id` in workspace `ws`.
    pub(super) async fn get<T: DeserializeOwned>(
        &self,
        pool: &PgPool,
        ws: &str,
        id: &str,
    ) -> StoreResult<Option<T>> {
        let row = sqlx::query(&self.sql().get)
            .bind(ws)
            .bind(id)
            .fetch_optional(pool)
            .await?;
        row.map(|r| body(&r)).transpose()
    }

    /// Replaces the body of row `id` in workspace `ws`, updated `at`; `archived` archives it
    /// `at` unless it was archived before (an archive keeps its first time). The row's
    /// `archived_at` after the update, or `None` when there is no such row.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn update<T: Serialize>(
        &self,
        conn: &mut PgConnection,
        ws: &str,
        id: &str,
        body: &T,
        at: Micros,
        archived: bool,
        extra: &[&str],
    ) -> StoreResult<Option<Option<Micros>>> {
        debug_assert_eq!(extra.len(), self.extra.len());
        let mut q = sqlx::query(&self.sql().update)
            .bind(serde_json::to_string(body)?)
            .bind(at)
            .bind(archived.then_some(at))
            .bind(ws)
            .bind(id);
        for v in extra {
            q = q.bind(*v);
        }
        let row = q.fetch_optional(conn).await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    /// A page of workspace `ws`'s bodies by id, archived ones only if `include_archived`;
    /// `filter` appends the area's own conditions (`AND …`) before the page's.
    pub(super) async fn list<T: DeserializeOwned>(
        &self,
        pool: &PgPool,
        ws: &str,
        include_archived: bool,
        scan: &Scan<String>,
        filter: impl FnOnce(&mut QueryBuilder<'_, Postgres>),
    ) -> StoreResult<Vec<T>> {
        let mut qb = QueryBuilder::<Postgres>::new(&self.sql().list);
        qb.push_bind(ws.to_string());
        if !include_archived {
            qb.push(" AND archived_at IS NULL");
        }
        filter(&mut qb);
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(pool).await?;
        rows.iter().map(body).collect()
    }

    /// Deletes row `id` of workspace `ws`; whether it was there.
    pub(super) async fn delete(
        &self,
        conn: &mut PgConnection,
        ws: &str,
        id: &str,
    ) -> StoreResult<bool> {
        let n = sqlx::query(&self.sql().delete)
            .bind(ws)
            .bind(id)
            .execute(conn)
            .await?
            .rows_affected();
        Ok(n > 0)
    }
}
