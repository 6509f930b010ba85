//! `/v1/mast/webhook_endpoints`: Mast's own API for a workspace's webhook endpoints, their
//! deliveries and attempts (upstream configures workspace webhooks in its Console, outside
//! the public API, so these paths sit under `/v1/mast/`, which upstream does not use).
//! Payloads are exactly what the SDK's `client.beta.webhooks.unwrap` verifies.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::Workspace;
use super::error::ApiResult;
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::query::Direction;
use mast_domain::webhook::{
    EndpointDeletedTag, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEndpointCreate,
    WebhookEndpointDeleted, WebhookEndpointUpdate,
};

/// A page of webhook endpoints.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpointPage {
    pub data: Vec<WebhookEndpoint>,
    pub next_page: Option<String>,
}

/// A page of deliveries of an endpoint.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookDeliveryPage {
    pub data: Vec<WebhookDelivery>,
    pub next_page: Option<String>,
}

/// The attempts of a delivery (all of them, oldest first).
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookAttemptList {
    pub data: Vec<WebhookAttempt>,
    pub next_page: Option<String>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/mast/webhook_endpoints", post(create).get(list))
        .route(
            "/v1/mast/webhook_endpoints/{endpoint_id}",
            get(retrieve).post(update).delete(delete),
        )
        .route(
            "/v1/mast/webhook_endpoints/{endpoint_id}/rotate_secret",
            post(rotate_secret),
        )
        .route(
            "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries",
            get(deliveries),
        )
        .route(
            "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}",
            get(delivery),
        )
        .route(
            "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/attempts",
            get(attempts),
        )
        .route(
            "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/replay",
            post(replay),
        )
}

/// Create a webhook endpoint.
///
/// Registers a URL to receive the workspace's events of the listed types, signed in the Standard Webhooks scheme. The response carries the endpoint's `signing_secret` (`whsec_…`), shown this once. The URL must pass the server's egress rules (private and loopback addresses only with `MAST_ALLOW_PRIVATE_NETWORK` / `MAST_ALLOW_PRIVATE_HOSTS`).
#[utoipa::path(post, path = "/v1/mast/webhook_endpoints", tag = "webhooks", operation_id = "webhook_endpoints_create", request_body = WebhookEndpointCreate,
    responses((status = 200, body = WebhookEndpoint), (status = 400, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<WebhookEndpointCreate>,
) -> ApiResult<axum::Json<WebhookEndpoint>> {
    Ok(axum::Json(app.webhooks.create(&ws, body).await?))
}

/// List webhook endpoints.
///
/// Lists the workspace's webhook endpoints, newest first (never their secrets).
#[utoipa::path(get, path = "/v1/mast/webhook_endpoints", tag = "webhooks", operation_id = "webhook_endpoints_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query)),
    responses((status = 200, body = WebhookEndpointPage)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<WebhookEndpoint>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let rows = app.webhooks.list_endpoints(&ws, &page.scan()).await?;
    Ok(axum::Json(page.finish(rows, |e| e.id.clone())))
}

/// Retrieve a webhook endpoint.
///
/// Returns one endpoint (never its secret).
#[utoipa::path(get, path = "/v1/mast/webhook_endpoints/{endpoint_id}", tag = "webhooks", operation_id = "webhook_endpoints_retrieve",
    params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`).")),
    responses((status = 200, body = WebhookEndpoint), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<WebhookEndpoint>> {
    Ok(axum::Json(app.webhooks.endpoint(&ws, &id).await?))
}

/// Update a webhook endpoint.
///
/// Changes the URL, event types, description, or `enabled` (a disabled endpoint is sent nothing and queues nothing; what was queued before waits until it is enabled again).
#[utoipa::path(post, path = "/v1/mast/webhook_endpoints/{endpoint_id}", tag = "webhooks", operation_id = "webhook_endpoints_update",
    request_body = WebhookEndpointUpdate, params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`).")),
    responses((status = 200, body = WebhookEndpoint), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<WebhookEndpointUpdate>,
) -> ApiResult<axum::Json<WebhookEndpoint>> {
    Ok(axum::Json(app.webhooks.update(&ws, &id, body).await?))
}

/// Delete a webhook endpoint.
///
/// Deletes the endpoint with its deliveries and their attempts.
#[utoipa::path(delete, path = "/v1/mast/webhook_endpoints/{endpoint_id}", tag = "webhooks", operation_id = "webhook_endpoints_delete",
    params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`).")),
    responses((status = 200, body = WebhookEndpointDeleted), (status = 404, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<WebhookEndpointDeleted>> {
    app.webhooks.delete_endpoint(&ws, &id).await?;
    Ok(axum::Json(WebhookEndpointDeleted {
        id,
        tag: EndpointDeletedTag::Tag,
    }))
}

/// Rotate a webhook endpoint's signing secret.
///
/// Gives the endpoint a new signing secret, returned this once. Deliveries are signed with both the new and the old secret (two `v1,` signatures) until `previous_secret_expires_at` (`MAST_WEBHOOK_ROTATION_OVERLAP_SECONDS`, default 24 h), so a receiver can switch to the new one without missing a delivery.
#[utoipa::path(post, path = "/v1/mast/webhook_endpoints/{endpoint_id}/rotate_secret", tag = "webhooks", operation_id = "webhook_endpoints_rotate_secret",
    params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`).")),
    responses((status = 200, body = WebhookEndpoint), (status = 404, body = super::openapi::ErrorBody)))]
async fn rotate_secret(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<WebhookEndpoint>> {
    Ok(axum::Json(app.webhooks.rotate(&ws, &id).await?))
}

/// List an endpoint's deliveries.
///
/// Lists the endpoint's deliveries, newest first: each event queued for it, its status (`pending`, `delivered`, `failed`), attempt count, last status code and next attempt.
#[utoipa::path(get, path = "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries", tag = "webhooks", operation_id = "webhook_deliveries_list",
    params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`)."), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("order" = Option<String>, Query)),
    responses((status = 200, body = WebhookDeliveryPage), (status = 404, body = super::openapi::ErrorBody)))]
async fn deliveries(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<WebhookDelivery>>> {
    app.webhooks.endpoint(&ws, &id).await?;
    let page = PageRequest::<i64>::parse(&q, Direction::Descending, 20, 100, true)?;
    let rows = app.webhooks.list_deliveries(&ws, &id, &page.scan()).await?;
    Ok(axum::Json(
        page.finish(rows, |(seq, _)| *seq).map(|(_, d)| d),
    ))
}

/// Retrieve a delivery.
///
/// Returns one delivery of the endpoint, with the exact payload sent.
#[utoipa::path(get, path = "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}", tag = "webhooks", operation_id = "webhook_deliveries_retrieve",
    params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`)."), ("delivery_id" = String, Path, description = "The delivery's id (`whdl_...`).")),
    responses((status = 200, body = WebhookDelivery), (status = 404, body = super::openapi::ErrorBody)))]
async fn delivery(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((id, did)): Path<(String, String)>,
) -> ApiResult<axum::Json<WebhookDelivery>> {
    Ok(axum::Json(app.webhooks.delivery(&ws, &id, &did).await?))
}

/// List a delivery's attempts.
///
/// Every attempt at the delivery, oldest first: status code (null when the receiver gave none), latency, error and when the next retry was due.
#[utoipa::path(get, path = "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/attempts", tag = "webhooks", operation_id = "webhook_attempts_list",
    params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`)."), ("delivery_id" = String, Path, description = "The delivery's id (`whdl_...`).")),
    responses((status = 200, body = WebhookAttemptList), (status = 404, body = super::openapi::ErrorBody)))]
async fn attempts(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((id, did)): Path<(String, String)>,
) -> ApiResult<axum::Json<WebhookAttemptList>> {
    Ok(axum::Json(WebhookAttemptList {
        data: app.webhooks.attempts(&ws, &id, &did).await?,
        next_page: None,
    }))
}

/// Replay a delivery.
///
/// Queues the same event again for the endpoint (same payload, same `webhook-id`, so receivers can deduplicate) as a new pending delivery at the end of its queue; works for delivered and failed deliveries alike. Returns the new delivery.
#[utoipa::path(post, path = "/v1/mast/webhook_endpoints/{endpoint_id}/deliveries/{delivery_id}/replay", tag = "webhooks", operation_id = "webhook_deliveries_replay",
    params(("endpoint_id" = String, Path, description = "The webhook endpoint's id (`whep_...`)."), ("delivery_id" = String, Path, description = "The delivery's id (`whdl_...`).")),
    responses((status = 200, body = WebhookDelivery), (status = 404, body = super::openapi::ErrorBody)))]
async fn replay(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((id, did)): Path<(String, String)>,
    _: NoBody,
) -> ApiResult<axum::Json<WebhookDelivery>> {
    Ok(axum::Json(app.webhooks.replay(&ws, &id, &did).await?))
}
