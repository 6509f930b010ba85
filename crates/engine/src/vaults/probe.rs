//! `mcp_oauth_validate`: tries a credential for real. An OAuth token that has expired (or is
//! about to) is refreshed first; then a JSON-RPC `initialize` is POSTed to the credential's
//! MCP server with `Authorization: Bearer …`; a 401 or 403 with an OAuth credential that can
//! refresh triggers one refresh and one more try. Refreshed tokens are stored.

use serde_json::json;

use super::Vaults;
use super::oauth::{self, Refresh};
use super::outbound::{Unreachable, capture};
use crate::ops::OpError;
use mast_domain::credential::{CredentialAuth, Secrets};
use mast_domain::credential_validation::{
    CredentialValidation, HttpCapture, McpProbe, RefreshAttempt, RefreshStatus, ValidationStatus,
    ValidationTag,
};
use mast_domain::time;
use mast_store::CredentialRecord;

/// The protocol version offered in the probe's `initialize`.
const PROTOCOL_VERSION: &str = "2025-06-18";
const METHOD: &str = "initialize";

/// What one `initialize` got.
enum Probe {
    Accepted,
    Refused(HttpCapture),
    Other(HttpCapture),
    Unreachable,
}

impl Vaults {
    /// POSTs `initialize` with `token`; ends the MCP session it opened, if any.
    async fn probe(&self, url: &str, token: &str, secrets: &Secrets) -> Probe {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": METHOD,
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mast-credential-check", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let Ok(req) = self.http.post(url) else {
            return Probe::Unreachable;
        };
        let req = req
            .bearer_auth(token)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .json(&body);
        let resp = match self.http.send(req).await {
            Ok(r) => r,
            Err(Unreachable(why)) => {
                tracing::debug!(error = %why, "credential probe: MCP server unreachable");
                return Probe::Unreachable;
            }
        };
        let status = resp.status();
        let known = secret_values(secrets, token);
        if status.is_success() {
            let session = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            drop(resp);
            if let Some(sid) = session
                && let Ok(req) = self.http.request(reqwest::Method::DELETE, url)
            {
                // Politeness: close the session the probe opened (failure changes nothing).
                let req = req
                    .bearer_auth(token)
                    .header("mcp-session-id", sid)
                    .timeout(std::time::Duration::from_secs(5));
                let _ = self.http.send(req).await;
            }
            return Probe::Accepted;
        }
        let cap = capture(resp, &known).await;
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            Probe::Refused(cap)
        } else {
            Probe::Other(cap)
        }
    }

    /// One refresh during a validation: the attempt as reported, and the new token if any.
    async fn validation_refresh(
        &self,
        ws: &str,
        rec: &CredentialRecord,
        secrets: &Secrets,
    ) -> Result<(RefreshAttempt, Option<Secrets>), OpError> {
        let now = self.store.clock().now();
        let attempt = |status, http_response| RefreshAttempt {
            status,
            http_response,
        };
        let lock = self.refresh_lock(&rec.credential.id);
        let _one_at_a_time = lock.lock().await;
        // A session may have refreshed it meanwhile (rotating the refresh token): use what
        // is stored now.
        let fresh = self
            .store
            .get_credential(ws, &rec.credential.vault_id, &rec.credential.id)
            .await?
            .ok_or_else(|| OpError::CredentialNotFound(rec.credential.id.clone()))?;
        let (rec, secrets) = if fresh.sealed == rec.sealed {
            (rec.clone(), secrets.clone())
        } else {
            let s = self.open(&fresh)?;
            (fresh, s)
        };
        let (rec, secrets) = (&rec, &secrets);
        Ok(
            match oauth::refresh(&self.http, rec.credential.auth.refresh(), secrets).await {
                Refresh::Issued(tokens) => {
                    let (_, s) = self.store_refresh(ws, rec, tokens, secrets, now).await?;
                    (attempt(RefreshStatus::Succeeded, None), Some(s))
                }
                Refresh::Refused(cap) => (attempt(RefreshStatus::Failed, Some(cap)), None),
                Refresh::Unreachable(_) => (attempt(RefreshStatus::ConnectError, None), None),
                Refresh::NotPossible => (attempt(RefreshStatus::NoRefreshToken, None), None),
            },
        )
    }

    /// Validates a credential of a vault of the workspace.
    pub async fn validate(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> Result<CredentialValidation, OpError> {
        let rec = self.credential(ws, vault_id, id).await?;
        let mut secrets = self.open(&rec)?;
        let oauth = matches!(rec.credential.auth, CredentialAuth::McpOauth { .. });
        let can_refresh =
            rec.credential.auth.refresh().is_some() && secrets.refresh_token.is_some();
        let url = rec.credential.auth.server_url().to_string();
        let mut refresh = None;
        let mut refreshed = false;
        let expiring = rec
            .credential
            .auth
            .expires_at()
            .is_some_and(|t| t - self.store.clock().now() < 60_000_000);
        if oauth && expiring && can_refresh {
            // Refreshed first; a failed refresh still lets the probe say whether the stored
            // token works.
            let (attempt, new) = self.validation_refresh(ws, &rec, &secrets).await?;
            refreshed = true;
            if let Some(s) = new {
                secrets = s;
            }
            refresh = Some(attempt);
        }
        let mut outcome = self.probe(&url, &secrets.token.clone(), &secrets).await;
        if let Probe::Refused(_) = &outcome
            && oauth
            && !refreshed
        {
            let (attempt, new) = self.validation_refresh(ws, &rec, &secrets).await?;
            refresh = Some(attempt);
            if let Some(s) = new {
                secrets = s;
                outcome = self.probe(&url, &secrets.token.clone(), &secrets).await;
            }
        }
        // Refused, but the token endpoint could not be asked for a new token: no verdict.
        let undecided = refresh
            .as_ref()
            .is_some_and(|r| r.status == RefreshStatus::ConnectError);
        let (status, probe) = match outcome {
            Probe::Accepted => (ValidationStatus::Valid, None),
            Probe::Refused(cap) => (
                if undecided {
                    ValidationStatus::Unknown
                } else {
                    ValidationStatus::Invalid
                },
                Some(McpProbe {
                    method: METHOD.into(),
                    http_response: Some(cap),
                }),
            ),
            Probe::Other(cap) => (
                ValidationStatus::Unknown,
                Some(McpProbe {
                    method: METHOD.into(),
                    http_response: Some(cap),
                }),
            ),
            Probe::Unreachable => (
                ValidationStatus::Unknown,
                Some(McpProbe {
                    method: METHOD.into(),
                    http_response: None,
                }),
            ),
        };
        Ok(self.report(&rec, status, can_refresh, probe, refresh))
    }

    fn report(
        &self,
        rec: &CredentialRecord,
        status: ValidationStatus,
        has_refresh_token: bool,
        mcp_probe: Option<McpProbe>,
        refresh: Option<RefreshAttempt>,
    ) -> CredentialValidation {
        CredentialValidation {
            tag: ValidationTag::Tag,
            credential_id: rec.credential.id.clone(),
            vault_id: rec.credential.vault_id.clone(),
            status,
            has_refresh_token,
            validated_at: time::format(self.store.clock().now()),
            mcp_probe,
            refresh,
        }
    }
}

/// Every secret value a quoted response must not show.
fn secret_values<'a>(secrets: &'a Secrets, token: &'a str) -> Vec<&'a str> {
    let mut v = vec![token, secrets.token.as_str()];
    v.extend(secrets.refresh_token.as_deref());
    v.extend(secrets.client_secret.as_deref());
    v
}
