//! `/v1/sessions`: create (with optional `initial_events`), retrieve, update, list
//! (bidirectional), archive, delete.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Principal, Workspace, session_workspace};
use super::error::{ApiError, ApiResult};
use super::extract::{Json, NoBody, QueryParams};
use super::pagination::{BiPage, PageRequest};
use crate::domain::environment::EnvironmentConfig;
use crate::domain::events::{ClientEvent, kind};
use crate::domain::ids::new_id;
use crate::domain::invalid::Invalid;
use crate::domain::metadata;
use crate::domain::multiagent;
use crate::domain::session::{
    Session, SessionBody, SessionCreate, SessionStats, SessionStatus, SessionTag, SessionUpdate,
    SessionUsage, check_resources, check_title, check_vault_ids, parse_agent_selection,
    parse_agent_update,
};
use crate::domain::time::{self, Micros};
use crate::engine::intake::{self, server_event};
use crate::engine::state::{EngineState, grant_lease, set_status, status_of, work_item_for};
use crate::store::{
    Deleted, Direction, NewEvent, SessionFilter, SessionRecord, StoreError, ThreadRecord,
    TxnOutput, Writer,
};
use crate::type_tag;

type_tag!(
    /// `"type": "session_deleted"`.
    SessionDeletedTag = "session_deleted"
);

/// Response of `DELETE /v1/sessions/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: SessionDeletedTag,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions", post(create).get(list))
        .route(
            "/v1/sessions/{session_id}",
            get(retrieve).post(update).delete(delete),
        )
        .route("/v1/sessions/{session_id}/archive", post(archive))
}

/// 404 for a session id.
pub fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("session `{id}` not found"))
}

fn seconds(micros: Micros) -> f64 {
    (micros.max(0) as f64 / 1_000_000.0 * 1000.0).round() / 1000.0
}

/// The wire object of a session row.
pub fn view(rec: &SessionRecord) -> ApiResult<Session> {
    let body: SessionBody = serde_json::from_str(&rec.body).map_err(ApiError::internal)?;
    let now = time::now();
    let active = rec.active_micros + rec.running_since.map_or(0, |s| (now - s).max(0));
    let mut usage: SessionUsage = serde_json::from_str(&rec.usage).map_err(ApiError::internal)?;
    usage.active_seconds = seconds(active);
    Ok(Session {
        tag: SessionTag::Tag,
        id: rec.id.clone(),
        status: status_of(rec),
        agent: body.agent,
        environment_id: rec.environment_id.clone(),
        title: body.title,
        metadata: body.metadata,
        resources: body.resources,
        vault_ids: body.vault_ids,
        budget: body.budget,
        outcome_evaluations: body.outcome_evaluations,
        stats: SessionStats {
            active_seconds: seconds(active),
            duration_seconds: seconds(rec.terminated_at.unwrap_or(now) - rec.created_at),
            waiting_for_worker: None,
        },
        usage,
        deployment_id: body.deployment_id,
        created_at: time::format(rec.created_at),
        updated_at: time::format(rec.updated_at),
        archived_at: time::format_opt(rec.archived_at),
    })
}

/// Create a session.
///
/// Starts a session of an agent (pinned to a version) in an environment. The session is idle until it receives a message.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", operation_id = "sessions_create", request_body = SessionCreate,
    responses((status = 200, body = Session), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Json(body): Json<SessionCreate>,
) -> ApiResult<axum::Json<Session>> {
    let sel = parse_agent_selection(&body.agent)?;
    check_title(&body.title)?;
    let meta = body.metadata.clone().unwrap_or_default();
    metadata::validate(&meta)?;
    if body.budget.as_ref().is_some_and(|b| !b.is_null()) {
        return Err(ApiError::invalid_code(
            "model_not_budgetable",
            "budgets are not supported: this server keeps no model price list",
        ));
    }
    check_vault_ids(body.vault_ids.as_ref())?;
    check_resources(body.resources.as_ref())?;
    let initial: Vec<ClientEvent> = match &body.initial_events {
        None => vec![],
        Some(list) if list.len() > 50 => {
            return Err(ApiError::invalid(
                "`initial_events` has more than 50 events",
            ));
        }
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let parsed = ClientEvent::parse(&format!("initial_events[{i}]"), e)?;
                match parsed {
                    ClientEvent::UserMessage { .. } => Ok(parsed),
                    _ => Err(Invalid::new(format!(
                        "`initial_events[{i}]` must be a `user.message`"
                    ))),
                }
            })
            .collect::<Result<_, Invalid>>()?,
    };
    let agent = app
        .store
        .get_agent(&ws, &sel.id, sel.version)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "agent `{}`{} not found",
                sel.id,
                sel.version
                    .map(|v| format!(" version {v}"))
                    .unwrap_or_default()
            ))
        })?;
    if agent.archived_at.is_some() {
        return Err(super::agents::archived(&agent.id, "cannot start new sessions").into());
    }
    let env = app
        .store
        .get_environment(&ws, &body.environment_id)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!("environment `{}` not found", body.environment_id))
        })?;
    if env.archived_at.is_some() {
        return Err(ApiError::invalid_code(
            "environment_archived",
            format!("environment `{}` is archived", env.id),
        ));
    }
    let mut snapshot = agent.thread_snapshot();
    if let Some(m) = &agent.multiagent {
        let mut snapshots = std::collections::HashMap::new();
        for (id, v) in multiagent::pinned_refs(m) {
            if let Some(a) = app.store.get_agent(&ws, &id, Some(v)).await? {
                snapshots.insert((id, v), a.thread_snapshot());
            }
        }
        snapshot.multiagent = Some(multiagent::session_form(m, &|id, v| {
            snapshots.get(&(id.to_string(), v)).cloned()
        }));
    }
    if let Some(o) = sel.overrides {
        snapshot = o.apply(snapshot)?;
        app.models.refresh().await;
        app.models
            .check_routable(&snapshot.model.id)
            .map_err(ApiError::invalid)?;
    }

    let now = time::now();
    let id = new_id("sesn");
    let thread_id = new_id("sthr");
    let session_body = SessionBody {
        title: body.title,
        metadata: meta,
        agent: snapshot.clone(),
        resources: vec![],
        vault_ids: vec![],
        budget: None,
        outcome_evaluations: vec![],
        deployment_id: None,
        environment: env.config.clone(),
        primary_thread_id: thread_id.clone(),
    };
    let mut rec = SessionRecord {
        id: id.clone(),
        workspace_id: ws.clone(),
        agent_id: agent.id.clone(),
        agent_version: agent.version,
        environment_id: env.id.clone(),
        status: SessionStatus::Idle.as_str().into(),
        body: serde_json::to_string(&session_body).map_err(ApiError::internal)?,
        usage: serde_json::to_string(&SessionUsage::default()).map_err(ApiError::internal)?,
        active_micros: 0,
        running_since: None,
        last_seq: 0,
        engine: serde_json::to_string(&EngineState::default()).map_err(ApiError::internal)?,
        created_at: now,
        updated_at: now,
        archived_at: None,
        terminated_at: None,
        lease_owner: None,
        lease_expires_at: None,
    };
    let thread = ThreadRecord {
        id: thread_id.clone(),
        session_id: id.clone(),
        parent_thread_id: None,
        spawning_event_id: None,
        status: SessionStatus::Idle.as_str().into(),
        body: serde_json::to_string(&json!({ "agent": snapshot, "agent_name": agent.name }))
            .map_err(ApiError::internal)?,
        created_at: now,
        updated_at: now,
        archived_at: None,
    };
    let mut events: Vec<NewEvent> = initial
        .iter()
        .map(|e| NewEvent {
            id: new_id("sevt"),
            thread_id: Some(thread_id.clone()),
            kind: e.kind().into(),
            body: e.body(None),
            internal: None,
            answers: None,
            processed_at: Some(now),
        })
        .collect();
    if !events.is_empty() {
        events.push(server_event(
            kind::STATUS_RUNNING,
            json!({}),
            &thread_id,
            now,
        ));
        set_status(&mut rec, SessionStatus::Running, now);
        grant_lease(&mut rec, app.engine.lease_grant().as_ref(), now);
    }
    // A self-hosted session is handed to the environment's workers from the start.
    let work =
        matches!(env.config, EnvironmentConfig::SelfHosted).then(|| work_item_for(&rec, now));
    let appended = app
        .store
        .create_session(&rec, &thread, &events, work.as_ref())
        .await?;
    if work.is_some() {
        app.hub.work_queued(&env.id);
    }
    rec.last_seq = appended.len() as i64;
    if !appended.is_empty() {
        app.engine.wake(&id);
    }
    Ok(axum::Json(view(&rec)?))
}

/// Retrieve a session.
///
/// Returns a session with its status, usage and stats.
#[utoipa::path(get, path = "/v1/sessions/{session_id}", tag = "sessions", operation_id = "sessions_retrieve", params(("session_id" = String, Path)),
    responses((status = 200, body = Session), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Session>> {
    let ws = session_workspace(app.store.as_ref(), &principal, &id).await?;
    let rec = app
        .store
        .get_session(&ws, &id)
        .await?
        .ok_or_else(|| not_found(&id))?;
    let mut session = view(&rec)?;
    session.stats.waiting_for_worker = waiting_for_worker(&app, &rec).await?;
    Ok(axum::Json(session))
}

/// Whether a self-hosted session waits on a worker that nobody runs (see
/// [`crate::domain::session::SessionStats::waiting_for_worker`]).
async fn waiting_for_worker(
    app: &AppState,
    rec: &SessionRecord,
) -> ApiResult<Option<crate::domain::session::WaitingForWorker>> {
    // Most sessions wait on nobody: the engine state says so before the body is read.
    if rec.archived_at.is_some() || !EngineState::of(rec).is_ok_and(|st| st.awaits_worker()) {
        return Ok(None);
    }
    let body: SessionBody = serde_json::from_str(&rec.body).map_err(ApiError::internal)?;
    if !matches!(body.environment, EnvironmentConfig::SelfHosted) {
        return Ok(None);
    }
    let stats = app
        .store
        .work_stats(&rec.environment_id, time::now())
        .await?;
    Ok((stats.workers_polling == 0).then(|| crate::domain::session::WaitingForWorker {
        workers_polling: 0,
        message: format!(
            "the session waits for a worker to run its tool calls, and no worker has polled environment `{}` in the \
             last 30 seconds; start one with a worker key of that environment (see the README's self-hosted section)",
            rec.environment_id
        ),
    }))
}

/// Runs a client-side decision on a session of the workspace and publishes what it appended.
pub async fn transact_session(
    app: &AppState,
    ws: &str,
    id: &str,
    f: impl FnOnce(&mut SessionRecord) -> Result<TxnOutput, StoreError> + Send + 'static,
) -> ApiResult<(SessionRecord, Vec<crate::store::EventRecord>)> {
    let ws = ws.to_string();
    let sid = id.to_string();
    let txn = Box::new(move |rec: &mut SessionRecord| {
        if rec.workspace_id != ws {
            return Err(StoreError::NotFound);
        }
        f(rec)
    });
    match app.store.transact(id, &Writer::Client, txn).await {
        Ok(Some((rec, events))) => {
            app.hub.publish(id, &events);
            Ok((rec, events))
        }
        Ok(None) | Err(StoreError::NotFound) => Err(not_found(&sid)),
        Err(e) => Err(e.into()),
    }
}

/// Update a session.
///
/// Changes a session's title, metadata or agent settings that may change mid-session.
#[utoipa::path(post, path = "/v1/sessions/{session_id}", tag = "sessions", operation_id = "sessions_update", request_body = SessionUpdate,
    params(("session_id" = String, Path)),
    responses((status = 200, body = Session), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn update(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    Json(body): Json<SessionUpdate>,
) -> ApiResult<axum::Json<Session>> {
    check_vault_ids(body.vault_ids.as_ref())?;
    // Sessions here never have a budget, so removing one (`null`) changes nothing.
    if body.budget.value().is_some_and(|b| !b.is_null()) {
        return Err(ApiError::invalid_code(
            "budget_create_only",
            "budgets can only be set at creation, and this server does not support them",
        ));
    }
    let agent_update = parse_agent_update(body.agent.as_ref())?;
    if let crate::domain::patch::Patch::Value(t) = &body.title {
        check_title(&Some(t.clone()))?;
    }
    if agent_update.is_some() {
        // The agent's model is checked against the provider's current list.
        app.models.refresh().await;
    }
    let models = app.models.clone();
    let (rec, _) = transact_session(&app, &ws, &id, move |rec| {
        if rec.archived_at.is_some() {
            return Err(StoreError::Invalid(intake::archived(
                &rec.id,
                "cannot be updated",
            )));
        }
        let mut sb: SessionBody = serde_json::from_str(&rec.body)?;
        let mut changed = json!({});
        match body.title {
            crate::domain::patch::Patch::Absent => {}
            crate::domain::patch::Patch::Null if sb.title.is_some() => {
                sb.title = None;
                changed["title"] = Value::Null;
            }
            crate::domain::patch::Patch::Value(t) if sb.title.as_ref() != Some(&t) => {
                changed["title"] = json!(t);
                sb.title = Some(t);
            }
            _ => {}
        }
        if let Some(p) = &body.metadata {
            let next = metadata::apply_patch(&sb.metadata, p, false)?;
            if next != sb.metadata {
                sb.metadata = next;
                changed["metadata"] = json!(sb.metadata);
            }
        }
        if let Some(a) = agent_update {
            if status_of(rec).is_active() {
                return Err(StoreError::Conflict(format!(
                    "session `{}` is running; its agent's tools can only change while it is idle",
                    rec.id
                )));
            }
            let next = a.apply(sb.agent.clone())?;
            models
                .check_routable(&next.model.id)
                .map_err(Invalid::new)?;
            if next != sb.agent {
                sb.agent = next;
                changed["agent"] = serde_json::to_value(&sb.agent)?;
            }
        }
        if changed.as_object().is_none_or(|o| o.is_empty()) {
            return Ok(TxnOutput::default());
        }
        let now = time::now();
        rec.body = serde_json::to_string(&sb)?;
        rec.updated_at = now;
        Ok(TxnOutput {
            events: vec![server_event(
                kind::SESSION_UPDATED,
                changed,
                &sb.primary_thread_id,
                now,
            )],
            ..Default::default()
        })
    })
    .await?;
    Ok(axum::Json(view(&rec)?))
}

/// List sessions.
///
/// Lists the workspace's sessions with bidirectional cursor pagination and filters (agent, status, creation time, archived).
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", operation_id = "sessions_list",
    params(("limit" = Option<i64>, Query), ("page" = Option<String>, Query), ("order" = Option<String>, Query),
        ("agent_id" = Option<String>, Query), ("agent_version" = Option<i64>, Query), ("include_archived" = Option<bool>, Query),
        ("statuses[]" = Option<Vec<String>>, Query), ("created_at[gt]" = Option<String>, Query), ("created_at[gte]" = Option<String>, Query),
        ("created_at[lt]" = Option<String>, Query), ("created_at[lte]" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::SessionPage), (status = 400, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<BiPage<Session>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 100, true)?;
    let statuses = q.all("statuses");
    if let Some(bad) = statuses.iter().find(|s| SessionStatus::parse(s).is_none()) {
        return Err(ApiError::invalid(format!(
            "`statuses[]` value `{bad}` is not one of idle, running, rescheduling, terminated"
        )));
    }
    let agent_id = q.get("agent_id").map(str::to_string);
    let agent_version = q.int("agent_version", 1, i64::MAX)?;
    if agent_version.is_some() && agent_id.is_none() {
        return Err(ApiError::invalid(
            "`agent_version` can only be used together with `agent_id`",
        ));
    }
    if q.get("deployment_id").is_some() || q.get("memory_store_id").is_some() {
        // Nothing here belongs to a deployment or memory store.
        return Ok(axum::Json(BiPage {
            data: vec![],
            next_page: None,
            prev_page: None,
        }));
    }
    let filter = SessionFilter {
        agent_id,
        agent_version,
        include_archived: q.bool("include_archived")?.unwrap_or(false),
        statuses,
        created_gt: q.time("created_at[gt]")?,
        created_gte: q.time("created_at[gte]")?,
        created_lt: q.time("created_at[lt]")?,
        created_lte: q.time("created_at[lte]")?,
    };
    let rows = app.store.list_sessions(&ws, &filter, &page.scan()).await?;
    let page = page.finish(rows, |r| r.id.clone());
    let data = page.data.iter().map(view).collect::<ApiResult<Vec<_>>>()?;
    Ok(axum::Json(BiPage {
        data,
        next_page: page.next_page,
        prev_page: page.prev_page,
    }))
}

/// Archive a session.
///
/// Archives a session: its loop stops, it accepts no new events, and its transcript stays readable.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/archive", tag = "sessions", operation_id = "sessions_archive", params(("session_id" = String, Path)),
    responses((status = 200, body = Session), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    _: NoBody,
) -> ApiResult<axum::Json<Session>> {
    let (rec, _) = transact_session(&app, &ws, &id, |rec| {
        if rec.archived_at.is_some() {
            return Ok(TxnOutput::default());
        }
        if status_of(rec).is_active() {
            return Err(StoreError::Conflict(format!(
                "session `{}` is running; interrupt it before archiving",
                rec.id
            )));
        }
        let now = time::now();
        rec.archived_at = Some(now);
        rec.updated_at = now;
        Ok(TxnOutput::default())
    })
    .await?;
    // Its worker hears `stopping` on its next heartbeat; queued items never reach one.
    app.store
        .stop_session_work(&rec.id, time::now(), true)
        .await?;
    Ok(axum::Json(view(&rec)?))
}

/// Delete a session.
///
/// Deletes a session with its events, threads and workspace files.
#[utoipa::path(delete, path = "/v1/sessions/{session_id}", tag = "sessions", operation_id = "sessions_delete", params(("session_id" = String, Path)),
    responses((status = 200, body = SessionDeleted), (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<SessionDeleted>> {
    match app.store.delete_session(&ws, &id).await? {
        Deleted::Yes => {
            app.hub.deleted(&id);
            app.store.stop_session_work(&id, time::now(), false).await?;
            app.toolbox.remove_session(&id).await;
            Ok(axum::Json(SessionDeleted {
                id,
                tag: SessionDeletedTag::Tag,
            }))
        }
        Deleted::Missing => Err(not_found(&id)),
        Deleted::Busy => Err(ApiError::conflict(format!(
            "session `{id}` is running; interrupt it before deleting"
        ))),
    }
}

/// `user.*` events answering blocking events get a precise message when the id is unknown
/// versus already answered (the transaction itself is the authority).
pub async fn explain_answer_error(
    app: &AppState,
    session_id: &str,
    batch: &[ClientEvent],
) -> ApiResult<()> {
    for (i, e) in batch.iter().enumerate() {
        let (field, target, want) = match e {
            ClientEvent::CustomToolResult {
                custom_tool_use_id, ..
            } => (
                "custom_tool_use_id",
                custom_tool_use_id,
                kind::AGENT_CUSTOM_TOOL_USE,
            ),
            ClientEvent::ToolResult { tool_use_id, .. } => {
                ("tool_use_id", tool_use_id, kind::AGENT_TOOL_USE)
            }
            ClientEvent::ToolConfirmation { tool_use_id, .. } => {
                ("tool_use_id", tool_use_id, kind::AGENT_TOOL_USE)
            }
            _ => continue,
        };
        match app.store.get_event(session_id, target).await? {
            None => {
                return Err(ApiError::invalid(format!(
                    "`events[{i}].{field}`: no event `{target}` in this session"
                )));
            }
            Some(ev) if ev.kind != want => {
                return Err(ApiError::invalid(format!(
                    "`events[{i}].{field}`: event `{target}` is a `{}`, not `{want}`",
                    ev.kind
                )));
            }
            Some(_) => {
                let answer = if matches!(e, ClientEvent::ToolConfirmation { .. }) {
                    "confirmation"
                } else {
                    "result"
                };
                if app.store.has_answer(session_id, target, answer).await? {
                    return Err(ApiError::invalid(format!(
                        "`events[{i}].{field}`: `{target}` was already answered"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Accepts a batch of client events on a session (shared by the events endpoint).
pub async fn accept_events(
    app: &AppState,
    ws: &str,
    id: &str,
    batch: Vec<ClientEvent>,
) -> ApiResult<Vec<Value>> {
    let n = batch.len();
    let flags = std::sync::Arc::new(std::sync::Mutex::new(intake::Accepted::default()));
    let out_flags = flags.clone();
    let lease = app.engine.lease_grant();
    let result = transact_session(app, ws, id, move |rec| {
        let (out, acc) = intake::accept(rec, &batch, lease.as_ref(), time::now())?;
        *out_flags.lock().expect("flags") = acc;
        Ok(out)
    })
    .await;
    let (rec, appended) = result?;
    let acc = flags.lock().expect("flags").clone();
    if acc.interrupt_all {
        app.engine.interrupt(id, None);
    }
    if let Some(t) = &acc.interrupt_thread {
        app.engine.interrupt(id, Some(t));
    }
    if acc.wake {
        app.engine.wake(id);
    }
    if acc.work {
        app.hub.work_queued(&rec.environment_id);
    }
    Ok(appended.iter().take(n).map(|e| e.wire()).collect())
}
