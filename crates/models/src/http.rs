//! HTTP error handling shared by the provider clients: which statuses are transient.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use super::sse::{SseDecoder, SseEvent};
use super::{ErrorKind, ModelError};

/// Sends a streaming request with `body` and hands every SSE event of the response to
/// `on_event`. HTTP errors, unreachable endpoints and broken streams become model errors.
pub async fn stream_events<B: serde::Serialize + ?Sized>(
    request: reqwest::RequestBuilder,
    body: &B,
    mut on_event: impl FnMut(SseEvent) -> Result<(), ModelError>,
) -> Result<(), ModelError> {
    let resp = request
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .json(body)
        .send()
        .await
        .map_err(|e| {
            ModelError::transient(
                ErrorKind::RequestFailed,
                format!("could not reach the model provider: {}", describe(&e)),
            )
        })?;
    let status = resp.status().as_u16();
    if status >= 400 {
        let url = resp.url().clone();
        let after = retry_after(resp.headers());
        let text = resp.text().await.unwrap_or_default();
        let mut e = classify_status(status, &text, after);
        e.message = format!("{} (HTTP {status} from {url})", e.message);
        return Err(e);
    }
    let mut decoder = SseDecoder::default();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ModelError::transient(
                ErrorKind::RequestFailed,
                format!("model stream interrupted: {}", describe(&e)),
            )
        })?;
        for ev in decoder.feed(&chunk) {
            on_event(ev)?;
        }
    }
    Ok(())
}

/// A request error with its causes: reqwest's own text ("error sending request for url (…)")
/// leaves out why ("Connection refused"), which is what an operator needs.
pub fn describe(e: &reqwest::Error) -> String {
    mast_domain::error_chain::chain(e)
}

/// Parses one SSE data payload.
pub fn parse_data(data: &str) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| {
        ModelError::transient(
            ErrorKind::RequestFailed,
            format!("model stream sent invalid JSON: {e}"),
        )
    })
}

/// Maps a provider's HTTP error to a model error: 429, 529, 408 and 5xx are transient;
/// authentication, billing and bad requests are not.
pub fn classify_status(status: u16, body: &str, retry_after: Option<Duration>) -> ModelError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let field = |p: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.pointer(p))
            .and_then(Value::as_str)
    };
    // Anthropic says `not_found_error` for an unknown model; OpenAI-compatible servers say
    // `model_not_found`. Any other 404 (a wrong base path) is the operator's to fix.
    let unknown_model = status == 404
        && (field("/error/type") == Some("not_found_error")
            || field("/error/code") == Some("model_not_found"));
    let message = field("/error/message")
        .map(str::to_string)
        .unwrap_or_else(|| format!("model provider answered HTTP {status}"));
    let mut e = match status {
        _ if unknown_model => ModelError::fatal(ErrorKind::ModelNotFound, message),
        429 => ModelError::transient(ErrorKind::RateLimited, message),
        529 => ModelError::transient(ErrorKind::Overloaded, message),
        408 | 500..=599 => ModelError::transient(ErrorKind::RequestFailed, message),
        401 | 403 => ModelError::fatal(ErrorKind::Authentication, message),
        402 => ModelError::fatal(ErrorKind::Billing, message),
        400 if is_context_overflow(&message) => {
            ModelError::fatal(ErrorKind::ContextWindow, message)
        }
        _ => ModelError::fatal(ErrorKind::RequestFailed, message),
    };
    e.retry_after = retry_after;
    e
}

/// The delay a provider asked for (`retry-after-ms` or `retry-after` seconds).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<f64>().ok())
    {
        return Some(Duration::from_millis(ms as u64));
    }
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| Duration::from_millis((s * 1000.0) as u64))
}

fn is_context_overflow(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "context window",
        "context length",
        "context_length_exceeded",
        "maximum context",
    ]
    .iter()
    .any(|p| m.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_http_errors() {
        assert!(classify_status(529, "", None).retryable);
        assert_eq!(classify_status(429, "", None).kind, ErrorKind::RateLimited);
        assert!(!classify_status(401, "", None).retryable);
        let gone =
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-gone"}}"#;
        assert_eq!(
            classify_status(404, gone, None).kind,
            ErrorKind::ModelNotFound
        );
        let oa = r#"{"error":{"code":"model_not_found","message":"no such model"}}"#;
        assert!(classify_status(404, oa, None).kind.is_terminal());
        assert!(!classify_status(404, "not here", None).kind.is_terminal());
        let e = classify_status(
            400,
            r#"{"error":{"type":"invalid_request_error","message":"prompt is too long: 300000 tokens"}}"#,
            None,
        );
        assert_eq!(e.kind, ErrorKind::ContextWindow);
        assert!(!e.retryable);
    }
}
