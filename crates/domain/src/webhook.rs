//! Webhooks (Mast's own management API, `/v1/mast/webhook_endpoints`; payloads as upstream
//! sends them): the endpoint, delivery and attempt objects, request bodies and their
//! validation, and the catalogue of event types an endpoint may ask for.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};
use super::patch::Patch;
use crate::type_tag;

/// Every `data.type` of `BetaWebhookEvent` in SDK 2.10.0 that concerns a workspace (the
/// organization-level `user_profile.*` and `external_key.*` ones are not configured here).
pub const EVENT_TYPES: &[&str] = &[
    "session.created",
    "session.pending",
    "session.running",
    "session.idled",
    "session.requires_action",
    "session.updated",
    "session.archived",
    "session.deleted",
    "session.status_run_started",
    "session.status_idled",
    "session.status_rescheduled",
    "session.status_terminated",
    "session.budget_reached",
    "session.outcome_evaluation_ended",
    "session.thread_created",
    "session.thread_idled",
    "session.thread_terminated",
    "agent.created",
    "agent.updated",
    "agent.archived",
    "agent.deleted",
    "environment.created",
    "environment.updated",
    "environment.archived",
    "environment.deleted",
    "vault.created",
    "vault.archived",
    "vault.deleted",
    "vault_credential.created",
    "vault_credential.archived",
    "vault_credential.deleted",
    "vault_credential.refresh_failed",
    "memory_store.created",
    "memory_store.archived",
    "memory_store.deleted",
    "deployment.created",
    "deployment.updated",
    "deployment.archived",
    "deployment.paused",
    "deployment.unpaused",
    "deployment.deleted",
    "deployment_run.started",
    "deployment_run.succeeded",
    "deployment_run.failed",
];

/// The organization-level types of the SDK's union, refused with a reason of their own.
const ORGANIZATION_TYPES: &[&str] = &[
    "user_profile.program_status_updated",
    "user_profile.enforcement_action_opened",
    "user_profile.enforcement_action_resolved",
    "external_key.failed",
    "external_key.recovered",
];

type_tag!(
    /// `"type": "webhook_endpoint"`.
    EndpointTag = "webhook_endpoint"
);
type_tag!(
    /// `"type": "webhook_endpoint_deleted"`.
    EndpointDeletedTag = "webhook_endpoint_deleted"
);
type_tag!(
    /// `"type": "webhook_delivery"`.
    DeliveryTag = "webhook_delivery"
);
type_tag!(
    /// `"type": "webhook_attempt"`.
    AttemptTag = "webhook_attempt"
);

/// A webhook endpoint of a workspace: where events are POSTed, which ones, signed how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WebhookEndpoint {
    #[serde(rename = "type")]
    pub tag: EndpointTag,
    /// `whep_…`.
    pub id: String,
    pub url: String,
    /// The event types delivered to it.
    pub event_types: Vec<String>,
    pub description: Option<String>,
    /// A disabled endpoint is sent nothing, and no deliveries are queued for it.
    pub enabled: bool,
    /// The signing secret (`whsec_…`): present only in the responses of create and
    /// `rotate_secret`, never again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// Until when the secret before the last rotation still signs (beside the new one).
    pub previous_secret_expires_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// Response of `DELETE /v1/mast/webhook_endpoints/{id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookEndpointDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: EndpointDeletedTag,
}

/// `POST /v1/mast/webhook_endpoints` body. Unknown keys are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a webhook endpoint object")]
pub struct WebhookEndpointCreate {
    /// An `http(s)` URL the server's egress rules allow (private addresses only where the
    /// operator allows them).
    pub url: String,
    /// At least one event type from the catalogue.
    pub event_types: Vec<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Default true.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// A `whsec_…` secret to sign with (the config file's endpoints use this); generated
    /// when absent.
    #[serde(default)]
    pub signing_secret: Option<String>,
}

/// `POST /v1/mast/webhook_endpoints/{id}` body: absent keeps, a value replaces.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a webhook endpoint update object")]
pub struct WebhookEndpointUpdate {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
    /// `null` clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// One event sent (or to be sent) to one endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WebhookDelivery {
    #[serde(rename = "type")]
    pub tag: DeliveryTag,
    /// `whdl_…`.
    pub id: String,
    pub endpoint_id: String,
    /// The envelope's `id`, also sent as `webhook-id` (the same on retries and replays).
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `delivered` or `failed` (retries ran out).
    pub status: String,
    pub attempt_count: i64,
    /// When the next attempt is due (pending only).
    pub next_attempt_at: Option<String>,
    pub last_status_code: Option<i64>,
    pub last_error: Option<String>,
    /// The body sent, exactly.
    pub payload: serde_json::Value,
    pub created_at: String,
    pub updated_at: String,
}

/// One try of a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WebhookAttempt {
    #[serde(rename = "type")]
    pub tag: AttemptTag,
    /// `what_…`.
    pub id: String,
    pub delivery_id: String,
    pub attempted_at: String,
    /// The receiver's HTTP status; null when it gave none (refused, timeout, connect error).
    pub status_code: Option<i64>,
    pub latency_ms: i64,
    pub error: Option<String>,
    /// When the delivery is tried again after this attempt (null: delivered or given up).
    pub next_retry_at: Option<String>,
}

/// Checks a list of wanted event types: non-empty, known, no repeats.
pub fn check_event_types(types: &[String]) -> Valid<()> {
    if types.is_empty() {
        return Err(Invalid::new(
            "`event_types` must name at least one event type",
        ));
    }
    for (i, t) in types.iter().enumerate() {
        if ORGANIZATION_TYPES.contains(&t.as_str()) {
            return Err(Invalid::new(format!(
                "`event_types[{i}]`: `{t}` is an organization-level event, which Mast does not emit"
            )));
        }
        if !EVENT_TYPES.contains(&t.as_str()) {
            let hint = super::invalid::suggest(t, EVENT_TYPES)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(Invalid::new(format!(
                "`event_types[{i}]`: `{t}` is not a webhook event type{hint}"
            )));
        }
        if types[..i].contains(t) {
            return Err(Invalid::new(format!(
                "`event_types[{i}]`: `{t}` is listed twice"
            )));
        }
    }
    Ok(())
}

/// Checks a description: at most 512 characters.
pub fn check_description(d: &str) -> Valid<()> {
    check_len("description", d, 0, 512)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_are_checked() {
        assert!(check_event_types(&["session.status_idled".into()]).is_ok());
        assert!(check_event_types(&[]).is_err());
        let e = check_event_types(&["session.status_idle".into()]).unwrap_err();
        assert!(e.to_string().contains("session.status_idled"), "{e}");
        assert!(check_event_types(&["external_key.failed".into()]).is_err());
        assert!(check_event_types(&["agent.created".into(), "agent.created".into()]).is_err());
    }

    #[test]
    fn the_catalogue_has_the_sdks_workspace_types() {
        // 49 in the SDK's union, less the five organization-level ones.
        assert_eq!(EVENT_TYPES.len() + ORGANIZATION_TYPES.len(), 49);
    }
}
