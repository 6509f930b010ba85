//! The deployment scheduler: a task on every replica, owned by the engine's task tracker and
//! stopped by its shutdown token, that fires due schedules.
//!
//! Each firing is claimed in the store before anything happens: the claim moves the
//! deployment's `next_fire_at` from the slot it read to the next slot with one conditional
//! update, which exactly one replica wins. The winner then creates the session and records
//! the run; at most one run per (deployment, slot) is also enforced by a unique index. A
//! replica that dies between its claim and its run loses that one firing (at most once,
//! never twice).
//!
//! Catch-up: when the scheduler finds a deployment whose `next_fire_at` passed while no
//! replica was running (or while the store was unreachable), it fires **once, for the most
//! recent slot at or before now**, and skips the older ones; the next firing is the first slot
//! after now. Slots that pass while a deployment is paused are never fired.

use std::time::Duration;

use super::Trigger;
use crate::Engine;
use mast_domain::schedule::Pace;
use mast_store::StoreResult;

/// Most due deployments one pass fires; the rest wait for the next pass.
const BATCH: i64 = 100;

/// How often the store is asked for due firings: firings start within this of their slot.
fn period(pace: Pace) -> Duration {
    if pace == Pace::SecondsForTests {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(1)
    }
}

impl Engine {
    /// Starts this replica's scheduler; it ends with the engine's shutdown.
    pub(crate) fn start_deployment_scheduler(&self) {
        let engine = self.clone();
        self.inner
            .tasks
            .spawn(async move { engine.schedule_forever().await });
    }

    async fn schedule_forever(&self) {
        let mut tick = tokio::time::interval(period(self.inner.config.cron_pace));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.inner.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.fire_due().await {
                tracing::warn!(error = %e, "deployment scheduler could not fire due schedules");
            }
        }
    }

    /// Claims every due firing (up to a batch), then fires the claimed ones together, so
    /// one whose session creation waits (on a slow `user_prompt_submit` hook, say) does not
    /// hold up the others.
    async fn fire_due(&self) -> StoreResult<()> {
        let store = &self.inner.store;
        let now = self.now();
        let due = store.due_deployments(now, BATCH).await?;
        let mut claimed = Vec::with_capacity(due.len());
        for d in &due {
            if self.inner.shutdown.is_cancelled() {
                return Ok(());
            }
            let (Some(expected), Some(sched)) = (d.next_fire_at, d.spec.schedule.as_ref()) else {
                continue;
            };
            // The catch-up rule: the latest slot at or before now stands for every missed one.
            let slot = sched
                .latest_at_or_before(now, self.inner.config.cron_pace)
                .filter(|s| *s >= expected)
                .unwrap_or(expected);
            let next = sched.next_after(now.max(slot), self.inner.config.cron_pace);
            if !store.claim_deployment_fire(&d.id, expected, next).await? {
                continue;
            }
            claimed.push((d, slot));
        }
        let fired = claimed
            .iter()
            .map(|(d, slot)| async move { (d, self.fire(d, Trigger::Schedule(*slot)).await) });
        for (d, result) in futures_util::future::join_all(fired).await {
            if let Err(e) = result {
                tracing::warn!(deployment_id = %d.id, error = %e, "could not record a deployment run");
            }
        }
        Ok(())
    }
}
