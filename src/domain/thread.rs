//! Session threads (API.md §2.7): the wire object.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::type_tag;

type_tag!(
    /// `"type": "session_thread"`.
    SessionThreadTag = "session_thread"
);

/// A thread's timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ThreadStats {
    pub active_seconds: f64,
    pub duration_seconds: f64,
    pub startup_seconds: f64,
}

/// A session thread: the primary one, a delegate, or an advisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionThread {
    #[serde(rename = "type")]
    pub tag: SessionThreadTag,
    pub id: String,
    pub session_id: String,
    pub parent_thread_id: Option<String>,
    /// `running`, `idle`, `rescheduling` or `terminated`.
    pub status: String,
    /// The thread's agent: a snapshot (`agent`), an inline definition, or an advisor.
    #[schema(value_type = Object)]
    pub agent: Value,
    pub workflow_run_id: Option<String>,
    /// Null until the thread's first status change.
    pub stats: Option<ThreadStats>,
    /// Null until the thread's first idle.
    #[schema(value_type = Option<Object>)]
    pub usage: Option<Value>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}
