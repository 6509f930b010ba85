//! `/v1/environments`: create, retrieve, update, list, archive, delete.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::Workspace;
use super::error::{ApiError, ApiResult};
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::environment::{
    Environment, EnvironmentCreate, EnvironmentSpec, EnvironmentTag, EnvironmentUpdate,
};
use mast_domain::ids::new_id;
use mast_domain::query::Direction;
use mast_domain::time;
use mast_domain::type_tag;
use mast_store::{EnvironmentDeletion, StoreError};

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

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("environment `{id}` not found"))
}

fn name_taken(e: StoreError, name: &str) -> ApiError {
    match e {
        StoreError::Conflict(_) => {
            ApiError::conflict(format!("an environment named `{name}` already exists"))
        }
        e => e.into(),
    }
}

fn build(
    id: &str,
    spec: EnvironmentSpec,
    created_at: String,
    updated_at: String,
    archived_at: Option<String>,
) -> Environment {
    Environment {
        tag: EnvironmentTag::Tag,
        id: id.to_string(),
        name: spec.name,
        description: spec.description,
        config: spec.config,
        metadata: spec.metadata,
        scope: spec.scope,
        created_at,
        updated_at,
        archived_at,
    }
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
    let spec = body.into_spec()?;
    let now = time::now();
    let env = build(
        &new_id("env"),
        spec,
        time::format(now),
        time::format(now),
        None,
    );
    app.store
        .insert_environment(&ws, &env, now)
        .await
        .map_err(|e| name_taken(e, &env.name))?;
    Ok(axum::Json(env))
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
    app.store
        .get_environment(&ws, &id)
        .await?
        .map(axum::Json)
        .ok_or_else(|| not_found(&id))
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
    let current = app
        .store
        .get_environment(&ws, &id)
        .await?
        .ok_or_else(|| not_found(&id))?;
    let spec = body.apply(&current)?;
    let now = time::now();
    let env = build(
        &id,
        spec,
        current.created_at.clone(),
        time::format(now),
        None,
    );
    if env.name == current.name
        && env.description == current.description
        && env.config == current.config
        && env.metadata == current.metadata
        && env.scope == current.scope
    {
        return Ok(axum::Json(current));
    }
    app.store
        .update_environment(&ws, &env, now, false)
        .await
        .map_err(|e| name_taken(e, &env.name))?;
    Ok(axum::Json(env))
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
        .store
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
    let mut env = app
        .store
        .get_environment(&ws, &id)
        .await?
        .ok_or_else(|| not_found(&id))?;
    if env.archived_at.is_some() {
        return Ok(axum::Json(env));
    }
    let now = time::now();
    env.archived_at = Some(time::format(now));
    env.updated_at = time::format(now);
    app.store.update_environment(&ws, &env, now, true).await?;
    Ok(axum::Json(env))
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
    match app.store.delete_environment(&ws, &id).await? {
        EnvironmentDeletion::Deleted => {}
        EnvironmentDeletion::Missing => return Err(not_found(&id)),
        EnvironmentDeletion::InUse { sessions, total } => {
            return Err(ApiError::conflict(format!(
                "environment `{id}` is used by {total} session{} that {} not archived ({}{}); archive or delete {} first, \
                 or archive the environment instead (no new sessions start in it, existing ones carry on)",
                if total == 1 { "" } else { "s" },
                if total == 1 { "is" } else { "are" },
                sessions.join(", "),
                if total > sessions.len() as i64 {
                    ", …"
                } else {
                    ""
                },
                if total == 1 { "it" } else { "them" },
            )));
        }
    }
    Ok(axum::Json(EnvironmentDeleted {
        id,
        tag: EnvironmentDeletedTag::Tag,
    }))
}
