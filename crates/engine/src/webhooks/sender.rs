//! The delivery task each replica runs: claim due deliveries in the store (a lease, so one
//! replica sends a delivery at a time; only each endpoint's oldest pending one, so an
//! endpoint gets its events in order), send them concurrently across endpoints, record each
//! attempt, retry with exponential backoff and jitter until the retry period runs out.
//!
//! At-least-once: a sender that dies mid-delivery leaves its lease to expire and another
//! sender (here or on another replica) sends it again with the same `webhook-id`. A slow
//! endpoint holds only its own slot: the timeout bounds it and others keep going.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng as _;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::Webhooks;
use mast_domain::ids::new_id;
use mast_domain::time::Micros;
use mast_store::webhooks::{AttemptOutcome, AttemptRecord, DeliveryRecord};

/// Longest quote of a receiver's answer kept in an attempt's `error`.
const ERROR_QUOTE: usize = 300;

impl Webhooks {
    /// Starts this replica's sender (as lease owner `owner`); it stops when `shutdown` is
    /// cancelled, abandoning sends in flight to their leases.
    pub fn spawn_sender(
        self: &Arc<Self>,
        owner: String,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let hooks = self.clone();
        tokio::spawn(async move { hooks.run(owner, shutdown).await })
    }

    async fn run(self: Arc<Self>, owner: String, shutdown: CancellationToken) {
        let mut sending: JoinSet<()> = JoinSet::new();
        let lease = self.config.lease().as_micros() as Micros;
        loop {
            let room = self.config.concurrency.saturating_sub(sending.len());
            let mut claimed = 0;
            if room > 0 {
                match self
                    .store
                    .claim_webhook_deliveries(&owner, lease, room as i64)
                    .await
                {
                    Ok(due) => {
                        claimed = due.len();
                        for d in due {
                            let (hooks, owner) = (self.clone(), owner.clone());
                            sending.spawn(async move { hooks.send(&owner, d).await });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not claim webhook deliveries"),
                }
            }
            // Look again at once when a claim was full (more may be due) ...
            if claimed > 0 && claimed == room {
                continue;
            }
            // ... else when a send ends (its endpoint's next event is due) or the poll ticks.
            tokio::select! {
                _ = shutdown.cancelled() => {
                    sending.abort_all();
                    return;
                }
                Some(_) = sending.join_next(), if !sending.is_empty() => {}
                _ = tokio::time::sleep(self.config.poll) => {}
            }
        }
    }

    /// One attempt at one delivery, recorded.
    async fn send(&self, owner: &str, d: DeliveryRecord) {
        let started = self.store.clock().now();
        let endpoint = match self.store.webhook_endpoint_by_id(&d.endpoint_id).await {
            Ok(Some(e)) => e,
            // Deleted since the claim: its deliveries went with it.
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, delivery_id = %d.id, "could not read a webhook endpoint");
                return;
            }
        };
        let (status, latency_ms, error) = match self.signing_secrets(&endpoint, started) {
            Err(why) => (None, 0, Some(why)),
            Ok(secrets) => match self
                .poster
                .post(
                    &endpoint.url,
                    &d.event_id,
                    d.payload.as_bytes(),
                    &secrets,
                    self.config.timeout,
                )
                .await
            {
                Ok(a) if (200..300).contains(&a.status) => (
                    Some(i64::from(a.status)),
                    a.latency.as_millis() as i64,
                    None,
                ),
                Ok(a) => (
                    Some(i64::from(a.status)),
                    a.latency.as_millis() as i64,
                    Some(quote(&format!("HTTP {}: {}", a.status, a.body))),
                ),
                Err(u) => (None, u.latency.as_millis() as i64, Some(quote(&u.message))),
            },
        };
        let outcome = if error.is_none() {
            AttemptOutcome::Delivered
        } else if self.store.clock().now() - d.created_at
            >= self.config.retry_period.as_micros() as Micros
        {
            AttemptOutcome::Failed
        } else {
            AttemptOutcome::RetryIn(
                retry_delay(
                    self.config.backoff_base,
                    self.config.backoff_cap,
                    d.attempts as u32 + 1,
                )
                .as_micros() as Micros,
            )
        };
        let attempt = AttemptRecord {
            id: new_id("what"),
            delivery_id: d.id.clone(),
            attempted_at: started,
            status_code: status,
            latency_ms,
            error,
            next_retry_at: None,
        };
        match self
            .store
            .finish_webhook_attempt(owner, &attempt, outcome)
            .await
        {
            Ok(true) => {}
            Ok(false) => tracing::info!(
                delivery_id = %d.id,
                "a webhook delivery's lease ran out during its attempt; another sender retries it"
            ),
            Err(e) => {
                tracing::warn!(error = %e, delivery_id = %d.id, "could not record a webhook attempt")
            }
        }
    }
}

/// The delay before retry `attempt` (1-based): exponential from `base` up to `cap`, then
/// scaled by a random factor in [0.5, 1] so endpoints that failed together do not all
/// retry together.
pub fn retry_delay(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let full = crate::backoff::delay(base, cap, attempt, None);
    full.mul_f64(rand::rng().random_range(0.5..=1.0))
}

fn quote(s: &str) -> String {
    match s.char_indices().nth(ERROR_QUOTE) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_with_jitter_under_the_cap() {
        let (base, cap) = (Duration::from_secs(5), Duration::from_secs(3600));
        for attempt in 1..20 {
            let full = crate::backoff::delay(base, cap, attempt, None);
            let d = retry_delay(base, cap, attempt);
            assert!(
                d <= full && d >= full / 2,
                "attempt {attempt}: {d:?} of {full:?}"
            );
        }
        assert_eq!(
            crate::backoff::delay(base, cap, 3, None),
            Duration::from_secs(20)
        );
    }
}
