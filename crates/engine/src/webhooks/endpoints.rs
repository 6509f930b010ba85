//! Reading and removing a workspace's webhook endpoints, and what the outbox holds for each:
//! its deliveries, their attempts, and replaying one.

use super::{Webhooks, wire};
use crate::ops::OpError;
use mast_domain::query::Scan;
use mast_domain::time;
use mast_domain::webhook::{
    AttemptTag, DeliveryTag, WebhookAttempt, WebhookDelivery, WebhookEndpoint,
};
use mast_store::webhooks::{AttemptRecord, DeliveryRecord, EndpointRecord};

impl Webhooks {
    /// One endpoint of the workspace (never its secret).
    pub async fn endpoint(&self, ws: &str, id: &str) -> Result<WebhookEndpoint, OpError> {
        Ok(wire(
            &self.existing(ws, id).await?,
            self.store.clock().now(),
        ))
    }

    /// A page of the workspace's endpoints (never their secrets).
    pub async fn list_endpoints(
        &self,
        ws: &str,
        scan: &Scan<String>,
    ) -> Result<Vec<WebhookEndpoint>, OpError> {
        let rows = self.store.list_webhook_endpoints(ws, scan).await?;
        let now = self.store.clock().now();
        Ok(rows.iter().map(|r| wire(r, now)).collect())
    }

    /// Deletes the endpoint with its deliveries and their attempts.
    pub async fn delete_endpoint(&self, ws: &str, id: &str) -> Result<(), OpError> {
        if !self.store.delete_webhook_endpoint(ws, id).await? {
            return Err(OpError::WebhookEndpointNotFound(id.to_string()));
        }
        Ok(())
    }

    /// A page of the endpoint's deliveries, each with its place in the endpoint's queue
    /// (what pages are keyed on).
    pub async fn list_deliveries(
        &self,
        ws: &str,
        endpoint_id: &str,
        scan: &Scan<i64>,
    ) -> Result<Vec<(i64, WebhookDelivery)>, OpError> {
        self.existing(ws, endpoint_id).await?;
        let rows = self
            .store
            .list_webhook_deliveries(endpoint_id, scan)
            .await?;
        Ok(rows
            .into_iter()
            .map(|d| (d.seq, delivery_wire(d)))
            .collect())
    }

    /// One delivery of the endpoint, with the exact payload sent.
    pub async fn delivery(
        &self,
        ws: &str,
        endpoint_id: &str,
        id: &str,
    ) -> Result<WebhookDelivery, OpError> {
        self.existing(ws, endpoint_id).await?;
        self.store
            .get_webhook_delivery(endpoint_id, id)
            .await?
            .map(delivery_wire)
            .ok_or_else(|| OpError::WebhookDeliveryNotFound(id.to_string()))
    }

    /// Every attempt at the delivery, oldest first.
    pub async fn attempts(
        &self,
        ws: &str,
        endpoint_id: &str,
        delivery_id: &str,
    ) -> Result<Vec<WebhookAttempt>, OpError> {
        self.existing(ws, endpoint_id).await?;
        if self
            .store
            .get_webhook_delivery(endpoint_id, delivery_id)
            .await?
            .is_none()
        {
            return Err(OpError::WebhookDeliveryNotFound(delivery_id.to_string()));
        }
        let rows = self.store.list_webhook_attempts(delivery_id).await?;
        Ok(rows.into_iter().map(attempt_wire).collect())
    }

    /// Queues the delivery's event again as a new pending delivery; returns it.
    pub async fn replay(
        &self,
        ws: &str,
        endpoint_id: &str,
        delivery_id: &str,
    ) -> Result<WebhookDelivery, OpError> {
        self.existing(ws, endpoint_id).await?;
        self.store
            .replay_webhook_delivery(endpoint_id, delivery_id)
            .await?
            .map(delivery_wire)
            .ok_or_else(|| OpError::WebhookDeliveryNotFound(delivery_id.to_string()))
    }

    async fn existing(&self, ws: &str, id: &str) -> Result<EndpointRecord, OpError> {
        self.store
            .get_webhook_endpoint(ws, id)
            .await?
            .ok_or_else(|| OpError::WebhookEndpointNotFound(id.to_string()))
    }
}

fn delivery_wire(d: DeliveryRecord) -> WebhookDelivery {
    WebhookDelivery {
        tag: DeliveryTag::Tag,
        next_attempt_at: (d.state == "pending").then(|| time::format(d.next_attempt_at)),
        payload: serde_json::from_str(&d.payload).unwrap_or(serde_json::Value::Null),
        id: d.id,
        endpoint_id: d.endpoint_id,
        event_id: d.event_id,
        event_type: d.event_type,
        status: d.state,
        attempt_count: d.attempts,
        last_status_code: d.last_status,
        last_error: d.last_error,
        created_at: time::format(d.created_at),
        updated_at: time::format(d.updated_at),
    }
}

fn attempt_wire(a: AttemptRecord) -> WebhookAttempt {
    WebhookAttempt {
        tag: AttemptTag::Tag,
        id: a.id,
        delivery_id: a.delivery_id,
        attempted_at: time::format(a.attempted_at),
        status_code: a.status_code,
        latency_ms: a.latency_ms,
        error: a.error,
        next_retry_at: time::format_opt(a.next_retry_at),
    }
}
