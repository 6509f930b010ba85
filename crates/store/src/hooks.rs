//! The records the store keeps for hooks (Mast's own addition).

use mast_domain::hook::Hook;

/// A hook row: the hook as responses show it (never with its secret) and its signing secret
/// sealed by the engine's secret cipher with the hook id as context.
#[derive(Debug, Clone, PartialEq)]
pub struct HookRecord {
    pub hook: Hook,
    /// The sealed `whsec_…` text.
    pub sealed_secret: Vec<u8>,
}
