//! Model providers behind one trait ([`ModelClient`]): the Anthropic Messages API (`anthropic`),
//! OpenAI-compatible chat completions (`openai`: OpenAI, vLLM, Ollama, llama.cpp, LM Studio) and
//! `mast-scripted`, a deterministic model for tests and demos (`scripted`). Requests and responses
//! use Anthropic's content-block shapes as the common format, so the loop speaks one shape whatever
//! serves the model.
//!
//! [`Models`] (`registry`) routes a model id to its provider: configured providers first, then the
//! built-in defaults. A failed request is a [`ModelError`]: its [`ErrorKind`] says which
//! `session.error` it becomes, `retryable` whether trying again can help; the engine owns the
//! retries and their backoff. `json_size` lets the engine tell a provider how much of a
//! conversation it has sized already, and `summarise` is the request context compaction sends.
//!
//! This crate depends only on `mast-domain`: it knows nothing of sessions or the store, and the
//! only HTTP it speaks is the providers'.

pub mod anthropic;
mod anthropic_body;
mod http;
pub mod json_size;
pub mod openai;
pub mod registry;
pub mod scripted;
pub mod sse;
pub mod summarise;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use mast_domain::model_config::EffortLevel;
use mast_domain::session::ModelUsage;

pub use json_size::SizedPrefix;
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

// Tool definitions are domain data (the engine and the tools build them); re-exported here
// because every provider serializes them.
pub use mast_domain::tools::ToolDef;

/// Everything a provider needs for one request.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    /// Shared: most requests of a session offer the same definitions.
    pub tools: std::sync::Arc<Vec<ToolDef>>,
    pub max_tokens: u32,
    pub effort: Option<EffortLevel>,
    pub fast: bool,
    pub inference_geo: Option<String>,
    /// What the engine already knows of the messages' size as JSON; zero when nothing is.
    pub sized: SizedPrefix,
}

/// A finished model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// Content blocks in order (text, thinking with signature, tool_use, ...).
    pub content: Vec<Value>,
    /// `end_turn`, `tool_use`, `max_tokens`, `pause_turn`, `refusal`, `stop_sequence`, ...
    /// (kept as the provider said it, for the log; [`ModelResponse::stop`] types it).
    pub stop_reason: String,
    pub stop_details: Option<Value>,
    pub usage: ModelUsage,
}

impl ModelResponse {
    /// Why the model stopped.
    pub fn stop(&self) -> ModelStop {
        ModelStop::parse(&self.stop_reason)
    }
}

/// Why a model response ended, as the loop acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelStop {
    /// The model finished its answer.
    EndTurn,
    /// A stop sequence ended it; the loop treats it as a finished answer.
    StopSequence,
    /// The model called tools and waits for their results.
    ToolUse,
    /// The `max_tokens` limit cut the answer; it is continued.
    MaxTokens,
    /// The provider paused a long turn; it is continued.
    PauseTurn,
    /// The model declined to answer.
    Refusal,
    /// The conversation no longer fits the model's context window.
    ContextWindowExceeded,
    /// A reason this server does not know; treated as a finished answer.
    Other,
}

impl ModelStop {
    /// The stop of a provider's `stop_reason`.
    pub fn parse(s: &str) -> Self {
        match s {
            "end_turn" => ModelStop::EndTurn,
            "stop_sequence" => ModelStop::StopSequence,
            "tool_use" => ModelStop::ToolUse,
            "max_tokens" => ModelStop::MaxTokens,
            "pause_turn" => ModelStop::PauseTurn,
            "refusal" => ModelStop::Refusal,
            "model_context_window_exceeded" => ModelStop::ContextWindowExceeded,
            _ => ModelStop::Other,
        }
    }

    /// Whether the loop asks the model to go on with the same answer.
    pub fn continues(self) -> bool {
        matches!(self, ModelStop::MaxTokens | ModelStop::PauseTurn)
    }
}

/// One content block of a message, as the engine reads it: a borrowed, typed view of the
/// Anthropic-shaped JSON that providers and the log exchange.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Block<'a> {
    /// A `text` block.
    Text(&'a str),
    /// A `thinking` or `redacted_thinking` block.
    Thinking,
    /// A `tool_use` block: the tool's name and its input (absent in a malformed block).
    ToolUse {
        name: &'a str,
        input: Option<&'a Value>,
    },
    /// Anything else (tool results, images, documents, server tool blocks, …): passed
    /// through untouched.
    Other,
}

impl<'a> Block<'a> {
    /// The typed view of `block`.
    pub fn of(block: &'a Value) -> Self {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("thinking" | "redacted_thinking") => Block::Thinking,
            Some("tool_use") => Block::ToolUse {
                name: block.get("name").and_then(Value::as_str).unwrap_or(""),
                input: block.get("input"),
            },
            _ => Block::Other,
        }
    }
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
    /// The provider does not know the requested model. A session's model is fixed, so no
    /// retry or new input can help: the session terminates.
    ModelNotFound,
}

impl ErrorKind {
    /// The `session.error` `error.type` for this class.
    pub fn session_error_type(self) -> &'static str {
        match self {
            ErrorKind::Overloaded => "model_overloaded_error",
            ErrorKind::RateLimited => "model_rate_limited_error",
            ErrorKind::Billing => "billing_error",
            ErrorKind::Authentication
            | ErrorKind::ContextWindow
            | ErrorKind::RequestFailed
            | ErrorKind::ModelNotFound => "model_request_failed_error",
        }
    }

    /// Whether this failure ends the session for good (`retry_status: terminal`).
    pub fn is_terminal(self) -> bool {
        self == ErrorKind::ModelNotFound
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
