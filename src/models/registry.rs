//! Which provider serves a model id: `mast-scripted` → the scripted model, Claude ids →
//! the Anthropic Messages API. Unknown ids are refused when an agent is saved.

use std::sync::Arc;

use super::ModelClient;
use super::anthropic::{AnthropicClient, AnthropicConfig};
use super::scripted::{self, Scripted};

/// The configured providers.
pub struct Models {
    anthropic: Arc<AnthropicClient>,
    scripted: Arc<Scripted>,
}

impl Models {
    /// Providers configured from `config`.
    pub fn new(anthropic: AnthropicConfig) -> Self {
        Models {
            anthropic: Arc::new(AnthropicClient::new(anthropic)),
            scripted: Arc::new(Scripted),
        }
    }

    /// The provider for a model id.
    pub fn route(&self, model_id: &str) -> Result<Arc<dyn ModelClient>, String> {
        if model_id == scripted::MODEL_ID {
            return Ok(self.scripted.clone());
        }
        if model_id.starts_with("claude-") {
            return Ok(self.anthropic.clone());
        }
        Err(format!(
            "no model provider serves `{model_id}`: use a Claude model id (claude-...) or `{}`",
            scripted::MODEL_ID
        ))
    }

    /// Fails with a clear message when no provider serves the id.
    pub fn check_routable(&self, model_id: &str) -> Result<(), String> {
        self.route(model_id).map(|_| ())
    }
}
