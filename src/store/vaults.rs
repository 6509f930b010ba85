//! The records the store keeps for vaults and their credentials.

use crate::domain::credential::Credential;

/// A credential row: the public credential (as responses show it), the normalised URL it
/// is matched on, and its secrets sealed by [`crate::secrets::Cipher`] (the store never sees
/// them in the clear).
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialRecord {
    pub credential: Credential,
    /// [`crate::domain::credential::normalize_url`] of the credential's `mcp_server_url`.
    pub server_url: String,
    /// The sealed [`crate::domain::credential::Secrets`].
    pub sealed: Vec<u8>,
}
