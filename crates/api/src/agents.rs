//! `/v1/agents`: create, retrieve, update (new immutable version), list, archive, versions.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};

use super::AppState;
use super::auth::Workspace;
use super::error::ApiResult;
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::agent::{Agent, AgentCreate, AgentUpdate};
use mast_domain::query::{AgentFilter, Direction};

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", post(create).get(list))
        .route("/v1/agents/{agent_id}", get(retrieve).post(update))
        .route("/v1/agents/{agent_id}/archive", post(archive))
        .route("/v1/agents/{agent_id}/versions", get(versions))
}

/// Create an agent.
///
/// Creates an agent at version 1: model, system prompt, tools, MCP servers, skills and an optional multiagent roster. The model must be one a configured provider serves.
#[utoipa::path(post, path = "/v1/agents", tag = "agents", operation_id = "agents_create", request_body = AgentCreate,
    responses((status = 200, body = Agent), (status = 400, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<AgentCreate>,
) -> ApiResult<axum::Json<Agent>> {
    let spec = body.into_spec()?;
    Ok(axum::Json(app.engine.create_agent(&ws, spec).await?))
}

/// Retrieve an agent.
///
/// Returns the agent's latest version, or the version named by `version`.
#[utoipa::path(get, path = "/v1/agents/{agent_id}", tag = "agents", operation_id = "agents_retrieve",
    params(("agent_id" = String, Path), ("version" = Option<i64>, Query)),
    responses((status = 200, body = Agent), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Agent>> {
    let version = q.int("version", 1, i64::MAX)?;
    Ok(axum::Json(app.engine.agent(&ws, &id, version).await?))
}

/// Update an agent.
///
/// Saves a new immutable version when anything changed (send the current `version` to guard against concurrent edits); an update that changes nothing returns the current version. Sessions keep the version they were created with.
#[utoipa::path(post, path = "/v1/agents/{agent_id}", tag = "agents", operation_id = "agents_update", request_body = AgentUpdate,
    params(("agent_id" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<AgentUpdate>,
) -> ApiResult<axum::Json<Agent>> {
    Ok(axum::Json(app.engine.update_agent(&ws, &id, body).await?))
}

/// List agents.
///
/// Lists the workspace's agents, newest first, with cursor pagination; archived agents only with `include_archived=true`.
#[utoipa::path(get, path = "/v1/agents", tag = "agents", operation_id = "agents_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("include_archived" = Option<bool>, Query),
        ("created_at[gte]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::AgentPage)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Agent>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, false)?;
    let filter = AgentFilter {
        include_archived: q.bool("include_archived")?.unwrap_or(false),
        created_gte: q.time("created_at[gte]")?,
        created_lte: q.time("created_at[lte]")?,
    };
    let rows = app.engine.list_agents(&ws, &filter, &page.scan()).await?;
    Ok(axum::Json(page.finish(rows, |a| a.id.clone())))
}

/// Archive an agent.
///
/// Archives an agent: it can no longer start sessions or be updated. Agents are never deleted, so sessions keep a readable definition.
#[utoipa::path(post, path = "/v1/agents/{agent_id}/archive", tag = "agents", operation_id = "agents_archive", params(("agent_id" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Agent>> {
    Ok(axum::Json(app.engine.archive_agent(&ws, &id).await?))
}

/// List an agent's versions.
///
/// Lists every saved version of an agent, newest first.
#[utoipa::path(get, path = "/v1/agents/{agent_id}/versions", tag = "agents", operation_id = "agents_versions",
    params(("agent_id" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::AgentPage), (status = 404, body = super::openapi::ErrorBody)))]
async fn versions(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Agent>>> {
    let page = PageRequest::<i64>::parse(&q, Direction::Descending, 20, 100, false)?;
    let rows = app
        .engine
        .list_agent_versions(&ws, &id, &page.scan())
        .await?;
    Ok(axum::Json(page.finish(rows, |a| a.version)))
}
