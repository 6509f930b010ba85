//! Records of deployments and their runs (`/v1/deployments`, `/v1/deployment_runs`,
//! migration 0015).

use crate::webhooks::WebhookEvent;
use mast_domain::deployment::{DeploymentSpec, DeploymentState};
use mast_domain::time::Micros;

pub use mast_domain::query::{DeploymentFilter, DeploymentRunFilter};

/// One deployment's row.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRecord {
    /// `depl_…`.
    pub id: String,
    pub workspace_id: String,
    pub spec: DeploymentSpec,
    pub state: DeploymentState,
    /// The next scheduled firing; `None` without a schedule.
    pub next_fire_at: Option<Micros>,
}

/// How a write of a deployment treats `next_fire_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextFire {
    /// Keep the stored value: the scheduler may have moved it since the row was read.
    Keep,
    /// Set it (a new or changed schedule, an unpause).
    Set(Option<Micros>),
}

/// What a write of a deployment changes, for the webhook event it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeploymentChange {
    Updated,
    Archived,
    Paused,
    Unpaused,
}

impl DeploymentChange {
    /// The webhook event type reporting it.
    pub fn webhook_type(self) -> &'static str {
        match self {
            DeploymentChange::Updated => "deployment.updated",
            DeploymentChange::Archived => "deployment.archived",
            DeploymentChange::Paused => "deployment.paused",
            DeploymentChange::Unpaused => "deployment.unpaused",
        }
    }

    /// The webhook event of this change to `d`.
    pub fn event(self, d: &DeploymentRecord) -> WebhookEvent {
        WebhookEvent::new(self.webhook_type(), &d.workspace_id, &d.id)
    }
}

/// The webhook events of a recorded run: it started, then succeeded (a session started) or
/// failed.
pub fn run_events(r: &DeploymentRunRecord) -> Vec<WebhookEvent> {
    let end = if r.session_id.is_some() {
        "deployment_run.succeeded"
    } else {
        "deployment_run.failed"
    };
    [("deployment_run.started"), end]
        .into_iter()
        .map(|kind| WebhookEvent::new(kind, &r.workspace_id, &r.id))
        .collect()
}

/// One run's row.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRunRecord {
    /// `drun_…`.
    pub id: String,
    pub workspace_id: String,
    pub deployment_id: String,
    /// `schedule` or `manual`.
    pub trigger_type: String,
    /// The slot a scheduled run fired for (before jitter, of which Mast adds none).
    pub scheduled_at: Option<Micros>,
    pub agent_id: String,
    pub agent_version: i64,
    pub session_id: Option<String>,
    /// JSON `{"type","message"}` when no session started.
    pub error: Option<String>,
    pub created_at: Micros,
}
