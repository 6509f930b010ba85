//! `/v1/mast/hooks`: hooks (Mast's own addition; the `/v1/mast/` prefix cannot
//! collide with an upstream path). A hook's signing secret is in the creation response only.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::Workspace;
use super::error::ApiResult;
use super::extract::{Json, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::hook::{Hook, HookCreate};
use mast_domain::query::Direction;
use mast_domain::type_tag;

type_tag!(
    /// `"type": "hook_deleted"`.
    HookDeletedTag = "hook_deleted"
);

/// Response of `DELETE /v1/mast/hooks/{hook_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct HookDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: HookDeletedTag,
}

/// A page of hooks (never their secrets).
#[derive(Debug, Serialize, ToSchema)]
pub struct HookPage {
    pub data: Vec<Hook>,
    pub next_page: Option<String>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/mast/hooks", post(create).get(list))
        .route("/v1/mast/hooks/{hook_id}", get(retrieve).delete(delete))
}

/// Create a hook.
///
/// Mast's own addition: registers an endpoint asked, with a Standard Webhooks-signed POST, at one point of every matching session: before a tool call runs (`pre_tool_use`), after it ran (`post_tool_use`), when a user message is sent (`user_prompt_submit`), when the agent would stop (`stop`), when a coordinator delegates (`subagent_start`) and when a delegate would stop (`subagent_stop`). The response carries the hook's `signing_secret` (`whsec_…`) — the only time it is shown.
#[utoipa::path(post, path = "/v1/mast/hooks", tag = "hooks", operation_id = "hooks_create", request_body = HookCreate,
    responses((status = 200, body = Hook), (status = 400, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<HookCreate>,
) -> ApiResult<axum::Json<Hook>> {
    Ok(axum::Json(app.hooks.create(&ws, body).await?))
}

/// Retrieve a hook.
///
/// Returns one hook, without its signing secret.
#[utoipa::path(get, path = "/v1/mast/hooks/{hook_id}", tag = "hooks", operation_id = "hooks_retrieve", params(("hook_id" = String, Path)),
    responses((status = 200, body = Hook), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Hook>> {
    Ok(axum::Json(app.hooks.get(&ws, &id).await?))
}

/// List hooks.
///
/// Lists the workspace's hooks, newest first, with cursor pagination.
#[utoipa::path(get, path = "/v1/mast/hooks", tag = "hooks", operation_id = "hooks_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query)),
    responses((status = 200, body = HookPage)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Hook>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let rows = app.hooks.list(&ws, &page.scan()).await?;
    Ok(axum::Json(page.finish(rows, |h| h.id.clone())))
}

/// Delete a hook.
///
/// Deletes a hook; calls decided after this no longer ask it.
#[utoipa::path(delete, path = "/v1/mast/hooks/{hook_id}", tag = "hooks", operation_id = "hooks_delete", params(("hook_id" = String, Path)),
    responses((status = 200, body = HookDeleted), (status = 404, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<HookDeleted>> {
    app.hooks.delete(&ws, &id).await?;
    Ok(axum::Json(HookDeleted {
        id,
        tag: HookDeletedTag::Tag,
    }))
}
