//! `/v1/sessions`: create (with optional `initial_events`), retrieve, update, list
//! (bidirectional), archive, delete.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Principal, Workspace, session_workspace};
use super::error::{ApiError, ApiResult};
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{BiPage, PageRequest};
use mast_domain::query::{Direction, SessionFilter};
use mast_domain::session::{Session, SessionCreate, SessionStatus, SessionUpdate};
use mast_domain::type_tag;
use mast_engine::ops::OpError;

type_tag!(
    /// `"type": "session_deleted"`.
    SessionDeletedTag = "session_deleted"
);

/// Response of `DELETE /v1/sessions/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: SessionDeletedTag,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions", post(create).get(list))
        .route(
            "/v1/sessions/{session_id}",
            get(retrieve).post(update).delete(delete),
        )
        .route("/v1/sessions/{session_id}/archive", post(archive))
}

/// 404 for a session id.
pub fn not_found(id: &str) -> ApiError {
    OpError::SessionNotFound(id.to_string()).into()
}

/// Create a session.
///
/// Starts a session of an agent (pinned to a version) in an environment. The session is idle until it receives a message.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", operation_id = "sessions_create", request_body = SessionCreate,
    responses((status = 200, body = Session), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<SessionCreate>,
) -> ApiResult<axum::Json<Session>> {
    Ok(axum::Json(app.engine.create_session(&ws, body).await?))
}

/// Retrieve a session.
///
/// Returns a session with its status, usage and stats.
#[utoipa::path(get, path = "/v1/sessions/{session_id}", tag = "sessions", operation_id = "sessions_retrieve", params(("session_id" = String, Path)),
    responses((status = 200, body = Session), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Session>> {
    let ws = session_workspace(&app.engine, &principal, &id).await?;
    Ok(axum::Json(app.engine.session(&ws, &id).await?))
}

/// Update a session.
///
/// Changes a session's title, metadata or agent settings that may change mid-session.
#[utoipa::path(post, path = "/v1/sessions/{session_id}", tag = "sessions", operation_id = "sessions_update", request_body = SessionUpdate,
    params(("session_id" = String, Path)),
    responses((status = 200, body = Session), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<SessionUpdate>,
) -> ApiResult<axum::Json<Session>> {
    Ok(axum::Json(app.engine.update_session(&ws, &id, body).await?))
}

/// List sessions.
///
/// Lists the workspace's sessions with bidirectional cursor pagination and filters (agent, status, creation time, archived).
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", operation_id = "sessions_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("order" = Option<String>, Query),
        ("agent_id" = Option<String>, Query), ("agent_version" = Option<i64>, Query), ("include_archived" = Option<bool>, Query),
        ("memory_store_id" = Option<String>, Query), ("deployment_id" = Option<String>, Query),
        ("statuses[]" = Option<Vec<String>>, Query), ("created_at[gt]" = Option<String>, Query), ("created_at[gte]" = Option<String>, Query),
        ("created_at[lt]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::SessionPage), (status = 400, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<BiPage<Session>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, true)?;
    let statuses = q.all("statuses");
    if let Some(bad) = statuses.iter().find(|s| SessionStatus::parse(s).is_none()) {
        return Err(ApiError::invalid(format!(
            "`statuses[]` value `{bad}` is not one of idle, running, rescheduling, terminated"
        )));
    }
    let agent_id = q.get("agent_id").map(str::to_string);
    let agent_version = q.int("agent_version", 1, i64::MAX)?;
    if agent_version.is_some() && agent_id.is_none() {
        return Err(ApiError::invalid(
            "`agent_version` can only be used together with `agent_id`",
        ));
    }
    let memory_store_id = q.get("memory_store_id").map(str::to_string);
    if let Some(store_id) = &memory_store_id {
        // An id that is not a store's is refused as upstream does.
        if !mast_domain::ids::has_prefix(store_id, "memstore") {
            return Err(ApiError::invalid(format!(
                "`memory_store_id` must be a memory store id (`memstore_...`), got `{store_id}`"
            )));
        }
        app.engine.require_memory_store(&ws, store_id).await?;
    }
    let filter = SessionFilter {
        agent_id,
        agent_version,
        include_archived: q.bool("include_archived")?.unwrap_or(false),
        statuses,
        created_gt: q.time("created_at[gt]")?,
        created_gte: q.time("created_at[gte]")?,
        created_lt: q.time("created_at[lt]")?,
        created_lte: q.time("created_at[lte]")?,
        memory_store_id,
        // An unknown deployment lists nothing, as upstream does.
        deployment_id: q.get("deployment_id").map(str::to_string),
    };
    let rows = app.engine.list_sessions(&ws, &filter, &page.scan()).await?;
    Ok(axum::Json(
        page.finish(rows, |r| r.id.clone()).bidirectional(),
    ))
}

/// Archive a session.
///
/// Archives a session: its loop stops, it accepts no new events, and its transcript stays readable.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/archive", tag = "sessions", operation_id = "sessions_archive", params(("session_id" = String, Path)),
    responses((status = 200, body = Session), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Session>> {
    Ok(axum::Json(app.engine.archive_session(&ws, &id).await?))
}

/// Delete a session.
///
/// Deletes a session with its events, threads and workspace files.
#[utoipa::path(delete, path = "/v1/sessions/{session_id}", tag = "sessions", operation_id = "sessions_delete", params(("session_id" = String, Path)),
    responses((status = 200, body = SessionDeleted), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<SessionDeleted>> {
    app.engine.delete_session(&ws, &id).await?;
    Ok(axum::Json(SessionDeleted {
        id,
        tag: SessionDeletedTag::Tag,
    }))
}
