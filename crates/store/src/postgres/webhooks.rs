//! Webhook endpoints, the outbox of deliveries and their attempts. Lease and retry times are
//! on the database's clock (`mast_clock()`), so replicas agree on who sends and when.

use crate::WebhookStore;
use async_trait::async_trait;
use sqlx::postgres::{PgConnection, PgRow, Postgres};
use sqlx::{QueryBuilder, Row};

use super::sink::Sink;
use super::{PgStore, push_scan};
use mast_domain::time::Micros;
// Re-exported so the store's trait impl names records and operations through one path.
pub(super) use crate::webhooks::{
    AttemptOutcome, AttemptRecord, DeliveryRecord, EndpointRecord, WebhookEvent,
};
use crate::{Scan, StoreResult};

const ENDPOINT_COLS: &str = "id, workspace_id, url, event_types, description, enabled, secret, \
     previous_secret, previous_until, created_at, updated_at";
const DELIVERY_COLS: &str = "seq, id, endpoint_id, event_id, event_type, payload, state, \
     attempts, next_attempt_at, last_status, last_error, created_at, updated_at";
const ATTEMPT_COLS: &str =
    "id, delivery_id, attempted_at, status_code, latency_ms, error, next_retry_at";

fn endpoint(row: &PgRow) -> StoreResult<EndpointRecord> {
    let types: &str = row.try_get(3)?;
    Ok(EndpointRecord {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        url: row.try_get(2)?,
        event_types: serde_json::from_str(types)?,
        description: row.try_get(4)?,
        enabled: row.try_get(5)?,
        secret: row.try_get(6)?,
        previous_secret: row.try_get(7)?,
        previous_until: row.try_get(8)?,
        created_at: row.try_get(9)?,
        updated_at: row.try_get(10)?,
    })
}

fn delivery(row: &PgRow) -> StoreResult<DeliveryRecord> {
    Ok(DeliveryRecord {
        seq: row.try_get(0)?,
        id: row.try_get(1)?,
        endpoint_id: row.try_get(2)?,
        event_id: row.try_get(3)?,
        event_type: row.try_get(4)?,
        payload: row.try_get(5)?,
        state: row.try_get(6)?,
        attempts: row.try_get(7)?,
        next_attempt_at: row.try_get(8)?,
        last_status: row.try_get(9)?,
        last_error: row.try_get(10)?,
        created_at: row.try_get(11)?,
        updated_at: row.try_get(12)?,
    })
}

fn attempt(row: &PgRow) -> StoreResult<AttemptRecord> {
    Ok(AttemptRecord {
        id: row.try_get(0)?,
        delivery_id: row.try_get(1)?,
        attempted_at: row.try_get(2)?,
        status_code: row.try_get(3)?,
        latency_ms: row.try_get(4)?,
        error: row.try_get(5)?,
        next_retry_at: row.try_get(6)?,
    })
}

/// Pushes the outbox write of `events` (see [`crate::webhooks`]): one pending
/// delivery per event and enabled endpoint of its workspace that wants its type, in event
/// order. Runs alone or as a `WITH` part of a larger statement.
/// `only_if` is SQL added to the join's condition (e.g. `AND EXISTS (SELECT 1 FROM s)`, to
/// write nothing when an earlier part of the statement changed nothing), or empty.
/// Every event is stamped `at` (the time of the write, on the store's clock).
pub(super) fn push_emit(qb: &mut impl Sink, events: &[WebhookEvent], only_if: &str, at: Micros) {
    let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    let kinds: Vec<String> = events.iter().map(|e| e.kind.clone()).collect();
    let wss: Vec<String> = events.iter().map(|e| e.workspace_id.clone()).collect();
    let payloads: Vec<String> = events.iter().map(|e| e.payload(at)).collect();
    let ats: Vec<i64> = vec![at; events.len()];
    qb.sql(
        "INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, payload, state, \
         attempts, next_attempt_at, created_at, updated_at) \
         SELECT 'whdl_' || replace(gen_random_uuid()::text, '-', ''), en.id, u.id, u.kind, \
         u.payload, 'pending', 0, mast_clock(), u.at, u.at FROM UNNEST(",
    )
    .arg(ids)
    .sql("::text[], ")
    .arg(kinds)
    .sql("::text[], ")
    .arg(wss)
    .sql("::text[], ")
    .arg(payloads)
    .sql("::text[], ")
    .arg(ats)
    .sql(
        "::bigint[]) WITH ORDINALITY AS u (id, kind, ws, payload, at, n) \
         JOIN webhook_endpoints en ON en.workspace_id = u.ws AND en.enabled \
         AND strpos(en.event_types, '\"' || u.kind || '\"') > 0 ",
    )
    .sql(only_if)
    .sql(" ORDER BY u.n, en.id");
}

impl PgStore {
    /// Writes `events` to the outbox on `conn`, inside the caller's transaction, stamped
    /// with this store's clock.
    pub(super) async fn emit(
        &self,
        conn: &mut PgConnection,
        events: &[WebhookEvent],
    ) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut qb = QueryBuilder::<Postgres>::new("");
        push_emit(&mut qb, events, "", self.clock.now());
        qb.build().execute(conn).await?;
        Ok(())
    }
}

#[async_trait]
impl WebhookStore for PgStore {
    async fn emit_webhook_events(&self, events: &[WebhookEvent]) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        self.emit(&mut conn, events).await
    }

    async fn insert_webhook_endpoint(&self, e: &EndpointRecord) -> StoreResult<()> {
        sqlx::query(&format!(
            "INSERT INTO webhook_endpoints ({ENDPOINT_COLS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ))
        .bind(&e.id)
        .bind(&e.workspace_id)
        .bind(&e.url)
        .bind(serde_json::to_string(&e.event_types)?)
        .bind(&e.description)
        .bind(e.enabled)
        .bind(&e.secret)
        .bind(&e.previous_secret)
        .bind(e.previous_until)
        .bind(e.created_at)
        .bind(e.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_webhook_endpoint(
        &self,
        ws: &str,
        id: &str,
    ) -> StoreResult<Option<EndpointRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(ws)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| endpoint(&r)).transpose()
    }

    async fn webhook_endpoint_by_id(&self, id: &str) -> StoreResult<Option<EndpointRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| endpoint(&r)).transpose()
    }

    async fn update_webhook_endpoint(&self, e: &EndpointRecord) -> StoreResult<bool> {
        let r = sqlx::query(
            "UPDATE webhook_endpoints SET url = $1, event_types = $2, description = $3, \
             enabled = $4, secret = $5, previous_secret = $6, previous_until = $7, updated_at = $8 \
             WHERE workspace_id = $9 AND id = $10",
        )
        .bind(&e.url)
        .bind(serde_json::to_string(&e.event_types)?)
        .bind(&e.description)
        .bind(e.enabled)
        .bind(&e.secret)
        .bind(&e.previous_secret)
        .bind(e.previous_until)
        .bind(e.updated_at)
        .bind(&e.workspace_id)
        .bind(&e.id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn list_webhook_endpoints(
        &self,
        ws: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<EndpointRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE workspace_id = "
        ));
        qb.push_bind(ws.to_string());
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(endpoint).collect()
    }

    async fn delete_webhook_endpoint(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let r = sqlx::query("DELETE FROM webhook_endpoints WHERE workspace_id = $1 AND id = $2")
            .bind(ws)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if r.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "DELETE FROM webhook_attempts WHERE delivery_id IN \
             (SELECT id FROM webhook_deliveries WHERE endpoint_id = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM webhook_deliveries WHERE endpoint_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {DELIVERY_COLS} FROM webhook_deliveries WHERE endpoint_id = "
        ));
        qb.push_bind(endpoint_id.to_string());
        push_scan(&mut qb, "seq", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        rows.iter().map(delivery).collect()
    }

    async fn get_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {DELIVERY_COLS} FROM webhook_deliveries WHERE endpoint_id = $1 AND id = $2"
        ))
        .bind(endpoint_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| delivery(&r)).transpose()
    }

    async fn list_webhook_attempts(&self, delivery_id: &str) -> StoreResult<Vec<AttemptRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id"
        ))
        .bind(delivery_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(attempt).collect()
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let now = self.clock.now();
        let row = sqlx::query(&format!(
            "INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, payload, \
             state, attempts, next_attempt_at, created_at, updated_at) \
             SELECT $1, endpoint_id, event_id, event_type, payload, 'pending', 0, mast_clock(), \
             $2, $2 FROM webhook_deliveries WHERE endpoint_id = $3 AND id = $4 \
             RETURNING {DELIVERY_COLS}"
        ))
        .bind(mast_domain::ids::new_id("whdl"))
        .bind(now)
        .bind(endpoint_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| delivery(&r)).transpose()
    }

    async fn claim_webhook_deliveries(
        &self,
        owner: &str,
        lease: Micros,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        // Only the oldest pending delivery of each enabled endpoint can be taken, so an
        // endpoint has at most one in flight and gets them in order. The conditions on `d`
        // itself are checked again on the row's newest version when another replica's claim
        // got there first, so two replicas never both take it.
        let rows = sqlx::query(&format!(
            "UPDATE webhook_deliveries d SET lease_owner = $1, lease_expires_at = mast_clock() + $2 \
             WHERE d.seq IN ( \
               SELECT h.seq FROM webhook_deliveries h \
               JOIN webhook_endpoints en ON en.id = h.endpoint_id AND en.enabled \
               WHERE h.state = 'pending' AND h.next_attempt_at <= mast_clock() \
               AND (h.lease_expires_at IS NULL OR h.lease_expires_at < mast_clock()) \
               AND h.seq = (SELECT min(p.seq) FROM webhook_deliveries p \
                            WHERE p.endpoint_id = h.endpoint_id AND p.state = 'pending') \
               ORDER BY h.seq LIMIT $3) \
             AND d.state = 'pending' \
             AND (d.lease_expires_at IS NULL OR d.lease_expires_at < mast_clock()) \
             RETURNING {}",
            DELIVERY_COLS
                .split(", ")
                .map(|c| format!("d.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .bind(owner)
        .bind(lease)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<DeliveryRecord> = rows.iter().map(delivery).collect::<Result<_, _>>()?;
        out.sort_by_key(|d| d.seq);
        Ok(out)
    }

    async fn finish_webhook_attempt(
        &self,
        owner: &str,
        a: &AttemptRecord,
        outcome: AttemptOutcome,
    ) -> StoreResult<bool> {
        let (state, retry_in) = match outcome {
            AttemptOutcome::Delivered => ("delivered", None),
            AttemptOutcome::RetryIn(d) => ("pending", Some(d)),
            AttemptOutcome::Failed => ("failed", None),
        };
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(
            "UPDATE webhook_deliveries SET state = $1, attempts = attempts + 1, \
             next_attempt_at = COALESCE(mast_clock() + $2, next_attempt_at), last_status = $3, \
             last_error = $4, lease_owner = NULL, lease_expires_at = NULL, updated_at = $5 \
             WHERE id = $6 AND lease_owner = $7 AND state = 'pending' \
             RETURNING CASE WHEN $2::bigint IS NULL THEN NULL ELSE next_attempt_at END",
        )
        .bind(state)
        .bind(retry_in)
        .bind(a.status_code)
        .bind(&a.error)
        .bind(a.attempted_at)
        .bind(&a.delivery_id)
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(false) };
        let next: Option<i64> = row.try_get(0)?;
        sqlx::query(&format!(
            "INSERT INTO webhook_attempts ({ATTEMPT_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(&a.id)
        .bind(&a.delivery_id)
        .bind(a.attempted_at)
        .bind(a.status_code)
        .bind(a.latency_ms)
        .bind(&a.error)
        .bind(next)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }
}
