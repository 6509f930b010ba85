//! The models this server can route to, as `/v1/models` lists them.

use super::OpError;
use crate::Engine;

pub use mast_models::registry::CatalogEntry;

impl Engine {
    /// Every model the configured providers list, in the catalog's order.
    pub async fn model_catalog(&self) -> Vec<CatalogEntry> {
        self.inner.models.catalog().await
    }

    /// One model: from the catalog, or one a provider's prefix routes even though its
    /// endpoint does not list it.
    pub async fn model(&self, id: &str) -> Result<CatalogEntry, OpError> {
        let models = &self.inner.models;
        if let Some(e) = models.catalog().await.into_iter().find(|e| e.id == id) {
            return Ok(e);
        }
        match models.route(id) {
            Ok(route) => Ok(CatalogEntry {
                display_name: id.to_string(),
                id: id.to_string(),
                provider: route.provider,
            }),
            Err(_) => Err(OpError::NotFound(format!("model `{id}` not found"))),
        }
    }
}
