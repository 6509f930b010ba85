//! The MCP connector's bearer tokens, from a session's vaults.
//!
//! Every call reads the session's `vault_ids` and the matching credential from the store, so
//! archiving or deleting a vault or credential takes effect on the session's next MCP
//! request (nothing is cached beyond one call).

use std::sync::Arc;

use async_trait::async_trait;

use super::Vaults;
use super::oauth::{self, Refresh};
use crate::credentials::{BearerSource, CredentialError};
use crate::ops::OpError;
use mast_domain::credential::{CredentialAuth, Secrets, normalize_url};
use mast_domain::time::Micros;
use mast_store::CredentialRecord;

/// An OAuth access token this close to its expiry is refreshed before use.
const EXPIRY_MARGIN: Micros = 60 * 1_000_000;

/// The part of a session's stored body this needs.
#[derive(serde::Deserialize)]
struct SessionVaults {
    #[serde(default)]
    vault_ids: Vec<String>,
}

/// [`BearerSource`] over the vaults.
pub struct VaultBearers(pub Arc<Vaults>);

fn unavailable(e: impl std::fmt::Display) -> CredentialError {
    CredentialError::Unavailable(e.to_string())
}

fn op(e: OpError) -> CredentialError {
    unavailable(e)
}

/// Whether an access token should be refreshed before it is used at `now`.
fn near_expiry(auth: &CredentialAuth, now: Micros) -> bool {
    auth.expires_at().is_some_and(|t| t - now < EXPIRY_MARGIN)
}

impl Vaults {
    /// The credential a session presents to `server_url`: the first match in the order of
    /// its `vault_ids`, with the workspace it lives in.
    async fn session_credential(
        &self,
        session_id: &str,
        server_url: &str,
    ) -> Result<Option<(String, CredentialRecord)>, CredentialError> {
        let Some(session) = self
            .store
            .get_session_by_id(session_id)
            .await
            .map_err(unavailable)?
        else {
            return Ok(None);
        };
        let body: SessionVaults = serde_json::from_str(&session.body).map_err(unavailable)?;
        if body.vault_ids.is_empty() {
            return Ok(None);
        }
        let found = self
            .store
            .credentials_for_server(
                &session.workspace_id,
                &body.vault_ids,
                &normalize_url(server_url),
            )
            .await
            .map_err(unavailable)?;
        let first = body.vault_ids.iter().find_map(|v| {
            found
                .iter()
                .filter(|c| &c.credential.vault_id == v)
                .min_by(|a, b| a.credential.id.cmp(&b.credential.id))
        });
        Ok(first.map(|c| (session.workspace_id.clone(), c.clone())))
    }

    /// Refreshes an OAuth credential (one refresh at a time per credential), unless another
    /// call refreshed it since `seen` was read. The new token, stored.
    async fn refreshed_token(
        &self,
        ws: &str,
        seen: &CredentialRecord,
    ) -> Result<String, CredentialError> {
        let id = &seen.credential.id;
        let lock = self.refresh_lock(id);
        let _one_at_a_time = lock.lock().await;
        let now = self.store.clock().now();
        let cur = self
            .store
            .get_credential(ws, &seen.credential.vault_id, id)
            .await
            .map_err(unavailable)?
            .filter(|c| c.credential.archived_at.is_none())
            .ok_or_else(|| {
                CredentialError::Authentication(format!(
                    "credential `{id}` was archived or deleted"
                ))
            })?;
        let secrets = self.open(&cur).map_err(op)?;
        if cur.sealed != seen.sealed && !near_expiry(&cur.credential.auth, now) {
            // Refreshed (or replaced by a client) while this call waited.
            return Ok(secrets.token);
        }
        self.refresh_now(ws, &cur, &secrets, now).await
    }

    /// One refresh-token exchange, its tokens stored.
    async fn refresh_now(
        &self,
        ws: &str,
        cur: &CredentialRecord,
        secrets: &Secrets,
        now: Micros,
    ) -> Result<String, CredentialError> {
        let id = &cur.credential.id;
        match oauth::refresh(&self.http, cur.credential.auth.refresh(), secrets).await {
            Refresh::Issued(tokens) => {
                let (_, s) = self
                    .store_refresh(ws, cur, tokens, secrets, now)
                    .await
                    .map_err(op)?;
                tracing::info!(credential_id = %id, "refreshed an MCP OAuth access token");
                Ok(s.token)
            }
            Refresh::Refused(r) => Err(CredentialError::Authentication(format!(
                "the token endpoint refused to refresh credential `{id}` (HTTP {})",
                r.status_code
            ))),
            Refresh::Unreachable(why) => Err(CredentialError::Unavailable(format!(
                "the token endpoint of credential `{id}` could not be reached: {why}"
            ))),
            Refresh::NotPossible => Err(CredentialError::Authentication(format!(
                "credential `{id}` was refused or has expired, and it has no refresh token"
            ))),
        }
    }
}

#[async_trait]
impl BearerSource for VaultBearers {
    async fn bearer(
        &self,
        session_id: &str,
        server_url: &str,
        refresh: bool,
    ) -> Result<Option<String>, CredentialError> {
        let vaults = &self.0;
        let Some((ws, rec)) = vaults.session_credential(session_id, server_url).await? else {
            return Ok(None);
        };
        let secrets = vaults.open(&rec).map_err(op)?;
        let now = vaults.store.clock().now();
        match &rec.credential.auth {
            CredentialAuth::StaticBearer { .. } => Ok(Some(secrets.token)),
            CredentialAuth::McpOauth { .. } => {
                let due = refresh || near_expiry(&rec.credential.auth, now);
                let can_refresh =
                    rec.credential.auth.refresh().is_some() && secrets.refresh_token.is_some();
                if !due {
                    return Ok(Some(secrets.token));
                }
                if !can_refresh {
                    let expired = rec.credential.auth.expires_at().is_some_and(|t| t <= now);
                    if refresh || expired {
                        return Err(CredentialError::Authentication(format!(
                            "credential `{}` was refused or has expired, and it has no refresh token",
                            rec.credential.id
                        )));
                    }
                    // Close to expiry but still valid, with no way to renew: use it.
                    return Ok(Some(secrets.token));
                }
                vaults.refreshed_token(&ws, &rec).await.map(Some)
            }
        }
    }
}
