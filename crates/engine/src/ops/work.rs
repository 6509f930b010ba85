//! A worker's requests on one self-hosted work item: acknowledge, heartbeat, stop, and a
//! client's metadata update — each a decision of [`crate::work`] on the locked item.

use tokio::sync::oneshot;

use super::OpError;
use crate::Engine;
use crate::work::{self, LeaseTerms, Refusal};
use mast_domain::metadata::{self, MetadataPatch};
use mast_domain::work::WorkHeartbeat;
use mast_store::{StoppedWork, StoreError, WorkRecord};

impl Engine {
    /// Acknowledges a polled item for its worker.
    pub async fn ack_work(
        &self,
        env_id: &str,
        work_id: &str,
        terms: LeaseTerms,
    ) -> Result<WorkRecord, OpError> {
        let clock = self.inner.store.clock().clone();
        let (w, ()) = self
            .decide_work(env_id, work_id, move |w| work::ack(w, clock.now(), terms))
            .await?;
        Ok(w)
    }

    /// Renews a worker's lease on an item (see [`work::heartbeat`]).
    pub async fn heartbeat_work(
        &self,
        env_id: &str,
        work_id: &str,
        expected: Option<String>,
        desired_ttl: Option<i64>,
        terms: LeaseTerms,
    ) -> Result<WorkHeartbeat, OpError> {
        let clock = self.inner.store.clock().clone();
        let (_, hb) = self
            .decide_work(env_id, work_id, move |w| {
                work::heartbeat(w, expected.as_deref(), desired_ttl, clock.now(), terms)
            })
            .await?;
        Ok(hb)
    }

    /// Stops an item; when it stopped for good, a session still waiting on a worker's tool
    /// result is queued again.
    pub async fn stop_work(
        &self,
        env_id: &str,
        work_id: &str,
        force: bool,
    ) -> Result<WorkRecord, OpError> {
        let clock = self.inner.store.clock().clone();
        let (w, ()) = self
            .decide_work(env_id, work_id, move |w| work::stop(w, force, clock.now()))
            .await?;
        if w.stopped_at.is_some() {
            // A worker that let go mid-turn leaves tool calls unanswered: queue the session
            // again. (Marked in the stop's own transaction, so the reaper finishes this after
            // a crash.)
            let item = StoppedWork {
                work_id: w.id.clone(),
                session_id: w.session_id.clone(),
            };
            self.settle_stopped_work(&item).await;
        }
        Ok(w)
    }

    /// Applies a metadata patch to an item, checked against the stored metadata first so a
    /// bad patch is refused without a write.
    pub async fn update_work_metadata(
        &self,
        env_id: &str,
        work_id: &str,
        patch: MetadataPatch,
    ) -> Result<WorkRecord, OpError> {
        let current = self
            .inner
            .store
            .get_work(env_id, work_id)
            .await?
            .ok_or_else(|| OpError::WorkNotFound(work_id.to_string()))?;
        let stored: metadata::Metadata = serde_json::from_str(&current.metadata)
            .map_err(|e| StoreError::Internal(anyhow::anyhow!("stored work metadata: {e}")))?;
        metadata::apply_patch(&stored, &patch, false)?;
        let clock = self.inner.store.clock().clone();
        let (w, ()) = self
            .decide_work(env_id, work_id, move |w| {
                let stored: metadata::Metadata =
                    serde_json::from_str(&w.metadata).unwrap_or_default();
                // Re-applied on the locked row so concurrent patches of other keys both land.
                if let Ok(next) = metadata::apply_patch(&stored, &patch, false)
                    && next != stored
                {
                    w.metadata = serde_json::to_string(&next).unwrap_or_else(|_| "{}".into());
                    w.updated_at = clock.now();
                }
                Ok(())
            })
            .await?;
        Ok(w)
    }

    /// Runs `decide` on the locked item; a refusal aborts the transaction and changes nothing.
    async fn decide_work<T: Send + 'static>(
        &self,
        env_id: &str,
        work_id: &str,
        decide: impl FnOnce(&mut WorkRecord) -> Result<T, Refusal> + Send + 'static,
    ) -> Result<(WorkRecord, T), OpError> {
        // The store's work transaction returns only the row, so the decision's result (or
        // its refusal) comes back on a one-shot channel.
        let (tx, rx) = oneshot::channel();
        let result = self
            .inner
            .store
            .transact_work(
                env_id,
                work_id,
                Box::new(move |w| {
                    let decided = decide(w);
                    let refused = decided.is_err();
                    let _ = tx.send(decided);
                    if refused {
                        // Aborts the transaction; the refusal itself travels on the channel.
                        return Err(StoreError::Conflict("refused".into()));
                    }
                    Ok(())
                }),
            )
            .await;
        match (result, rx.await.ok()) {
            (_, Some(Err(refusal))) => Err(refusal.into()),
            (Ok(Some(w)), Some(Ok(v))) => Ok((w, v)),
            (Ok(None), _) => Err(OpError::WorkNotFound(work_id.to_string())),
            (Err(e), _) => Err(e.into()),
            (Ok(Some(_)), None) => Err(OpError::Store(StoreError::Internal(anyhow::anyhow!(
                "the store committed a work decision it never ran"
            )))),
        }
    }
}
