//! The answer of `mcp_oauth_validate`: what a live probe of a credential
//! against its MCP server found. Response bodies it quotes are scrubbed of secrets.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::type_tag;

type_tag!(
    /// `"type": "vault_credential_validation"`.
    ValidationTag = "vault_credential_validation"
);

/// The overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValidationStatus {
    /// The MCP server accepted the credential.
    Valid,
    /// The MCP server (or the token endpoint) refused it.
    Invalid,
    /// No verdict: the server could not be reached or answered something else.
    Unknown,
}

/// An HTTP response captured during a probe (body scrubbed, maybe truncated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HttpCapture {
    pub status_code: u16,
    pub content_type: String,
    pub body: String,
    pub body_truncated: bool,
}

/// The failing MCP step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct McpProbe {
    pub method: String,
    pub http_response: Option<HttpCapture>,
}

/// How a refresh-token exchange went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefreshStatus {
    Succeeded,
    Failed,
    ConnectError,
    NoRefreshToken,
}

/// The refresh attempted during a validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RefreshAttempt {
    pub status: RefreshStatus,
    pub http_response: Option<HttpCapture>,
}

/// `vault_credential_validation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CredentialValidation {
    #[serde(rename = "type")]
    pub tag: ValidationTag,
    pub credential_id: String,
    pub vault_id: String,
    pub status: ValidationStatus,
    pub has_refresh_token: bool,
    pub validated_at: String,
    pub mcp_probe: Option<McpProbe>,
    pub refresh: Option<RefreshAttempt>,
}
