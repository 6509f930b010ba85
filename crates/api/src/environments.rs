//! `/v1/environments`: create, retrieve, update, list, archive, delete.

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
use mast_domain::environment::{Environment, EnvironmentCreate, EnvironmentUpdate};
use mast_domain::query::Direction;
use mast_domain::type_tag;

type_tag!(
    /// `"type": "environment_deleted"`.
    EnvironmentDeletedTag = "environment_deleted"
);

/// Response of `DELETE /v1/environments/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: EnvironmentDeletedTag,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/environments", post(create).get(list))
        .route(
            "/v1/environments/{environment_id}",
            get(retrieve).post(update).delete(delete),
        )
        .route("/v1/environments/{environment_id}/archive", post(archive))
}

/// Create an environment.
///
/// Creates an environment: `cloud` (this server runs the built-in tools in a sandbox, with the networking and packages given) or `self_hosted` (your workers run them through the work queue).
#[utoipa::path(post, path = "/v1/environments", tag = "environments", operation_id = "environments_create", request_body = EnvironmentCreate,
    responses((status = 200, body = Environment), (status = 400, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<EnvironmentCreate>,
) -> ApiResult<axum::Json<Environment>> {
    Ok(axum::Json(app.engine.create_environment(&ws, body).await?))
}

/// Retrieve an environment.
///
/// Returns one environment.
#[utoipa::path(get, path = "/v1/environments/{environment_id}", tag = "environments", operation_id = "environments_retrieve", params(("environment_id" = String, Path)),
    responses((status = 200, body = Environment), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Environment>> {
    Ok(axum::Json(app.engine.environment(&ws, &id).await?))
}

/// Update an environment.
///
/// Changes an environment's name, description, metadata or configuration; sessions started afterwards use the new configuration.
#[utoipa::path(post, path = "/v1/environments/{environment_id}", tag = "environments", operation_id = "environments_update", request_body = EnvironmentUpdate,
    params(("environment_id" = String, Path)),
    responses((status = 200, body = Environment), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody),
        (status = 409, body = super::openapi::ErrorBody, description = "another environment has this name")))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<EnvironmentUpdate>,
) -> ApiResult<axum::Json<Environment>> {
    Ok(axum::Json(
        app.engine.update_environment(&ws, &id, body).await?,
    ))
}

/// List environments.
///
/// Lists the workspace's environments, newest first, with cursor pagination.
#[utoipa::path(get, path = "/v1/environments", tag = "environments", operation_id = "environments_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("include_archived" = Option<bool>, Query)),
    responses((status = 200, body = super::openapi::EnvironmentPage)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Environment>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let include_archived = q.bool("include_archived")?.unwrap_or(false);
    let rows = app
        .engine
        .list_environments(&ws, include_archived, &page.scan())
        .await?;
    Ok(axum::Json(page.finish(rows, |e| e.id.clone())))
}

/// Archive an environment.
///
/// Archives an environment: no new sessions start in it; existing sessions carry on.
#[utoipa::path(post, path = "/v1/environments/{environment_id}/archive", tag = "environments", operation_id = "environments_archive", params(("environment_id" = String, Path)),
    responses((status = 200, body = Environment), (status = 404, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Environment>> {
    Ok(axum::Json(app.engine.archive_environment(&ws, &id).await?))
}

/// Delete an environment.
///
/// Deletes an environment with its worker keys and work queue. An environment that sessions still use (any not archived) is not deleted: archive or delete those sessions first, or archive the environment instead, which stops new sessions and lets existing ones finish.
#[utoipa::path(delete, path = "/v1/environments/{environment_id}", tag = "environments", operation_id = "environments_delete", params(("environment_id" = String, Path)),
    responses((status = 200, body = EnvironmentDeleted), (status = 404, body = super::openapi::ErrorBody),
        (status = 409, body = super::openapi::ErrorBody, description = "sessions that are not archived use the environment")))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<EnvironmentDeleted>> {
    app.engine.delete_environment(&ws, &id).await?;
    Ok(axum::Json(EnvironmentDeleted {
        id,
        tag: EnvironmentDeletedTag::Tag,
    }))
}
