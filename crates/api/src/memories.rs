//! `/v1/memory_stores/{id}/memories` and `/memory_versions`: the memory and version methods
//! of `client.beta.memory_stores`. Every create, change and delete is one
//! store write that also records an immutable version naming its author.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ApiResult};
use super::extract::{Json, NoBody, QueryParams};
use super::memory_stores::{MemoryWorkspace, caller};
use super::pagination::{Page, PageRequest};
use mast_domain::memory::{
    self, FULL_VIEW_PAGE, Memory, MemoryCreate, MemoryListItem, MemoryUpdate, MemoryVersion,
    Operation, View,
};
use mast_domain::query::{Direction, MemoryVersionFilter};
use mast_domain::type_tag;
use mast_engine::ops::MemoryEdit;

type_tag!(
    /// `"type": "memory_deleted"`.
    MemoryDeletedTag = "memory_deleted"
);

/// Response of `DELETE /v1/memory_stores/{id}/memories/{mem_id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: MemoryDeletedTag,
}

/// A page of the memories list.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemoryListPage {
    pub data: Vec<MemoryListItem>,
    pub next_page: Option<String>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/memory_stores/{memory_store_id}/memories",
            post(create).get(list),
        )
        .route(
            "/v1/memory_stores/{memory_store_id}/memories/{memory_id}",
            get(retrieve).post(update).delete(delete),
        )
        .route(
            "/v1/memory_stores/{memory_store_id}/memory_versions",
            get(versions),
        )
        .route(
            "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}",
            get(version),
        )
        .route(
            "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact",
            post(redact),
        )
}

fn view(q: &QueryParams, default: View) -> ApiResult<View> {
    Ok(View::parse(q.get("view"), default)?)
}

fn shown(mut m: Memory, v: View) -> Memory {
    if v == View::Basic {
        m.content = None;
    }
    m
}

fn shown_version(mut m: MemoryVersion, v: View) -> MemoryVersion {
    if v == View::Basic {
        m.content = None;
    }
    m
}

/// Create a memory.
///
/// Creates a memory at a path (409 `memory_path_conflict_error` when another memory has it) and records its `created` version. Paths start with `/`, have 1–20 segments (none empty, `.` or `..`), no control or format characters nor U+2028/U+2029, are NFC and at most 1,024 bytes; content is at most 102,400 bytes. `view` defaults to `basic`.
#[utoipa::path(post, path = "/v1/memory_stores/{memory_store_id}/memories", tag = "memory_stores", operation_id = "memories_create",
    request_body = MemoryCreate, params(("memory_store_id" = String, Path), ("view" = Option<String>, Query)),
    responses((status = 200, body = Memory), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody),
        (status = 409, body = super::openapi::ErrorBody, description = "another memory has this path")))]
async fn create(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path(store_id): Path<String>,
    headers: HeaderMap,
    q: QueryParams,
    Json(body): Json<MemoryCreate>,
) -> ApiResult<axum::Json<Memory>> {
    let v = view(&q, View::Basic)?;
    let (path, content) = body.into_parts()?;
    let actor = caller(&app, &headers).await?;
    let m = app
        .engine
        .create_memory(&ws, &store_id, path, content, actor)
        .await?;
    Ok(axum::Json(shown(m, v)))
}

/// Retrieve a memory.
///
/// Returns one memory; `view` defaults to `full` (with its content).
#[utoipa::path(get, path = "/v1/memory_stores/{memory_store_id}/memories/{memory_id}", tag = "memory_stores", operation_id = "memories_retrieve",
    params(("memory_store_id" = String, Path), ("memory_id" = String, Path), ("view" = Option<String>, Query)),
    responses((status = 200, body = Memory), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path((store_id, id)): Path<(String, String)>,
    q: QueryParams,
) -> ApiResult<axum::Json<Memory>> {
    let v = view(&q, View::Full)?;
    let m = app.engine.memory(&ws, &store_id, &id).await?;
    Ok(axum::Json(shown(m, v)))
}

/// Update a memory.
///
/// Replaces a memory's content and/or moves it to a new path (it keeps its id), recording a `modified` version. With `precondition` `{"type":"content_sha256", …}` it applies only while the content still has that hash (409 `memory_precondition_failed_error` otherwise). An update that changes nothing records no version. `view` defaults to `basic`.
#[utoipa::path(post, path = "/v1/memory_stores/{memory_store_id}/memories/{memory_id}", tag = "memory_stores", operation_id = "memories_update",
    request_body = MemoryUpdate, params(("memory_store_id" = String, Path), ("memory_id" = String, Path), ("view" = Option<String>, Query)),
    responses((status = 200, body = Memory), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody),
        (status = 409, body = super::openapi::ErrorBody, description = "stale precondition, or another memory has the new path")))]
async fn update(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path((store_id, id)): Path<(String, String)>,
    headers: HeaderMap,
    q: QueryParams,
    Json(body): Json<MemoryUpdate>,
) -> ApiResult<axum::Json<Memory>> {
    let v = view(&q, View::Basic)?;
    let (path, content, expected_sha256) = body.into_parts()?;
    let edit = MemoryEdit {
        path,
        content,
        expected_sha256,
    };
    let actor = caller(&app, &headers).await?;
    let m = app
        .engine
        .update_memory(&ws, &store_id, &id, edit, actor)
        .await?;
    Ok(axum::Json(shown(m, v)))
}

/// Delete a memory.
///
/// Deletes a memory, recording a `deleted` version (its earlier versions stay). With `expected_content_sha256` it applies only while the content has that hash (409 `memory_precondition_failed_error` otherwise). Allowed on archived stores.
#[utoipa::path(delete, path = "/v1/memory_stores/{memory_store_id}/memories/{memory_id}", tag = "memory_stores", operation_id = "memories_delete",
    params(("memory_store_id" = String, Path), ("memory_id" = String, Path), ("expected_content_sha256" = Option<String>, Query)),
    responses((status = 200, body = MemoryDeleted), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path((store_id, id)): Path<(String, String)>,
    headers: HeaderMap,
    q: QueryParams,
) -> ApiResult<axum::Json<MemoryDeleted>> {
    let expected = q.get("expected_content_sha256").map(str::to_string);
    if let Some(e) = &expected {
        memory::check_sha("expected_content_sha256", e)?;
    }
    let actor = caller(&app, &headers).await?;
    app.engine
        .delete_memory(&ws, &store_id, &id, expected, actor)
        .await?;
    Ok(axum::Json(MemoryDeleted {
        id,
        tag: MemoryDeletedTag::Tag,
    }))
}

fn encode_from(from: &str) -> String {
    format!("page_{}", URL_SAFE_NO_PAD.encode(format!("m1:{from}")))
}

fn decode_from(cursor: &str) -> Option<String> {
    let raw = URL_SAFE_NO_PAD.decode(cursor.strip_prefix("page_")?).ok()?;
    String::from_utf8(raw)
        .ok()?
        .strip_prefix("m1:")
        .map(str::to_string)
}

/// List memories.
///
/// Lists a store's memories in path order. `path_prefix` (ending with `/`) keeps those below it, matching whole segments; `depth` 0 (the default) lists every memory below it, `depth` N lists those at most N segments below it and rolls deeper ones up into `memory_prefix` items, which count toward `limit` (1–100, default 20). `view` defaults to `basic`; with `full` a page holds at most 20 items.
#[utoipa::path(get, path = "/v1/memory_stores/{memory_store_id}/memories", tag = "memory_stores", operation_id = "memories_list",
    params(("memory_store_id" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query),
        ("path_prefix" = Option<String>, Query), ("depth" = Option<i64>, Query), ("view" = Option<String>, Query)),
    responses((status = 200, body = MemoryListPage), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path(store_id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<MemoryListPage>> {
    let v = view(&q, View::Basic)?;
    let mut limit = q.limit(20, 100)?;
    if v == View::Full {
        limit = limit.min(FULL_VIEW_PAGE);
    }
    let prefix = q.get("path_prefix").unwrap_or("/").to_string();
    memory::check_prefix(&prefix)?;
    let depth = q.int("depth", 0, memory::MAX_SEGMENTS as i64)?.unwrap_or(0) as usize;
    let from = match q.get("page").filter(|p| !p.is_empty()) {
        None => None,
        Some(p) => Some(
            decode_from(p)
                .ok_or_else(|| ApiError::invalid("`page` is not a valid cursor for this list"))?,
        ),
    };
    let page = app
        .engine
        .list_memories(&ws, &store_id, &prefix, depth, from, limit as usize)
        .await?;
    let data = page
        .items
        .into_iter()
        .map(|i| match i {
            MemoryListItem::Memory(m) => MemoryListItem::Memory(Box::new(shown(*m, v))),
            p => p,
        })
        .collect();
    Ok(axum::Json(MemoryListPage {
        data,
        next_page: page.next_from.as_deref().map(encode_from),
    }))
}

/// List memory versions.
///
/// Lists a store's memory versions, newest first: every create, change and delete, with its author. Filters: `memory_id` (also after the memory was deleted), `operation`, `session_id`, `api_key_id`, `service_account_id`, `created_at[gte]`/`created_at[lte]`. `view` defaults to `basic`; with `full` a page holds at most 20 versions.
#[utoipa::path(get, path = "/v1/memory_stores/{memory_store_id}/memory_versions", tag = "memory_stores", operation_id = "memory_versions_list",
    params(("memory_store_id" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query),
        ("memory_id" = Option<String>, Query), ("operation" = Option<String>, Query), ("session_id" = Option<String>, Query),
        ("api_key_id" = Option<String>, Query), ("service_account_id" = Option<String>, Query),
        ("created_at[gte]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query), ("view" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::MemoryVersionPage), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn versions(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path(store_id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<MemoryVersion>>> {
    let v = view(&q, View::Basic)?;
    let mut page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    if v == View::Full {
        // A larger `limit` is capped rather than refused, as upstream documents.
        page = page.capped(FULL_VIEW_PAGE);
    }
    let operation = match q.get("operation") {
        None => None,
        Some(o) => Some(Operation::parse(o).ok_or_else(|| {
            ApiError::invalid(format!(
                "`operation` must be `created`, `modified` or `deleted` (got `{o}`)"
            ))
        })?),
    };
    let filter = MemoryVersionFilter {
        memory_id: q.get("memory_id").map(str::to_string),
        operation,
        session_id: q.get("session_id").map(str::to_string),
        api_key_id: q.get("api_key_id").map(str::to_string),
        created_gte: q.time("created_at[gte]")?,
        created_lte: q.time("created_at[lte]")?,
    };
    // No version here is written by a service account (this server has none).
    let rows = if q.get("service_account_id").is_some() {
        app.engine.memory_store(&ws, &store_id).await?;
        vec![]
    } else {
        app.engine
            .list_memory_versions(&ws, &store_id, &filter, &page.scan())
            .await?
    };
    Ok(axum::Json(
        page.finish(rows, |r| r.id.clone())
            .map(|r| shown_version(r, v)),
    ))
}

/// Retrieve a memory version.
///
/// Returns one memory version; `view` defaults to `full`. A redacted version has `content`, `path`, `content_sha256` and `content_size_bytes` null.
#[utoipa::path(get, path = "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}", tag = "memory_stores", operation_id = "memory_versions_retrieve",
    params(("memory_store_id" = String, Path), ("memory_version_id" = String, Path), ("view" = Option<String>, Query)),
    responses((status = 200, body = MemoryVersion), (status = 404, body = super::openapi::ErrorBody)))]
async fn version(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path((store_id, id)): Path<(String, String)>,
    q: QueryParams,
) -> ApiResult<axum::Json<MemoryVersion>> {
    let v = view(&q, View::Full)?;
    let r = app.engine.memory_version(&ws, &store_id, &id).await?;
    Ok(axum::Json(shown_version(r, v)))
}

/// Redact a memory version.
///
/// Removes a version's content, path and hash for good (`redacted_at`/`redacted_by` are set; redacting again changes nothing). The version holding a memory's current content cannot be redacted while the memory exists: change or delete the memory first. Allowed on archived stores.
#[utoipa::path(post, path = "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact", tag = "memory_stores", operation_id = "memory_versions_redact",
    params(("memory_store_id" = String, Path), ("memory_version_id" = String, Path)),
    responses((status = 200, body = MemoryVersion), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn redact(
    State(app): State<AppState>,
    MemoryWorkspace(ws): MemoryWorkspace,
    Path((store_id, id)): Path<(String, String)>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<axum::Json<MemoryVersion>> {
    let by = caller(&app, &headers).await?;
    Ok(axum::Json(
        app.engine
            .redact_memory_version(&ws, &store_id, &id, by)
            .await?,
    ))
}
