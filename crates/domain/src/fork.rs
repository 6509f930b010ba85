//! `POST /v1/sessions/{id}/fork` (Mast's own, beyond the upstream API): its request and the
//! metadata keys a fork records its origin under.

use serde::Deserialize;
use utoipa::ToSchema;

/// Body of `POST /v1/sessions/{id}/fork`; an empty body forks at the latest event.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a fork request object")]
pub struct ForkRequest {
    /// The event (`sevt_…`) of the session whose history the fork keeps, up to and including
    /// it; the latest event when absent. The fork ends earlier when this point leaves a tool
    /// call without its result or a model request unfinished (see `mast.forked_at_event`).
    #[serde(default)]
    pub event_id: Option<String>,
}

/// Metadata key: the session a fork was made from.
pub const FORKED_FROM_SESSION: &str = "mast.forked_from_session";
/// Metadata key: the original's event the fork's history ends with (after snapping to a
/// clean point); absent when the fork holds no events.
pub const FORKED_AT_EVENT: &str = "mast.forked_at_event";
/// Metadata key: the event the client asked for, present only when the fork ends earlier.
pub const FORK_REQUESTED_EVENT: &str = "mast.fork_requested_event";
