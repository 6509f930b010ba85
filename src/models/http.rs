//! HTTP error handling shared by the provider clients: which statuses are transient.

use std::time::Duration;

use serde_json::Value;

use super::{ErrorKind, ModelError};

/// Maps a provider's HTTP error to a model error: 429, 529, 408 and 5xx are transient;
/// authentication, billing and bad requests are not.
pub fn classify_status(status: u16, body: &str, retry_after: Option<Duration>) -> ModelError {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("model provider answered HTTP {status}"));
    let mut e = match status {
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
        let e = classify_status(
            400,
            r#"{"error":{"type":"invalid_request_error","message":"prompt is too long: 300000 tokens"}}"#,
            None,
        );
        assert_eq!(e.kind, ErrorKind::ContextWindow);
        assert!(!e.retryable);
    }
}
