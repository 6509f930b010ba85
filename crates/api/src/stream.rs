//! `GET /v1/sessions/{id}/events/stream`: Server-Sent Events exactly as the SDK parses them.
//! Live-only by default; `Last-Event-ID` or `?after=<event id>` replays what
//! followed that event first, with no gap and no duplicate.

use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::Stream;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::AppState;
use super::auth::{Principal, session_workspace};
use super::error::{ApiError, ApiResult};
use super::extract::QueryParams;
use mast_domain::events::kind;
use mast_engine::StoreError;
use mast_engine::hub::{HubItem, Subscription};
use mast_engine::keys::Keys;
use mast_engine::ops::EventLog;

/// How often an idle stream sends `event: ping`.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/events/stream", get(stream))
}

/// Which preview kinds a connection asked for.
fn parse_deltas(q: &QueryParams) -> ApiResult<(bool, bool)> {
    let values = q.all("event_deltas");
    if values.len() > 100 {
        return Err(ApiError::invalid(
            "`event_deltas[]` accepts at most 100 values",
        ));
    }
    let (mut message, mut thinking) = (false, false);
    for v in &values {
        match v.as_str() {
            kind::AGENT_MESSAGE => message = true,
            kind::AGENT_THINKING => thinking = true,
            other => {
                return Err(ApiError::invalid(format!(
                    "`event_deltas[]` value `{other}` must be `agent.message` or `agent.thinking`"
                )));
            }
        }
    }
    Ok((message, thinking))
}

/// How many stored events a catching-up stream reads at a time.
const PAGE: i64 = 500;

struct Tail {
    log: EventLog,
    sid: String,
    thread: String,
    /// The session's view: its primary thread plus what delegates cross-post to it.
    crossposts: bool,
    sub: Subscription,
    last_seq: i64,
    /// Events after `last_seq` are in the log but not yet sent (replay, lag or a gap): they
    /// are read a page at a time before live items are taken again.
    catching_up: bool,
    previews: (bool, bool),
    started: HashSet<String>,
    backlog: std::collections::VecDeque<Event>,
    last_sent: tokio::time::Instant,
    done: bool,
    shutdown: tokio_util::sync::CancellationToken,
    /// The credential the stream was opened with: the stream ends when it no longer stands.
    /// Keys are checked against the published keys whenever those change (`keys`); a work
    /// token is re-checked in the store every [`RECHECK`] (its item's state is not published).
    caller: Principal,
    keys: tokio::sync::watch::Receiver<super::key_watch::Published>,
    /// Where a credential the published keys do not vouch for is looked up.
    keys_store: Keys,
    last_check: tokio::time::Instant,
}

/// How often a stream opened with a work token checks that it still stands.
const RECHECK: Duration = Duration::from_secs(5);

fn frame(kind: &str, id: &str, json: &str) -> Event {
    Event::default().event(kind).id(id).data(json)
}

impl Tail {
    /// Whether an event of `thread_id` shows on this stream; `crosspost`: it is a child
    /// thread's event that names its thread.
    fn visible(&self, thread_id: Option<&str>, crosspost: bool) -> bool {
        match thread_id {
            None => self.crossposts,
            Some(t) if t == self.thread => true,
            Some(_) => self.crossposts && crosspost,
        }
    }

    /// Queues the next page of stored events after `last_seq`.
    async fn fill_page(&mut self) -> Result<(), StoreError> {
        let batch = self.log.after(&self.sid, self.last_seq, PAGE).await?;
        if (batch.len() as i64) < PAGE {
            self.catching_up = false;
        }
        for e in batch {
            self.last_seq = e.seq;
            if self.visible(e.thread_id.as_deref(), e.crossposts()) {
                self.backlog
                    .push_back(frame(&e.kind, &e.id, &e.wire_json()));
            }
        }
        Ok(())
    }

    /// Whether the caller's credential is re-checked on a timer (see [`Tail::caller`]).
    fn rechecks_on_timer(&self) -> bool {
        matches!(self.caller, Principal::WorkToken { .. })
    }

    /// Whether the caller's credential still stands. The published keys vouch for most
    /// callers in memory; the store decides the rest — a key they do not list (revoked, or
    /// made after they were read), a work token — and a store that cannot say keeps the stream.
    async fn caller_stands(&mut self) -> bool {
        let published = self.keys.borrow_and_update().clone();
        if published.is_some_and(|k| k.vouches(&self.caller) == Some(true)) {
            return true;
        }
        self.last_check = tokio::time::Instant::now();
        super::auth::still_valid(&self.keys_store, &self.caller)
            .await
            .unwrap_or(true)
    }

    async fn next_frame(&mut self) -> Option<Event> {
        let due = self.rechecks_on_timer() && self.last_check.elapsed() >= RECHECK;
        let keys_changed = self.keys.has_changed().unwrap_or(false);
        if (due || keys_changed) && !self.caller_stands().await {
            // The key was revoked, or the work item stopped or moved on.
            return None;
        }
        let f = self.produce().await;
        self.last_sent = tokio::time::Instant::now();
        f
    }

    async fn produce(&mut self) -> Option<Event> {
        loop {
            if let Some(f) = self.backlog.pop_front() {
                return Some(f);
            }
            if self.done {
                return None;
            }
            if self.catching_up {
                if self.fill_page().await.is_err() {
                    return None;
                }
                continue;
            }
            // Items this connection skips do not count: the deadline is from the last frame.
            let mut deadline = self.last_sent + KEEPALIVE;
            if self.rechecks_on_timer() {
                // Wake up in time for the next credential check (the ping it may send is harmless).
                deadline = deadline.min(self.last_check + RECHECK);
            }
            let item = tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                changed = self.keys.changed() => {
                    // No watch any more: the server is going away.
                    if changed.is_err() || !self.caller_stands().await {
                        return None;
                    }
                    continue;
                }
                r = tokio::time::timeout_at(deadline, self.sub.recv()) => r,
            };
            match item {
                Err(_) => {
                    return Some(
                        Event::default()
                            .event("ping")
                            .data(json!({"type": "ping"}).to_string()),
                    );
                }
                Ok(Err(RecvError::Closed)) => return None,
                // Fell behind the channel: what was missed is in the log.
                Ok(Err(RecvError::Lagged(_))) => self.catching_up = true,
                Ok(Ok(HubItem::Appended(seq))) => {
                    if seq > self.last_seq {
                        self.catching_up = true;
                    }
                }
                Ok(Ok(HubItem::Deleted)) => {
                    self.done = true;
                    let data = json!({"type": kind::SESSION_DELETED, "id": mast_domain::ids::new_id("sevt"),
                        "processed_at": mast_domain::time::format(self.log.now())});
                    return Some(
                        Event::default()
                            .event(kind::SESSION_DELETED)
                            .data(data.to_string()),
                    );
                }
                Ok(Ok(HubItem::Preview {
                    thread_id,
                    of,
                    frame,
                })) => {
                    let wanted = (of == kind::AGENT_MESSAGE && self.previews.0)
                        || (of == kind::AGENT_THINKING && self.previews.1);
                    if !wanted || thread_id != self.thread {
                        continue;
                    }
                    let kind_name = frame.get("type").and_then(|t| t.as_str()).unwrap_or("");
                    if kind_name == "event_start" {
                        if let Some(id) = frame.pointer("/event/id").and_then(|v| v.as_str()) {
                            self.started.insert(id.to_string());
                        }
                    } else if let Some(id) = frame.get("event_id").and_then(|v| v.as_str())
                        && !self.started.contains(id)
                    {
                        // Joined mid-message: a delta without its start would break clients.
                        continue;
                    }
                    return Some(Event::default().event(kind_name).data(frame.to_string()));
                }
                Ok(Ok(HubItem::Event(published))) => {
                    let e = &*published;
                    if e.seq <= self.last_seq {
                        continue;
                    }
                    if e.seq > self.last_seq + 1 {
                        // Published out of order: this one and those before it are committed,
                        // so the log returns them all in order.
                        self.catching_up = true;
                        continue;
                    }
                    self.last_seq = e.seq;
                    self.started.remove(&e.id);
                    if self.visible(e.thread_id.as_deref(), e.crosspost) {
                        self.backlog.push_back(frame(&e.kind, &e.id, &e.json));
                    }
                }
            }
        }
    }
}

fn into_stream(tail: Tail) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(tail, |mut t| async move {
        t.next_frame().await.map(|f| (Ok(f), t))
    })
}

/// Stream a session's events.
///
/// Server-Sent Events: every event appended from now on (`event: <type>`, one `data:` line each). With `Last-Event-ID` (or `after`), every event after that one first, then the live tail, with no gap and no duplicate.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/events/stream", tag = "events", operation_id = "events_stream",
    params(("session_id" = String, Path), ("event_deltas[]" = Option<Vec<String>>, Query), ("after" = Option<String>, Query)),
    responses((status = 200, description = "Server-Sent Events", content_type = "text/event-stream"),
        (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn stream(
    State(app): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
    q: QueryParams,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let ws = session_workspace(&app.engine, &principal, &id).await?;
    open(&app, &ws, &id, None, &q, &headers, principal).await
}

/// Opens an SSE stream of a session's view (`thread` None) or of one thread's own log.
pub async fn open(
    app: &AppState,
    ws: &str,
    id: &str,
    thread: Option<String>,
    q: &QueryParams,
    headers: &HeaderMap,
    caller: Principal,
) -> ApiResult<Response> {
    let previews = parse_deltas(q)?;
    let after = q
        .get("after")
        .map(str::to_string)
        .or_else(|| {
            headers
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .filter(|s| !s.is_empty());
    let start = app
        .engine
        .open_stream(ws, id, thread, after.as_deref(), previews.0 || previews.1)
        .await?;
    let tail = Tail {
        log: start.log,
        sid: id.to_string(),
        thread: start.thread,
        crossposts: start.crossposts,
        sub: start.subscription,
        last_seq: start.last_seq,
        catching_up: start.catching_up,
        previews,
        started: HashSet::new(),
        backlog: Default::default(),
        last_sent: tokio::time::Instant::now(),
        done: false,
        shutdown: app.shutdown.clone(),
        caller,
        keys: app.auth.key_watch().subscribe(),
        keys_store: app.engine.keys(),
        last_check: tokio::time::Instant::now(),
    };
    let mut resp = Sse::new(into_stream(tail)).into_response();
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}
