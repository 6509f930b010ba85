//! Memory-store requests from a self-hosted worker: the SDK's `EnvironmentWorker` downloads
//! and syncs a session's attached stores with its work item's sessions token (the memory
//! endpoints refuse the environment key). The token reaches only the stores its session
//! attached: their memories (written only when attached `read_write`), the store itself and
//! its versions to read; nothing that changes the store as a whole.

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::Method;
use axum::http::request::Parts;

use super::AppState;
use super::auth::{Principal, session_workspace};
use super::error::ApiError;
use mast_domain::memory_resource::{Access, attached};

/// The workspace a work token acts in on this memory-store request, or why it may not.
pub async fn worker_workspace(
    app: &AppState,
    parts: &mut Parts,
    principal: &Principal,
) -> Result<String, ApiError> {
    let Principal::WorkToken { session_id, .. } = principal else {
        return Err(ApiError::forbidden(
            "environment keys cannot use the memory-store endpoints; a worker uses its work item's sessions token",
        ));
    };
    let ws = session_workspace(&app.engine, principal, session_id).await?;
    let params = RawPathParams::from_request_parts(parts, app)
        .await
        .map_err(|_| {
            ApiError::forbidden("a work token reaches only its session's memory stores")
        })?;
    let Some(store_id) = params
        .iter()
        .find(|(k, _)| *k == "memory_store_id")
        .map(|(_, v)| v.to_string())
    else {
        return Err(ApiError::forbidden(
            "a work token reaches only its session's memory stores, not the list of stores or new ones",
        ));
    };
    let resources = app.engine.resources(&ws, session_id).await?;
    let Some(res) = attached(&resources)
        .into_iter()
        .find(|r| r.memory_store_id == store_id)
    else {
        return Err(ApiError::forbidden(format!(
            "session `{session_id}` has not attached memory store `{store_id}`; its work token reaches only the stores it attached"
        )));
    };
    let reading = parts.method == Method::GET;
    let on_memories = parts.uri.path().contains("/memories");
    if reading {
        return Ok(ws);
    }
    if !on_memories {
        return Err(ApiError::forbidden(
            "a work token may change memories, not the memory store itself or its versions",
        ));
    }
    if res.access == Access::ReadOnly {
        return Err(ApiError::forbidden(format!(
            "session `{session_id}` attached memory store `{store_id}` read-only; its memories cannot be changed with this token"
        )));
    }
    Ok(ws)
}
