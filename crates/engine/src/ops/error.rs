//! Why a front-door operation refused or failed.

use crate::work::Refusal;
use mast_domain::ids::other_kind_hint;
use mast_domain::invalid::Invalid;
use mast_store::StoreError;

/// The failures of a front-door operation, one variant per answer the API gives.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// No session with this id in the caller's workspace.
    #[error("session `{0}` not found{hint}", hint = other_kind_hint(.0, "sesn"))]
    SessionNotFound(String),
    /// No thread with this id in the session.
    #[error("thread `{0}` not found in this session{hint}", hint = other_kind_hint(.0, "sthr"))]
    ThreadNotFound(String),
    /// No agent with this id (and version, when one was asked for) in the workspace.
    #[error("agent `{id}`{} not found{}", version.map(|v| format!(" version {v}")).unwrap_or_default(), other_kind_hint(id, "agent"))]
    AgentNotFound { id: String, version: Option<i64> },
    /// No environment with this id in the workspace.
    #[error("environment `{0}` not found{hint}", hint = other_kind_hint(.0, "env"))]
    EnvironmentNotFound(String),
    /// No vault with this id in the workspace.
    #[error("vault `{0}` not found{hint}", hint = other_kind_hint(.0, "vlt"))]
    VaultNotFound(String),
    /// No credential with this id in the vault.
    #[error("credential `{0}` not found in this vault")]
    CredentialNotFound(String),
    /// No file with this id in the workspace (or it expired).
    #[error("file `{0}` not found{hint}", hint = other_kind_hint(.0, "file"))]
    FileNotFound(String),
    /// No memory store with this id in the workspace.
    #[error("memory store `{0}` not found{hint}", hint = other_kind_hint(.0, "memstore"))]
    MemoryStoreNotFound(String),
    /// No resource with this id in the session.
    #[error("resource `{0}` not found in this session")]
    ResourceNotFound(String),
    /// No event with this id in the session (a fork point).
    #[error("event `{event}` not found in session `{session}`")]
    EventNotFound { event: String, session: String },
    /// No work item with this id in the environment.
    #[error("work item `{0}` not found")]
    WorkNotFound(String),
    /// No deployment with this id in the workspace.
    #[error("deployment `{0}` not found{hint}", hint = other_kind_hint(.0, "depl"))]
    DeploymentNotFound(String),
    /// No deployment run with this id in the workspace.
    #[error("deployment run `{0}` not found")]
    DeploymentRunNotFound(String),
    /// No skill with this id in the workspace.
    #[error("skill `{0}` not found{hint}", hint = other_kind_hint(.0, "skill"))]
    SkillNotFound(String),
    /// No hook with this id in the workspace.
    #[error("hook `{0}` not found{hint}", hint = other_kind_hint(.0, "hook"))]
    HookNotFound(String),
    /// No webhook endpoint with this id in the workspace.
    #[error("webhook endpoint `{0}` not found{hint}", hint = other_kind_hint(.0, "whep"))]
    WebhookEndpointNotFound(String),
    /// No delivery with this id for the endpoint.
    #[error("webhook delivery `{0}` not found")]
    WebhookDeliveryNotFound(String),
    /// No memory with this id in the memory store.
    #[error("memory `{0}` not found in this memory store")]
    MemoryNotFound(String),
    /// No memory version with this id in the memory store.
    #[error("memory version `{0}` not found in this memory store")]
    MemoryVersionNotFound(String),
    /// Another memory (this one) already has the path a write asked for.
    #[error("another memory (`{0}`) already has this path")]
    MemoryPathTaken(String),
    /// The memory's content no longer has the hash the write expected; carries the current.
    #[error("the memory's content_sha256 is `{0}`, not the one the precondition expects")]
    MemoryPreconditionFailed(String),
    /// Something the request names is not there, in words that say what (a version of an
    /// agent, a path in a memory store, …) where no variant above fits.
    #[error("{0}")]
    NotFound(String),
    /// The request breaks a rule (a 400, with its error code when the rule has one).
    #[error(transparent)]
    Invalid(Invalid),
    /// The session's current state does not allow it (running, terminated, …); retrying the
    /// same request will not help until that state changes.
    #[error("{0}")]
    Conflict(String),
    /// A worker's view of its lease is stale (`heartbeat_precondition_failed`); carries the
    /// server's lease state.
    #[error("{message}")]
    Precondition {
        message: String,
        current: serde_json::Value,
    },
    /// The store failed (unavailable, internal).
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(i) => OpError::Invalid(i),
            StoreError::Conflict(m) => OpError::Conflict(m),
            e => OpError::Store(e),
        }
    }
}

impl From<Refusal> for OpError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Conflict(m) => OpError::Conflict(m),
            Refusal::Precondition { message, current } => {
                OpError::Precondition { message, current }
            }
        }
    }
}

impl From<Invalid> for OpError {
    fn from(e: Invalid) -> Self {
        OpError::Invalid(e)
    }
}
