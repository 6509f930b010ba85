//! Deployments and their runs (bodies and errors are JSON text).

use crate::DeploymentStore;
use async_trait::async_trait;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{QueryBuilder, Row};

use super::{PgStore, push_scan};
use crate::deployments::run_events;
use crate::webhooks::WebhookEvent;
use crate::{
    DeploymentChange, DeploymentFilter, DeploymentRecord, DeploymentRunFilter, DeploymentRunRecord,
    NextFire, Scan, StoreResult,
};
use mast_domain::deployment::DeploymentState;
use mast_domain::time::Micros;

const COLS: &str = "id, workspace_id, body, paused_reason, next_fire_at, last_run_at, \
                    created_at, updated_at, archived_at";
const RUN_COLS: &str = "id, workspace_id, deployment_id, trigger_type, scheduled_at, agent_id, \
                        agent_version, session_id, error, created_at";

fn deployment(r: &PgRow) -> StoreResult<DeploymentRecord> {
    let body: &str = r.try_get(2)?;
    let paused: Option<&str> = r.try_get(3)?;
    Ok(DeploymentRecord {
        id: r.try_get(0)?,
        workspace_id: r.try_get(1)?,
        spec: serde_json::from_str(body)?,
        state: DeploymentState {
            paused_reason: paused.map(serde_json::from_str).transpose()?,
            last_run_at: r.try_get(5)?,
            created_at: r.try_get(6)?,
            updated_at: r.try_get(7)?,
            archived_at: r.try_get(8)?,
        },
        next_fire_at: r.try_get(4)?,
    })
}

fn run(r: &PgRow) -> StoreResult<DeploymentRunRecord> {
    Ok(DeploymentRunRecord {
        id: r.try_get(0)?,
        workspace_id: r.try_get(1)?,
        deployment_id: r.try_get(2)?,
        trigger_type: r.try_get(3)?,
        scheduled_at: r.try_get(4)?,
        agent_id: r.try_get(5)?,
        agent_version: r.try_get(6)?,
        session_id: r.try_get(7)?,
        error: r.try_get(8)?,
        created_at: r.try_get(9)?,
    })
}

fn paused_text(d: &DeploymentRecord) -> StoreResult<Option<String>> {
    Ok(d.state
        .paused_reason
        .as_ref()
        .map(serde_json::to_string)
        .transpose()?)
}

#[async_trait]
impl DeploymentStore for PgStore {
    async fn insert_deployment(&self, d: &DeploymentRecord) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(&format!(
            "INSERT INTO deployments ({COLS}, agent_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(&d.id)
        .bind(&d.workspace_id)
        .bind(serde_json::to_string(&d.spec)?)
        .bind(paused_text(d)?)
        .bind(d.next_fire_at)
        .bind(d.state.last_run_at)
        .bind(d.state.created_at)
        .bind(d.state.updated_at)
        .bind(d.state.archived_at)
        .bind(&d.spec.agent_id)
        .execute(&mut *tx)
        .await?;
        self.emit(
            &mut tx,
            &[WebhookEvent::new(
                "deployment.created",
                &d.workspace_id,
                &d.id,
            )],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_deployment(&self, ws: &str, id: &str) -> StoreResult<Option<DeploymentRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {COLS} FROM deployments WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(ws)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(deployment).transpose()
    }

    async fn update_deployment(
        &self,
        d: &DeploymentRecord,
        next: NextFire,
        change: DeploymentChange,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let (set_next, next_at) = match next {
            NextFire::Keep => (false, None),
            NextFire::Set(at) => (true, at),
        };
        sqlx::query(
            "UPDATE deployments SET body = $1, agent_id = $2, paused_reason = $3, updated_at = $4, \
             archived_at = $5, next_fire_at = CASE WHEN $6 THEN $7 ELSE next_fire_at END \
             WHERE workspace_id = $8 AND id = $9",
        )
        .bind(serde_json::to_string(&d.spec)?)
        .bind(&d.spec.agent_id)
        .bind(paused_text(d)?)
        .bind(d.state.updated_at)
        .bind(d.state.archived_at)
        .bind(set_next)
        .bind(next_at)
        .bind(&d.workspace_id)
        .bind(&d.id)
        .execute(&mut *tx)
        .await?;
        self.emit(&mut tx, &[change.event(d)]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_deployments(
        &self,
        ws: &str,
        f: &DeploymentFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {COLS} FROM deployments WHERE workspace_id = "
        ));
        qb.push_bind(ws.to_string());
        if let Some(a) = &f.agent_id {
            qb.push(" AND agent_id = ").push_bind(a.clone());
        }
        match f.paused {
            Some(true) => {
                qb.push(" AND paused_reason IS NOT NULL AND archived_at IS NULL");
            }
            Some(false) => {
                qb.push(" AND paused_reason IS NULL AND archived_at IS NULL");
            }
            None if !f.include_archived => {
                qb.push(" AND archived_at IS NULL");
            }
            None => {}
        }
        if let Some(v) = f.created_gte {
            qb.push(" AND created_at >= ").push_bind(v);
        }
        if let Some(v) = f.created_lte {
            qb.push(" AND created_at <= ").push_bind(v);
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(deployment).collect()
    }

    async fn due_deployments(&self, now: Micros, limit: i64) -> StoreResult<Vec<DeploymentRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM deployments WHERE next_fire_at IS NOT NULL AND next_fire_at <= $1 \
             AND paused_reason IS NULL AND archived_at IS NULL ORDER BY next_fire_at LIMIT $2"
        ))
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deployment).collect()
    }

    async fn claim_deployment_fire(
        &self,
        id: &str,
        expected: Micros,
        next: Option<Micros>,
    ) -> StoreResult<bool> {
        // One conditional statement: concurrent claimers serialise on the row, and only the
        // first sees `next_fire_at = expected`.
        let n = sqlx::query(
            "UPDATE deployments SET next_fire_at = $1 WHERE id = $2 AND next_fire_at = $3 \
             AND paused_reason IS NULL AND archived_at IS NULL",
        )
        .bind(next)
        .bind(id)
        .bind(expected)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    async fn record_deployment_run(
        &self,
        r: &DeploymentRunRecord,
        pause: Option<&serde_json::Value>,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(&format!(
            "INSERT INTO deployment_runs ({RUN_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(&r.id)
        .bind(&r.workspace_id)
        .bind(&r.deployment_id)
        .bind(&r.trigger_type)
        .bind(r.scheduled_at)
        .bind(&r.agent_id)
        .bind(r.agent_version)
        .bind(&r.session_id)
        .bind(&r.error)
        .bind(r.created_at)
        .execute(&mut *tx)
        .await?;
        if r.trigger_type == "schedule" && r.session_id.is_some() {
            sqlx::query("UPDATE deployments SET last_run_at = $1 WHERE id = $2")
                .bind(r.created_at)
                .bind(&r.deployment_id)
                .execute(&mut *tx)
                .await?;
        }
        let mut hooks = run_events(r);
        if let Some(p) = pause {
            let paused = sqlx::query(
                "UPDATE deployments SET paused_reason = $1, updated_at = $2 \
                 WHERE id = $3 AND paused_reason IS NULL AND archived_at IS NULL",
            )
            .bind(serde_json::to_string(p)?)
            .bind(r.created_at)
            .bind(&r.deployment_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if paused == 1 {
                hooks.push(WebhookEvent::new(
                    DeploymentChange::Paused.webhook_type(),
                    &r.workspace_id,
                    &r.deployment_id,
                ));
            }
        }
        self.emit(&mut tx, &hooks).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_deployment_run(
        &self,
        ws: &str,
        id: &str,
    ) -> StoreResult<Option<DeploymentRunRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {RUN_COLS} FROM deployment_runs WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(ws)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(run).transpose()
    }

    async fn list_deployment_runs(
        &self,
        ws: &str,
        f: &DeploymentRunFilter,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<DeploymentRunRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {RUN_COLS} FROM deployment_runs WHERE workspace_id = "
        ));
        qb.push_bind(ws.to_string());
        if let Some(d) = &f.deployment_id {
            qb.push(" AND deployment_id = ").push_bind(d.clone());
        }
        match f.has_error {
            Some(true) => {
                qb.push(" AND error IS NOT NULL");
            }
            Some(false) => {
                qb.push(" AND session_id IS NOT NULL");
            }
            None => {}
        }
        if let Some(t) = &f.trigger_type {
            qb.push(" AND trigger_type = ").push_bind(t.clone());
        }
        for (op, v) in [
            (" > ", f.created_gt),
            (" >= ", f.created_gte),
            (" < ", f.created_lt),
            (" <= ", f.created_lte),
        ] {
            if let Some(v) = v {
                qb.push(" AND created_at").push(op).push_bind(v);
            }
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(run).collect()
    }
}
