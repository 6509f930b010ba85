//! Operability endpoints: `/healthz` (the process is up), `/readyz` (the store answers and its
//! schema is current), `/metrics` (Prometheus), and the middleware counting HTTP requests.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use mast_engine::telemetry;

/// `GET /healthz`.
pub async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

/// `GET /readyz`: 200 when the store can serve requests, 503 saying why otherwise.
pub async fn readyz(State(app): State<AppState>) -> Response {
    match app.engine.readiness().await {
        None => axum::Json(json!({"status": "ready", "store": app.engine.store_backend()}))
            .into_response(),
        Some(why) => super::error::ApiError::unavailable(why).into_response(),
    }
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(app): State<AppState>) -> Response {
    metrics::gauge!(telemetry::ACTIVE_RUNNERS).set(app.engine.active_runners() as f64);
    metrics::gauge!(telemetry::SSE_SUBSCRIBERS).set(app.engine.stream_subscribers() as f64);
    // State counts come from the store; when it is down the scrape still answers, without them.
    if let Ok(counts) = app.engine.ops_counts().await {
        for status in ["idle", "running", "rescheduling", "terminated"] {
            let n = counts
                .sessions_by_status
                .iter()
                .find(|(s, _)| s == status)
                .map_or(0, |(_, n)| *n);
            metrics::gauge!(telemetry::SESSIONS, "status" => status).set(n as f64);
        }
        metrics::gauge!(telemetry::WORK_QUEUED).set(counts.queued_work as f64);
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        telemetry::handle().render(),
    )
        .into_response()
}

/// The route template a request matched, left on its response for the access log (which
/// runs outside routing, so it also sees requests no route matched).
#[derive(Clone)]
pub struct MatchedRoute(pub String);

/// Counts each request by its route template (never the raw path, whose ids would make a
/// series per session) and status, and times it to the response head.
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().as_str().to_string();
    let started = Instant::now();
    let mut resp = next.run(req).await;
    let status = resp.status();
    let elapsed = started.elapsed();
    metrics::histogram!(telemetry::HTTP_DURATION, "route" => route.clone(), "method" => method.clone())
        .record(elapsed.as_secs_f64());
    metrics::counter!(telemetry::HTTP_REQUESTS, "route" => route.clone(), "method" => method,
        "status" => status.as_u16().to_string())
    .increment(1);
    resp.extensions_mut().insert(MatchedRoute(route));
    resp
}
