//! How a loop's decisions reach the store: `Loop::commit` runs one against the session row
//! (in one round trip from the row the loop holds when the store can, see
//! `SessionTransactions::transact_from`), publishes what it appended, and carries the committed row to the
//! loop's next iteration (`Loop::carry`) so it need not read the row or the log again.

use std::sync::atomic::Ordering;

use super::{Loop, RunError};
use crate::context;
use crate::state::{self, EngineState, work_item_for};
use mast_store::{Attempt, EventRecord, NewEvent, SessionRecord, SessionTxn, StoreError};

/// A committed row handed to the loop's next iteration (see `Loop::carry`).
pub(super) struct Carried {
    pub(super) rec: SessionRecord,
    /// This thread's loop events among those the commits wrote, not yet in the transcript.
    pub(super) fresh: Vec<EventRecord>,
    /// The log position they bring the loop to.
    pub(super) last_seq: i64,
    /// The handle's interrupt count for the thread before the commit locked the row.
    pub(super) interrupts: u64,
    /// `Loop::waits` at the commit: a wait since then makes the row stale.
    pub(super) waits: u64,
}

impl Loop<'_> {
    /// After a commit: when its events directly follow what this loop has read (nobody else
    /// wrote in between), they are all that is new, so the returned row and those events are
    /// the next iteration's whole view, and it needs neither the row nor the log read again.
    /// The events wait in [`Carried`] until then: the transcript may be lent to a model
    /// request now. `interrupts` is the handle's count taken before the transaction locked
    /// the row.
    pub(super) fn carry(&mut self, rec: SessionRecord, appended: &[EventRecord], interrupts: u64) {
        let pending = self.fast.carried.take();
        let read_to = pending.as_ref().map_or(self.view.last_seq, |c| c.last_seq);
        let follows = appended
            .iter()
            .zip(read_to + 1..)
            .all(|(e, seq)| e.seq == seq)
            && rec.last_seq == read_to + appended.len() as i64;
        if !follows {
            // The next iteration reads the log from `last_seq`, pending events included.
            return;
        }
        let mut fresh = pending.map(|c| c.fresh).unwrap_or_default();
        fresh.extend(
            appended
                .iter()
                .filter(|e| context::LOOP_KINDS.contains(&e.kind.as_str()) && self.is_mine(e))
                .cloned(),
        );
        self.fast.carried = Some(Carried {
            last_seq: rec.last_seq,
            rec,
            fresh,
            interrupts,
            waits: self.fast.waits.load(Ordering::Relaxed),
        });
    }

    /// Runs a decision against the session row, appends its events, publishes them. The
    /// decision is taken on the row this loop holds when it is still current (one round
    /// trip), else on the locked row: `f` is cloned for that second chance, so it must not
    /// own what cannot be decided twice.
    pub async fn commit<F>(
        &mut self,
        f: F,
        mark_processed: Vec<String>,
    ) -> Result<Vec<EventRecord>, RunError>
    where
        F: FnOnce(&mut SessionRecord, &mut EngineState) -> Result<Vec<NewEvent>, StoreError>
            + Clone
            + Send
            + 'static,
    {
        let self_hosted = self.scope.self_hosted;
        let interrupts = self.handle.interrupt_count(&self.scope.thread);
        let store = &self.inner.store;
        // A copy that does not show this runner's lease (the row read before a claim) is
        // surely stale: only a copy that does is worth the attempt.
        let held = self
            .fast
            .expected
            .take()
            .filter(|r| r.lease_owner.as_deref() == Some(self.inner.owner.as_str()));
        let mut from_held = None;
        if let Some(expected) = held {
            let (txn, awaits) = decision(
                f.clone(),
                mark_processed.clone(),
                self_hosted,
                self.inner.store.clock().clone(),
            );
            let attempt = store.transact_from(&self.scope.sid, &self.scope.writer, &expected, txn);
            match self.hold(attempt).await? {
                Attempt::Done(written) => from_held = Some((written, awaits)),
                Attempt::Stale => {
                    metrics::counter!(crate::telemetry::STALE_SESSION_WRITES, "writer" => "runner")
                        .increment(1);
                }
            }
        }
        let (written, awaits) = match from_held {
            Some(done) => done,
            None => {
                let (txn, awaits) = decision(
                    f,
                    mark_processed,
                    self_hosted,
                    self.inner.store.clock().clone(),
                );
                let written = self
                    .hold(store.transact(&self.scope.sid, &self.scope.writer, txn))
                    .await?;
                (written, awaits)
            }
        };
        let (rec, appended) = written.ok_or(RunError::Gone)?;
        self.view.released = rec.lease_owner.as_deref() != Some(self.inner.owner.as_str());
        if self.view.released && store.decides_on_held_rows() {
            // The session's next write is most likely a client's input, here.
            self.inner.held_rows.put(rec.clone());
        }
        self.handle.saw_seq(rec.last_seq);
        self.inner.hub.publish(&self.scope.sid, &appended);
        // Threads this decision set working (a workflow run's new agents) get their loops.
        for e in appended.iter().filter(|e| {
            e.kind == mast_domain::events::kind::THREAD_STATUS_RUNNING
                && e.thread_id.as_deref() != Some(self.scope.thread.as_str())
        }) {
            if let Some(t) = &e.thread_id {
                self.crew.spawn.send(t.clone());
            }
        }
        if let Some(rx) = awaits
            && rx.await.unwrap_or(false)
        {
            self.inner.hub.work_queued(&rec.environment_id);
        }
        if !self.view.released && store.decides_on_held_rows() {
            self.fast.expected = Some(rec.clone());
        }
        self.carry(rec, &appended, interrupts);
        Ok(appended)
    }
}

/// The store transaction of a loop's decision `f`: the decoded engine state handed to `f`,
/// the state's changes turned into the row's columns and events, and, for a self-hosted
/// session, whether its committed state waits on a worker (the receiver; the store's
/// transaction returns only the row).
fn decision<F>(
    f: F,
    mark_processed: Vec<String>,
    self_hosted: bool,
    clock: mast_domain::clock::Clock,
) -> (SessionTxn, Option<tokio::sync::oneshot::Receiver<bool>>)
where
    F: FnOnce(&mut SessionRecord, &mut EngineState) -> Result<Vec<NewEvent>, StoreError>
        + Send
        + 'static,
{
    let (awaits_tx, awaits_rx) = match self_hosted {
        true => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            (Some(tx), Some(rx))
        }
        false => (None, None),
    };
    let txn = Box::new(move |rec: &mut SessionRecord| {
        let before = EngineState::of(rec)?;
        let mut st = before.clone();
        let events = f(rec, &mut st)?;
        // Whenever the session waits on a worker, some work item must be live for one
        // to pick up, even if the last worker let its item go a moment ago.
        let now = clock.now();
        let awaits_worker = self_hosted && st.awaits_worker();
        let ensure_work = awaits_worker.then(|| work_item_for(rec, now));
        let mut out = state::output(rec, &before, st, events, mark_processed, now)?;
        out.ensure_work = ensure_work;
        if let Some(tx) = awaits_tx {
            let _ = tx.send(awaits_worker);
        }
        Ok(out)
    });
    (txn, awaits_rx)
}
