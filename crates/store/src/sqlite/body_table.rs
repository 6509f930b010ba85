//! The statements of a table of JSON bodies owned by workspaces: rows of `id`,
//! `workspace_id`, `body` (the record as JSON text), `created_at`, `updated_at` and
//! `archived_at`, perhaps with a few text columns copied out of the body (an environment's
//! `name`, for its uniqueness). Vaults, memory stores and environments are such tables; what
//! each adds (webhooks, cascades, checks) stays in its area's file, around these calls, in
//! the same transaction.

use std::sync::OnceLock;

use rusqlite::types::ToSql;
use rusqlite::{Connection, OptionalExtension, params_from_iter};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::rows::Query;
use crate::{Scan, StoreResult};
use mast_domain::time::Micros;

/// One body table: its name and the columns written beside the body. Its statements are
/// built on first use and kept, so each has one text and stays in the connections'
/// statement caches.
pub(super) struct BodyTable {
    table: &'static str,
    extra: &'static [&'static str],
    sql: OnceLock<Statements>,
}

/// The fixed statements of a [`BodyTable`]; lists are built on [`Statements::list`].
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
            extra_values.push_str(&format!(", ?{}", i + 5));
            extra_sets.push_str(&format!(", {col} = ?{}", i + 6));
        }
        Statements {
            insert: format!(
                "INSERT INTO {table} (id, workspace_id, body, created_at, updated_at{extra_cols}) \
                 VALUES (?1, ?2, ?3, ?4, ?4{extra_values})"
            ),
            get: format!("SELECT body FROM {table} WHERE workspace_id = ?1 AND id = ?2"),
            update: format!(
                "UPDATE {table} SET body = ?1, updated_at = ?2, \
                 archived_at = COALESCE(archived_at, ?3){extra_sets} \
                 WHERE workspace_id = ?4 AND id = ?5"
            ),
            list: format!("SELECT body FROM {table} WHERE workspace_id = "),
            delete: format!("DELETE FROM {table} WHERE workspace_id = ?1 AND id = ?2"),
        }
    }
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
    pub(super) fn insert<T: Serialize>(
        &self,
        conn: &Connection,
        ws: &str,
        id: &str,
        body: &T,
        at: Micros,
        extra: &[&str],
    ) -> StoreResult<()> {
        debug_assert_eq!(extra.len(), self.extra.len());
        let body = serde_json::to_string(body)?;
        let fixed: [&dyn ToSql; 4] = [&id, &ws, &body, &at];
        let args = fixed
            .into_iter()
            .chain(extra.iter().map(|v| v as &dyn ToSql));
        conn.prepare_cached(&self.sql().insert)?
            .execute(params_from_iter(args))?;
        Ok(())
    }

    /// The body of row `id` in workspace `ws`.
    pub(super) fn get<T: DeserializeOwned>(
        &self,
        conn: &Connection,
        ws: &str,
        id: &str,
    ) -> StoreResult<Option<T>> {
        let body: Option<String> = conn
            .prepare_cached(&self.sql().get)?
            .query_row([ws, id], |r| r.get(0))
            .optional()?;
        Ok(body.map(|b| serde_json::from_str(&b)).transpose()?)
    }

    /// Replaces the body of row `id` in workspace `ws`, updated `at`; `archived` archives it
    /// `at` unless it was archived before (an archive keeps its first time). Whether the row
    /// was there.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update<T: Serialize>(
        &self,
        conn: &Connection,
        ws: &str,
        id: &str,
        body: &T,
        at: Micros,
        archived: bool,
        extra: &[&str],
    ) -> StoreResult<bool> {
        debug_assert_eq!(extra.len(), self.extra.len());
        let body = serde_json::to_string(body)?;
        let archived_at = archived.then_some(at);
        let fixed: [&dyn ToSql; 5] = [&body, &at, &archived_at, &ws, &id];
        let args = fixed
            .into_iter()
            .chain(extra.iter().map(|v| v as &dyn ToSql));
        let n = conn
            .prepare_cached(&self.sql().update)?
            .execute(params_from_iter(args))?;
        Ok(n == 1)
    }

    /// A page of workspace `ws`'s bodies by id, archived ones only if `include_archived`;
    /// `filter` appends the area's own conditions (`AND …`) before the page's.
    pub(super) fn list<T: DeserializeOwned>(
        &self,
        conn: &Connection,
        ws: &str,
        include_archived: bool,
        scan: &Scan<String>,
        filter: impl FnOnce(&mut Query),
    ) -> StoreResult<Vec<T>> {
        let mut q = Query::new(&self.sql().list);
        q.bind(ws.to_string());
        if !include_archived {
            q.push(" AND archived_at IS NULL");
        }
        filter(&mut q);
        q.scan("id", scan);
        q.all(conn, |r| r.get::<_, String>(0))?
            .into_iter()
            .map(|b| Ok(serde_json::from_str(&b)?))
            .collect()
    }

    /// Deletes row `id` of workspace `ws`; whether it was there.
    pub(super) fn delete(&self, conn: &Connection, ws: &str, id: &str) -> StoreResult<bool> {
        let n = conn.prepare_cached(&self.sql().delete)?.execute([ws, id])?;
        Ok(n > 0)
    }
}
