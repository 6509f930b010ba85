//! `/v1/environments/{environment_id}/work`: the self-hosted work queue. Workers
//! poll with an environment key, get each item's sessions token in its `secret`, and keep
//! the item's lease alive with heartbeats while they serve the session's tool calls.

use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};

use super::AppState;
use super::auth::{Principal, Workspace};
use super::error::{ApiError, ApiResult};
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::environment::Environment;
use mast_domain::query::Direction;
use mast_domain::time;
use mast_domain::work::{
    Work, WorkHeartbeat, WorkQueueStats, WorkQueueStatsTag, WorkState, WorkStop, WorkUpdate,
    secret_for,
};
use mast_engine::work;

/// Longest `block_ms` a poll may ask for.
const MAX_BLOCK_MS: i64 = 999;
/// Default age after which a polled but unacknowledged item may be claimed again.
const DEFAULT_RECLAIM_MS: i64 = 5_000;
/// Longest accepted `Anthropic-Worker-ID`.
const MAX_WORKER_ID: usize = 256;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/environments/{environment_id}/work", get(list))
        .route("/v1/environments/{environment_id}/work/poll", get(poll))
        .route("/v1/environments/{environment_id}/work/stats", get(stats))
        .route(
            "/v1/environments/{environment_id}/work/{work_id}",
            get(retrieve).post(update),
        )
        .route(
            "/v1/environments/{environment_id}/work/{work_id}/ack",
            post(ack),
        )
        .route(
            "/v1/environments/{environment_id}/work/{work_id}/heartbeat",
            post(heartbeat),
        )
        .route(
            "/v1/environments/{environment_id}/work/{work_id}/stop",
            post(stop),
        )
}

/// The self-hosted environment `env_id` of the workspace.
/// The caller's self-hosted environment `env_id`; 404 when it is not theirs, 400 when it is
/// not self-hosted (only those have a work queue and worker keys).
pub(super) async fn self_hosted(app: &AppState, ws: &str, env_id: &str) -> ApiResult<Environment> {
    Ok(app.engine.self_hosted_environment(ws, env_id).await?)
}

/// The workspace of an environment-key caller for its own environment.
fn environment_key_for(principal: &Principal, env_id: &str, what: &str) -> ApiResult<String> {
    match principal {
        Principal::EnvironmentKey {
            workspace,
            environment_id,
            ..
        } if environment_id == env_id => Ok(workspace.clone()),
        Principal::EnvironmentKey { .. } => Err(ApiError::forbidden(
            "this environment key belongs to another environment",
        )),
        _ => Err(ApiError::forbidden(format!(
            "{what} takes the environment's key (`Authorization: Bearer mast_ek_…`), not an API key or work token"
        ))),
    }
}

/// The workspace of a caller allowed to act on one item: an API key of the workspace (when
/// `api_keys`), the environment's key, or the item's own token.
async fn item_caller(
    app: &AppState,
    principal: &Principal,
    env_id: &str,
    work_id: &str,
    api_keys: bool,
) -> ApiResult<String> {
    match principal {
        Principal::ApiKey { workspace, .. } if api_keys => {
            self_hosted(app, workspace, env_id).await?;
            Ok(workspace.clone())
        }
        Principal::ApiKey { .. } => Err(ApiError::forbidden(
            "heartbeats come from the worker holding the item: use the environment key or the item's token",
        )),
        Principal::EnvironmentKey { .. } => environment_key_for(principal, env_id, "this call"),
        Principal::WorkToken {
            work_id: scoped,
            environment_id,
            state: WorkState::Queued,
            ..
        } if scoped == work_id && environment_id == env_id && api_keys => {
            // Its lease expired and the item went back to the queue: the old holder must not
            // stop what the next worker will pick up.
            Err(ApiError::forbidden(
                "this work token's lease was lost: the item is back in the queue",
            ))
        }
        Principal::WorkToken {
            workspace,
            work_id: scoped,
            environment_id,
            ..
        } if scoped == work_id && environment_id == env_id => Ok(workspace.clone()),
        Principal::WorkToken { .. } => Err(ApiError::forbidden(
            "this work token is scoped to another work item",
        )),
    }
}

/// Poll for work.
///
/// A worker asks for the next queued work item of a self-hosted environment (long-polls up to `block_ms`); the item carries a session token for that session only.
#[utoipa::path(get, path = "/v1/environments/{environment_id}/work/poll", tag = "work", operation_id = "work_poll",
    params(("environment_id" = String, Path), ("block_ms" = Option<i64>, Query), ("reclaim_older_than_ms" = Option<i64>, Query),
        ("Anthropic-Worker-ID" = Option<String>, Header)),
    responses((status = 200, body = Option<Work>, description = "A claimed item with its `secret`, or `null` when none is available"),
        (status = 400, body = super::openapi::ErrorBody), (status = 403, body = super::openapi::ErrorBody)))]
async fn poll(
    State(app): State<AppState>,
    principal: Principal,
    Path(env_id): Path<String>,
    q: QueryParams,
    headers: HeaderMap,
) -> ApiResult<axum::Json<Option<Work>>> {
    let ws = environment_key_for(&principal, &env_id, "polling")?;
    let block = match q.get("block_ms") {
        None => None,
        Some(_) => Some(q.int("block_ms", 1, MAX_BLOCK_MS).map_err(|_| {
            ApiError::invalid(format!(
                "`block_ms` must be an integer from 1 to {MAX_BLOCK_MS}; omit it for a non-blocking poll"
            ))
        })?),
    }
    .flatten();
    let reclaim = q
        .int("reclaim_older_than_ms", 0, 86_400_000)?
        .unwrap_or(DEFAULT_RECLAIM_MS);
    let worker = headers
        .get("anthropic-worker-id")
        .map(|v| {
            v.to_str()
                .ok()
                .filter(|s| !s.is_empty() && s.len() <= MAX_WORKER_ID)
                .map(str::to_string)
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "`Anthropic-Worker-ID` must be 1 to {MAX_WORKER_ID} visible ASCII characters"
                    ))
                })
        })
        .transpose()?;
    self_hosted(&app, &ws, &env_id).await?;

    let wait = Duration::from_millis(block.unwrap_or(0) as u64);
    let claimed = app
        .engine
        .poll_work(&env_id, worker.as_deref(), reclaim, wait, &app.shutdown)
        .await?;
    Ok(axum::Json(match claimed {
        Some(c) => Some(work::view(&c.item, Some(secret_for(&c.token)))?),
        None => None,
    }))
}

/// Acknowledge a work item.
///
/// The worker that polled an item starts on it, under a fresh lease.
#[utoipa::path(post, path = "/v1/environments/{environment_id}/work/{work_id}/ack", tag = "work", operation_id = "work_ack",
    params(("environment_id" = String, Path), ("work_id" = String, Path)),
    responses((status = 200, body = Work), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn ack(
    State(app): State<AppState>,
    principal: Principal,
    Path((env_id, work_id)): Path<(String, String)>,
    _: NoBody,
) -> ApiResult<axum::Json<Work>> {
    environment_key_for(&principal, &env_id, "acknowledging")?;
    let w = app
        .engine
        .ack_work(&env_id, &work_id, app.work_leases)
        .await?;
    Ok(axum::Json(work::view(&w, None)?))
}

/// Renew a work item's lease.
///
/// Keeps the worker's lease on an item alive; the answer says when a stop was requested.
#[utoipa::path(post, path = "/v1/environments/{environment_id}/work/{work_id}/heartbeat", tag = "work", operation_id = "work_heartbeat",
    params(("environment_id" = String, Path), ("work_id" = String, Path), ("desired_ttl_seconds" = Option<i64>, Query),
        ("expected_last_heartbeat" = Option<String>, Query)),
    responses((status = 200, body = WorkHeartbeat), (status = 404, body = super::openapi::ErrorBody),
        (status = 412, body = super::openapi::ErrorBody, description = "`heartbeat_precondition_failed`: the lease is not the caller's")))]
async fn heartbeat(
    State(app): State<AppState>,
    principal: Principal,
    Path((env_id, work_id)): Path<(String, String)>,
    q: QueryParams,
    _: NoBody,
) -> ApiResult<axum::Json<WorkHeartbeat>> {
    item_caller(&app, &principal, &env_id, &work_id, false).await?;
    // Without one the beat is unconditional.
    let expected = q.get("expected_last_heartbeat").map(str::to_string);
    let desired = q.int("desired_ttl_seconds", 1, i64::MAX)?;
    let hb = app
        .engine
        .heartbeat_work(&env_id, &work_id, expected, desired, app.work_leases)
        .await?;
    Ok(axum::Json(hb))
}

/// Stop a work item.
///
/// Stops an item: a held item winds down through `stopping` (or stops at once with `force`). A session still waiting on a worker's tool result is queued again.
#[utoipa::path(post, path = "/v1/environments/{environment_id}/work/{work_id}/stop", tag = "work", operation_id = "work_stop",
    params(("environment_id" = String, Path), ("work_id" = String, Path)), request_body = WorkStop,
    responses((status = 200, body = Work), (status = 404, body = super::openapi::ErrorBody),
        (status = 409, body = super::openapi::ErrorBody, description = "already stopped")))]
async fn stop(
    State(app): State<AppState>,
    principal: Principal,
    Path((env_id, work_id)): Path<(String, String)>,
    Json(body): Json<WorkStop>,
) -> ApiResult<axum::Json<Work>> {
    item_caller(&app, &principal, &env_id, &work_id, true).await?;
    let force = body.force.unwrap_or(false);
    let w = app.engine.stop_work(&env_id, &work_id, force).await?;
    Ok(axum::Json(work::view(&w, None)?))
}

/// List work items.
///
/// Lists a self-hosted environment's work items, newest first.
#[utoipa::path(get, path = "/v1/environments/{environment_id}/work", tag = "work", operation_id = "work_list",
    params(("environment_id" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::WorkPage), (status = 403, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    principal: Principal,
    Path(env_id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Work>>> {
    let ws = environment_key_for(&principal, &env_id, "listing work items")?;
    self_hosted(&app, &ws, &env_id).await?;
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let rows = app.engine.list_work(&env_id, &page.scan()).await?;
    let page = page.finish(rows, |w| w.id.clone());
    let mut views = Vec::with_capacity(page.data.len());
    for w in &page.data {
        views.push(work::view(w, None)?);
    }
    Ok(axum::Json(Page {
        data: views,
        next_page: page.next_page,
        prev_page: None,
    }))
}

/// Retrieve a work item.
///
/// Returns one work item.
#[utoipa::path(get, path = "/v1/environments/{environment_id}/work/{work_id}", tag = "work", operation_id = "work_retrieve",
    params(("environment_id" = String, Path), ("work_id" = String, Path)),
    responses((status = 200, body = Work), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((env_id, work_id)): Path<(String, String)>,
) -> ApiResult<axum::Json<Work>> {
    self_hosted(&app, &ws, &env_id).await?;
    let w = app.engine.work_item(&env_id, &work_id).await?;
    Ok(axum::Json(work::view(&w, None)?))
}

/// Update a work item.
///
/// Changes a work item's metadata.
#[utoipa::path(post, path = "/v1/environments/{environment_id}/work/{work_id}", tag = "work", operation_id = "work_update",
    params(("environment_id" = String, Path), ("work_id" = String, Path)), request_body = WorkUpdate,
    responses((status = 200, body = Work), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((env_id, work_id)): Path<(String, String)>,
    Json(body): Json<WorkUpdate>,
) -> ApiResult<axum::Json<Work>> {
    self_hosted(&app, &ws, &env_id).await?;
    let w = app
        .engine
        .update_work_metadata(&env_id, &work_id, body.metadata)
        .await?;
    Ok(axum::Json(work::view(&w, None)?))
}

/// Work queue statistics.
///
/// Queue depth, items polled but not acknowledged, the oldest queued item and how many workers polled recently.
#[utoipa::path(get, path = "/v1/environments/{environment_id}/work/stats", tag = "work", operation_id = "work_stats",
    params(("environment_id" = String, Path)),
    responses((status = 200, body = WorkQueueStats), (status = 404, body = super::openapi::ErrorBody)))]
async fn stats(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(env_id): Path<String>,
) -> ApiResult<axum::Json<WorkQueueStats>> {
    self_hosted(&app, &ws, &env_id).await?;
    let s = app.engine.work_stats(&env_id).await?;
    Ok(axum::Json(WorkQueueStats {
        tag: WorkQueueStatsTag::Tag,
        depth: s.depth,
        pending: s.pending,
        oldest_queued_at: time::format_opt(s.oldest_queued_at),
        workers_polling: Some(s.workers_polling),
    }))
}
