//! `/v1/deployments` and `/v1/deployment_runs`: the 10 methods of `client.beta.deployments`
//! and `client.beta.deployment_runs`. Every operation is the engine's
//! ([`mast_engine::deployments`]); this file reads HTTP and writes the answers.

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
use mast_domain::deployment::{Deployment, DeploymentCreate, DeploymentRun, DeploymentUpdate};
use mast_domain::query::{DeploymentFilter, DeploymentRunFilter, Direction};

/// A page of deployments.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentPage {
    pub data: Vec<Deployment>,
    pub next_page: Option<String>,
}

/// A page of deployment runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeploymentRunPage {
    pub data: Vec<DeploymentRun>,
    pub next_page: Option<String>,
}

/// Routes of these resources.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/deployments", post(create).get(list))
        .route(
            "/v1/deployments/{deployment_id}",
            get(retrieve).post(update),
        )
        .route("/v1/deployments/{deployment_id}/archive", post(archive))
        .route("/v1/deployments/{deployment_id}/pause", post(pause))
        .route("/v1/deployments/{deployment_id}/unpause", post(unpause))
        .route("/v1/deployments/{deployment_id}/run", post(run))
        .route("/v1/deployment_runs", get(runs_list))
        .route(
            "/v1/deployment_runs/{deployment_run_id}",
            get(runs_retrieve),
        )
}

/// Create a deployment.
///
/// Saves an agent (pinned to a version), environment, initial events, resources, vaults, budget and an optional cron schedule; checked as a session creation would be.
#[utoipa::path(post, path = "/v1/deployments", tag = "deployments", operation_id = "deployments_create", request_body = DeploymentCreate,
    responses((status = 200, body = Deployment), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<DeploymentCreate>,
) -> ApiResult<axum::Json<Deployment>> {
    Ok(axum::Json(app.engine.create_deployment(&ws, body).await?))
}

/// Retrieve a deployment.
///
/// Returns one deployment, with its schedule's last and upcoming runs.
#[utoipa::path(get, path = "/v1/deployments/{deployment_id}", tag = "deployments", operation_id = "deployments_retrieve",
    params(("deployment_id" = String, Path)),
    responses((status = 200, body = Deployment), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Deployment>> {
    Ok(axum::Json(app.engine.deployment(&ws, &id).await?))
}

/// Update a deployment.
///
/// Changes any field (absent keeps, `null` clears where allowed, `metadata` is a patch); archived deployments cannot be updated.
#[utoipa::path(post, path = "/v1/deployments/{deployment_id}", tag = "deployments", operation_id = "deployments_update", request_body = DeploymentUpdate,
    params(("deployment_id" = String, Path)),
    responses((status = 200, body = Deployment), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<DeploymentUpdate>,
) -> ApiResult<axum::Json<Deployment>> {
    Ok(axum::Json(
        app.engine.update_deployment(&ws, &id, body).await?,
    ))
}

/// List deployments.
///
/// Lists the workspace's deployments, newest first; `status` (active or paused) cannot be combined with `include_archived`.
#[utoipa::path(get, path = "/v1/deployments", tag = "deployments", operation_id = "deployments_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("agent_id" = Option<String>, Query),
        ("include_archived" = Option<bool>, Query), ("status" = Option<String>, Query),
        ("created_at[gte]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query)),
    responses((status = 200, body = DeploymentPage), (status = 400, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Deployment>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let include_archived = q.bool("include_archived")?;
    let paused = match q.get("status") {
        None => None,
        Some("active") => Some(false),
        Some("paused") => Some(true),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "`status` must be `active` or `paused`, got `{other}`"
            )));
        }
    };
    if paused.is_some() && include_archived.is_some() {
        return Err(ApiError::invalid(
            "`status` cannot be combined with `include_archived`",
        ));
    }
    let filter = DeploymentFilter {
        agent_id: q.get("agent_id").map(str::to_string),
        include_archived: include_archived.unwrap_or(false),
        paused,
        created_gte: q.time("created_at[gte]")?,
        created_lte: q.time("created_at[lte]")?,
    };
    let rows = app
        .engine
        .list_deployments(&ws, &filter, &page.scan())
        .await?;
    Ok(axum::Json(page.finish(rows, |d| d.id.clone())))
}

/// Archive a deployment.
///
/// Archives a deployment: it never fires again and takes no changes; its runs stay listable.
#[utoipa::path(post, path = "/v1/deployments/{deployment_id}/archive", tag = "deployments", operation_id = "deployments_archive",
    params(("deployment_id" = String, Path)),
    responses((status = 200, body = Deployment), (status = 404, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Deployment>> {
    Ok(axum::Json(app.engine.archive_deployment(&ws, &id).await?))
}

/// Pause a deployment.
///
/// Stops scheduled firings (`paused_reason: {"type":"manual"}`) until it is unpaused.
#[utoipa::path(post, path = "/v1/deployments/{deployment_id}/pause", tag = "deployments", operation_id = "deployments_pause",
    params(("deployment_id" = String, Path)),
    responses((status = 200, body = Deployment), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn pause(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Deployment>> {
    Ok(axum::Json(app.engine.pause_deployment(&ws, &id).await?))
}

/// Unpause a deployment.
///
/// Resumes scheduled firings from the schedule's first slot after now (slots missed while paused are not fired).
#[utoipa::path(post, path = "/v1/deployments/{deployment_id}/unpause", tag = "deployments", operation_id = "deployments_unpause",
    params(("deployment_id" = String, Path)),
    responses((status = 200, body = Deployment), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn unpause(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Deployment>> {
    Ok(axum::Json(app.engine.unpause_deployment(&ws, &id).await?))
}

/// Run a deployment now.
///
/// Starts one session from the deployment (also while paused) and returns its run; a session that could not start is a run with an `error`.
#[utoipa::path(post, path = "/v1/deployments/{deployment_id}/run", tag = "deployments", operation_id = "deployments_run",
    params(("deployment_id" = String, Path)),
    responses((status = 200, body = DeploymentRun), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn run(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<DeploymentRun>> {
    Ok(axum::Json(app.engine.run_deployment(&ws, &id).await?))
}

/// Retrieve a deployment run.
///
/// Returns one run: its trigger, and the session it started or the error that kept it from starting.
#[utoipa::path(get, path = "/v1/deployment_runs/{deployment_run_id}", tag = "deployments", operation_id = "deployment_runs_retrieve",
    params(("deployment_run_id" = String, Path)),
    responses((status = 200, body = DeploymentRun), (status = 404, body = super::openapi::ErrorBody)))]
async fn runs_retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<DeploymentRun>> {
    Ok(axum::Json(app.engine.deployment_run(&ws, &id).await?))
}

/// List deployment runs.
///
/// Lists the workspace's runs, newest first, of one deployment or all; an unknown `deployment_id` lists nothing.
#[utoipa::path(get, path = "/v1/deployment_runs", tag = "deployments", operation_id = "deployment_runs_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("deployment_id" = Option<String>, Query),
        ("has_error" = Option<bool>, Query), ("trigger_type" = Option<String>, Query),
        ("created_at[gt]" = Option<String>, Query), ("created_at[gte]" = Option<String>, Query),
        ("created_at[lt]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query)),
    responses((status = 200, body = DeploymentRunPage), (status = 400, body = super::openapi::ErrorBody)))]
async fn runs_list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<DeploymentRun>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 1000, false)?;
    let trigger_type = match q.get("trigger_type") {
        None => None,
        Some(t @ ("schedule" | "manual")) => Some(t.to_string()),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "`trigger_type` must be `schedule` or `manual`, got `{other}`"
            )));
        }
    };
    let filter = DeploymentRunFilter {
        deployment_id: q.get("deployment_id").map(str::to_string),
        has_error: q.bool("has_error")?,
        trigger_type,
        created_gt: q.time("created_at[gt]")?,
        created_gte: q.time("created_at[gte]")?,
        created_lt: q.time("created_at[lt]")?,
        created_lte: q.time("created_at[lte]")?,
    };
    let rows = app
        .engine
        .list_deployment_runs(&ws, &filter, &page.scan())
        .await?;
    Ok(axum::Json(page.finish(rows, |r| r.id.clone())))
}
