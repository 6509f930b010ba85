//! Self-hosted work items: the wire objects of the work queue.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::metadata::Metadata;
use crate::type_tag;

type_tag!(
    /// `"type": "work"`.
    WorkTag = "work"
);
type_tag!(
    /// `"type": "work_heartbeat"`.
    WorkHeartbeatTag = "work_heartbeat"
);
type_tag!(
    /// `"type": "work_queue_stats"`.
    WorkQueueStatsTag = "work_queue_stats"
);
type_tag!(
    /// `"type": "session"`.
    SessionDataTag = "session"
);

/// Where a work item is in its life: queued → starting (acked) → active (heartbeating) →
/// stopping (stop requested) → stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    Queued,
    Starting,
    Active,
    Stopping,
    Stopped,
}

impl WorkState {
    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkState::Queued => "queued",
            WorkState::Starting => "starting",
            WorkState::Active => "active",
            WorkState::Stopping => "stopping",
            WorkState::Stopped => "stopped",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => WorkState::Queued,
            "starting" => WorkState::Starting,
            "active" => WorkState::Active,
            "stopping" => WorkState::Stopping,
            "stopped" => WorkState::Stopped,
            _ => return None,
        })
    }
}

/// What a work item is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkData {
    #[serde(rename = "type")]
    pub tag: SessionDataTag,
    pub id: String,
}

/// A work item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Work {
    #[serde(rename = "type")]
    pub tag: WorkTag,
    pub id: String,
    pub environment_id: String,
    pub state: WorkState,
    pub data: WorkData,
    pub metadata: Metadata,
    pub created_at: String,
    pub acknowledged_at: Option<String>,
    pub started_at: Option<String>,
    pub latest_heartbeat_at: Option<String>,
    pub stop_requested_at: Option<String>,
    pub stopped_at: Option<String>,
    /// Only on poll responses (null elsewhere): URL-safe base64 of `{"sessions_token": ...}`.
    pub secret: Option<String>,
}

/// A heartbeat's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkHeartbeat {
    #[serde(rename = "type")]
    pub tag: WorkHeartbeatTag,
    /// RFC 3339 of this beat, echoed back as `expected_last_heartbeat` next time.
    pub last_heartbeat: String,
    pub lease_extended: bool,
    pub state: WorkState,
    pub ttl_seconds: i64,
}

/// Queue statistics of an environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkQueueStats {
    #[serde(rename = "type")]
    pub tag: WorkQueueStatsTag,
    pub depth: i64,
    pub pending: i64,
    pub oldest_queued_at: Option<String>,
    pub workers_polling: Option<i64>,
}

type_tag!(
    /// `"type": "environment_key"`.
    EnvironmentKeyTag = "environment_key"
);
type_tag!(
    /// `"type": "environment_key_deleted"`.
    EnvironmentKeyDeletedTag = "environment_key_deleted"
);

/// A self-hosted environment's worker credential. `key` is shown once, on creation; only
/// its hash is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentKey {
    #[serde(rename = "type")]
    pub tag: EnvironmentKeyTag,
    pub id: String,
    pub environment_id: String,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Response of deleting an environment key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentKeyDeleted {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: EnvironmentKeyDeletedTag,
}

/// Body of `POST …/work/{work_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkUpdate {
    /// Patch: a `null` value deletes the key.
    pub metadata: super::metadata::MetadataPatch,
}

/// Body of `POST …/work/{work_id}/stop`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkStop {
    /// Stop at once instead of letting the worker wind down.
    #[serde(default)]
    pub force: Option<bool>,
}

/// The literal a worker sends as `expected_last_heartbeat` before its first beat.
pub const NO_HEARTBEAT: &str = "NO_HEARTBEAT";

/// The `secret` handed to the worker that polled an item.
pub fn secret_for(sessions_token: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({ "sessions_token": sessions_token }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_carries_the_token() {
        let s = secret_for("tok");
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&raw).unwrap()["sessions_token"],
            "tok"
        );
    }
}
