//! `/v1/environments/{environment_id}/keys`: the credentials of a self-hosted environment's
//! workers. Created with an API key; the key is shown once and stored only as a hash.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{delete, get};

use super::AppState;
use super::auth::{ENVIRONMENT_KEY_PREFIX, Workspace, hash_key};
use super::error::{ApiError, ApiResult};
use super::extract::NoBody;
use super::pagination::Page;
use mast_domain::ids::{new_id, new_secret};
use mast_domain::time;
use mast_domain::work::{
    EnvironmentKey, EnvironmentKeyDeleted, EnvironmentKeyDeletedTag, EnvironmentKeyTag,
};

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

/// Checks the environment exists in the workspace, is self-hosted and, unless `archived_ok`,
/// is not archived.
async fn self_hosted(app: &AppState, ws: &str, env_id: &str, archived_ok: bool) -> ApiResult<()> {
    let env = super::work::self_hosted(app, ws, env_id).await?;
    if !archived_ok && env.archived_at.is_some() {
        return Err(ApiError::invalid_code(
            "environment_archived",
            format!("environment `{env_id}` is archived"),
        ));
    }
    Ok(())
}

/// Mints a key for an environment; returns it once.
pub async fn mint(
    store: &dyn mast_store::Store,
    ws: &str,
    env_id: &str,
) -> Result<EnvironmentKey, mast_store::StoreError> {
    let key = format!("{ENVIRONMENT_KEY_PREFIX}{}", new_secret(48));
    let id = new_id("envkey");
    store
        .insert_environment_key(&id, ws, env_id, &hash_key(&key))
        .await?;
    Ok(EnvironmentKey {
        tag: EnvironmentKeyTag::Tag,
        id,
        environment_id: env_id.to_string(),
        created_at: time::format(time::now()),
        key: Some(key),
    })
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
    self_hosted(&app, &ws, &env_id, false).await?;
    Ok(axum::Json(mint(app.store.as_ref(), &ws, &env_id).await?))
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
    self_hosted(&app, &ws, &env_id, true).await?;
    let data = app
        .store
        .list_environment_keys(&env_id)
        .await?
        .into_iter()
        .map(|(id, created_at)| EnvironmentKey {
            tag: EnvironmentKeyTag::Tag,
            id,
            environment_id: env_id.clone(),
            created_at: time::format(created_at),
            key: None,
        })
        .collect();
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
    self_hosted(&app, &ws, &env_id, true).await?;
    if !app.store.delete_environment_key(&env_id, &key_id).await? {
        return Err(ApiError::not_found(format!(
            "environment key `{key_id}` not found"
        )));
    }
    Ok(axum::Json(EnvironmentKeyDeleted {
        id: key_id,
        tag: EnvironmentKeyDeletedTag::Tag,
    }))
}
