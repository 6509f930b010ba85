//! Which keys stand, as open event streams need to know: a stream outlives the request that
//! authenticated it, so it must end when its key is revoked — by this server, another replica
//! or the CLI writing the store directly. One task per server reads the stored keys every
//! [`INTERVAL`] (a small query, however many streams are open) and publishes them; a stream
//! checks its caller against what was published, in memory, whenever it changes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::auth::Principal;
use mast_engine::keys::{KeyKind, KeyRecord, Keys};

/// How often the stored keys are read. A revoked key's streams end within about this.
pub const INTERVAL: Duration = Duration::from_secs(2);

/// The keys that stood when they were last read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// Hashes of API keys not revoked.
    api: HashSet<String>,
    /// Hashes of environment keys (revoking one deletes it).
    environment: HashSet<String>,
    /// Whether any API key was ever made (revoked ones count: open mode never comes back).
    any_api_key: bool,
}

impl Standing {
    fn of(keys: &[KeyRecord]) -> Self {
        let mut s = Standing::default();
        for k in keys {
            match k.kind {
                KeyKind::Api => {
                    s.any_api_key = true;
                    if k.revoked_at.is_none() {
                        s.api.insert(k.key_hash.clone());
                    }
                }
                KeyKind::Environment { .. } => {
                    s.environment.insert(k.key_hash.clone());
                }
            }
        }
        s
    }

    /// Whether `caller` still stands by these keys; None for a credential they cannot vouch
    /// for (a work token lives and dies with its item, which the store must be asked about).
    pub fn vouches(&self, caller: &Principal) -> Option<bool> {
        match caller {
            Principal::ApiKey {
                key_hash: Some(h), ..
            } => Some(self.api.contains(h)),
            Principal::ApiKey { key_hash: None, .. } => Some(!self.any_api_key),
            Principal::EnvironmentKey { key_hash, .. } => Some(self.environment.contains(key_hash)),
            Principal::WorkToken { .. } => None,
        }
    }
}

/// The published keys: None until the first read.
pub type Published = Option<Arc<Standing>>;

/// The keys as last read, published to every open stream.
pub struct KeyWatch {
    tx: Arc<watch::Sender<Published>>,
}

impl Default for KeyWatch {
    fn default() -> Self {
        KeyWatch {
            tx: Arc::new(watch::Sender::new(None)),
        }
    }
}

impl KeyWatch {
    /// A receiver that sees every change from now on, and counts as changed at once: a key
    /// revoked between a stream's authentication and this call is caught at its first frame.
    pub fn subscribe(&self) -> watch::Receiver<Published> {
        let mut rx = self.tx.subscribe();
        rx.mark_changed();
        rx
    }

    /// Reads the stored keys every [`INTERVAL`] until `shutdown`, publishing them when they
    /// changed.
    pub fn spawn(&self, keys: Keys, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            loop {
                match keys.list().await {
                    Ok(keys) => {
                        let now = Standing::of(&keys);
                        tx.send_if_modified(|published| {
                            let changed = published.as_deref() != Some(&now);
                            if changed {
                                *published = Some(Arc::new(now));
                            }
                            changed
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read the keys to see revocations")
                    }
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(INTERVAL) => {}
                }
            }
        })
    }
}
