//! The records the store keeps for vaults and their credentials.

use mast_domain::credential::Credential;

/// A credential row: the public credential (as responses show it), the normalised URL it
/// is matched on, and its secrets sealed by the engine's secret cipher (the store never sees
/// them in the clear).
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialRecord {
    pub credential: Credential,
    /// [`mast_domain::credential::normalize_url`] of the credential's `mcp_server_url`.
    pub server_url: String,
    /// The sealed [`mast_domain::credential::Secrets`].
    pub sealed: Vec<u8>,
}
