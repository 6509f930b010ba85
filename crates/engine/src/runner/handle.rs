//! What the engine and a session's runner tell each other: new input, interrupts, and the
//! transaction that woke the runner.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

/// Signals to one session's runner.
#[derive(Default)]
pub(crate) struct RunnerHandle {
    /// New input arrived after the runner last looked.
    pub(super) dirty: AtomicBool,
    /// Counts interrupts of every thread signalled to this runner; a wait compares its
    /// thread's count with the one it saw before reading the session, so a stale signal never
    /// cuts the next model request.
    pub(super) all_interrupts: AtomicU64,
    /// Counts interrupts aimed at one thread.
    pub(super) thread_interrupts: Mutex<HashMap<String, u64>>,
    pub(super) interrupted: Notify,
    /// New input or answers arrived: a primary thread waiting on delegates looks again
    /// (a delegate may have become runnable).
    pub(super) nudge: Notify,
    /// What the transaction that woke the runner committed, for its next start (see
    /// [`Handoff`]).
    pub(super) handoff: Mutex<Option<Handoff>>,
    /// A model request the waking transaction started for the primary thread (see
    /// `engine::fast_start`), for the runner's next start; kept apart from the handoff, which
    /// may be dropped, since the loop checks it against the log itself.
    pub(super) armed: Mutex<Option<String>>,
    /// The highest `last_seq` this runner's loops have read or committed: a handoff no newer
    /// than that is stale.
    pub(super) seen_seq: std::sync::atomic::AtomicI64,
}

/// A committed client transaction handed to the runner it wakes, so the runner starts from
/// the row and events that transaction returned instead of reading them again.
///
/// The row stands for a read of the session at the transaction's commit. The loop's rule is
/// that interrupt counts are taken *before* the row is read (so an interrupt committed after
/// the read still cuts the next wait); here the read happened before the runner's snapshot,
/// so the handoff carries [`crate::Inner::interrupt_epoch`] as it was before the transaction began,
/// and is used only while no interrupt was signalled in this process since then: an
/// interrupt committed after the transaction is signalled after it, so either it changed
/// the epoch before the runner's snapshot (the handoff is dropped and the row read as
/// usual) or it is counted on the runner's handle after that snapshot.
pub(crate) struct Handoff {
    /// The row as committed.
    pub rec: mast_store::SessionRecord,
    /// Every event the transaction appended.
    pub events: Vec<mast_store::EventRecord>,
    /// [`crate::Inner::interrupt_epoch`] before the transaction began.
    pub epoch: u64,
    /// The `span.model_request_start` the transaction logged for the runner to issue
    /// (`engine::fast_start`).
    pub armed: Option<String>,
}

impl RunnerHandle {
    /// Interrupts that concern `thread` so far.
    pub(crate) fn interrupt_count(&self, thread: &str) -> u64 {
        let own = self
            .thread_interrupts
            .lock()
            .expect("interrupts lock")
            .get(thread)
            .copied()
            .unwrap_or(0);
        self.all_interrupts.load(Ordering::SeqCst) + own
    }

    /// Every thread's interrupt count now, for a loop that reads the session row next and
    /// does not know yet which thread it will drive.
    pub(crate) fn interrupts_seen(&self) -> InterruptsSeen {
        let threads = self
            .thread_interrupts
            .lock()
            .expect("interrupts lock")
            .clone();
        InterruptsSeen {
            all: self.all_interrupts.load(Ordering::SeqCst),
            threads,
        }
    }

    /// Notes that a loop of this runner read or committed the session at `last_seq`.
    pub(crate) fn saw_seq(&self, last_seq: i64) {
        self.seen_seq.fetch_max(last_seq, Ordering::SeqCst);
    }

    /// New input or answers arrived: the runner looks again before it exits, and a primary
    /// thread waiting on delegates re-evaluates.
    pub(crate) fn signal_input(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        self.nudge.notify_one();
    }

    /// An interrupt of `thread` (every thread when None): the waits it concerns end.
    pub(crate) fn signal_interrupt(&self, thread: Option<&str>) {
        self.dirty.store(true, Ordering::SeqCst);
        match thread {
            None => {
                self.all_interrupts.fetch_add(1, Ordering::SeqCst);
            }
            Some(t) => {
                *self
                    .thread_interrupts
                    .lock()
                    .expect("interrupts lock")
                    .entry(t.to_string())
                    .or_default() += 1;
            }
        }
        self.interrupted.notify_waiters();
    }

    /// Leaves `h` for the runner's next start, unless a newer one is already there.
    pub(crate) fn hand_off(&self, mut h: Handoff) {
        if let Some(id) = h.armed.take() {
            *self.armed.lock().expect("armed lock") = Some(id);
        }
        let mut slot = self.handoff.lock().expect("handoff lock");
        if slot
            .as_ref()
            .is_none_or(|old| old.rec.last_seq < h.rec.last_seq)
        {
            *slot = Some(h);
        }
    }

    /// The handoff left for this start, if it is still current: no interrupt signalled since
    /// its transaction began (`epoch` is [`crate::Inner::interrupt_epoch`] now, read after the
    /// runner's interrupt snapshot) and newer than anything this runner's loops saw.
    pub(super) fn take_handoff(&self, epoch: u64) -> Option<Handoff> {
        let h = self.handoff.lock().expect("handoff lock").take()?;
        let newer = h.rec.last_seq > self.seen_seq.load(Ordering::SeqCst);
        (h.epoch == epoch && newer).then_some(h)
    }
}

/// The interrupt counts a runner saw before it read the session row: an interrupt signalled
/// after that read differs from them, so the loop's first wait still sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct InterruptsSeen {
    all: u64,
    threads: HashMap<String, u64>,
}

impl InterruptsSeen {
    /// The count [`RunnerHandle::interrupt_count`] gave for `thread` at the snapshot.
    pub(crate) fn count(&self, thread: &str) -> u64 {
        self.all + self.threads.get(thread).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::{Handoff, RunnerHandle};

    fn handoff(last_seq: i64, epoch: u64) -> Handoff {
        let mut rec = crate::fixtures::session(
            mast_domain::session::SessionStatus::Running,
            &Default::default(),
            false,
        );
        rec.last_seq = last_seq;
        Handoff {
            rec,
            events: vec![],
            epoch,
            armed: None,
        }
    }

    #[test]
    fn a_handoff_is_taken_only_while_current() {
        // (handed at last_seq, epoch when handed, epoch at the runner's start, the runner's
        // loops saw up to) -> taken
        let cases = [
            (5, 0, 0, 0, true),
            (5, 3, 3, 4, true),
            // An interrupt was signalled since the handing transaction began.
            (5, 0, 1, 0, false),
            // The runner's own loops wrote (or read) as far or further: the row is stale.
            (5, 0, 0, 5, false),
            (5, 0, 0, 9, false),
        ];
        for (seq, handed, now, seen, taken) in cases {
            let h = RunnerHandle::default();
            h.saw_seq(seen);
            h.hand_off(handoff(seq, handed));
            assert_eq!(
                h.take_handoff(now).is_some(),
                taken,
                "{seq} {handed} {now} {seen}"
            );
            assert!(h.take_handoff(now).is_none(), "taken once");
        }
        // Of two handoffs the newer stays, whatever order they come in; the armed request
        // is kept apart from either.
        let h = RunnerHandle::default();
        let mut armed = handoff(7, 0);
        armed.armed = Some("sevt_start".into());
        h.hand_off(armed);
        h.hand_off(handoff(6, 0));
        assert_eq!(h.take_handoff(0).map(|h| h.rec.last_seq), Some(7));
        assert_eq!(h.armed.lock().unwrap().as_deref(), Some("sevt_start"));
    }

    #[test]
    fn a_snapshot_counts_as_the_handle_did_and_misses_later_interrupts() {
        let h = RunnerHandle::default();
        *h.thread_interrupts
            .lock()
            .unwrap()
            .entry("sthr_d".into())
            .or_default() += 1;
        let seen = h.interrupts_seen();
        for t in ["sthr_p", "sthr_d"] {
            assert_eq!(seen.count(t), h.interrupt_count(t), "{t}");
        }
        // An interrupt of every thread after the snapshot (the row read) shows in each
        // thread's count; one of a delegate, only in its own.
        h.all_interrupts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert_ne!(seen.count("sthr_p"), h.interrupt_count("sthr_p"));
        let seen = h.interrupts_seen();
        *h.thread_interrupts
            .lock()
            .unwrap()
            .entry("sthr_d".into())
            .or_default() += 1;
        assert_eq!(seen.count("sthr_p"), h.interrupt_count("sthr_p"));
        assert_ne!(seen.count("sthr_d"), h.interrupt_count("sthr_d"));
    }
}
