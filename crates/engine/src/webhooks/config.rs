//! Webhook delivery settings (`MAST_WEBHOOK_*`).

use std::time::Duration;

/// How deliveries are sent and retried.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhooksConfig {
    /// How long a delivery keeps being retried after its event (`MAST_WEBHOOK_RETRY_PERIOD_SECONDS`,
    /// default 24 h); then it is marked `failed`.
    pub retry_period: Duration,
    /// The first retry's delay, doubled per attempt with jitter (`MAST_WEBHOOK_BACKOFF_BASE_MS`,
    /// default 5 s) ...
    pub backoff_base: Duration,
    /// ... up to this (`MAST_WEBHOOK_BACKOFF_CAP_MS`, default 1 h).
    pub backoff_cap: Duration,
    /// The longest wait for a receiver's whole answer (`MAST_WEBHOOK_TIMEOUT_MS`, default 15 s).
    pub timeout: Duration,
    /// How often each replica looks for due deliveries (`MAST_WEBHOOK_POLL_MS`, default 1 s).
    pub poll: Duration,
    /// How many endpoints one replica sends to at once (`MAST_WEBHOOK_CONCURRENCY`, default 16).
    pub concurrency: usize,
    /// How long a rotated-out secret keeps signing beside the new one
    /// (`MAST_WEBHOOK_ROTATION_OVERLAP_SECONDS`, default 24 h).
    pub rotation_overlap: Duration,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            retry_period: Duration::from_secs(24 * 3600),
            backoff_base: Duration::from_secs(5),
            backoff_cap: Duration::from_secs(3600),
            timeout: Duration::from_secs(15),
            poll: Duration::from_secs(1),
            concurrency: 16,
            rotation_overlap: Duration::from_secs(24 * 3600),
        }
    }
}

impl WebhooksConfig {
    /// Applies the `MAST_WEBHOOK_*` variables.
    pub fn with_env(mut self) -> anyhow::Result<Self> {
        fn num(name: &str) -> anyhow::Result<Option<u64>> {
            match std::env::var(name) {
                Ok(v) if !v.trim().is_empty() => {
                    Ok(Some(v.trim().parse().map_err(|_| {
                        anyhow::anyhow!("{name} must be a whole number")
                    })?))
                }
                _ => Ok(None),
            }
        }
        if let Some(n) = num("MAST_WEBHOOK_RETRY_PERIOD_SECONDS")? {
            self.retry_period = Duration::from_secs(n);
        }
        if let Some(n) = num("MAST_WEBHOOK_BACKOFF_BASE_MS")? {
            anyhow::ensure!(n >= 1, "MAST_WEBHOOK_BACKOFF_BASE_MS must be at least 1");
            self.backoff_base = Duration::from_millis(n);
        }
        if let Some(n) = num("MAST_WEBHOOK_BACKOFF_CAP_MS")? {
            self.backoff_cap = Duration::from_millis(n);
        }
        if let Some(n) = num("MAST_WEBHOOK_TIMEOUT_MS")? {
            anyhow::ensure!(n >= 100, "MAST_WEBHOOK_TIMEOUT_MS must be at least 100");
            self.timeout = Duration::from_millis(n);
        }
        if let Some(n) = num("MAST_WEBHOOK_POLL_MS")? {
            anyhow::ensure!(n >= 10, "MAST_WEBHOOK_POLL_MS must be at least 10");
            self.poll = Duration::from_millis(n);
        }
        if let Some(n) = num("MAST_WEBHOOK_CONCURRENCY")? {
            anyhow::ensure!(n >= 1, "MAST_WEBHOOK_CONCURRENCY must be at least 1");
            self.concurrency = n as usize;
        }
        if let Some(n) = num("MAST_WEBHOOK_ROTATION_OVERLAP_SECONDS")? {
            self.rotation_overlap = Duration::from_secs(n);
        }
        Ok(self)
    }

    /// The lease a sender holds on a delivery: one attempt's timeout and as long again (at
    /// most 30 s) to record it. A sender that dies holds its delivery this long at most.
    pub fn lease(&self) -> Duration {
        self.timeout + self.timeout.min(Duration::from_secs(30))
    }
}

/// A webhook endpoint of the config file: a `[[webhooks]]` table with the fields of
/// `POST /v1/mast/webhook_endpoints` (`signing_secret` required, so receivers can be set up
/// ahead) and the `workspace` it belongs to (default: the default workspace). Read by the
/// binary's config, put in place by [`super::Webhooks::put_configured`].
#[derive(Debug, Clone)]
pub struct ConfiguredWebhook {
    /// `whep_config_<n>`: its place in the file, from 1.
    pub id: String,
    pub workspace: String,
    pub endpoint: mast_domain::webhook::WebhookEndpointCreate,
}
