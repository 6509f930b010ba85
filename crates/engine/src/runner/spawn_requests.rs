//! The threads whose loops a runner's supervisor should start, asked for by its loops.
//!
//! A set, not a queue: the primary asks for every working thread on each pass, and a queue of
//! those asks grows faster than the supervisor drains it while many threads work, so by the
//! time an old ask is read its thread has long finished. Each such ask started a loop that
//! found nothing to do, whose end woke the primary to ask again — a livelock. A set holds each
//! thread once, and the supervisor reads the threads' state when it starts their loops.
//!
//! An ask for a thread whose loop still runs is dropped: that loop either goes on with the
//! work, or ends, which wakes the primary, whose next pass asks again for every thread at work.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tokio::sync::Notify;

/// Thread ids whose loops are wanted, each at most once, with a signal for the supervisor.
#[derive(Default)]
pub(super) struct SpawnRequests {
    wanted: Mutex<BTreeSet<String>>,
    asked: Notify,
}

impl SpawnRequests {
    /// Asks for a loop for thread `id` (none is started while its loop runs).
    pub fn send(&self, id: String) {
        let fresh = self.wanted.lock().expect("spawn requests").insert(id);
        if fresh {
            self.asked.notify_one();
        }
    }

    /// Waits until some thread is asked for, then takes every ask.
    pub async fn take(&self) -> Vec<String> {
        loop {
            let taken = std::mem::take(&mut *self.wanted.lock().expect("spawn requests"));
            if !taken.is_empty() {
                return taken.into_iter().collect();
            }
            self.asked.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SpawnRequests;

    #[tokio::test]
    async fn asks_for_one_thread_are_taken_once() {
        let r = SpawnRequests::default();
        for _ in 0..1000 {
            r.send("sthr_a".into());
            r.send("sthr_b".into());
        }
        assert_eq!(r.take().await, vec!["sthr_a", "sthr_b"]);
        // Nothing is left over: the next take waits for the next ask.
        assert!(futures_util::FutureExt::now_or_never(r.take()).is_none());
        r.send("sthr_c".into());
        assert_eq!(r.take().await, vec!["sthr_c"]);
    }
}
