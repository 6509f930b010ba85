//! A session's `github_repository` resources on the host: each is cloned (at its checkout,
//! with its token) into the session's workspace at its `mount_path` when a turn first sets up
//! the session's tools, and taken out of the workspace when the resource is deleted.
//!
//! A clone that fails becomes a `session.error` of the matching `repository_*` type with
//! `retry_status: retrying`: the turn goes on without the repository, and the next turn that
//! uses tools tries again, with the token as it is then (so a rotation fixes a bad token).
//! A marker per resource in the session's server-private mounts directory records a finished
//! clone, so the agent's own changes to the working copy are never cloned over.

use std::path::PathBuf;

use base64::Engine as _;
use serde_json::{Value, json};

use super::Inner;
use mast_domain::repository::RepositoryResource;
use mast_domain::session::SessionBody;
use mast_sandbox::SessionTools;
use mast_sandbox::git::{self, CloneJob, Failure, FailureKind};

/// The server-private directory of a session's clones in progress and their markers.
fn repos_dir(inner: &Inner, sid: &str) -> PathBuf {
    inner.toolbox.mounts_dir(sid).join(".repos")
}

/// Clones every repository of the session not cloned yet; the `session.error` bodies of those
/// that failed, in resource order.
pub(super) async fn prepare(
    inner: &Inner,
    sid: &str,
    body: &SessionBody,
    tools: &SessionTools,
) -> Vec<Value> {
    let mut errors = Vec::new();
    for v in &body.resources {
        if v.get("type").and_then(Value::as_str) != Some("github_repository") {
            continue;
        }
        let Ok(repo) = serde_json::from_value::<RepositoryResource>(v.clone()) else {
            continue;
        };
        let marker = repos_dir(inner, sid).join(&repo.id);
        if marker.exists() {
            continue;
        }
        let result = tokio::select! {
            r = clone_one(inner, sid, body, tools, &repo) => r,
            _ = inner.shutdown.cancelled() => Err(Failure {
                kind: FailureKind::Clone,
                message: "the server is shutting down".into(),
            }),
        };
        match result {
            Ok(()) => {
                if let Err(e) = std::fs::write(&marker, &repo.url) {
                    tracing::warn!(session = sid, resource = %repo.id, error = %e, "the clone marker could not be written");
                }
            }
            // Another thread of the session finished the same clone first.
            Err(_) if marker.exists() => {}
            Err(f) => {
                tracing::info!(session = sid, resource = %repo.id, kind = f.kind.error_type(), "a repository could not be cloned");
                errors.push(json!({"error": {
                    "type": f.kind.error_type(),
                    "message": format!(
                        "repository `{}` could not be cloned into {}: {}; the session continues without it",
                        repo.url, repo.mount_path, f.message
                    ),
                    "repository_url": repo.url,
                    "retry_status": {"type": "retrying"},
                }}));
            }
        }
    }
    errors
}

/// Clones one repository into a fresh private directory, then moves it into the workspace.
async fn clone_one(
    inner: &Inner,
    sid: &str,
    body: &SessionBody,
    tools: &SessionTools,
    repo: &RepositoryResource,
) -> Result<(), Failure> {
    let failed = |message: String| Failure {
        kind: FailureKind::Clone,
        message,
    };
    let token = match body.repository_tokens.get(&repo.id) {
        None => None,
        Some(sealed) => Some(open_token(inner, &repo.id, sealed).map_err(failed)?),
    };
    let dir = repos_dir(inner, sid);
    git::private_dir(&dir).map_err(|e| failed(format!("no room for the clone: {e}")))?;
    let staging = dir.join(format!(".clone-{}", mast_domain::ids::new_id("tmp")));
    let result = async {
        git::clone(&CloneJob {
            url: &repo.url,
            token: token.as_deref(),
            checkout: repo.checkout.as_ref(),
            dest: &staging,
            egress: &tools.egress,
            guard: tools.netguard,
            timeout: git::CLONE_TIMEOUT,
        })
        .await?;
        let (workspace, path, from, owner) = (
            tools.workspace.clone(),
            repo.mount_path.clone(),
            staging.clone(),
            tools.user,
        );
        tokio::task::spawn_blocking(move || git::place(&workspace, &path, &from, owner))
            .await
            .map_err(|e| failed(format!("the clone could not be placed: {e}")))?
            .map_err(failed)
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_dir_all(&staging).await;
    }
    result
}

/// The token sealed for resource `rid`.
fn open_token(inner: &Inner, rid: &str, sealed: &str) -> Result<String, String> {
    let cipher = inner
        .secrets
        .as_ref()
        .map_err(|why| format!("the repository's token cannot be decrypted: {why}"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(sealed)
        .map_err(|_| "the repository's stored token is damaged".to_string())?;
    let plain = cipher.open(&bytes, rid).map_err(|e| e.to_string())?;
    String::from_utf8(plain).map_err(|_| "the repository's stored token is damaged".to_string())
}

/// Takes a deleted repository's working copy out of the workspace (the resource is gone, so
/// it is no longer there from the next tool call on) and forgets that it was cloned.
pub(crate) async fn remove(inner: &Inner, sid: &str, resource: &Value) {
    let Ok(repo) = serde_json::from_value::<RepositoryResource>(resource.clone()) else {
        return;
    };
    let dir = repos_dir(inner, sid);
    let marker = dir.join(&repo.id);
    if !marker.exists() {
        return;
    }
    if let Err(e) = git::private_dir(&dir) {
        tracing::warn!(session = sid, error = %e, "a deleted repository could not be removed");
        return;
    }
    let trash = dir.join(format!(".gone-{}", mast_domain::ids::new_id("tmp")));
    let (workspace, path, to) = (
        inner.toolbox.workspace_dir(sid),
        repo.mount_path.clone(),
        trash.clone(),
    );
    let taken = tokio::task::spawn_blocking(move || git::take_out(&workspace, &path, &to)).await;
    match taken {
        Ok(Ok(true)) => {
            // std's remove_dir_all never follows links (CVE-2022-21658), so links the agent
            // left in the working copy delete nothing outside it.
            let _ = tokio::fs::remove_dir_all(&trash).await;
        }
        Ok(Ok(false)) => {}
        Ok(Err(e)) => {
            tracing::warn!(session = sid, resource = %repo.id, error = %e, "a deleted repository's working copy stays")
        }
        Err(e) => tracing::warn!(session = sid, error = %e, "removing a repository failed"),
    }
    let _ = tokio::fs::remove_file(&marker).await;
}
