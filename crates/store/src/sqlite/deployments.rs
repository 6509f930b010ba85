//! Deployments and their runs (bodies and errors are JSON text).

use super::SqliteStore;
use crate::DeploymentStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::rows::Query;
use crate::deployments::run_events;
use crate::webhooks::WebhookEvent;
use crate::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    NextFire, Scan, StoreError, StoreResult,
};
use mast_domain::deployment::DeploymentState;
use mast_domain::time::Micros;

const COLS: &str = "id, workspace_id, body, paused_reason, next_fire_at, last_run_at, \
                    created_at, updated_at, archived_at";
const RUN_COLS: &str = "id, workspace_id, deployment_id, trigger_type, scheduled_at, agent_id, \
                        agent_version, session_id, error, created_at";

type RawDeployment = (
    String,
    String,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
    Option<i64>,
);

fn raw(r: &Row<'_>) -> rusqlite::Result<RawDeployment> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

fn deployment(raw: RawDeployment) -> StoreResult<DeploymentRecord> {
    let (id, workspace_id, body, paused, next_fire_at, last_run_at, created, updated, archived) =
        raw;
    Ok(DeploymentRecord {
        id,
        workspace_id,
        spec: serde_json::from_str(&body)?,
        state: DeploymentState {
            paused_reason: paused.map(|p| serde_json::from_str(&p)).transpose()?,
            last_run_at,
            created_at: created,
            updated_at: updated,
            archived_at: archived,
        },
        next_fire_at,
    })
}

fn run(r: &Row<'_>) -> rusqlite::Result<DeploymentRunRecord> {
    Ok(DeploymentRunRecord {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        deployment_id: r.get(2)?,
        trigger_type: r.get(3)?,
        scheduled_at: r.get(4)?,
        agent_id: r.get(5)?,
        agent_version: r.get(6)?,
        session_id: r.get(7)?,
        error: r.get(8)?,
        created_at: r.get(9)?,
    })
}

fn paused_text(d: &DeploymentRecord) -> StoreResult<Option<String>> {
    Ok(d.state
        .paused_reason
        .as_ref()
        .map(serde_json::to_string)
        .transpose()?)
}

pub(super) fn insert(conn: &Connection, d: &DeploymentRecord) -> StoreResult<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO deployments ({COLS}, agent_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
    ))?
    .execute(params![
        d.id,
        d.workspace_id,
        serde_json::to_string(&d.spec)?,
        paused_text(d)?,
        d.next_fire_at,
        d.state.last_run_at,
        d.state.created_at,
        d.state.updated_at,
        d.state.archived_at,
        d.spec.agent_id,
    ])?;
    super::webhooks::emit(
        conn,
        &[WebhookEvent::new(
            "deployment.created",
            &d.workspace_id,
            &d.id,
        )],
    )
}

pub(super) fn get(conn: &Connection, ws: &str, id: &str) -> StoreResult<Option<DeploymentRecord>> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {COLS} FROM deployments WHERE workspace_id = ?1 AND id = ?2"
        ))?
        .query_row([ws, id], raw)
        .optional()?;
    row.map(deployment).transpose()
}

pub(super) fn update(
    conn: &Connection,
    d: &DeploymentRecord,
    next: NextFire,
    change: DeploymentChange,
) -> StoreResult<()> {
    let (set_next, next_at) = match next {
        NextFire::Keep => (false, None),
        NextFire::Set(at) => (true, at),
    };
    conn.prepare_cached(
        "UPDATE deployments SET body = ?1, agent_id = ?2, paused_reason = ?3, updated_at = ?4, \
         archived_at = ?5, next_fire_at = CASE WHEN ?6 THEN ?7 ELSE next_fire_at END \
         WHERE workspace_id = ?8 AND id = ?9",
    )?
    .execute(params![
        serde_json::to_string(&d.spec)?,
        d.spec.agent_id,
        paused_text(d)?,
        d.state.updated_at,
        d.state.archived_at,
        set_next,
        next_at,
        d.workspace_id,
        d.id,
    ])?;
    super::webhooks::emit(conn, &[change.event(d)])
}

pub(super) fn list(
    conn: &Connection,
    ws: &str,
    f: &DeploymentFilter,
    scan: &Scan<String>,
) -> StoreResult<Vec<DeploymentRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {COLS} FROM deployments WHERE workspace_id = "
    ));
    q.bind(ws.to_string());
    if let Some(a) = &f.agent_id {
        q.push(" AND agent_id = ").bind(a.clone());
    }
    match f.paused {
        Some(true) => q.push(" AND paused_reason IS NOT NULL AND archived_at IS NULL"),
        Some(false) => q.push(" AND paused_reason IS NULL AND archived_at IS NULL"),
        None if !f.include_archived => q.push(" AND archived_at IS NULL"),
        None => &mut q,
    };
    if let Some(v) = f.created_gte {
        q.push(" AND created_at >= ").bind(v);
    }
    if let Some(v) = f.created_lte {
        q.push(" AND created_at <= ").bind(v);
    }
    q.scan("id", scan);
    q.all(conn, raw)?.into_iter().map(deployment).collect()
}

pub(super) fn due(
    conn: &Connection,
    now: Micros,
    limit: i64,
) -> StoreResult<Vec<DeploymentRecord>> {
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {COLS} FROM deployments WHERE next_fire_at IS NOT NULL AND next_fire_at <= ?1 \
             AND paused_reason IS NULL AND archived_at IS NULL ORDER BY next_fire_at LIMIT ?2"
        ))?
        .query_map(params![now, limit], raw)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(deployment).collect()
}

pub(super) fn claim(
    conn: &Connection,
    id: &str,
    expected: Micros,
    next: Option<Micros>,
) -> StoreResult<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE deployments SET next_fire_at = ?1 WHERE id = ?2 AND next_fire_at = ?3 \
             AND paused_reason IS NULL AND archived_at IS NULL",
        )?
        .execute(params![next, id, expected])?;
    Ok(n == 1)
}

pub(super) fn record_run(
    conn: &Connection,
    r: &DeploymentRunRecord,
    pause: Option<&serde_json::Value>,
) -> StoreResult<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO deployment_runs ({RUN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
    ))?
    .execute(params![
        r.id,
        r.workspace_id,
        r.deployment_id,
        r.trigger_type,
        r.scheduled_at,
        r.agent_id,
        r.agent_version,
        r.session_id,
        r.error,
        r.created_at,
    ])?;
    if r.trigger_type == "schedule" && r.session_id.is_some() {
        conn.prepare_cached("UPDATE deployments SET last_run_at = ?1 WHERE id = ?2")?
            .execute(params![r.created_at, r.deployment_id])?;
    }
    let mut hooks = run_events(r);
    if let Some(p) = pause {
        let paused = conn
            .prepare_cached(
                "UPDATE deployments SET paused_reason = ?1, updated_at = ?2 \
                 WHERE id = ?3 AND paused_reason IS NULL AND archived_at IS NULL",
            )?
            .execute(params![
                serde_json::to_string(p).map_err(StoreError::from)?,
                r.created_at,
                r.deployment_id
            ])?;
        if paused == 1 {
            hooks.push(WebhookEvent::new(
                DeploymentChange::Paused.webhook_type(),
                &r.workspace_id,
                &r.deployment_id,
            ));
        }
    }
    super::webhooks::emit(conn, &hooks)
}

pub(super) fn get_run(
    conn: &Connection,
    ws: &str,
    id: &str,
) -> StoreResult<Option<DeploymentRunRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {RUN_COLS} FROM deployment_runs WHERE workspace_id = ?1 AND id = ?2"
        ))?
        .query_row([ws, id], run)
        .optional()?)
}

pub(super) fn list_runs(
    conn: &Connection,
    ws: &str,
    f: &DeploymentRunFilter,
    scan: &Scan<String>,
) -> StoreResult<Vec<DeploymentRunRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {RUN_COLS} FROM deployment_runs WHERE workspace_id = "
    ));
    q.bind(ws.to_string());
    if let Some(d) = &f.deployment_id {
        q.push(" AND deployment_id = ").bind(d.clone());
    }
    match f.has_error {
        Some(true) => q.push(" AND error IS NOT NULL"),
        Some(false) => q.push(" AND session_id IS NOT NULL"),
        None => &mut q,
    };
    if let Some(t) = &f.trigger_type {
        q.push(" AND trigger_type = ").bind(t.clone());
    }
    for (op, v) in [
        (" > ", f.created_gt),
        (" >= ", f.created_gte),
        (" < ", f.created_lt),
        (" <= ", f.created_lte),
    ] {
        if let Some(v) = v {
            q.push(" AND created_at").push(op).bind(v);
        }
    }
    q.scan("id", scan);
    Ok(q.all(conn, run)?)
}

#[async_trait]
impl DeploymentStore for SqliteStore {
    // ---- deployments ----

    async fn insert_deployment(&self, d: &DeploymentRecord) -> StoreResult<()> {
        let d = d.clone();
        self.db.write(move |c| insert(c, &d)).await
    }

    async fn get_deployment(&self, ws: &str, id: &str) -> StoreResult<Option<DeploymentRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| get(c, &ws, &id)).await
    }

    async fn update_deployment(
        &self,
        d: &DeploymentRecord,
        next: NextFire,
        change: DeploymentChange,
    ) -> StoreResult<()> {
        let d = d.clone();
        self.db.write(move |c| update(c, &d, next, change)).await
    }

    async fn list_deployments(
        &self,
        ws: &str,
        filter: &DeploymentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRecord>> {
        let (ws, f, scan) = (ws.to_string(), filter.clone(), scan.clone());
        self.db.read(move |c| list(c, &ws, &f, &scan)).await
    }

    async fn due_deployments(&self, now: Micros, limit: i64) -> StoreResult<Vec<DeploymentRecord>> {
        self.db.read(move |c| due(c, now, limit)).await
    }

    async fn claim_deployment_fire(
        &self,
        id: &str,
        expected: Micros,
        next: Option<Micros>,
    ) -> StoreResult<bool> {
        let id = id.to_string();
        self.db.write(move |c| claim(c, &id, expected, next)).await
    }

    async fn record_deployment_run(
        &self,
        run: &DeploymentRunRecord,
        pause: Option<&serde_json::Value>,
    ) -> StoreResult<()> {
        let (run, pause) = (run.clone(), pause.cloned());
        self.db
            .write(move |c| record_run(c, &run, pause.as_ref()))
            .await
    }

    async fn get_deployment_run(
        &self,
        ws: &str,
        id: &str,
    ) -> StoreResult<Option<DeploymentRunRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| get_run(c, &ws, &id)).await
    }

    async fn list_deployment_runs(
        &self,
        ws: &str,
        filter: &DeploymentRunFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRunRecord>> {
        let (ws, f, scan) = (ws.to_string(), filter.clone(), scan.clone());
        self.db.read(move |c| list_runs(c, &ws, &f, &scan)).await
    }
}
