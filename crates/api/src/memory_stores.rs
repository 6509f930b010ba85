//! `/v1/memory_stores`: the store methods of `client.beta.memory_stores`, and
//! what every memory-store route shares: the beta header rule and the caller as an actor.
//! Memories and versions are in [`super::memories`].

use axum::Router;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::routing::{get, post};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Principal, presented_key};
use super::error::{ApiError, ApiResult};
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::memory::{Actor, MemoryStore, MemoryStoreCreate, MemoryStoreUpdate};
use mast_domain::query::{Direction, MemoryStoreFilter};
use mast_domain::type_tag;

/// The betas that open the memory-store endpoints (either one, as the SDK documents).
pub const MEMORY_BETAS: [&str; 2] = ["agent-memory-2026-07-22", "managed-agents-2026-04-01"];

type_tag!(
    /// `"type": "memory_store_deleted"`.
    MemoryStoreDeletedTag = "memory_store_deleted"
);

/// Response of `DELETE /v1/memory_stores/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryStoreDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: MemoryStoreDeletedTag,
}

/// The workspace of a memory-store request that carries one of [`MEMORY_BETAS`] in
/// `anthropic-beta` (upstream refuses these endpoints without it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryWorkspace(pub String);

impl FromRequestParts<AppState> for MemoryWorkspace {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let has_beta = parts
            .headers
            .get_all("anthropic-beta")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|b| MEMORY_BETAS.contains(&b.trim()));
        if !has_beta {
            return Err(ApiError::invalid(format!(
                "memory stores are in beta: send the `anthropic-beta: {}` header",
                MEMORY_BETAS[0]
            )));
        }
        match Principal::from_request_parts(parts, state).await? {
            Principal::ApiKey { workspace, .. } => Ok(MemoryWorkspace(workspace)),
            worker => Ok(MemoryWorkspace(
                super::memory_access::worker_workspace(state, parts, &worker).await?,
            )),
        }
    }
}

/// Who a request acts as, for `created_by` / `redacted_by`: the API key it presented, or
/// nobody recorded when the server runs open without keys.
pub async fn caller(app: &AppState, headers: &HeaderMap) -> ApiResult<Option<Actor>> {
    let Some(key) = presented_key(headers) else {
        return Ok(None);
    };
    Ok(app.engine.memory_actor(&key).await?)
}

/// A store of the workspace, or 404.
pub async fn existing(app: &AppState, ws: &str, id: &str) -> ApiResult<MemoryStore> {
    Ok(app.engine.memory_store(ws, id).await?)
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/memory_stores", post(create).get(list))
        .route(
            "/v1/memory_stores/{memory_store_id}",
            get(retrieve).post(update).delete(delete),
        )
        .route("/v1/memory_stores/{memory_store_id}/archive", post(archive))
}

/// Create a memory store.
///
/// Creates a memory store: a set of text memories at paths that agents can keep across sessions. Requires the `agent-memory-2026-07-22` (or `managed-agents-2026-04-01`) beta header.
#[utoipa::path(post, path = "/v1/memory_stores", tag = "memory_stores", operation_id = "memory_stores_create", request_body = MemoryStoreCreate,
    responses((status = 200, body = MemoryStore), (status = 400, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Json(body): Json<MemoryStoreCreate>,
) -> ApiResult<axum::Json<MemoryStore>> {
    Ok(axum::Json(app.engine.create_memory_store(&ws, body).await?))
}

/// Retrieve a memory store.
///
/// Returns one memory store, archived or not.
#[utoipa::path(get, path = "/v1/memory_stores/{memory_store_id}", tag = "memory_stores", operation_id = "memory_stores_retrieve",
    params(("memory_store_id" = String, Path)),
    responses((status = 200, body = MemoryStore), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<MemoryStore>> {
    existing(&app, &ws, &id).await.map(axum::Json)
}

/// Update a memory store.
///
/// Changes a store's name, description (`""` clears it) or metadata (a patch: `null` deletes a key). Archived stores cannot be updated.
#[utoipa::path(post, path = "/v1/memory_stores/{memory_store_id}", tag = "memory_stores", operation_id = "memory_stores_update",
    request_body = MemoryStoreUpdate, params(("memory_store_id" = String, Path)),
    responses((status = 200, body = MemoryStore), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path(id): Path<String>,
    Json(body): Json<MemoryStoreUpdate>,
) -> ApiResult<axum::Json<MemoryStore>> {
    Ok(axum::Json(
        app.engine.update_memory_store(&ws, &id, body).await?,
    ))
}

/// List memory stores.
///
/// Lists the workspace's memory stores, newest first, with cursor pagination; archived ones only with `include_archived=true`; `created_at[gte]`/`created_at[lte]` bound the creation time.
#[utoipa::path(get, path = "/v1/memory_stores", tag = "memory_stores", operation_id = "memory_stores_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("include_archived" = Option<bool>, Query),
        ("created_at[gte]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::MemoryStorePage), (status = 400, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<MemoryStore>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let filter = MemoryStoreFilter {
        include_archived: q.bool("include_archived")?.unwrap_or(false),
        created_gte: q.time("created_at[gte]")?,
        created_lte: q.time("created_at[lte]")?,
    };
    let rows = app
        .engine
        .list_memory_stores(&ws, &filter, &page.scan())
        .await?;
    Ok(axum::Json(page.finish(rows, |s| s.id.clone())))
}

/// Archive a memory store.
///
/// Archives a memory store, irreversibly (archiving again changes nothing): it can no longer be attached to sessions, its memories can no longer be created or changed and the store can no longer be updated; its memories can still be read and deleted, its versions redacted, and the store deleted.
#[utoipa::path(post, path = "/v1/memory_stores/{memory_store_id}/archive", tag = "memory_stores", operation_id = "memory_stores_archive",
    params(("memory_store_id" = String, Path)),
    responses((status = 200, body = MemoryStore), (status = 404, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<MemoryStore>> {
    Ok(axum::Json(app.engine.archive_memory_store(&ws, &id).await?))
}

/// Delete a memory store.
///
/// Deletes a memory store with every memory and every memory version in it.
#[utoipa::path(delete, path = "/v1/memory_stores/{memory_store_id}", tag = "memory_stores", operation_id = "memory_stores_delete",
    params(("memory_store_id" = String, Path)),
    responses((status = 200, body = MemoryStoreDeleted), (status = 404, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<MemoryStoreDeleted>> {
    app.engine.delete_memory_store(&ws, &id).await?;
    Ok(axum::Json(MemoryStoreDeleted {
        id,
        tag: MemoryStoreDeletedTag::Tag,
    }))
}
