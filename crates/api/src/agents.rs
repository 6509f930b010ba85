//! `/v1/agents`: create, retrieve, update (new immutable version), list, archive, versions.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde_json::Value;

use super::AppState;
use super::auth::Workspace;
use super::error::{ApiError, ApiResult};
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::agent::{Agent, AgentCreate, AgentSpec, AgentUpdate, same_content};
use mast_domain::ids::new_id;
use mast_domain::multiagent::{self, RosterRef, SelfAgent};
use mast_domain::query::{AgentFilter, Direction};
use mast_domain::time;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", post(create).get(list))
        .route("/v1/agents/{agent_id}", get(retrieve).post(update))
        .route("/v1/agents/{agent_id}/archive", post(archive))
        .route("/v1/agents/{agent_id}/versions", get(versions))
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("agent `{id}` not found"))
}

use mast_domain::agent::archived;

/// Resolves a multiagent request against the store: roster agents are looked up in the
/// workspace, pinned to versions and checked (exist, not archived, no roster of their own).
async fn resolve_multiagent(
    app: &AppState,
    ws: &str,
    req: Option<&Value>,
    me: SelfAgent<'_>,
) -> ApiResult<Option<Value>> {
    let Some(req) = req else { return Ok(None) };
    let mut found: HashMap<RosterRef, Agent> = HashMap::new();
    for r in multiagent::roster_refs(req)? {
        if r.id == me.id {
            continue;
        }
        if let Some(a) = app.store.get_agent(ws, &r.id, r.version).await? {
            found.insert(r, a);
        }
    }
    Ok(Some(multiagent::resolve(req, &me, &|r| {
        found.get(r).cloned()
    })?))
}

/// Refuses models no configured provider serves, at save time rather than at the first turn.
async fn check_model(app: &AppState, spec: &AgentSpec) -> ApiResult<()> {
    app.models.refresh().await;
    app.models
        .check_routable(&spec.model.id)
        .map_err(ApiError::invalid)
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
    check_model(&app, &spec).await?;
    super::skills::check_agent_skills(&app, &ws, &spec.skills).await?;
    let id = new_id("agent");
    let me = SelfAgent {
        id: &id,
        version: 1,
        inference_geo: spec.model.inference_geo.as_deref(),
    };
    let multiagent = resolve_multiagent(&app, &ws, spec.multiagent_request.as_ref(), me).await?;
    let now = time::format(time::now());
    let agent = spec.into_agent(&id, 1, multiagent, now.clone(), now);
    app.store.insert_agent(&ws, &agent).await?;
    Ok(axum::Json(agent))
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
    match app.store.get_agent(&ws, &id, version).await? {
        Some(a) => Ok(axum::Json(a)),
        None if version.is_some() && app.store.get_agent(&ws, &id, None).await?.is_some() => {
            Err(ApiError::not_found(format!(
                "agent `{id}` has no version {}",
                version.unwrap_or_default()
            )))
        }
        None => Err(not_found(&id)),
    }
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
    let current = app
        .store
        .get_agent(&ws, &id, None)
        .await?
        .ok_or_else(|| not_found(&id))?;
    if current.archived_at.is_some() {
        return Err(archived(&id, "cannot be updated").into());
    }
    if let Some(v) = body.version
        && v != current.version
    {
        return Err(ApiError::conflict(format!(
            "agent `{id}` is at version {}, not {v}; retrieve it and retry with the current version",
            current.version
        )));
    }
    let spec = body.apply(&current)?;
    check_model(&app, &spec).await?;
    super::skills::check_agent_skills(&app, &ws, &spec.skills).await?;
    let next_version = current.version + 1;
    let me = SelfAgent {
        id: &id,
        version: next_version,
        inference_geo: spec.model.inference_geo.as_deref(),
    };
    let multiagent = resolve_multiagent(&app, &ws, spec.multiagent_request.as_ref(), me).await?;
    let next = spec.into_agent(
        &id,
        next_version,
        multiagent,
        current.created_at.clone(),
        time::format(time::now()),
    );
    // A `self` roster entry pins the version being written; compare with it mapped back.
    let unchanged = {
        let mut probe = next.clone();
        probe.multiagent = probe
            .multiagent
            .map(|m| repin_self(m, &id, next_version, current.version));
        same_content(&probe, &current)
    };
    if unchanged {
        return Ok(axum::Json(current));
    }
    app.store
        .append_agent_version(&ws, &next, current.version)
        .await?;
    Ok(axum::Json(next))
}

/// Rewrites `self` pins from one version to another (for the no-op update check).
fn repin_self(mut m: Value, id: &str, from: i64, to: i64) -> Value {
    fn visit(v: &mut Value, id: &str, from: i64, to: i64) {
        match v {
            Value::Object(o) => {
                if o.get("id").and_then(Value::as_str) == Some(id)
                    && o.get("version").and_then(Value::as_i64) == Some(from)
                {
                    o.insert("version".into(), to.into());
                }
                o.values_mut().for_each(|c| visit(c, id, from, to));
            }
            Value::Array(a) => a.iter_mut().for_each(|c| visit(c, id, from, to)),
            _ => {}
        }
    }
    visit(&mut m, id, from, to);
    m
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
    let rows = app.store.list_agents(&ws, &filter, &page.scan()).await?;
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
    app.store
        .archive_agent(&ws, &id, time::now())
        .await?
        .map(axum::Json)
        .ok_or_else(|| not_found(&id))
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
        .store
        .list_agent_versions(&ws, &id, &page.scan())
        .await?;
    if rows.is_empty() && app.store.get_agent(&ws, &id, None).await?.is_none() {
        return Err(not_found(&id));
    }
    Ok(axum::Json(page.finish(rows, |a| a.version)))
}
