//! A self-hosted environment's queue as workers and clients read it: long-polling for the
//! next item, listing, reading one item, the queue's statistics.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::OpError;
use crate::Engine;
use mast_domain::environment::{Environment, EnvironmentConfig};
use mast_domain::ids::new_secret;
use mast_domain::invalid::Invalid;
use mast_domain::keys::{WORK_TOKEN_PREFIX, hash_key};
use mast_domain::query::Scan;

pub use mast_store::{WorkRecord, WorkStats};

/// An item a poll claimed, with the sessions token made for it (shown once).
pub struct Claimed {
    /// The claimed item.
    pub item: WorkRecord,
    /// Its sessions token; only the hash is stored.
    pub token: String,
}

impl Engine {
    /// The self-hosted environment `env_id` of workspace `ws`: not found when it is not
    /// theirs, invalid when it is not self-hosted (only those have a work queue and worker
    /// keys).
    pub async fn self_hosted_environment(
        &self,
        ws: &str,
        env_id: &str,
    ) -> Result<Environment, OpError> {
        let env = self
            .inner
            .store
            .get_environment(ws, env_id)
            .await?
            .ok_or_else(|| OpError::EnvironmentNotFound(env_id.to_string()))?;
        if !matches!(env.config, EnvironmentConfig::SelfHosted) {
            return Err(Invalid::new(format!(
                "environment `{env_id}` is not self_hosted: only self-hosted environments have a work queue and worker keys"
            ))
            .into());
        }
        Ok(env)
    }

    /// Claims the next item of environment `env_id` for `worker`, waiting up to `wait` for
    /// one to be queued (or until `until` is cancelled). Items polled but not acknowledged
    /// for `reclaim_ms` are claimed again.
    pub async fn poll_work(
        &self,
        env_id: &str,
        worker: Option<&str>,
        reclaim_ms: i64,
        wait: Duration,
        until: &CancellationToken,
    ) -> Result<Option<Claimed>, OpError> {
        let deadline = tokio::time::Instant::now() + wait;
        let waiter = self.inner.hub.work.waiter(env_id);
        loop {
            let notified = waiter.notify().notified();
            tokio::pin!(notified);
            // Registered before the claim, so an item queued in between still wakes us.
            notified.as_mut().enable();
            let token = format!("{WORK_TOKEN_PREFIX}{}", new_secret(48));
            let now = self.now();
            let claimed = self
                .inner
                .store
                .poll_work(
                    env_id,
                    worker,
                    now,
                    now - reclaim_ms * 1_000,
                    &hash_key(&token),
                )
                .await?;
            if let Some(item) = claimed {
                return Ok(Some(Claimed { item, token }));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(None),
                _ = until.cancelled() => return Ok(None),
            }
        }
    }

    /// A page of environment `env_id`'s work items.
    pub async fn list_work(
        &self,
        env_id: &str,
        scan: &Scan<String>,
    ) -> Result<Vec<WorkRecord>, OpError> {
        Ok(self.inner.store.list_work(env_id, scan).await?)
    }

    /// Work item `work_id` of environment `env_id`.
    pub async fn work_item(&self, env_id: &str, work_id: &str) -> Result<WorkRecord, OpError> {
        self.inner
            .store
            .get_work(env_id, work_id)
            .await?
            .ok_or_else(|| OpError::WorkNotFound(work_id.to_string()))
    }

    /// Environment `env_id`'s queue depth, unacknowledged items, oldest queued item and
    /// recent pollers.
    pub async fn work_stats(&self, env_id: &str) -> Result<WorkStats, OpError> {
        Ok(self.inner.store.work_stats(env_id, self.now()).await?)
    }
}
