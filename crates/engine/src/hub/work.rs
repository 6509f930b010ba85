//! Wake-ups for workers long-polling an environment's work queue: whoever queues an item
//! signals its environment, and every poll waiting there tries to claim again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// One [`Notify`] per environment that has a poll waiting; entries go away with their
/// last waiter.
#[derive(Default)]
pub struct WorkSignals {
    envs: Mutex<HashMap<String, Arc<Notify>>>,
}

/// A poll's registration on its environment; drop it when the poll ends.
pub struct WorkWaiter<'a> {
    signals: &'a WorkSignals,
    environment_id: String,
    notify: Arc<Notify>,
}

impl WorkSignals {
    /// Registers a waiting poll on an environment.
    pub fn waiter(&self, environment_id: &str) -> WorkWaiter<'_> {
        let notify = self
            .envs
            .lock()
            .expect("work signals lock")
            .entry(environment_id.to_string())
            .or_default()
            .clone();
        WorkWaiter {
            signals: self,
            environment_id: environment_id.to_string(),
            notify,
        }
    }

    /// Tells every poll waiting on the environment that an item may be claimable.
    pub fn queued(&self, environment_id: &str) {
        let notify = self
            .envs
            .lock()
            .expect("work signals lock")
            .get(environment_id)
            .cloned();
        if let Some(n) = notify {
            n.notify_waiters();
        }
    }

    /// Environments with a waiting poll (for tests of cleanup).
    pub fn len(&self) -> usize {
        self.envs.lock().expect("work signals lock").len()
    }

    /// Whether no poll waits anywhere.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl WorkWaiter<'_> {
    /// The notify to wait on. Create its `notified()` future and `enable()` it before
    /// trying to claim, so a signal between the attempt and the wait is not lost.
    pub fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for WorkWaiter<'_> {
    fn drop(&mut self) {
        let mut envs = self.signals.envs.lock().expect("work signals lock");
        // Two references: the map's and ours. Anything more is another waiter.
        if Arc::strong_count(&self.notify) == 2 {
            envs.remove(&self.environment_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_wakes_a_registered_waiter_and_entries_clean_up() {
        let s = WorkSignals::default();
        {
            let w = s.waiter("env_a");
            let n = w.notify().notified();
            tokio::pin!(n);
            n.as_mut().enable();
            s.queued("env_a");
            tokio::time::timeout(std::time::Duration::from_secs(1), n)
                .await
                .expect("woken");
            assert_eq!(s.len(), 1);
        }
        assert!(s.is_empty());
    }
}
