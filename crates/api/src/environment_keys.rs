//! `/v1/environments/{environment_id}/keys`: the credentials of a self-hosted environment's
//! workers. Created with an API key; the key is shown once and stored only as a hash.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{delete, get};

use super::AppState;
use super::auth::Workspace;
use super::error::ApiResult;
use super::extract::NoBody;
use super::pagination::Page;
use mast_domain::work::{EnvironmentKey, EnvironmentKeyDeleted, EnvironmentKeyDeletedTag};

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/environments/{environment_id}/keys",
            get(list).post(create),
        )
        .route(
            "/v1/environments/{environment_id}/keys/{key_id}",
            delete(revoke),
        )
}

/// Create a worker key.
///
/// Creates a key for a self-hosted environment's workers and returns it once; only its hash is stored.
#[utoipa::path(post, path = "/v1/environments/{environment_id}/keys", tag = "environments", operation_id = "environment_keys_create",
    params(("environment_id" = String, Path)),
    responses((status = 200, body = EnvironmentKey, description = "The new key; `key` is shown only here"),
        (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(env_id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<EnvironmentKey>> {
    Ok(axum::Json(
        app.engine.create_environment_key(&ws, &env_id).await?,
    ))
}

/// List worker keys.
///
/// Lists a self-hosted environment's worker keys (never the keys themselves).
#[utoipa::path(get, path = "/v1/environments/{environment_id}/keys", tag = "environments", operation_id = "environment_keys_list",
    params(("environment_id" = String, Path)),
    responses((status = 200, body = super::openapi::EnvironmentKeyPage), (status = 404, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(env_id): Path<String>,
) -> ApiResult<axum::Json<Page<EnvironmentKey>>> {
    let data = app.engine.list_environment_keys(&ws, &env_id).await?;
    Ok(axum::Json(Page {
        data,
        next_page: None,
        prev_page: None,
    }))
}

/// Revoke a worker key.
///
/// Revokes a worker key at once; workers using it get 401 on their next request.
#[utoipa::path(delete, path = "/v1/environments/{environment_id}/keys/{key_id}", tag = "environments", operation_id = "environment_keys_revoke",
    params(("environment_id" = String, Path), ("key_id" = String, Path)),
    responses((status = 200, body = EnvironmentKeyDeleted), (status = 404, body = super::openapi::ErrorBody)))]
async fn revoke(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((env_id, key_id)): Path<(String, String)>,
) -> ApiResult<axum::Json<EnvironmentKeyDeleted>> {
    app.engine
        .revoke_environment_key(&ws, &env_id, &key_id)
        .await?;
    Ok(axum::Json(EnvironmentKeyDeleted {
        id: key_id,
        tag: EnvironmentKeyDeletedTag::Tag,
    }))
}
