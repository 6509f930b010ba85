//! Credentials as every layer names them: the default workspace, the prefixes that tell a
//! worker's credential from an API key, and the hash that is the only form keys are stored in.

use sha2::{Digest, Sha256};

/// The default workspace every store is created with.
pub const DEFAULT_WORKSPACE: &str = "wrkspc_default";

/// Prefix of API keys.
pub const API_KEY_PREFIX: &str = "mast_sk_";
/// Prefix of environment keys (a self-hosted environment's workers).
pub const ENVIRONMENT_KEY_PREFIX: &str = "mast_ek_";
/// Prefix of work items' sessions tokens.
pub const WORK_TOKEN_PREFIX: &str = "mast_wt_";

/// Hex SHA-256 of a key: the only form in which keys are stored or cached.
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
