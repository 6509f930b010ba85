//! `/v1/vaults` and `/v1/vaults/{id}/credentials`: the 13 methods of `client.beta.vaults`.
//! Responses never carry a secret; credential writes go through the engine's
//! [`mast_engine::vaults::Vaults`], which seals secrets before the store sees them.

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
use mast_domain::credential::{Credential, CredentialCreate, CredentialUpdate};
use mast_domain::credential_validation::CredentialValidation;
use mast_domain::query::Direction;
use mast_domain::type_tag;
use mast_domain::vault::{Vault, VaultCreate, VaultUpdate};

type_tag!(
    /// `"type": "vault_deleted"`.
    VaultDeletedTag = "vault_deleted"
);

type_tag!(
    /// `"type": "vault_credential_deleted"`.
    CredentialDeletedTag = "vault_credential_deleted"
);

/// Response of `DELETE /v1/vaults/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VaultDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: VaultDeletedTag,
}

/// Response of `DELETE /v1/vaults/{id}/credentials/{cid}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: CredentialDeletedTag,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/vaults", post(create).get(list))
        .route(
            "/v1/vaults/{vault_id}",
            get(retrieve).post(update).delete(delete),
        )
        .route("/v1/vaults/{vault_id}/archive", post(archive))
        .route(
            "/v1/vaults/{vault_id}/credentials",
            post(credential_create).get(credential_list),
        )
        .route(
            "/v1/vaults/{vault_id}/credentials/{credential_id}",
            get(credential_retrieve)
                .post(credential_update)
                .delete(credential_delete),
        )
        .route(
            "/v1/vaults/{vault_id}/credentials/{credential_id}/archive",
            post(credential_archive),
        )
        .route(
            "/v1/vaults/{vault_id}/credentials/{credential_id}/mcp_oauth_validate",
            post(credential_validate),
        )
}

/// Create a vault.
///
/// Creates a vault: a named set of credentials that sessions use for their MCP servers (`vault_ids` on session creation).
#[utoipa::path(post, path = "/v1/vaults", tag = "vaults", operation_id = "vaults_create", request_body = VaultCreate,
    responses((status = 200, body = Vault), (status = 400, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<VaultCreate>,
) -> ApiResult<axum::Json<Vault>> {
    Ok(axum::Json(app.vaults.create_vault(&ws, body).await?))
}

/// Retrieve a vault.
///
/// Returns one vault.
#[utoipa::path(get, path = "/v1/vaults/{vault_id}", tag = "vaults", operation_id = "vaults_retrieve", params(("vault_id" = String, Path)),
    responses((status = 200, body = Vault), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Vault>> {
    Ok(axum::Json(app.vaults.get_vault(&ws, &id).await?))
}

/// Update a vault.
///
/// Changes a vault's display name or metadata (a patch: `null` deletes a key). Archived vaults cannot be updated.
#[utoipa::path(post, path = "/v1/vaults/{vault_id}", tag = "vaults", operation_id = "vaults_update", request_body = VaultUpdate,
    params(("vault_id" = String, Path)),
    responses((status = 200, body = Vault), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<VaultUpdate>,
) -> ApiResult<axum::Json<Vault>> {
    Ok(axum::Json(app.vaults.update_vault(&ws, &id, body).await?))
}

/// List vaults.
///
/// Lists the workspace's vaults, newest first, with cursor pagination; archived ones only with `include_archived=true`.
#[utoipa::path(get, path = "/v1/vaults", tag = "vaults", operation_id = "vaults_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("include_archived" = Option<bool>, Query)),
    responses((status = 200, body = super::openapi::VaultPage)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Vault>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let include_archived = q.bool("include_archived")?.unwrap_or(false);
    let rows = app
        .vaults
        .list_vaults(&ws, include_archived, &page.scan())
        .await?;
    Ok(axum::Json(page.finish(rows, |v| v.id.clone())))
}

/// Archive a vault.
///
/// Archives a vault: it is kept for reference, takes no changes or new credentials, cannot be given to new sessions, and its credentials stop being used by running sessions from their next MCP request.
#[utoipa::path(post, path = "/v1/vaults/{vault_id}/archive", tag = "vaults", operation_id = "vaults_archive", params(("vault_id" = String, Path)),
    responses((status = 200, body = Vault), (status = 404, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Vault>> {
    Ok(axum::Json(app.vaults.archive_vault(&ws, &id).await?))
}

/// Delete a vault.
///
/// Deletes a vault and all its credentials. Sessions that list it stop using its credentials from their next MCP request.
#[utoipa::path(delete, path = "/v1/vaults/{vault_id}", tag = "vaults", operation_id = "vaults_delete", params(("vault_id" = String, Path)),
    responses((status = 200, body = VaultDeleted), (status = 404, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<VaultDeleted>> {
    app.vaults.delete_vault(&ws, &id).await?;
    Ok(axum::Json(VaultDeleted {
        id,
        tag: VaultDeletedTag::Tag,
    }))
}

/// Create a credential.
///
/// Adds a `static_bearer` or `mcp_oauth` credential to a vault; its secrets are encrypted at rest and never returned. A vault holds at most one credential that is not archived per MCP server URL (409 otherwise).
#[utoipa::path(post, path = "/v1/vaults/{vault_id}/credentials", tag = "vaults", operation_id = "vault_credentials_create", request_body = CredentialCreate,
    params(("vault_id" = String, Path)),
    responses((status = 200, body = Credential), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody),
        (status = 409, body = super::openapi::ErrorBody, description = "the vault already has a credential for this MCP server")))]
async fn credential_create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(vault_id): Path<String>,
    Json(body): Json<CredentialCreate>,
) -> ApiResult<axum::Json<Credential>> {
    Ok(axum::Json(
        app.vaults.create_credential(&ws, &vault_id, body).await?,
    ))
}

/// Retrieve a credential.
///
/// Returns one credential, without its secrets.
#[utoipa::path(get, path = "/v1/vaults/{vault_id}/credentials/{credential_id}", tag = "vaults", operation_id = "vault_credentials_retrieve",
    params(("vault_id" = String, Path), ("credential_id" = String, Path)),
    responses((status = 200, body = Credential), (status = 404, body = super::openapi::ErrorBody)))]
async fn credential_retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((vault_id, id)): Path<(String, String)>,
) -> ApiResult<axum::Json<Credential>> {
    Ok(axum::Json(
        app.vaults.get_credential(&ws, &vault_id, &id).await?,
    ))
}

/// Update a credential.
///
/// Replaces a credential's secrets, expiry or refresh settings (its `auth.type` and `mcp_server_url` cannot change), display name or metadata. Archived credentials cannot be updated.
#[utoipa::path(post, path = "/v1/vaults/{vault_id}/credentials/{credential_id}", tag = "vaults", operation_id = "vault_credentials_update", request_body = CredentialUpdate,
    params(("vault_id" = String, Path), ("credential_id" = String, Path)),
    responses((status = 200, body = Credential), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn credential_update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((vault_id, id)): Path<(String, String)>,
    Json(body): Json<CredentialUpdate>,
) -> ApiResult<axum::Json<Credential>> {
    Ok(axum::Json(
        app.vaults
            .update_credential(&ws, &vault_id, &id, body)
            .await?,
    ))
}

/// List credentials.
///
/// Lists a vault's credentials, newest first, with cursor pagination; archived ones only with `include_archived=true`.
#[utoipa::path(get, path = "/v1/vaults/{vault_id}/credentials", tag = "vaults", operation_id = "vault_credentials_list",
    params(("vault_id" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("include_archived" = Option<bool>, Query)),
    responses((status = 200, body = super::openapi::CredentialPage), (status = 404, body = super::openapi::ErrorBody)))]
async fn credential_list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(vault_id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Credential>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let include_archived = q.bool("include_archived")?.unwrap_or(false);
    let rows = app
        .vaults
        .list_credentials(&ws, &vault_id, include_archived, &page.scan())
        .await?;
    Ok(axum::Json(page.finish(rows, |c| c.id.clone())))
}

/// Archive a credential.
///
/// Archives a credential: kept for reference, no longer updatable, and no longer used by sessions from their next MCP request. Its server URL is free for a new credential in the vault.
#[utoipa::path(post, path = "/v1/vaults/{vault_id}/credentials/{credential_id}/archive", tag = "vaults", operation_id = "vault_credentials_archive",
    params(("vault_id" = String, Path), ("credential_id" = String, Path)),
    responses((status = 200, body = Credential), (status = 404, body = super::openapi::ErrorBody)))]
async fn credential_archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((vault_id, id)): Path<(String, String)>,
    _: NoBody,
) -> ApiResult<axum::Json<Credential>> {
    Ok(axum::Json(
        app.vaults.archive_credential(&ws, &vault_id, &id).await?,
    ))
}

/// Delete a credential.
///
/// Deletes a credential and its secrets. Sessions stop using it from their next MCP request.
#[utoipa::path(delete, path = "/v1/vaults/{vault_id}/credentials/{credential_id}", tag = "vaults", operation_id = "vault_credentials_delete",
    params(("vault_id" = String, Path), ("credential_id" = String, Path)),
    responses((status = 200, body = CredentialDeleted), (status = 404, body = super::openapi::ErrorBody)))]
async fn credential_delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((vault_id, id)): Path<(String, String)>,
) -> ApiResult<axum::Json<CredentialDeleted>> {
    app.vaults.delete_credential(&ws, &vault_id, &id).await?;
    Ok(axum::Json(CredentialDeleted {
        id,
        tag: CredentialDeletedTag::Tag,
    }))
}

/// Validate a credential.
///
/// Tries the credential for real: refreshes an OAuth token that has expired (or is refused with a 401/403), then sends a JSON-RPC `initialize` to its MCP server with the token, and reports what happened. Refreshed tokens are stored. Response bodies quoted are scrubbed of secrets.
#[utoipa::path(post, path = "/v1/vaults/{vault_id}/credentials/{credential_id}/mcp_oauth_validate", tag = "vaults", operation_id = "vault_credentials_mcp_oauth_validate",
    params(("vault_id" = String, Path), ("credential_id" = String, Path)),
    responses((status = 200, body = CredentialValidation), (status = 404, body = super::openapi::ErrorBody)))]
async fn credential_validate(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((vault_id, id)): Path<(String, String)>,
    _: NoBody,
) -> ApiResult<axum::Json<CredentialValidation>> {
    Ok(axum::Json(app.vaults.validate(&ws, &vault_id, &id).await?))
}
