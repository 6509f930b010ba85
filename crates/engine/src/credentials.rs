//! What the engine asks of a session's vaults when it connects to an MCP server.
//!
//! The MCP connector only needs a bearer token for a server URL; where tokens live (vaults,
//! encrypted credentials, OAuth refresh) stays behind [`BearerSource`].

use async_trait::async_trait;

/// Why no bearer token could be had for a server.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The matching credential was refused or could not be refreshed: the session reports
    /// `mcp_authentication_failed_error`.
    #[error("{0}")]
    Authentication(String),
    /// The store or a token endpoint did not answer; worth retrying.
    #[error("{0}")]
    Unavailable(String),
}

/// Gives the bearer token a session presents to an MCP server.
#[async_trait]
pub trait BearerSource: Send + Sync {
    /// The token for `server_url` from the session's vaults (first match in the session's
    /// `vault_ids` order), or `None` when no credential matches. With `refresh`, the caller
    /// was just refused (401) with the token it had, so an OAuth credential refreshes now.
    async fn bearer(
        &self,
        session_id: &str,
        server_url: &str,
        refresh: bool,
    ) -> Result<Option<String>, CredentialError>;
}

/// The source for a server without vaults: no session holds a credential.
pub struct NoCredentials;

#[async_trait]
impl BearerSource for NoCredentials {
    async fn bearer(&self, _: &str, _: &str, _: bool) -> Result<Option<String>, CredentialError> {
        Ok(None)
    }
}
