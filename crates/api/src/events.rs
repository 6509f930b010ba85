//! `/v1/sessions/{id}/events`: send client events and list the log.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Principal, session_workspace};
use super::error::{ApiError, ApiResult};
use super::extract::{Json, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::events::{LISTABLE_TYPES, parse_batch};
use mast_domain::query::{Direction, EventFilter};

/// Most events one send request may carry.
pub const MAX_BATCH: usize = 100;

/// `POST /v1/sessions/{id}/events` body. A key unknown at any depth is refused (400
/// `unknown_field`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "an object with `events`")]
pub struct SendEvents {
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Value>,
}

/// The accepted events, echoed with their ids and `processed_at`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SentEvents {
    #[schema(value_type = Vec<Object>)]
    pub data: Vec<Value>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/events", get(list).post(send))
}

/// Send events to a session.
///
/// Appends user events (messages, tool results, tool confirmations, interrupts, custom tool results) to a session and wakes its loop. Events are stored before the call returns.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/events", tag = "events", operation_id = "events_send", request_body = SendEvents,
    params(("session_id" = String, Path)),
    responses((status = 200, body = SentEvents), (status = 400, body = super::openapi::ErrorBody),
        (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn send(
    State(app): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    Json(body): Json<SendEvents>,
) -> ApiResult<axum::Json<SentEvents>> {
    let ws = session_workspace(&app.engine, &principal, &id).await?;
    let batch = parse_batch(&body.events, MAX_BATCH)?;
    if !matches!(principal, Principal::ApiKey { .. })
        && let Some(e) = batch.iter().find(|e| !e.is_tool_result())
    {
        // A worker answers the tool calls it ran; prompting, interrupting or confirming stays
        // with the user's own credentials.
        return Err(ApiError::forbidden(format!(
            "worker credentials may only send `user.tool_result` and `user.custom_tool_result`, not `{}`",
            e.kind()
        )));
    }
    let accepted = app.engine.accept_events(&ws, &id, batch).await?;
    Ok(axum::Json(SentEvents {
        data: accepted.iter().map(|e| e.wire()).collect(),
    }))
}

/// List a session's events.
///
/// Lists a session's stored events in order with cursor pagination: its whole transcript, every thread included.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/events", tag = "events", operation_id = "events_list",
    params(("session_id" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("order" = Option<String>, Query),
        ("types[]" = Option<Vec<String>>, Query), ("created_at[gt]" = Option<String>, Query), ("created_at[gte]" = Option<String>, Query),
        ("created_at[lt]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::EventPage), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Value>>> {
    let ws = session_workspace(&app.engine, &principal, &id).await?;
    if q.get("after_id").is_some() || q.get("before_id").is_some() {
        return Err(ApiError::invalid(
            "this list pages with `page` cursors; `after_id`/`before_id` are not supported",
        ));
    }
    let page = PageRequest::<i64>::parse(&q, Direction::Ascending, 1000, 1000, true)?;
    let types = q.all("types");
    if let Some(bad) = types.iter().find(|t| !LISTABLE_TYPES.contains(&t.as_str())) {
        return Err(ApiError::invalid(format!(
            "`types[]` value `{bad}` is not a listable event type"
        )));
    }
    let filter = EventFilter {
        types,
        processed_gt: q.time("created_at[gt]")?,
        processed_gte: q.time("created_at[gte]")?,
        processed_lt: q.time("created_at[lt]")?,
        processed_lte: q.time("created_at[lte]")?,
        ..Default::default()
    };
    let rows = app
        .engine
        .list_session_events(&ws, &id, filter, &page.scan())
        .await?;
    let page = page.finish(rows, |e| e.seq);
    Ok(axum::Json(page.map(|e| e.wire())))
}
