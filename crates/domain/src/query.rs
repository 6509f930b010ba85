//! What a list asks for: which way a page walks its key, how far, and each resource's filters.
//! The API reads these from query strings, the engine passes them on, and both stores answer
//! them the same way.

use crate::memory::Operation;
use crate::time::Micros;

/// Which way a keyset scan walks the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ascending,
    Descending,
}

/// A page request in store terms: rows strictly beyond `after` in `direction`, at most `limit`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan<K> {
    pub after: Option<K>,
    pub direction: Direction,
    pub limit: i64,
}

/// Filters of `GET /v1/agents`.
#[derive(Debug, Clone, Default)]
pub struct AgentFilter {
    pub include_archived: bool,
    pub created_gte: Option<Micros>,
    pub created_lte: Option<Micros>,
}

/// Filters of `GET /v1/sessions`.
#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    pub agent_id: Option<String>,
    pub agent_version: Option<i64>,
    pub include_archived: bool,
    pub statuses: Vec<String>,
    pub created_gt: Option<Micros>,
    pub created_gte: Option<Micros>,
    pub created_lt: Option<Micros>,
    pub created_lte: Option<Micros>,
    /// Only sessions that attached this memory store.
    pub memory_store_id: Option<String>,
    /// Only sessions a firing of this deployment created.
    pub deployment_id: Option<String>,
}

/// Filters of `GET /v1/sessions/{id}/events` (times compare against `processed_at`).
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub types: Vec<String>,
    pub thread_id: Option<String>,
    /// With `thread_id`: also child threads' events cross-posted to the session's view.
    pub crossposts: bool,
    pub processed_gt: Option<Micros>,
    pub processed_gte: Option<Micros>,
    pub processed_lt: Option<Micros>,
    pub processed_lte: Option<Micros>,
}

/// Filters of `GET /v1/files`.
#[derive(Debug, Clone, Default)]
pub struct FileFilter {
    /// Only files of this scope (a session id).
    pub scope_id: Option<String>,
    /// Only these ids (empty: no restriction).
    pub ids: Vec<String>,
    /// Hides files whose `expires_at` is at or before this time (expired, not yet swept).
    pub live_at: Micros,
}

/// Filters of `GET /v1/memory_stores`.
#[derive(Debug, Clone, Default)]
pub struct MemoryStoreFilter {
    pub include_archived: bool,
    pub created_gte: Option<Micros>,
    pub created_lte: Option<Micros>,
}

/// Filters of `GET /v1/memory_stores/{id}/memory_versions`.
#[derive(Debug, Clone, Default)]
pub struct MemoryVersionFilter {
    pub memory_id: Option<String>,
    pub operation: Option<Operation>,
    pub session_id: Option<String>,
    pub api_key_id: Option<String>,
    pub created_gte: Option<Micros>,
    pub created_lte: Option<Micros>,
}

/// Filters of `GET /v1/deployments`.
#[derive(Debug, Clone, Default)]
pub struct DeploymentFilter {
    pub agent_id: Option<String>,
    pub include_archived: bool,
    /// `Some(true)`: only paused; `Some(false)`: only active (both leave archived ones out).
    pub paused: Option<bool>,
    pub created_gte: Option<Micros>,
    pub created_lte: Option<Micros>,
}

/// Filters of `GET /v1/deployment_runs`.
#[derive(Debug, Clone, Default)]
pub struct DeploymentRunFilter {
    pub deployment_id: Option<String>,
    /// `Some(true)`: runs with an error; `Some(false)`: runs with a session.
    pub has_error: Option<bool>,
    pub trigger_type: Option<String>,
    pub created_gt: Option<Micros>,
    pub created_gte: Option<Micros>,
    pub created_lt: Option<Micros>,
    pub created_lte: Option<Micros>,
}
