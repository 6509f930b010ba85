//! The one API error type: every non-2xx response body is
//! `{"type":"error","error":{"type","message","details"?},"request_id"}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::request_id;
use mast_domain::invalid::Invalid;
use mast_engine::StoreError;
use mast_engine::ops::OpError;

/// An error answer: status, upstream error type, message and optional details.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
    /// `error.details`: present exactly when the error has a stable `error_code` (the SDK
    /// reads it to pick an exception subclass), which it then always carries, with any extra
    /// keys of that code (`field`, `suggestion`, `current_state`, ...).
    pub details: Option<Value>,
    /// Tells the SDK not to retry (deterministic conflicts), via `x-should-retry: false`.
    pub no_retry: bool,
}

/// Handler result.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            details: None,
            no_retry: false,
        }
    }

    /// 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 with an `error.details.error_code`.
    pub fn invalid_code(code: &str, message: impl Into<String>) -> Self {
        let mut e = Self::invalid(message);
        e.details = Some(json!({ "error_code": code }));
        e
    }

    /// The same error answered with another status.
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The same error with another message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// 404 `not_found_error` naming what was not found.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found_error", what)
    }

    /// 409 for a deterministic conflict; upstream uses `invalid_request_error` for these, and
    /// the SDK is told not to retry.
    pub fn conflict(message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::CONFLICT, "invalid_request_error", message);
        e.no_retry = true;
        e
    }

    /// 409 of the memory API under its own error type (`memory_path_conflict_error`,
    /// `memory_precondition_failed_error`), with `details` naming what it conflicts with.
    pub fn memory_conflict(kind: &'static str, message: impl Into<String>, details: Value) -> Self {
        let mut e = Self::new(StatusCode::CONFLICT, kind, message);
        e.details = Some(details);
        e.no_retry = true;
        e
    }

    /// 401 `authentication_error`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "authentication_error", message)
    }

    /// 403 `permission_error`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "permission_error", message)
    }

    /// 413 for a body over the size limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            message,
        )
    }

    /// 503 while the database is unreachable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "api_error", message)
    }

    /// 500; the cause is logged with the request id and never sent to the client.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(request_id = %request_id::current(), error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "internal server error",
        )
    }

    /// The generic error for a status produced outside our handlers (405, 404, 413, ...).
    pub fn for_status(status: StatusCode) -> Self {
        match status {
            StatusCode::NOT_FOUND => Self::not_found("no such route"),
            StatusCode::METHOD_NOT_ALLOWED => Self::new(
                status,
                "invalid_request_error",
                "method not allowed for this route",
            ),
            StatusCode::PAYLOAD_TOO_LARGE => Self::too_large("request body is too large"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                Self::new(status, "invalid_request_error", "request body must be JSON")
            }
            StatusCode::REQUEST_TIMEOUT => Self::new(status, "timeout_error", "request timed out"),
            s if s.is_client_error() => Self::new(
                s,
                "invalid_request_error",
                s.canonical_reason().unwrap_or("bad request"),
            ),
            s => Self::new(
                s,
                "api_error",
                s.canonical_reason().unwrap_or("server error"),
            ),
        }
    }

    /// The JSON body for this error (also the payload of an SSE `event: error`).
    pub fn body(&self, request_id: &str) -> Value {
        let mut error = json!({ "type": self.kind, "message": self.message });
        if let Some(d) = &self.details {
            error["details"] = d.clone();
        }
        json!({ "type": "error", "error": error, "request_id": request_id })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.kind,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let rid = request_id::current();
        let mut resp = (self.status, axum::Json(self.body(&rid))).into_response();
        if self.no_retry {
            resp.headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("false"));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The body was refused unread, so the connection is closed after this answer; a
            // client told so opens a new one for its next request instead of sending it on
            // a connection the server is closing.
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}

impl From<Invalid> for ApiError {
    /// A 400; `error.details` is present exactly when the rule has a code, holding
    /// `error_code` and the rule's extra keys (`field`, `suggestion`, ...).
    fn from(e: Invalid) -> Self {
        match e.code {
            Some(code) => {
                let mut details = serde_json::Map::new();
                details.insert("error_code".into(), code.into());
                details.extend(e.details);
                let mut err = ApiError::invalid(e.message);
                err.details = Some(Value::Object(details));
                err
            }
            None => ApiError::invalid(e.message),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => ApiError::conflict(m),
            StoreError::Fenced(m) => ApiError::internal(m),
            StoreError::Invalid(i) => i.into(),
            StoreError::NotFound => ApiError::not_found("not found"),
            StoreError::Unavailable(m) => {
                tracing::warn!(error = %m, "database unavailable");
                ApiError::unavailable("the database is unavailable; retry shortly")
            }
            StoreError::Internal(e) => ApiError::internal(format!("{e:#}")),
        }
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        match e {
            OpError::SessionNotFound(_)
            | OpError::ThreadNotFound(_)
            | OpError::AgentNotFound { .. }
            | OpError::EnvironmentNotFound(_)
            | OpError::WorkNotFound(_)
            | OpError::VaultNotFound(_)
            | OpError::CredentialNotFound(_)
            | OpError::FileNotFound(_)
            | OpError::MemoryStoreNotFound(_)
            | OpError::ResourceNotFound(_)
            | OpError::EventNotFound { .. }
            | OpError::DeploymentNotFound(_)
            | OpError::DeploymentRunNotFound(_)
            | OpError::SkillNotFound(_)
            | OpError::HookNotFound(_)
            | OpError::WebhookEndpointNotFound(_)
            | OpError::WebhookDeliveryNotFound(_)
            | OpError::MemoryNotFound(_)
            | OpError::MemoryVersionNotFound(_)
            | OpError::NotFound(_) => ApiError::not_found(e.to_string()),
            OpError::MemoryPathTaken(ref holder) => ApiError::memory_conflict(
                "memory_path_conflict_error",
                e.to_string(),
                json!({"error_code": "memory_path_conflict", "conflicting_memory_id": holder}),
            ),
            OpError::MemoryPreconditionFailed(ref current) => ApiError::memory_conflict(
                "memory_precondition_failed_error",
                e.to_string(),
                json!({"error_code": "memory_precondition_failed", "current_content_sha256": current}),
            ),
            OpError::Invalid(i) => i.into(),
            OpError::Conflict(m) => ApiError::conflict(m),
            OpError::Precondition { message, current } => {
                let mut e =
                    ApiError::conflict(message).with_status(StatusCode::PRECONDITION_FAILED);
                e.details = Some(json!({
                    "error_code": "heartbeat_precondition_failed",
                    "current_state": current,
                }));
                e
            }
            OpError::Store(e) => e.into(),
        }
    }
}
