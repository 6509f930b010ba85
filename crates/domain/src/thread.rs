//! Session threads: the wire object.

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

/// Where a thread is (the primary thread's status is the session's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThreadStatus {
    Idle,
    Running,
    Rescheduling,
    Terminated,
}

impl ThreadStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadStatus::Idle => "idle",
            ThreadStatus::Running => "running",
            ThreadStatus::Rescheduling => "rescheduling",
            ThreadStatus::Terminated => "terminated",
        }
    }

    /// Running or retrying.
    pub fn is_active(self) -> bool {
        matches!(self, ThreadStatus::Running | ThreadStatus::Rescheduling)
    }

    /// The status of a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            ThreadStatus::Idle,
            ThreadStatus::Running,
            ThreadStatus::Rescheduling,
            ThreadStatus::Terminated,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

impl From<super::session::SessionStatus> for ThreadStatus {
    /// The primary thread's status: the session's.
    fn from(s: super::session::SessionStatus) -> Self {
        use super::session::SessionStatus as S;
        match s {
            S::Idle => ThreadStatus::Idle,
            S::Running => ThreadStatus::Running,
            S::Rescheduling => ThreadStatus::Rescheduling,
            S::Terminated => ThreadStatus::Terminated,
        }
    }
}

/// A session thread: the primary one, a delegate, or an advisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionThread {
    #[serde(rename = "type")]
    pub tag: SessionThreadTag,
    pub id: String,
    pub session_id: String,
    pub parent_thread_id: Option<String>,
    pub status: ThreadStatus,
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
