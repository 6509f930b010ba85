//! A workflow run as the session's engine state keeps it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mast_domain::time::Micros;
use mast_domain::workflow::RunState;

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    /// Paused; see [`Run::paused_by`].
    Idle,
    Ended,
}

impl RunStatus {
    /// The status the agent's tools report.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Idle => "idle",
            RunStatus::Ended => "ended",
        }
    }
}

/// One phase of a run: its id (`wrph_…`) and name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRef {
    pub id: String,
    pub name: String,
}

/// A workflow run of the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The n-th run of the session, from 1: it orders runs newest first.
    pub number: u64,
    pub name: String,
    pub status: RunStatus,
    /// Why an idle run is paused (`budget`, `interrupt`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused_by: Vec<String>,
    /// When the run's lifetime ends.
    pub deadline_at: Micros,
    pub phases: Vec<PhaseRef>,
    /// The id of the open phase's `workflow_run.phase_started`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_started_event: Option<String>,
    /// The checked plan (as `mast_domain::workflow::parse` reads it back) and the
    /// interpreter's state; dropped when the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<Live>,
    /// Agents started, returned and failed.
    #[serde(default)]
    pub agents: [u64; 3],
    /// Once ended: the `result` of `workflow_run.status_ended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Once completed: the rendered `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// What an open run goes on from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Live {
    pub plan: Value,
    pub state: RunState,
}
