//! What operability endpoints read: whether the store can serve, which store it is, and the
//! counts that metrics report as gauges.

use super::OpError;
use crate::Engine;

pub use mast_store::OpsCounts;

impl Engine {
    /// None when the store can serve requests (reachable, schema current); otherwise why not.
    pub async fn readiness(&self) -> Option<String> {
        self.inner.store.readiness().await
    }

    /// The store's name (`postgres` or `sqlite`).
    pub fn store_backend(&self) -> &'static str {
        self.inner.store.backend()
    }

    /// Sessions by status and queued work, across the store.
    pub async fn ops_counts(&self) -> Result<OpsCounts, OpError> {
        Ok(self.inner.store.ops_counts().await?)
    }

    /// Stream subscribers connected to this process.
    pub fn stream_subscribers(&self) -> usize {
        self.inner.hub.subscriber_count()
    }
}
