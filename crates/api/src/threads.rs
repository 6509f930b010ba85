//! `/v1/sessions/{session_id}/threads`: a session's threads (the primary one and its
//! delegates), each thread's own log and stream, and the whole tree as a transcript.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::TryStreamExt as _;
use serde_json::Value;

use super::AppState;
use super::auth::{Principal, Workspace};
use super::error::{ApiError, ApiResult};
use super::extract::{NoBody, QueryParams};
use super::pagination::{Page, PageRequest};
use mast_domain::query::Direction;
use mast_domain::thread::SessionThread;
use mast_engine::state::ThreadStatus;

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/threads", get(list))
        .route(
            "/v1/sessions/{session_id}/threads/{thread_id}",
            get(retrieve),
        )
        .route(
            "/v1/sessions/{session_id}/threads/{thread_id}/archive",
            post(archive),
        )
        .route(
            "/v1/sessions/{session_id}/threads/{thread_id}/events",
            get(events),
        )
        .route(
            "/v1/sessions/{session_id}/threads/{thread_id}/stream",
            get(stream),
        )
        .route("/v1/sessions/{session_id}/transcript", get(transcript))
}

/// List a session's threads.
///
/// Lists the threads of a multiagent session: the primary thread and every delegate's thread, with their statuses.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/threads", tag = "threads", operation_id = "threads_list",
    params(("session_id" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<String>, Query),
        ("statuses[]" = Option<Vec<String>>, Query)),
    responses((status = 200, body = super::openapi::ThreadPage), (status = 400, body = super::openapi::ErrorBody),
        (status = 404, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<SessionThread>>> {
    let page = PageRequest::<String>::parse(&q, Direction::Ascending, 1000, 1000, false)?;
    let statuses = q
        .all("statuses")
        .iter()
        .map(|s| {
            ThreadStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(format!(
                    "`statuses[]` value `{s}` is not one of running, idle, rescheduling, terminated"
                ))
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let rows = app
        .engine
        .list_threads(&ws, &id, &statuses, page.scan())
        .await?;
    Ok(axum::Json(Page {
        prev_page: None,
        ..page.finish(rows, |t| t.id.clone())
    }))
}

/// Retrieve a thread.
///
/// Returns one thread of a session.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/threads/{thread_id}", tag = "threads", operation_id = "threads_retrieve",
    params(("session_id" = String, Path), ("thread_id" = String, Path)),
    responses((status = 200, body = SessionThread), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((id, tid)): Path<(String, String)>,
) -> ApiResult<axum::Json<SessionThread>> {
    Ok(axum::Json(app.engine.thread(&ws, &id, &tid).await?))
}

/// Archive a thread.
///
/// Archives a delegate's thread: it stops and accepts no further work.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/threads/{thread_id}/archive", tag = "threads", operation_id = "threads_archive",
    params(("session_id" = String, Path), ("thread_id" = String, Path)),
    responses((status = 200, body = SessionThread), (status = 400, body = super::openapi::ErrorBody),
        (status = 404, body = super::openapi::ErrorBody), (status = 409, body = super::openapi::ErrorBody)))]
async fn archive(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((id, tid)): Path<(String, String)>,
    _: NoBody,
) -> ApiResult<axum::Json<SessionThread>> {
    Ok(axum::Json(app.engine.archive_thread(&ws, &id, &tid).await?))
}

/// List a thread's events.
///
/// Lists the events of one thread in order, with cursor pagination.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/threads/{thread_id}/events", tag = "threads", operation_id = "threads_events",
    params(("session_id" = String, Path), ("thread_id" = String, Path), ("limit" = Option<i64>, Query),
        ("page" = Option<String>, Query)),
    responses((status = 200, body = super::openapi::EventPage), (status = 404, body = super::openapi::ErrorBody)))]
async fn events(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path((id, tid)): Path<(String, String)>,
    q: QueryParams,
) -> ApiResult<axum::Json<Page<Value>>> {
    let page = PageRequest::<i64>::parse(&q, Direction::Ascending, 1000, 1000, true)?;
    let rows = app
        .engine
        .list_thread_events(&ws, &id, &tid, &page.scan())
        .await?;
    let page = page.finish(rows, |e| e.seq);
    Ok(axum::Json(page.map(|e| e.wire())))
}

/// Stream a thread's events.
///
/// Server-Sent Events of one thread, with the same replay rules as the session stream.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/threads/{thread_id}/stream", tag = "threads", operation_id = "threads_stream",
    params(("session_id" = String, Path), ("thread_id" = String, Path), ("event_deltas[]" = Option<Vec<String>>, Query)),
    responses((status = 200, description = "Server-Sent Events", content_type = "text/event-stream"),
        (status = 404, body = super::openapi::ErrorBody)))]
async fn stream(
    State(app): State<AppState>,
    principal: Principal,
    Path((id, tid)): Path<(String, String)>,
    q: QueryParams,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let Workspace(ws) = Workspace::of(&principal)?;
    app.engine.require_thread(&id, &tid).await?;
    super::stream::open(&app, &ws, &id, Some(tid), &q, &headers, principal).await
}

/// Download a session's transcript.
///
/// The whole session, every thread included, as JSON lines: one stored event per line, in order.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/transcript", tag = "threads", operation_id = "threads_transcript",
    params(("session_id" = String, Path)),
    responses((status = 200, description = "Every thread's events as JSON lines, with `thread_id`, `parent_thread_id` and `spawning_event_id`", content_type = "application/x-ndjson"),
        (status = 404, body = super::openapi::ErrorBody)))]
async fn transcript(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let lines = app
        .engine
        .transcript(&ws, &id)
        .await?
        .map_err(|e| std::io::Error::other(e.to_string()));
    let mut resp = Body::from_stream(lines).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    super::page_headers::download(resp.headers_mut());
    Ok(resp)
}
