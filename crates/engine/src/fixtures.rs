//! Rows for the engine's unit tests: a session row in a given status and engine state.

use crate::state::{EngineState, Pending, PendingKind, ThreadRun, ThreadStatus};
use mast_domain::agent::{ExecutionIdentity, SessionAgent};
use mast_domain::environment::EnvironmentConfig;
use mast_domain::model_config::ModelConfig;
use mast_domain::session::{SessionBody, SessionStatus, SessionUsage};
use mast_store::{SessionRecord, ThreadRecord};

/// The primary thread of every fixture session.
pub const PRIMARY: &str = "sthr_primary";
/// The delegate thread [`with_delegate`] adds.
pub const DELEGATE: &str = "sthr_delegate";
/// A fixed clock reading.
pub const NOW: i64 = 1_000_000_000;

fn agent() -> SessionAgent {
    SessionAgent {
        tag: Default::default(),
        id: "agent_1".into(),
        version: 1,
        name: "agent".into(),
        description: None,
        system: None,
        model: ModelConfig {
            id: "mast-scripted".into(),
            effort: None,
            speed: None,
            inference_geo: None,
        },
        tools: vec![],
        mcp_servers: vec![],
        skills: vec![],
        execution_identity: ExecutionIdentity::ServiceAccount,
        multiagent: None,
    }
}

/// A session row in `status` with engine state `st`, in a cloud or self-hosted environment.
pub fn session(status: SessionStatus, st: &EngineState, self_hosted: bool) -> SessionRecord {
    let body = SessionBody {
        title: None,
        metadata: Default::default(),
        agent: agent(),
        resources: vec![],
        vault_ids: vec![],
        budget: None,
        outcome_evaluations: vec![],
        deployment_id: None,
        environment: if self_hosted {
            EnvironmentConfig::SelfHosted
        } else {
            EnvironmentConfig::default_cloud()
        },
        primary_thread_id: PRIMARY.into(),
        repository_tokens: Default::default(),
    };
    let active = status.is_active();
    SessionRecord {
        id: "sesn_1".into(),
        workspace_id: "ws".into(),
        agent_id: "agent_1".into(),
        agent_version: 1,
        environment_id: "env_1".into(),
        status: status.as_str().into(),
        body: serde_json::to_string(&body).unwrap().into(),
        usage: serde_json::to_string(&SessionUsage::default()).unwrap(),
        active_micros: 0,
        running_since: active.then_some(NOW - 2_000_000),
        last_seq: 0,
        engine: serde_json::to_string(st).unwrap(),
        lease_owner: None,
        lease_expires_at: None,
        created_at: NOW - 10_000_000,
        updated_at: NOW - 10_000_000,
        archived_at: None,
        terminated_at: (status == SessionStatus::Terminated).then_some(NOW - 1_000_000),
        workflow_deadline_at: None,
        version: 0,
    }
}

/// Blocking calls `ids` of `kind` on the primary thread.
pub fn pending(kind: PendingKind, ids: &[&str]) -> EngineState {
    EngineState {
        pending: ids
            .iter()
            .map(|id| Pending {
                id: id.to_string(),
                kind,
                thread_id: PRIMARY.into(),
                mcp: false,
            })
            .collect(),
        ..Default::default()
    }
}

/// `st` with a delegate thread in `status`.
pub fn with_delegate(mut st: EngineState, status: ThreadStatus) -> EngineState {
    let mut run = ThreadRun::new("helper", false, NOW - 5_000_000);
    run.set_status(status, NOW - 1_000_000);
    st.threads.insert(DELEGATE.into(), run);
    st
}

/// A thread row of session `sesn_1`: the primary one (no parent) or a delegate.
pub fn thread_row(id: &str, parent: Option<&str>) -> ThreadRecord {
    ThreadRecord {
        id: id.into(),
        session_id: "sesn_1".into(),
        parent_thread_id: parent.map(str::to_string),
        spawning_event_id: None,
        status: "idle".into(),
        body: r#"{"agent": {"name": "helper", "multiagent": null}, "agent_name": "helper"}"#.into(),
        created_at: NOW - 5_000_000,
        updated_at: NOW - 1_000_000,
        archived_at: None,
    }
}
