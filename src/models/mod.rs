//! Model providers behind one trait: the Anthropic Messages API and a deterministic scripted
//! model. Requests and responses use Anthropic's content-block shapes as the common format.

pub mod anthropic;
mod http;
pub mod openai;
pub mod registry;
pub mod scripted;
pub mod sse;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::domain::model_config::EffortLevel;
use crate::domain::session::ModelUsage;

pub use registry::Models;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of the conversation, as Anthropic content blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Value>,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// Everything a provider needs for one request.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    pub max_tokens: u32,
    pub effort: Option<EffortLevel>,
    pub fast: bool,
    pub inference_geo: Option<String>,
}

/// A finished model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// Content blocks in order (text, thinking with signature, tool_use, ...).
    pub content: Vec<Value>,
    /// `end_turn`, `tool_use`, `max_tokens`, `pause_turn`, `refusal`, `stop_sequence`, ...
    pub stop_reason: String,
    pub stop_details: Option<Value>,
    pub usage: ModelUsage,
}

/// Progress while a response streams, for opt-in previews.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// A thinking block started.
    ThinkingStarted,
    /// Text arrived for text block number `index` (counting text blocks only).
    Text { index: usize, text: String },
}

/// Classes of provider failure, mapped to `session.error` types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Overloaded,
    RateLimited,
    Billing,
    Authentication,
    ContextWindow,
    RequestFailed,
}

impl ErrorKind {
    /// The `session.error` `error.type` for this class.
    pub fn session_error_type(self) -> &'static str {
        match self {
            ErrorKind::Overloaded => "model_overloaded_error",
            ErrorKind::RateLimited => "model_rate_limited_error",
            ErrorKind::Billing => "billing_error",
            ErrorKind::Authentication | ErrorKind::ContextWindow | ErrorKind::RequestFailed => {
                "model_request_failed_error"
            }
        }
    }
}

/// A failed model request.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelError {
    pub kind: ErrorKind,
    pub message: String,
    /// Transient failures (429, 529, 5xx, connection) are retried; the rest are not.
    pub retryable: bool,
    pub retry_after: Option<Duration>,
}

impl ModelError {
    /// A transient failure.
    pub fn transient(kind: ErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            message: message.into(),
            retryable: true,
            retry_after: None,
        }
    }

    /// A failure retrying cannot fix.
    pub fn fatal(kind: ErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            message: message.into(),
            retryable: false,
            retry_after: None,
        }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Receives streaming progress.
pub type DeltaSink<'a> = &'a (dyn Fn(Delta) + Send + Sync);

/// A model provider.
#[async_trait]
pub trait ModelClient: Send + Sync {
    /// Runs one request to completion, reporting progress to `deltas`.
    async fn complete(
        &self,
        req: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError>;
}
