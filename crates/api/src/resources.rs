//! `/v1/sessions/{session_id}/resources`: add, list, retrieve, update and
//! delete the files a session mounts and the repositories it clones.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::auth::Workspace;
use super::error::ApiResult;
use super::extract::{Json, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::query::Direction;
use mast_domain::repository::{Checkout, RepositoryResource};
use mast_domain::resource::{DeletedResource, FileResource, ResourceDeletedTag};

/// Body of `POST /v1/sessions/{id}/resources` (parsed strictly by the engine).
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct ResourceAdd {
    /// `file` or `github_repository`.
    #[schema(rename = "type")]
    kind: String,
    /// `file`: an uploaded file's id.
    file_id: Option<String>,
    /// `github_repository`: the clone URL (`https://…`, any git host).
    url: Option<String>,
    /// `github_repository`: the token the clone authenticates with; never shown back.
    authorization_token: Option<String>,
    /// `github_repository`: what to check out; default the remote's default branch.
    checkout: Option<Checkout>,
    /// Where it appears: a file's default is `/mnt/session/uploads/<file_id>`, a
    /// repository's `/workspace/<repo-name>` (repositories stay below `/workspace/`).
    mount_path: Option<String>,
}

/// A session resource: a mounted file or a cloned repository.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum SessionResource {
    File(FileResource),
    GitHubRepository(RepositoryResource),
    MemoryStore(mast_domain::memory_resource::MemoryStoreResource),
}

/// Body of `POST /v1/sessions/{id}/resources/{resource_id}` (token rotation).
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct ResourceUpdate {
    /// A new token for a repository resource.
    authorization_token: String,
}

/// A page of a session's resources.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResourcePage {
    #[schema(value_type = Vec<SessionResource>)]
    pub data: Vec<Value>,
    pub next_page: Option<String>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/resources", get(list).post(add))
        .route(
            "/v1/sessions/{session_id}/resources/{resource_id}",
            get(retrieve).post(update).delete(delete),
        )
}

/// Add a resource to a session.
///
/// Mounts an uploaded file (read-only) in an idle session's sandbox, at `mount_path` (default `/mnt/session/uploads/<file_id>`), or clones a git repository into its workspace (default `/workspace/<repo-name>`), from the session's next tool call on. `file` and `github_repository` resources are supported, in `cloud` environments.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/resources", tag = "sessions", operation_id = "sessions_resources_add",
    params(("session_id" = String, Path)), request_body = ResourceAdd,
    responses((status = 200, body = SessionResource), (status = 400, body = super::openapi::ErrorBody),
        (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn add(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(sid): Path<String>,
    Json(body): Json<Value>,
) -> ApiResult<axum::Json<Value>> {
    Ok(axum::Json(app.engine.add_resource(&ws, &sid, &body).await?))
}

/// List a session's resources.
///
/// Lists the session's resources in the order they were added; without `limit`, all of them.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/resources", tag = "sessions", operation_id = "sessions_resources_list",
    params(("session_id" = String, Path), ("limit" = Option<i64>, Query, minimum = 1, maximum = 1000), ("page" = Option<String>, Query)),
    responses((status = 200, body = ResourcePage), (status = 400, body = super::openapi::ErrorBody),
        (status = 404, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(sid): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<ResourcePage>> {
    let page = PageRequest::<String>::parse(&q, Direction::Ascending, 1000, 1000, false)?;
    let scan = page.scan();
    let all = app.engine.resources(&ws, &sid).await?;
    // Ids are issued in increasing order, so the list's order is its ids' order.
    let id = |v: &Value| v["id"].as_str().unwrap_or_default().to_string();
    let rows: Vec<Value> = all
        .into_iter()
        .filter(|r| scan.after.as_ref().is_none_or(|a| id(r) > *a))
        .take(scan.limit as usize)
        .collect();
    let Page {
        data, next_page, ..
    } = page.finish(rows, id);
    Ok(axum::Json(ResourcePage { data, next_page }))
}

/// Retrieve a session resource.
///
/// Returns one of the session's resources.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/resources/{resource_id}", tag = "sessions", operation_id = "sessions_resources_retrieve",
    params(("session_id" = String, Path), ("resource_id" = String, Path)),
    responses((status = 200, body = SessionResource), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((sid, rid)): Path<(String, String)>,
) -> ApiResult<axum::Json<Value>> {
    Ok(axum::Json(app.engine.resource(&ws, &sid, &rid).await?))
}

/// Update a session resource.
///
/// Rotates a repository resource's `authorization_token` (any status but archived): the next clone or clone retry uses it. File resources take no update (400).
#[utoipa::path(post, path = "/v1/sessions/{session_id}/resources/{resource_id}", tag = "sessions", operation_id = "sessions_resources_update",
    params(("session_id" = String, Path), ("resource_id" = String, Path)), request_body = ResourceUpdate,
    responses((status = 200, body = SessionResource), (status = 400, body = super::openapi::ErrorBody),
        (status = 404, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((sid, rid)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> ApiResult<axum::Json<Value>> {
    Ok(axum::Json(
        app.engine.update_resource(&ws, &sid, &rid, &body).await?,
    ))
}

/// Delete a session resource.
///
/// Removes a resource from an idle session: it is no longer mounted from the next tool call on. The uploaded file itself stays; a repository's working copy is taken out of the workspace.
#[utoipa::path(delete, path = "/v1/sessions/{session_id}/resources/{resource_id}", tag = "sessions", operation_id = "sessions_resources_delete",
    params(("session_id" = String, Path), ("resource_id" = String, Path)),
    responses((status = 200, body = DeletedResource), (status = 404, body = super::openapi::ErrorBody),
        (status = 409, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((sid, rid)): Path<(String, String)>,
) -> ApiResult<axum::Json<DeletedResource>> {
    app.engine.delete_resource(&ws, &sid, &rid).await?;
    Ok(axum::Json(DeletedResource {
        id: rid,
        tag: ResourceDeletedTag::Tag,
    }))
}
