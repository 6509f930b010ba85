//! Per-request ids: every response carries `request-id`, every error body its `request_id`,
//! and responses that did not come from our handlers are rewritten into the API error shape.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{ALLOW, CONTENT_TYPE};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use tracing::Instrument;

use super::error::ApiError;
use mast_domain::ids::new_id;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being handled (a fresh one outside a request).
pub fn current() -> String {
    REQUEST_ID
        .try_with(Clone::clone)
        .unwrap_or_else(|_| new_id("req"))
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"))
}

/// The API error for an error response that did not come from a handler (axum's own 405,
/// a body limit's 413, ...), naming the request where that helps.
fn foreign_error(resp: &Response, method: &Method, path: &str) -> ApiError {
    let status = resp.status();
    if status != StatusCode::METHOD_NOT_ALLOWED {
        return ApiError::for_status(status);
    }
    // The rewritten response keeps the `Allow` header too.
    let allowed = resp
        .headers()
        .get(ALLOW)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').map(str::trim).collect::<Vec<_>>().join(", "))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "no method".into());
    let mut message = format!("`{method} {path}` is not supported: this route takes {allowed}.");
    // Resources the API archives rather than deletes.
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    if method == Method::DELETE
        && let ["v1", resource @ ("agents" | "threads"), _]
        | ["v1", "sessions", _, resource @ "threads", _] = segments.as_slice()
    {
        let what = resource.trim_end_matches('s');
        message.push_str(&format!(
            " A{} {what} is not deleted: archive it with `POST {path}/archive`.",
            if what.starts_with('a') { "n" } else { "" }
        ));
    }
    ApiError::for_status(status).with_message(message)
}

/// The access log: one line per request, inside the request's span (so with its id), naming
/// the route template it matched or, when none did, the path asked for.
fn access_log(method: &Method, path: &str, resp: &Response, elapsed: std::time::Duration) {
    let target = resp
        .extensions()
        .get::<crate::ops::MatchedRoute>()
        .map_or(path, |r| r.0.as_str());
    // A tenth of a millisecond is as fine as a request's time means anything.
    let ms = (elapsed.as_secs_f64() * 10_000.0).round() / 10.0;
    tracing::info!(
        target: "mast::access",
        latency_ms = ms,
        "{method} {target} {}",
        resp.status().as_u16()
    );
}

/// Middleware: assigns the request id and normalises foreign error responses.
pub async fn middleware(req: Request<Body>, next: Next) -> Response {
    let id = new_id("req");
    // Every log line of the request carries its id (and, in JSON logs, its method and path).
    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path());
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    let mut resp = REQUEST_ID
        .scope(id.clone(), async move {
            let resp = next.run(req).await;
            let status = resp.status();
            access_log(&method, &path, &resp, started.elapsed());
            if (status.is_client_error() || status.is_server_error()) && !is_json(&resp) {
                let mut rewritten = foreign_error(&resp, &method, &path).into_response();
                if let Some(allow) = resp.headers().get(ALLOW) {
                    rewritten.headers_mut().insert(ALLOW, allow.clone());
                }
                rewritten
            } else {
                resp
            }
        })
        .instrument(span)
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("request-id", v);
    }
    resp
}
