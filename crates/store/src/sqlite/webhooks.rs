//! Webhook endpoints, the outbox of deliveries and their attempts (one replica: times are
//! this process's clock).

use super::SqliteStore;
use crate::WebhookStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::rows::Query;
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

type RawEndpoint = (EndpointRecord, String);

fn raw_endpoint(r: &Row<'_>) -> rusqlite::Result<RawEndpoint> {
    Ok((
        EndpointRecord {
            id: r.get(0)?,
            workspace_id: r.get(1)?,
            url: r.get(2)?,
            event_types: vec![],
            description: r.get(4)?,
            enabled: r.get(5)?,
            secret: r.get(6)?,
            previous_secret: r.get(7)?,
            previous_until: r.get(8)?,
            created_at: r.get(9)?,
            updated_at: r.get(10)?,
        },
        r.get(3)?,
    ))
}

fn endpoint((mut e, types): RawEndpoint) -> StoreResult<EndpointRecord> {
    e.event_types = serde_json::from_str(&types)?;
    Ok(e)
}

fn delivery(r: &Row<'_>) -> rusqlite::Result<DeliveryRecord> {
    Ok(DeliveryRecord {
        seq: r.get(0)?,
        id: r.get(1)?,
        endpoint_id: r.get(2)?,
        event_id: r.get(3)?,
        event_type: r.get(4)?,
        payload: r.get(5)?,
        state: r.get(6)?,
        attempts: r.get(7)?,
        next_attempt_at: r.get(8)?,
        last_status: r.get(9)?,
        last_error: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
    })
}

fn attempt(r: &Row<'_>) -> rusqlite::Result<AttemptRecord> {
    Ok(AttemptRecord {
        id: r.get(0)?,
        delivery_id: r.get(1)?,
        attempted_at: r.get(2)?,
        status_code: r.get(3)?,
        latency_ms: r.get(4)?,
        error: r.get(5)?,
        next_retry_at: r.get(6)?,
    })
}

/// Writes `events` to the outbox on the writer's connection, inside the caller's
/// transaction: one pending delivery per event and enabled endpoint of its workspace that
/// wants its type (see [`crate::webhooks`]).
pub(super) fn emit(conn: &Connection, events: &[WebhookEvent]) -> StoreResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    // Which types the workspace's enabled endpoints want, read in the same transaction
    // (this is the only writer), so a payload is rendered only for an event some endpoint
    // takes: a busy session's events are mostly wanted by none.
    let mut endpoint_types = conn.prepare_cached(
        "SELECT event_types FROM webhook_endpoints WHERE workspace_id = ?1 AND enabled",
    )?;
    let mut lists: Vec<(String, Vec<String>)> = Vec::new();
    for e in events {
        if !lists.iter().any(|(ws, _)| ws == &e.workspace_id) {
            let types = endpoint_types
                .query_map(params![e.workspace_id], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            lists.push((e.workspace_id.clone(), types));
        }
    }
    let now = super::clock::now(conn)?;
    let mut stmt = conn.prepare_cached(
        "INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, payload, state, \
         attempts, next_attempt_at, created_at, updated_at) \
         SELECT 'whdl_' || lower(hex(randomblob(16))), id, ?1, ?2, ?3, 'pending', 0, ?4, ?5, ?5 \
         FROM webhook_endpoints WHERE workspace_id = ?6 AND enabled \
         AND instr(event_types, '\"' || ?2 || '\"') > 0 ORDER BY id",
    )?;
    for e in events {
        let quoted = format!("\"{}\"", e.kind);
        let wanted = lists
            .iter()
            .find(|(ws, _)| ws == &e.workspace_id)
            .is_some_and(|(_, types)| types.iter().any(|t| t.contains(&quoted)));
        if !wanted {
            continue;
        }
        stmt.execute(params![
            e.id,
            e.kind,
            e.payload(now),
            now,
            now,
            e.workspace_id
        ])?;
    }
    Ok(())
}

pub(super) fn insert_endpoint(conn: &Connection, e: &EndpointRecord) -> StoreResult<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO webhook_endpoints ({ENDPOINT_COLS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    ))?
    .execute(params![
        e.id,
        e.workspace_id,
        e.url,
        serde_json::to_string(&e.event_types)?,
        e.description,
        e.enabled,
        e.secret,
        e.previous_secret,
        e.previous_until,
        e.created_at,
        e.updated_at
    ])?;
    Ok(())
}

pub(super) fn get_endpoint(
    conn: &Connection,
    ws: Option<&str>,
    id: &str,
) -> StoreResult<Option<EndpointRecord>> {
    let raw = conn
        .prepare_cached(&format!(
            "SELECT {ENDPOINT_COLS} FROM webhook_endpoints \
             WHERE id = ?1 AND (?2 IS NULL OR workspace_id = ?2)"
        ))?
        .query_row(params![id, ws], raw_endpoint)
        .optional()?;
    raw.map(endpoint).transpose()
}

pub(super) fn update_endpoint(conn: &Connection, e: &EndpointRecord) -> StoreResult<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE webhook_endpoints SET url = ?1, event_types = ?2, description = ?3, \
             enabled = ?4, secret = ?5, previous_secret = ?6, previous_until = ?7, updated_at = ?8 \
             WHERE workspace_id = ?9 AND id = ?10",
        )?
        .execute(params![
            e.url,
            serde_json::to_string(&e.event_types)?,
            e.description,
            e.enabled,
            e.secret,
            e.previous_secret,
            e.previous_until,
            e.updated_at,
            e.workspace_id,
            e.id
        ])?;
    Ok(n == 1)
}

pub(super) fn list_endpoints(
    conn: &Connection,
    ws: &str,
    scan: &Scan<String>,
) -> StoreResult<Vec<EndpointRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {ENDPOINT_COLS} FROM webhook_endpoints WHERE workspace_id = "
    ));
    q.bind(ws.to_string());
    q.scan("id", scan);
    q.all(conn, raw_endpoint)?
        .into_iter()
        .map(endpoint)
        .collect()
}

pub(super) fn delete_endpoint(conn: &Connection, ws: &str, id: &str) -> StoreResult<bool> {
    let n = conn
        .prepare_cached("DELETE FROM webhook_endpoints WHERE workspace_id = ?1 AND id = ?2")?
        .execute([ws, id])?;
    if n == 0 {
        return Ok(false);
    }
    conn.prepare_cached(
        "DELETE FROM webhook_attempts WHERE delivery_id IN \
         (SELECT id FROM webhook_deliveries WHERE endpoint_id = ?1)",
    )?
    .execute([id])?;
    conn.prepare_cached("DELETE FROM webhook_deliveries WHERE endpoint_id = ?1")?
        .execute([id])?;
    Ok(true)
}

pub(super) fn list_deliveries(
    conn: &Connection,
    endpoint_id: &str,
    scan: &Scan<i64>,
) -> StoreResult<Vec<DeliveryRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {DELIVERY_COLS} FROM webhook_deliveries WHERE endpoint_id = "
    ));
    q.bind(endpoint_id.to_string());
    q.scan("seq", scan);
    Ok(q.all(conn, delivery)?)
}

pub(super) fn get_delivery(
    conn: &Connection,
    endpoint_id: &str,
    id: &str,
) -> StoreResult<Option<DeliveryRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLS} FROM webhook_deliveries WHERE endpoint_id = ?1 AND id = ?2"
        ))?
        .query_row([endpoint_id, id], delivery)
        .optional()?)
}

pub(super) fn list_attempts(
    conn: &Connection,
    delivery_id: &str,
) -> StoreResult<Vec<AttemptRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ATTEMPT_COLS} FROM webhook_attempts WHERE delivery_id = ?1 ORDER BY id"
    ))?;
    let rows = stmt.query_map([delivery_id], attempt)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn replay_delivery(
    conn: &Connection,
    endpoint_id: &str,
    id: &str,
) -> StoreResult<Option<DeliveryRecord>> {
    let now = super::clock::now(conn)?;
    let new_id = mast_domain::ids::new_id("whdl");
    let n = conn
        .prepare_cached(
            "INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, payload, \
             state, attempts, next_attempt_at, created_at, updated_at) \
             SELECT ?1, endpoint_id, event_id, event_type, payload, 'pending', 0, ?2, ?2, ?2 \
             FROM webhook_deliveries WHERE endpoint_id = ?3 AND id = ?4",
        )?
        .execute(params![new_id, now, endpoint_id, id])?;
    if n == 0 {
        return Ok(None);
    }
    get_delivery(conn, endpoint_id, &new_id)
}

pub(super) fn claim_deliveries(
    conn: &Connection,
    owner: &str,
    lease: Micros,
    limit: i64,
) -> StoreResult<Vec<DeliveryRecord>> {
    let now = super::clock::now(conn)?;
    // Only the oldest pending delivery of each enabled endpoint: one in flight per endpoint,
    // in order (the writer connection serialises claims).
    let seqs: Vec<i64> = {
        let mut stmt = conn.prepare_cached(
            "SELECT h.seq FROM webhook_deliveries h \
             JOIN webhook_endpoints en ON en.id = h.endpoint_id AND en.enabled \
             WHERE h.state = 'pending' AND h.next_attempt_at <= ?1 \
             AND (h.lease_expires_at IS NULL OR h.lease_expires_at < ?1) \
             AND h.seq = (SELECT min(p.seq) FROM webhook_deliveries p \
                          WHERE p.endpoint_id = h.endpoint_id AND p.state = 'pending') \
             ORDER BY h.seq LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![now, limit], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut out = Vec::with_capacity(seqs.len());
    for seq in seqs {
        conn.prepare_cached(
            "UPDATE webhook_deliveries SET lease_owner = ?1, lease_expires_at = ?2 WHERE seq = ?3",
        )?
        .execute(params![owner, now + lease, seq])?;
        out.push(
            conn.prepare_cached(&format!(
                "SELECT {DELIVERY_COLS} FROM webhook_deliveries WHERE seq = ?1"
            ))?
            .query_row([seq], delivery)?,
        );
    }
    Ok(out)
}

pub(super) fn finish_attempt(
    conn: &Connection,
    owner: &str,
    a: &AttemptRecord,
    outcome: AttemptOutcome,
) -> StoreResult<bool> {
    let (state, next) = match outcome {
        AttemptOutcome::Delivered => ("delivered", None),
        AttemptOutcome::RetryIn(d) => ("pending", Some(super::clock::now(conn)? + d)),
        AttemptOutcome::Failed => ("failed", None),
    };
    let n = conn
        .prepare_cached(
            "UPDATE webhook_deliveries SET state = ?1, attempts = attempts + 1, \
             next_attempt_at = COALESCE(?2, next_attempt_at), last_status = ?3, last_error = ?4, \
             lease_owner = NULL, lease_expires_at = NULL, updated_at = ?5 \
             WHERE id = ?6 AND lease_owner = ?7 AND state = 'pending'",
        )?
        .execute(params![
            state,
            next,
            a.status_code,
            a.error,
            a.attempted_at,
            a.delivery_id,
            owner
        ])?;
    if n == 0 {
        return Ok(false);
    }
    conn.prepare_cached(&format!(
        "INSERT INTO webhook_attempts ({ATTEMPT_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    ))?
    .execute(params![
        a.id,
        a.delivery_id,
        a.attempted_at,
        a.status_code,
        a.latency_ms,
        a.error,
        next
    ])?;
    Ok(true)
}

#[async_trait]
impl WebhookStore for SqliteStore {
    // Webhooks.
    async fn emit_webhook_events(&self, events: &[WebhookEvent]) -> StoreResult<()> {
        let events = events.to_vec();
        self.db.write(move |c| emit(c, &events)).await
    }

    async fn insert_webhook_endpoint(&self, e: &EndpointRecord) -> StoreResult<()> {
        let e = e.clone();
        self.db.write(move |c| insert_endpoint(c, &e)).await
    }

    async fn get_webhook_endpoint(
        &self,
        workspace_id: &str,
        id: &str,
    ) -> StoreResult<Option<EndpointRecord>> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.read(move |c| get_endpoint(c, Some(&ws), &id)).await
    }

    async fn webhook_endpoint_by_id(&self, id: &str) -> StoreResult<Option<EndpointRecord>> {
        let id = id.to_string();
        self.db.read(move |c| get_endpoint(c, None, &id)).await
    }

    async fn update_webhook_endpoint(&self, e: &EndpointRecord) -> StoreResult<bool> {
        let e = e.clone();
        self.db.write(move |c| update_endpoint(c, &e)).await
    }

    async fn list_webhook_endpoints(
        &self,
        workspace_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<EndpointRecord>> {
        let (ws, scan) = (workspace_id.to_string(), scan.clone());
        self.db.read(move |c| list_endpoints(c, &ws, &scan)).await
    }

    async fn delete_webhook_endpoint(&self, workspace_id: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (workspace_id.to_string(), id.to_string());
        self.db.write(move |c| delete_endpoint(c, &ws, &id)).await
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        scan: &Scan<i64>,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let (id, scan) = (endpoint_id.to_string(), scan.clone());
        self.db.read(move |c| list_deliveries(c, &id, &scan)).await
    }

    async fn get_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let (eid, id) = (endpoint_id.to_string(), id.to_string());
        self.db.read(move |c| get_delivery(c, &eid, &id)).await
    }

    async fn list_webhook_attempts(&self, delivery_id: &str) -> StoreResult<Vec<AttemptRecord>> {
        let id = delivery_id.to_string();
        self.db.read(move |c| list_attempts(c, &id)).await
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        id: &str,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let (eid, id) = (endpoint_id.to_string(), id.to_string());
        self.db.write(move |c| replay_delivery(c, &eid, &id)).await
    }

    async fn claim_webhook_deliveries(
        &self,
        owner: &str,
        lease: Micros,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRecord>> {
        let owner = owner.to_string();
        self.db
            .write(move |c| claim_deliveries(c, &owner, lease, limit))
            .await
    }

    async fn finish_webhook_attempt(
        &self,
        owner: &str,
        attempt: &AttemptRecord,
        outcome: AttemptOutcome,
    ) -> StoreResult<bool> {
        let (owner, a) = (owner.to_string(), attempt.clone());
        self.db
            .write(move |c| finish_attempt(c, &owner, &a, outcome))
            .await
    }
}
