//! `POST /v1/sessions/{id}/fork`: Mast's own, beyond the upstream API (a path upstream does
//! not use, so an upstream client never meets it unless it asks).

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;

use super::AppState;
use super::auth::Workspace;
use super::error::ApiResult;
use super::extract::Json;
use mast_domain::fork::ForkRequest;
use mast_domain::session::Session;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/fork", post(fork))
}

/// Fork a session (Mast's own, beyond the upstream API).
///
/// Creates a new idle session whose history is this session's up to and including `event_id` (default: its latest event), with the same agent snapshot, environment, resources and vaults, and its workspace as of that point. When that point would leave a tool call without its result or a model request unfinished, the fork ends just before the model request that made the call. The fork's metadata records its origin: `mast.forked_from_session`, `mast.forked_at_event` (the original's event the fork's history ends with) and, when the fork ends earlier than asked, `mast.fork_requested_event`. The fork's events have new ids. The fork starts with zero usage. The original is not changed; archived sessions can be forked, running ones from what they have committed.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/fork", tag = "sessions", operation_id = "sessions_fork",
    params(("session_id" = String, Path)), request_body(content = ForkRequest, description = "Optional; an empty body forks at the latest event."),
    responses((status = 200, body = Session), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn fork(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<ForkRequest>,
) -> ApiResult<axum::Json<Session>> {
    Ok(axum::Json(app.engine.fork_session(&ws, &id, body).await?))
}
