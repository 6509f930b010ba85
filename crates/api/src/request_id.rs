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
    // The message points at the `Allow` header, which the rewritten response keeps.
    let mut message = format!(
        "`{method} {path}` is not supported: the `Allow` header lists the methods this route takes."
    );
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

/// Middleware: assigns the request id and normalises foreign error responses.
pub async fn middleware(req: Request<Body>, next: Next) -> Response {
    let id = new_id("req");
    // Every log line of the request carries its id (and, in JSON logs, its method and path).
    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path());
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut resp = REQUEST_ID
        .scope(id.clone(), async move {
            let resp = next.run(req).await;
            let status = resp.status();
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
